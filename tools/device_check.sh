#!/usr/bin/env bash
# The GPU checks of one or more chapters, run from the repository root on a machine with a GPU:
#
#   tools/device_check.sh [--no-build] [--no-bench] [CHAPTER...]   e.g.  tools/device_check.sh 06 07
#
# CHAPTER is a number (default: 06). Steps, each reported in the summary at the end:
#   1. configure $BUILD_DIR (default build-device: Release, solution, CUDA on) and build the
#      chapters' test binaries and benchmarks (skipped with --no-build: binaries must exist);
#   2. (chapters 09, 10) PyTorch's side of the GPT-2 124M check (reference_data/ch09/check_gpt2_124m.py),
#      then ctest -L cuda --output-on-failure, restricted to the chapters' tests (names ChNN_...);
#   3. compute-sanitizer --tool memcheck on each chapter's test binary (its CUDA tests), with the
#      caching allocator off (TT_CUDA_CACHING=0) so that every tensor has exact bounds; tests
#      that provoke CUDA API errors on purpose (MEMCHECK_EXCLUDE) are left out, since memcheck
#      counts every failed API call as an error;
#   4. compute-sanitizer --tool racecheck and --tool synccheck on the tests of kernels that use
#      shared memory (gtest filter per chapter: RACECHECK_FILTER below);
#   5. the chapters' benchmarks (BENCHMARKS below; skipped with --no-bench, e.g. when
#      tools/run_benchmarks runs them for the report); with $OUT set, each writes Google Benchmark
#      JSON to $OUT/<name>.json.
# Exit status: 0 when every step passed. Environment: BUILD_DIR, JOBS (default: nproc),
# TT_GPT2_124M_REF (default: $BUILD_DIR/gpt2_124m_ref).
set -uo pipefail
cd "$(dirname "$0")/.."

# Per chapter: benchmark binaries, and the gtest filter of tests whose kernels use shared memory.
declare -A BENCHMARKS=([06]="bench_cuda_basics bench_nn" [07]="bench_cuda_matmul bench_optim"
  [09]="bench_gpt2_step" [10]="bench_attention")
declare -A RACECHECK_FILTER=([06]="Ch06_3_CudaSum.*:Ch06_6_CudaSoftmax.*:Ch06_7_CudaLayerNorm.*:Ch06_CudaSoftmaxBackward.*:Ch06_CudaLayerNormBackward.*:Ch06_CudaCrossEntropy.*-*Gpt2*"
  [07]="Ch07_2_CudaSgemmTiled.Layouts:Ch07_3_CudaSgemmRegblock.Layouts:Ch07_4_CudaSgemmVec4.Layouts:Ch07_CudaSgemmWarptile.WarpTiledShapes:Ch07_6_CudaSumOfSquares.*"
  [10]="Ch10_5_FlashAttentionCuda.*:Ch10_6_FlashAttentionCuda.*:Ch10_FlashAttentionQkvCuda.*"
  [11]="Ch11_FlashBf16Cuda.*:Ch11_ResidualLayerNormBf16Cuda.*-*Qkv*"
  [15]="Ch15_OpsCuda.RmsNormMatchesTheCpu:Ch15_OpsCuda.KvCacheStepMatchesTheCpu")
# gtest negative patterns (':'-separated) of tests that make CUDA API calls fail on purpose, and
# the GPT-2 124M comparison (minutes under memcheck; the tiny model runs the same kernels), and
# chapter 10's T = 8192 attention (the smaller tests run the same kernels).
MEMCHECK_EXCLUDE="*OutOfMemory*:*LaunchCheck*:*Gpt2_124M*:*LongSequence*"
# Extra memcheck options per chapter. NCCL's ncclCommInitRank probes kernels of other GPU
# architectures with cudaFuncGetAttributes, and memcheck counts each failed probe
# (cudaErrorNoKernelImageForDevice, inside libnccl) as an error: chapter 12 does not report API
# errors (memory errors are still reported).
declare -A MEMCHECK_OPTIONS=([12]="--report-api-errors no")

