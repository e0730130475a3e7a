#!/usr/bin/env bash
# Session 14, one H200, carried binaries: .devbin/s14base.tar.xz (bench_decode, tt_generate at
# 6f2769d) and .devbin/$1.tar.xz (the same with the decode GEMV's L2 prefetch and
# llama_decode_attention), ~4 minutes: which of the two made the step slower in a first call
# (tt_generate: 1.63 ms a step against 1.28; the L2 prefetch was then reverted, see chapter 15's
# README). TT_DECODE_PREFETCH exists only in those binaries.
#  1. bench_decode: the attention alone (fused against the two launches), a step's projections
#     before (base) and after at TT_DECODE_PREFETCH 0/1/2/4, twice;
#  2. tt_generate (TinyLlama-1.1B's shape, bf16, batch 1, CUDA graph): base, new at prefetch 0.
set -uo pipefail
. .devrun/lib.sh
status=0
decode_setup "${1:-s14c}"
stamp "bench_decode"
decode_bench attn build/bin/bench_decode --benchmark_filter='decode_attn'
for round in 1 2; do
  decode_bench "base$round" base/build/bin/bench_decode --benchmark_filter='copy|decode_layers/gemv/1/'
  for pf in 0 1 2 4; do
    TT_DECODE_PREFETCH=$pf decode_bench "pf$pf.$round" build/bin/bench_decode \
      --benchmark_filter='decode_layers/gemv/1/'
  done
done
TT_DECODE_PREFETCH=0 decode_bench projs build/bin/bench_decode --benchmark_filter='decode_proj/gemv/.*/1/'
decode_bench projs_base base/build/bin/bench_decode --benchmark_filter='decode_proj/gemv/.*/1/'
stamp "tt_generate"
decode_gen base base/build/bin/tt_generate
TT_DECODE_PREFETCH=0 decode_gen new_pf0 build/bin/tt_generate
stamp "s14c done (status $status)"
exit $status
