#!/usr/bin/env bash
# Session 16, one H200: the final verification of chapter 11's bf16 FlashAttention (the portable
# forward with 32 query rows a warp and one FFMA per score, the Hopper kernels behind
# set_flash_attention_bf16_hopper) (.devbin/$1.tar.xz: tt_ch10/11/15_tests, train_gpt2,
# bench_attention), ~5 min:
#  1. chapter 10, 11 and 15's CUDA tests (chapter 11's kernel tests run both kernel sets);
#     memcheck, racecheck, synccheck on chapter 11's forward, backward and full-mode tests;
#  2. bench_attention's bf16 rows (portable and sm90a) and SDPA, alternating, three rounds.
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s16h}"
logs_begin
nvidia-smi -L
stamp "tests"
gtests ch11.log 300 build/bin/tt_ch11_tests '*Cuda*:*Bf16TrainGpt2*' | tail -3 || status=1
gtests ch10.log 300 build/bin/tt_ch10_tests '*Cuda*:*CUDA*' | tail -3 || status=1
gtests ch15.log 300 build/bin/tt_ch15_tests 'Ch15_GqaCuda.*:Ch15_Bf16Cuda.*:Ch15_ModelCuda.*' | tail -3 || status=1
for tool in memcheck racecheck synccheck; do
  stamp "$tool"
  sanitize $tool $tool.log build/bin/tt_ch11_tests \
    'Ch11_FlashBf16Cuda.ForwardMatchesReference:Ch11_FlashBf16Cuda.BackwardMatchesReference:Ch11_FlashBf16Cuda.FullModeMatchesReference' || status=1
done
for round in 1 2 3; do
  stamp "bench_attention bf16 (portable, sm90a), round $round"
  attn_bench r$round 'cuda_bf16'
  stamp "SDPA, round $round"
  python3 .devrun/sdpa_hs.py 2>&1 | tee "$OUT/sdpa_r$round.txt" || status=1
done
logs_end
stamp "s16h done (status $status)"
exit $status
