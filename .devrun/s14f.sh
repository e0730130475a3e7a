#!/usr/bin/env bash
# Session 14, one H200, carried binaries: .devbin/s14base.tar.xz (bench_decode, tt_generate at
# 6f2769d) and .devbin/$1.tar.xz (tt_ch15_tests, bench_decode, tt_generate with
# llama_decode_attention for caches of 512 positions or more (the final version); the GEMV as at
# 6f2769d), ~5 minutes:
#  1. chapter 15's single-GPU CUDA tests; memcheck, racecheck, synccheck on the new kernel's test
#     and the graph decodes;
#  2. tt_generate (TinyLlama-1.1B's shape, bf16, batch 1, CUDA graph, prompt 128 + 256 new; then
#     prompt 1536 + 256): base, new.
set -uo pipefail
. .devrun/lib.sh
status=0
decode_setup "${1:-s14f}"
ch15_cuda_checks 'Ch15_Bf16Cuda.DecodeAttention*:Ch15_Bf16Cuda.CudaGraphDecode*:Ch15_Bf16Cuda.LongCache*'
stamp "tt_generate"
decode_gen base base/build/bin/tt_generate 128,1536
decode_gen new build/bin/tt_generate 128,1536
stamp "s14f done (status $status)"
exit $status
