#!/usr/bin/env bash
# GPU run for the ch11 branch (issue 22: ch11.4 is now DynamicLossScaler::update, the bf16
# FlashAttention forward is given code, bf16 tolerances restated with u = 2^-8 at equal values).
# Run from the repository root on an H100; writes its logs to $OUT.
#  1. build chapter 11's tests (solution build, starters' tests too: default preset);
#  2. every ch11 CUDA test (ctest -L ch11 -L cuda), and the CPU tests of ch11.4 and the bf16
#     tolerances that changed names;
#  3. the starter binary: Ch11_4_* must fail with "TODO ch11.4" (and nothing may crash);
#  4. tools/device_check.sh 11 --no-build --no-bench: memcheck of the ch11 CUDA tests, racecheck
#     and synccheck of the bf16 FlashAttention and LayerNorm kernels.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
status=0
step() { echo "=== $* ==="; }

step build
{ cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build build -j16 --target tt_ch11_tests tt_ch11_tests_starter; } >"$OUT/build.log" 2>&1 || {
  tail -50 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
tail -3 "$OUT/build.log"

step "ch11 CUDA tests"
ctest --test-dir build -L ch11 -L cuda --output-on-failure -j4 >"$OUT/ctest_cuda.log" 2>&1 || status=1
tail -15 "$OUT/ctest_cuda.log"

step "ch11.4 and the renamed bf16 tolerance tests (CPU and CUDA), verbose"
build/bin/tt_ch11_tests --gtest_filter='Ch11_4_*:Ch11_LossScaler*:Ch11_Float16*:Ch11_FlashBf16Cuda.*:Ch11_Bf16Gpt2*:Ch11_ClassifierBf16*' \
  >"$OUT/ch11_4_and_tolerances.log" 2>&1 || status=1
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|float16 gradients|first applied|\[ bf16 \]" "$OUT/ch11_4_and_tolerances.log"

step "starter: Ch11_4_* fail with TODO ch11.4"
if [ -x build/bin/starter/tt_ch11_tests_starter ]; then
  build/bin/starter/tt_ch11_tests_starter --gtest_filter='Ch11_4_*' >"$OUT/starter_ch11_4.log" 2>&1
  rc=$?
  echo "starter exit $rc (expected 1); TODO ch11.4 lines: $(grep -c 'TODO ch11.4' "$OUT/starter_ch11_4.log")"
  [ "$rc" = 1 ] || status=1
else
  echo "no starter binary (TT_STARTER_TESTS off?)"
fi

step "device_check 11 (memcheck, racecheck, synccheck)"
BUILD_DIR=build tools/device_check.sh --no-build --no-bench 11 >"$OUT/device_check.log" 2>&1 || status=1
tail -20 "$OUT/device_check.log"

echo "ch11 devrun: exit $status"
exit $status
