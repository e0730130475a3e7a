#!/usr/bin/env bash
# Session 8, first H100 call: chapter 06's reductions (cuda::sum copies when nothing is reduced:
# Ch06_3 tests + memcheck), then .devrun/fa128.sh (bf16 FlashAttention at hs 128: tests,
# sanitizers, bench next to SDPA).
set -uo pipefail
. .devrun/lib.sh
status=0
tt_build tt_ch06_tests tt_ch11_tests tt_ch15_tests bench_attention || exit 1
stamp "ch06 reductions (CUDA) + memcheck"
timeout 120 build/bin/tt_ch06_tests --gtest_color=no --gtest_filter='Ch06_3*' >"$OUT/ch06.log" 2>&1 || status=1
grep -aE "^\[  (PASSED|FAILED)|FAILED " "$OUT/ch06.log"
TT_CUDA_CACHING=0 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 \
  build/bin/tt_ch06_tests --gtest_color=no --gtest_filter='Ch06_3*Cuda*' >"$OUT/ch06_memcheck.log" 2>&1 || status=1
grep -aE "ERROR SUMMARY|^\[  (PASSED|FAILED)" "$OUT/ch06_memcheck.log"
bash .devrun/fa128.sh || status=1
stamp "s8a done (status $status)"
exit $status
