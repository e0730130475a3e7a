#!/usr/bin/env bash
# GPU run for the ch13 branch (issue 24, the foundation): the tensor-parallel MLP on GPUs through
# NCCL, where every tp group is a sub-group (ProcessGroup::split) with its own communicator.
# Run from the repository root on an H100 machine; writes its logs to $OUT.
#  1. build chapter 13's tests (solution build, and the starter binary: default preset);
#  2. every ch13 test as one process (tp = 1 on one GPU);
#  3. under mpirun with as many ranks as GPUs (2 or 4: tp = 1, 2[, 4] and dp x tp = 2 x 2),
#     the CUDA test verbose (it skips, on every rank, where a rank has no GPU of its own);
#  4. the starter binary: Ch13_1_*, Ch13_2_*, Ch13_3_* must fail with "TODO ch13.M", no crash.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
status=0
step() { echo "=== $* ==="; }

step build
{ cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build build -j16 --target tt_ch13_tests tt_ch13_tests_starter; } >"$OUT/build.log" 2>&1 || {
  tail -50 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
tail -3 "$OUT/build.log"

step "ch13 tests, one process"
build/bin/tt_ch13_tests >"$OUT/ch13_np1.log" 2>&1 || status=1
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED" "$OUT/ch13_np1.log"

gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
for np in 2 4; do
  if [ "$gpus" -ge "$np" ]; then
    step "ch13 tests under mpirun -np $np ($gpus GPUs)"
    mpirun --oversubscribe --allow-run-as-root -np "$np" build/bin/tt_ch13_tests \
      >"$OUT/ch13_np$np.log" 2>&1 || status=1
    grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED|Skipped" "$OUT/ch13_np$np.log" | sort | uniq -c
  else
    echo "=== mpirun -np $np: skipped, only $gpus GPU(s) ==="
  fi
done

step "starter binary (the exercises must fail with their TODO, nothing may crash)"
build/bin/starter/tt_ch13_tests_starter --gtest_filter='Ch13_1_*:Ch13_2_*:Ch13_3_*' \
  >"$OUT/starter.log" 2>&1
grep -c "TODO ch13\." "$OUT/starter.log"
grep -E "^\[  (PASSED|FAILED) " "$OUT/starter.log"
if grep -qE "Segmentation|Aborted|terminate called" "$OUT/starter.log"; then
  echo "STARTER CRASHED"; status=1
fi
exit $status
