#!/usr/bin/env bash
# Session 15, one H200: the step kernel's GEMV through cp.async rings running ahead through
# every phase, block-balanced rows, the attention's cached rows requested before the barrier
# (.devbin/$1.tar.xz: tt_ch15_tests, bench_decode, tt_generate; call 3 ran the rings alone as
# .devbin/s15c.tar.xz) against the register version
# (.devbin/s15b.tar.xz: bench_decode), both with the per-phase trace (TT_DECODE_STEP_TRACE), ~7 min:
#  1. chapter 15's single-GPU CUDA tests; memcheck, racecheck, synccheck on the step kernel's
#     tests and the graph decodes;
#  2. bench_decode decode_step/{one,many} and the copy, the register version then the rings at
#     12, 16 and 8 warps; the last (warm) eager trace of each;
#  3. tt_generate (TinyLlama-1.1B's shape, bf16, batch 1, CUDA graph, prompts 128 and 1536 + 256
#     new): the step in one launch and launch by launch, in one process.
set -uo pipefail
. .devrun/lib.sh
mkdir -p b15 && tar xJf .devbin/s15b.tar.xz -C b15
decode_begin "${1:-s15d}" 'Ch15_Bf16Cuda.DecodeStep*:Ch15_Bf16Cuda.CudaGraphDecode*'
stamp "bench_decode"
export TT_DECODE_STEP_TRACE=1
decode_bench regs b15/build/bin/bench_decode --benchmark_filter='decode_step/one|copy'
step_trace regs
decode_bench ring12 build/bin/bench_decode --benchmark_filter='decode_step|copy'
step_trace ring12
for w in 16 8; do
  TT_DECODE_STEP_WARPS=$w decode_bench ring$w build/bin/bench_decode --benchmark_filter='decode_step/one'
  step_trace ring$w
done
unset TT_DECODE_STEP_TRACE
stamp "tt_generate"
decode_gen new build/bin/tt_generate 128,1536 --gemv step,on
stamp "s15d done (status $status)"
exit $status
