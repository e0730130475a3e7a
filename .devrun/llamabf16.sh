#!/usr/bin/env bash
# GPU run for the llamabf16 branch (issue 26: bf16 mixed-precision training of LLaMA). Run from
# the repository root on an H100; writes to $OUT: build.log, tests.log.
#  1. build chapter 15's tests and train_llama (default preset, sm_90);
#  2. the bf16 training tests on the GPU: Ch15_Bf16TrainingCuda (losses follow float32 within
#     0.02 and fall), and the CPU ones for comparison;
#  3. every CUDA test of chapter 15 (one process), which the bf16 path shares kernels with.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
status=0
step() { echo "=== $* ==="; }

step "build"
cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/build.log" 2>&1 &&
  cmake --build build -j16 --target tt_ch15_tests train_llama >>"$OUT/build.log" 2>&1 ||
  { tail -40 "$OUT/build.log"; exit 1; }

step "bf16 training tests"
build/bin/tt_ch15_tests --gtest_filter='Ch15_Bf16Training*:Ch15_Bf16TrainingCuda*' \
  >"$OUT/tests.log" 2>&1 || status=1
grep -E "max \||OK \]|FAILED|Failure" "$OUT/tests.log" | head -40

step "chapter 15 CUDA tests"
build/bin/tt_ch15_tests --gtest_filter='*Cuda*:-*Mpi*' >>"$OUT/tests.log" 2>&1 || status=1
grep -E "PASSED|FAILED|SKIPPED" "$OUT/tests.log" | tail -12

echo "status $status"
exit $status
