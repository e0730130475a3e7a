#!/usr/bin/env bash
# Grouped-query attention through chapter 10's and 11's CUDA FlashAttention kernels (issue 26,
# chapter 15) on one H100, under 6 minutes; writes to $OUT:
#  1. build tt_ch10_tests, tt_ch11_tests, tt_ch15_tests (.devrun/lib.sh: sm_90, solution);
#  2. their CUDA tests (--gtest_filter='*Cuda*'): chapter 10's and 11's FlashAttention kernels
#     unchanged for NKV == NH, Ch15_GqaCuda for the grouped path;
#  3. compute-sanitizer memcheck and racecheck on the GQA tests that launch the kernels
#     (caching allocator off; the allocation test needs the caching allocator, so it is left out).
# GQA_ONLY=1 (a re-run): only tt_ch15_tests, its Ch15_GqaCuda tests, and the two sanitizers.
set -uo pipefail
. .devrun/lib.sh
status=0
nvidia-smi -L
chapters="10 11 15" filter='*Cuda*' tools="memcheck racecheck"
if [ "${GQA_ONLY:-0}" = 1 ]; then chapters=15 filter='Ch15_GqaCuda.*'; fi
tt_build $(for ch in $chapters; do echo tt_ch${ch}_tests; done) || exit 1

for ch in $chapters; do
  stamp "ch$ch CUDA tests"
  gtests "ch${ch}_cuda.log" 150 "build/bin/tt_ch${ch}_tests" "$filter" || status=1
done
grep -aE "^\[ +(OK|FAILED|SKIPPED) +\] Ch15_GqaCuda|GQA peak" "$OUT/ch15_cuda.log"

gqa_filter='Ch15_GqaCuda.MatchesRepeatKvAndTheCpuKernel:Ch15_GqaCuda.TakesKvCacheSlices'
for tool in $tools; do
  stamp "compute-sanitizer $tool ($gqa_filter)"
  TT_CUDA_CACHING=0 timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 \
    build/bin/tt_ch15_tests --gtest_color=no --gtest_filter="$gqa_filter" \
    >"$OUT/$tool.log" 2>&1
  rc=$?
  [ $rc = 0 ] || { status=1; echo "$tool FAILED (rc $rc)"; }
  grep -aE "ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED)" "$OUT/$tool.log"
done
stamp "done (status $status)"
exit $status
