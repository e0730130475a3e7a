#!/usr/bin/env bash
# Session 14, one H200, carried binaries: .devbin/s14base.tar.xz (bench_decode, tt_generate at
# 6f2769d) and .devbin/$1.tar.xz (tt_ch15_tests, bench_decode, tt_generate with
# llama_decode_attention; the GEMV as at 6f2769d), ~4 minutes. Run with s14d (v2: a split's loads
# in one round trip, a one-pass merge) and s14e (v3: the merge in two passes, a warp per head
# for the maximum, then every output; the attention rows once):
#  1. chapter 15's single-GPU CUDA tests; memcheck, racecheck, synccheck on the new kernel's test
#     and the graph decodes;
#  2. bench_decode: the attention alone (fused against the two launches) at 130/512/2048 cached
#     positions, twice; a step's projections, base and new (the GEMV did not change);
#  3. tt_generate (TinyLlama-1.1B's shape, bf16, batch 1, CUDA graph, prompt 128 + 256 new; then
#     prompt 1536 + 256): base, new.
set -uo pipefail
. .devrun/lib.sh
status=0
decode_setup "${1:-s14d}"
ch15_cuda_checks 'Ch15_Bf16Cuda.DecodeAttention*:Ch15_Bf16Cuda.CudaGraphDecode*:Ch15_ModelCuda.CudaGraph*'
stamp "bench_decode"
decode_bench attn1 build/bin/bench_decode --benchmark_filter='decode_attn'
decode_bench attn2 build/bin/bench_decode --benchmark_filter='decode_attn'
decode_bench base base/build/bin/bench_decode --benchmark_filter='copy|decode_layers/gemv/1/'
decode_bench new build/bin/bench_decode --benchmark_filter='decode_layers/gemv/1/'
stamp "tt_generate"
decode_gen base base/build/bin/tt_generate 128,1536
decode_gen new build/bin/tt_generate 128,1536
stamp "s14d done (status $status)"
exit $status