build=1
bench=1
chapters=()
for arg in "$@"; do
  case "$arg" in
    --no-build) build=0 ;;
    --no-bench) bench=0 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    [0-9]|[0-9][0-9]) chapters+=("$(printf '%02d' "$((10#$arg))")") ;;
    *) echo "device_check: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#chapters[@]} -eq 0 ] && chapters=(06)
build_dir=${BUILD_DIR:-build-device}
jobs=${JOBS:-$(nproc)}
bin="$build_dir/bin"
results=()
status=0
record() {  # record <step> <exit code>
  if [ "$2" -eq 0 ]; then results+=("PASS  $1"); else results+=("FAIL  $1 (exit $2)"); status=1; fi
}
banner() { echo; echo "=== device_check: $* ==="; }

banner "GPU"
nvidia-smi -L || echo "nvidia-smi failed: is there a GPU?"

if [ "$build" = 1 ]; then
  banner "configure and build ($build_dir)"
  targets=()
  for ch in "${chapters[@]}"; do
    targets+=("tt_ch${ch}_tests")
    for b in ${BENCHMARKS[$ch]:-}; do targets+=("$b"); done
  done
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTT_IMPLEMENTATION=solution \
        -DTT_ENABLE_CUDA=ON -DTT_BUILD_DOCS=OFF &&
    cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}"
  rc=$?
  record "build ${targets[*]}" $rc
  if [ $rc -ne 0 ]; then
    printf '%s\n' "${results[@]}"
    exit 1
  fi
fi

regex="^Ch($(IFS='|'; echo "${chapters[*]}"))_"

# Chapters 09 and 10 compare GPT-2 124M with PyTorch: PyTorch's side is written first, into the
# folder the tests Ch09_GPT2Cuda.Gpt2_124MMatchesPyTorch and
# Ch10_FastGpt2Cuda.Gpt2_124MFastPathMatchesPyTorch read from TT_GPT2_124M_REF.
if [[ " ${chapters[*]} " == *" 09 "* || " ${chapters[*]} " == *" 10 "* ]]; then
  banner "PyTorch side of the GPT-2 124M check"
  export TT_GPT2_124M_REF=${TT_GPT2_124M_REF:-$build_dir/gpt2_124m_ref}
  python3 reference_data/ch09/check_gpt2_124m.py --out "$TT_GPT2_124M_REF"
  record "reference_data/ch09/check_gpt2_124m.py -> $TT_GPT2_124M_REF" $?
fi

banner "ctest -L cuda (chapters ${chapters[*]})"
ctest --test-dir "$build_dir" -L cuda -R "$regex" --output-on-failure --no-tests=error -j 4
record "ctest -L cuda -R '$regex'" $?

if command -v compute-sanitizer >/dev/null; then
  for ch in "${chapters[@]}"; do
    exe="$bin/tt_ch${ch}_tests"
    if ! "$exe" --gtest_list_tests --gtest_filter="*Cuda*-$MEMCHECK_EXCLUDE" | grep -q '^  '; then
      record "memcheck tt_ch${ch}_tests: no CUDA tests in this chapter" 0
      continue
    fi
    banner "compute-sanitizer memcheck: $exe"
    # shellcheck disable=SC2086  # the options are words
    TT_CUDA_CACHING=0 compute-sanitizer --tool memcheck --error-exitcode 99 ${MEMCHECK_OPTIONS[$ch]:-} \
      "$exe" --gtest_filter="*Cuda*-$MEMCHECK_EXCLUDE" --gtest_brief=1
    record "memcheck tt_ch${ch}_tests (*Cuda*-$MEMCHECK_EXCLUDE)" $?
    filter=${RACECHECK_FILTER[$ch]:-}
    if [ -n "$filter" ]; then
      for tool in racecheck synccheck; do
        banner "compute-sanitizer $tool: $exe --gtest_filter=$filter"
        TT_CUDA_CACHING=0 compute-sanitizer --tool "$tool" --error-exitcode 99 \
          "$exe" --gtest_filter="$filter" --gtest_brief=1
        record "$tool tt_ch${ch}_tests ($filter)" $?
      done
    fi
  done
else
  record "compute-sanitizer not found on PATH" 1
fi

for ch in "${chapters[@]}"; do
  [ "$bench" = 1 ] || break
  for b in ${BENCHMARKS[$ch]:-}; do
    banner "benchmark $b"
    args=()
    if [ -n "${OUT:-}" ]; then
      mkdir -p "$OUT"
      args=(--benchmark_out="$OUT/$b.json" --benchmark_out_format=json)
    fi
    "$bin/$b" "${args[@]}"
    record "benchmark $b${OUT:+ -> \$OUT/$b.json}" $?
  done
done

banner "summary (chapters ${chapters[*]})"
printf '%s\n' "${results[@]}"
exit $status
