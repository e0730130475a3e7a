#!/usr/bin/env bash
# Session 9's last call, on a 2-GPU H100 machine with the binaries built on the CPU machine for
# sm_90 and carried (build/bin/tt_ch06_tests, tt_ch11_tests, tt_ch16_tests, tt_pipeline_bench;
# no build here), ~3 minutes, on the merged tree (main with branch rectfa):
#  1. the embedding fusion test again (its counters now nest) and chapter 11's bf16
#     FlashAttention CUDA tests (causal and the new full mode) with memcheck on the full mode;
#  2. chapter 16's CUDA ring tests under $MPI -np 2 (float32 and the new bf16 ring);
#  3. the bubble sweep's p = 2 rows (1F1B, m = 4, 8, 16; .devrun/ch14c.sh PARTS=bubble skips
#     p = 4 on two GPUs).
set -uo pipefail
. .devrun/lib.sh
status=0
for b in tt_ch06_tests tt_ch11_tests tt_ch16_tests tt_pipeline_bench; do
  [ -x build/bin/$b ] || { echo "build/bin/$b missing: carry it"; exit 1; }
done
gtests ch06.log 120 build/bin/tt_ch06_tests '*CudaEmbedding*' | tail -3 || status=1
gtests ch11.log 200 build/bin/tt_ch11_tests 'Ch11_FlashBf16Cuda*' | tail -3 || status=1
sanitize memcheck ch11_memcheck.log build/bin/tt_ch11_tests 'Ch11_FlashBf16Cuda.FullMode*' ||
  status=1
stamp "ch16 CUDA ring tests, np 2"
timeout 200 $MPI -np 2 build/bin/tt_ch16_tests --gtest_color=no \
  --gtest_filter='Ch16_RingAttention.Cuda*' >"$OUT/ch16_np2.log" 2>&1 || {
  echo "ch16 np 2 FAILED"; status=1; }
grep -aE "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$OUT/ch16_np2.log" | sort | uniq -c
PARTS=bubble BUDGET_S=${SWEEP_S:-150} timeout 200 bash .devrun/ch14c.sh 2>&1 | cut -c1-260 |
  grep -a "^ranks\|^pipeline\|FAILED\|SKIPPED" | cut -c1-200 || status=1
stamp "s9b done (status $status)"
exit $status
