#!/usr/bin/env bash
# Issue 23, goal 1: chapter 10's register kernel for residual + LayerNorm backward on an H100.
# Builds, runs the LayerNorm tests of chapters 10-11 (bit-for-bit composition check included) and
# compute-sanitizer on them, the kernel benchmark pair, then GPT-2 124M's bf16 step (bench_gpt2_step)
# alternated three times with PyTorch's eager and torch.compile bf16 steps (same run), and one
# profiled train_gpt2 bf16 step. ANCHORS: folder of gpt2_torch_bench.py (default .anchors).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ANCHORS=${ANCHORS:-.anchors}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ -d .devdeps ] && [ ! -f /usr/include/pcre2.h ]; then
  for f in .devdeps/*.deb; do dpkg -x "$f" /; done; ldconfig
fi
L=/tmp/perf_ln; rm -rf $L; mkdir -p $L
{ cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build build -j "$(nproc)" --target tt_ch10_tests tt_ch11_tests bench_fused_ops \
    bench_gpt2_step train_gpt2 tt_prepare_data; } > $L/build.log 2>&1 || { tail -60 $L/build.log; exit 1; }
echo "build ok"
cuobjdump -res-usage build/chapters/CMakeFiles/tt_ch10_given.dir/10_fast_step/src/residual_layernorm_cuda.cu.o 2>&1 \
  | grep -A1 "residual_layernorm_backward_kernel" | grep -o "REG:[0-9]*\|SHARED:[0-9]*\|STACK:[0-9]*" | paste -sd' '
(cd build && ctest -L cuda -R "^Ch10_|^Ch11_" -j 4 --output-on-failure > $L/ctest.log 2>&1; echo "ctest ch10/11 cuda rc $?"; grep -E "tests passed|\(Failed\)" $L/ctest.log)
F='Ch10_8_ResidualLayerNormCuda.*:Ch11_ResidualLayerNormBf16Cuda.*'
for tool in memcheck racecheck synccheck; do
  TT_CUDA_CACHING=0 compute-sanitizer --tool $tool --error-exitcode 9 build/bin/tt_ch10_tests --gtest_filter="$F" > $L/san_$tool.log 2>&1
  echo "compute-sanitizer $tool ch10 rc $? $(grep -o 'ERROR SUMMARY: [0-9]* errors' $L/san_$tool.log | tail -1)"
done
TT_CUDA_CACHING=0 compute-sanitizer --tool memcheck --error-exitcode 9 build/bin/tt_ch11_tests --gtest_filter="$F" > $L/san_ch11.log 2>&1
echo "compute-sanitizer memcheck ch11 rc $? $(grep -o 'ERROR SUMMARY: [0-9]* errors' $L/san_ch11.log | tail -1)"
build/bin/bench_fused_ops --benchmark_filter='residual_layernorm' --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true > $L/bench_ln.txt 2>&1; grep -E "median" $L/bench_ln.txt
for rep in 1 2 3; do
  build/bin/bench_gpt2_step --benchmark_filter='cuda_bf16/L12' 2>&1 | grep -E "cuda_bf16/" | tee -a $L/ours.txt
  python3 $ANCHORS/gpt2_torch_bench.py --B 8 --T 1024 --modes bf16_sdpa,bf16_compile 2>/dev/null \
    | grep '"system"' | tee -a $L/torch.txt
done
D=$L/data
./build/bin/tt_prepare_data --gpt2-vocab --input chapters/09_gpt2/README.md --input chapters/10_fast_step/README.md \
  --input chapters/11_mixed_precision/README.md --format paragraph --out $D > $L/prep.log 2>&1
./build/bin/train_gpt2 --data $D --device cuda --layers 12 --heads 12 --channels 768 --block-size 1024 \
  --B 8 --T 1024 --steps 8 --warmup 2 --eval-every 0 --eval-batches 1 --sample-tokens 4 \
  --profile-step 6 --out $L/prof > $L/prof.log 2>&1
awk '/^Per-op profile/{f=1} f&&/^Step:/{print; exit} f' $L/prof.log | cut -c1-140 | grep -v "^---" | head -30
tar czf "$OUT/perf_ln.tgz" --exclude data --exclude "*.ttckpt" --exclude "*.bin" -C /tmp perf_ln
