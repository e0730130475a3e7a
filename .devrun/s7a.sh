#!/usr/bin/env bash
# One H100, under 10 minutes (session 7): the CUDA changes not yet run on a GPU.
#  1. chapter 11's CUDA tests, compute-sanitizer memcheck on the bf16 add_bias kernels (one check
#     rule since c0e1048);
#  2. chapter 15's grouped-query attention (GQA_ONLY part of .devrun/gqa.sh: tests, memcheck,
#     racecheck);
#  3. chapter 15's bf16 training (Ch15_Bf16Training*, CPU and CUDA) and every CUDA test of
#     chapter 15 (one process), memcheck on the CUDA bf16 training test;
#  4. .devrun/ch15_ref.sh: the ~100M transformers reference and the round trip.
set -uo pipefail
. .devrun/lib.sh
status=0
nvidia-smi -L
tt_build tt_ch11_tests tt_ch15_tests tt_generate train_llama || exit 1
stamp "ch11 CUDA tests"
timeout 120 build/bin/tt_ch11_tests --gtest_color=no --gtest_filter='*Cuda*' >"$OUT/ch11_cuda.log" 2>&1 || status=1
grep -aE "^\[  (PASSED|FAILED)|^\[  FAILED  \]" "$OUT/ch11_cuda.log"
stamp "memcheck Ch11_AddBiasBf16Cuda"
TT_CUDA_CACHING=0 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 \
  build/bin/tt_ch11_tests --gtest_color=no --gtest_filter='Ch11_AddBiasBf16Cuda.*' >"$OUT/ch11_memcheck.log" 2>&1 || status=1
grep -aE "ERROR SUMMARY|^\[  (PASSED|FAILED)" "$OUT/ch11_memcheck.log"
GQA_ONLY=1 bash .devrun/gqa.sh || status=1
stamp "ch15 bf16 training tests (CPU and CUDA)"
timeout 200 build/bin/tt_ch15_tests --gtest_color=no --gtest_filter='Ch15_Bf16Training*' \
  >"$OUT/bf16train.log" 2>&1 || status=1
grep -aE "max \||^\[ +(OK|FAILED|SKIPPED) +\]|Failure" "$OUT/bf16train.log" | head -30
stamp "ch15 CUDA tests (not Mpi)"
timeout 200 build/bin/tt_ch15_tests --gtest_color=no --gtest_filter='*Cuda*:-*Mpi*' \
  >"$OUT/ch15_cuda_all.log" 2>&1 || status=1
grep -aE "^\[  (PASSED|FAILED)|^\[  FAILED  \]|SKIPPED \]" "$OUT/ch15_cuda_all.log" | head -20
stamp "memcheck Ch15_Bf16TrainingCuda"
sanitize memcheck bf16_memcheck.log build/bin/tt_ch15_tests 'Ch15_Bf16TrainingCuda.*' || status=1
bash .devrun/ch15_ref.sh || status=1
stamp "s7a done (status $status)"
exit $status
