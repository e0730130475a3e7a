#!/usr/bin/env bash
# Session 15, one H200, carried binaries .devbin/$1.tar.xz (tt_ch15_tests, bench_decode,
# tt_generate with llama_decode_step, the whole decode step of one row in one launch), ~7 min:
#  1. chapter 15's single-GPU CUDA tests; memcheck, racecheck, synccheck on the step kernel's
#     tests and the graph decodes;
#  2. bench_decode decode_step/{one,many} and the copy (default 12 warps), then the one launch
#     at 16 and 8 warps (TT_DECODE_STEP_WARPS);
#  3. tt_generate (TinyLlama-1.1B's shape, bf16, batch 1, CUDA graph, prompts 128 and 1536 + 256
#     new): the step in one launch and launch by launch, in one process.
set -uo pipefail
. .devrun/lib.sh
decode_begin "${1:-s15a}" 'Ch15_Bf16Cuda.DecodeStep*:Ch15_Bf16Cuda.CudaGraphDecode*'
stamp "bench_decode"
decode_bench w12 build/bin/bench_decode --benchmark_filter='decode_step|copy'
TT_DECODE_STEP_WARPS=16 decode_bench w16 build/bin/bench_decode --benchmark_filter='decode_step/one'
TT_DECODE_STEP_WARPS=8 decode_bench w8 build/bin/bench_decode --benchmark_filter='decode_step/one'
stamp "tt_generate"
decode_gen new build/bin/tt_generate 128,1536 --gemv step,on
stamp "s15a done (status $status)"
exit $status
