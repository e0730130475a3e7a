#!/usr/bin/env bash
# Integration run of issue 22's branches on a 2-GPU H100 machine, in parts that each fit one call:
#   .devrun/integrate.sh build   configure (default preset, sm_90) and build everything
#   .devrun/integrate.sh tests   ctest -L cuda (all chapters, MPI/NCCL tests on 2 GPUs)
#   .devrun/integrate.sh checks  ch10/ch11 devrun scripts (sanitizers, starters), trainlib app runs
#   .devrun/integrate.sh lab     the tools lab (ncu, NVTX, traces, NCCL_DEBUG, busbw)
# Logs go to $OUT/<part>/ and are packed into $OUT/<part>.tgz.
set -uo pipefail
part=${1:?part}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ -d .devdeps ] && [ ! -f /usr/include/pcre2.h ]; then
  for f in .devdeps/*.deb; do dpkg -x "$f" /; done; ldconfig
fi
FINAL_OUT=${OUT:-/tmp/out}
export OUT=/tmp/integrate/$part
rm -rf "$OUT"; mkdir -p "$OUT"
t0=$SECONDS
case "$part" in
  build)
    nvidia-smi -L > "$OUT/gpu.txt" 2>&1
    { cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 &&
      cmake --build build -j "$(nproc)"; } > "$OUT/build.log" 2>&1
    echo "build rc $?"; tail -5 "$OUT/build.log"; grep -E "error|FAILED" "$OUT/build.log" | head -20 ;;
  tests)
    ctest --test-dir build -L cuda -j 4 --output-on-failure --timeout 600 > "$OUT/ctest_cuda.log" 2>&1
    echo "ctest -L cuda rc $?"; grep -E "tests passed|\(Failed\)|\(Timeout\)|Not Run|Exception" "$OUT/ctest_cuda.log" | head -30 ;;
  checks)
    # Each script re-runs configure and a build of its targets: no-ops after the build part.
    for n in ch10 ch11 trainlib; do
      mkdir -p "$OUT/$n"; OUT=$OUT/$n bash .devrun/$n.sh > "$OUT/$n.log" 2>&1; echo "$n rc $?"
      grep -E "^(PASS|FAIL)|rc [0-9]|exit [0-9]|passed|failed" "$OUT/$n.log" | tail -25
    done ;;
  lab)
    mkdir -p "$OUT/lab"; OUT=$OUT/lab bash .devrun/toolslab.sh 1 > "$OUT/lab1.log" 2>&1; echo "lab1 rc $?"; tail -30 "$OUT/lab1.log"
    OUT=$OUT/lab bash .devrun/toolslab.sh 2 > "$OUT/lab2.log" 2>&1; echo "lab2 rc $?"; tail -30 "$OUT/lab2.log" ;;
  final)
    # After the last merges: build, the thin app's GPU checks (tests, bf16 run, graphed resume,
    # traces on 1 and 2 GPUs), then the tools lab's ncu part.
    { cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 &&
      cmake --build build -j "$(nproc)"; } > "$OUT/build.log" 2>&1
    echo "build rc $?"; grep -E "error|FAILED" "$OUT/build.log" | head -20
    mkdir -p "$OUT/thin"; OUT=$OUT/thin bash .devrun/thin.sh > "$OUT/thin.log" 2>&1; echo "thin rc $?"; tail -40 "$OUT/thin.log"
    mkdir -p "$OUT/lab"; OUT=$OUT/lab bash .devrun/toolslab.sh ncu > "$OUT/ncu.log" 2>&1; echo "ncu rc $?"; tail -30 "$OUT/ncu.log" ;;
  ch13)
    # Chapter 13's foundation and chapter 12 after ProcessGroup::split (MPI backend on its own
    # communicator): build, every CUDA test of chapters 12-13 (MPI/NCCL on 2 GPUs), ch13.sh.
    { cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 &&
      cmake --build build -j "$(nproc)"; } > "$OUT/build.log" 2>&1
    echo "build rc $?"; grep -E "error|FAILED" "$OUT/build.log" | head -20
    ctest --test-dir build -L cuda -R "^Ch1[23]_" -j 4 --output-on-failure --timeout 600 > "$OUT/ctest_cuda.log" 2>&1
    echo "ctest ch12/13 cuda rc $?"; grep -E "tests passed|\(Failed\)|\(Timeout\)" "$OUT/ctest_cuda.log" | head
    mkdir -p "$OUT/ch13"; OUT=$OUT/ch13 bash .devrun/ch13.sh > "$OUT/ch13.log" 2>&1; echo "ch13 rc $?"; tail -30 "$OUT/ch13.log" ;;
esac
echo "part $part: $((SECONDS - t0)) s"
mkdir -p "$FINAL_OUT"; tar czf "$FINAL_OUT/$part.tgz" -C /tmp/integrate "$part"; ls -la "$FINAL_OUT"
