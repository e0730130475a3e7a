#!/usr/bin/env bash
# Session 15, one H200: the final step kernel (s15g's, the attention spread over all blocks in the
# grid's order of splits, the launch through launch_with), built with kDecodeStepMaxCache lifted
# so that tt_generate measures the step kernel at every cache length
# (.devbin/$1.tar.xz: tt_ch15_tests, bench_decode, tt_generate), with the per-phase trace
# (TT_DECODE_STEP_TRACE), ~5 min:
#  1. chapter 15's single-GPU CUDA tests; memcheck, racecheck, synccheck on the step kernel's
#     tests and the graph decodes;
#  2. bench_decode decode_step/{one,many} and the copy (or the filter $2; call 6 ran
#     `s15h.sh s15g 'decode_step|copy|decode_attn|decode_layers/gemv/1'` with s15g's binaries:
#     s15h's kernel before the order of the attention's splits over all blocks and launch_with,
#     and with kDecodeStepMaxCache = 1,024); the
#     last eager trace of the step at 130 and 1600 cached positions;
#  3. tt_generate (TinyLlama-1.1B's shape, bf16, batch 1, CUDA graph, prompts 128 and 1536 + 256
#     new): the step in one launch and launch by launch, in one process.
set -uo pipefail
. .devrun/lib.sh
decode_begin "${1:-s15h}" 'Ch15_Bf16Cuda.DecodeStep*:Ch15_Bf16Cuda.CudaGraphDecode*:Ch15_Bf16Cuda.LongCache*:Ch15_Bf16Cuda.DecodeAttention*:Ch15_Bf16Cuda.RopeAppend*'
stamp "bench_decode"
export TT_DECODE_STEP_TRACE=1
decode_bench step build/bin/bench_decode --benchmark_filter="${2:-decode_step|copy}"
step_trace step
unset TT_DECODE_STEP_TRACE
stamp "tt_generate"
decode_gen new build/bin/tt_generate 128,1536 --gemv step,on
stamp "s15h done (status $status)"
exit $status
