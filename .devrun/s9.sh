#!/usr/bin/env bash
# Session 9 on a 4-GPU H100 machine, ~8 minutes (the ring attention of branch rectfa runs after it,
# on the same machine: .devrun/rectfa.sh):
#  1. one build of every target below;
#  2. the embedding's gradient-accumulation fusion: Ch06_CudaEmbedding (and compute-sanitizer
#     memcheck on the new test), chapter 10's CUDA tests (the beta = 1 GEMM test's TF32 case may
#     now decline) and chapter 11's CUDA tests (a whole bf16 GPT-2 with fusion on and off);
#  3. the bubble sweep of chapter 14 again (774M, .devrun/ch14c.sh PARTS=bubble) after the
#     fusion, with the new columns: the busiest rank's idle share and the imbalance;
#  4. GPT-2 124M's bf16 step traced on one GPU (issue 23's profile: pptrace.sh P=1 ONE_B=8).
set -uo pipefail
. .devrun/lib.sh
status=0
tt_build tt_ch06_tests tt_ch10_tests tt_ch11_tests tt_pipeline_bench train_gpt2 \
  tt_prepare_data || exit 1
stamp "CUDA tests"
gtests ch06.log 120 build/bin/tt_ch06_tests '*CudaEmbedding*' | tail -4 || status=1
sanitize memcheck ch06_memcheck.log build/bin/tt_ch06_tests \
  '*CudaEmbedding.AccumulatesIntoGradUnderFusionBitForBit' || status=1
gtests ch10.log 200 build/bin/tt_ch10_tests '*Cuda*:*cuda*' | tail -6 || status=1
gtests ch11.log 300 build/bin/tt_ch11_tests '*Cuda*:*cuda*' | tail -6 || status=1
PARTS=bubble BUDGET_S=${SWEEP_S:-260} timeout 320 bash .devrun/ch14c.sh 2>&1 | cut -c1-260 |
  grep -v "^model:\|^parallel:\|^ops:" | tail -40 || status=1
SHAPE=124m P=1 ONE_B=8 timeout 150 bash .devrun/pptrace.sh 2>&1 | cut -c1-200 | tail -26 || status=1
stamp "s9 done (status $status)"
exit $status
