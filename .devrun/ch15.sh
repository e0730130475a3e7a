#!/usr/bin/env bash
# GPU run for the ch15 branch (issue 26: LLaMA, Hugging Face interop, KV-cache inference).
# Run from the repository root on an H100 (torch and transformers installed); writes to $OUT:
#   llama_ref.tar      only when gen_llama_reference.py now writes other bytes than the committed
#                      reference_data/ch15/ (e.g. another transformers version): the new files
#   gen.log, build.log, ctest.log, reference.log, hf_load.log, generate.log, device_check.log
# Steps:
#  1. python3 reference_data/gen_llama_reference.py (a tiny random LlamaForCausalLM, GQA, untied)
#     into /tmp, compared with the committed reference_data/ch15;
#  2. build chapter 15's tests and tt_generate (default preset, sm_90);
#  3. every ch15 test (CPU and CUDA), now with the reference data present: Ch15_Reference* and
#     Ch15_ReferenceCuda* must pass, not skip;
#  4. the other direction: tt_generate --save DIR writes a model, check_llama_hf_load.py loads it
#     in transformers and compares the logits (1e-4);
#  5. tt_generate timings on the GPU: the tiny preset and TinyLlama-1.1B's shape (random fp32
#     weights, batch 1, 128 new tokens): time to first token and decode tokens/s;
#  6. tools/device_check.sh 15 (compute-sanitizer).
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
status=0
step() { echo "=== $* ==="; }

step "reference data (transformers)"
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
# Regenerated into /tmp and compared with the committed files (the tests read the committed ones).
rm -rf /tmp/ch15_ref
PYTHONUNBUFFERED=1 python3 reference_data/gen_llama_reference.py --out /tmp/ch15_ref/ch15 \
  >"$OUT/gen.log" 2>&1 || status=1
tail -3 "$OUT/gen.log"
if diff -r -q /tmp/ch15_ref/ch15 reference_data/ch15 >>"$OUT/gen.log" 2>&1; then
  echo "regenerated reference data: identical to reference_data/ch15"
else
  echo "regenerated reference data DIFFERS from reference_data/ch15 (llama_ref.tar has the new files)"
  tar -cf "$OUT/llama_ref.tar" -C /tmp/ch15_ref ch15
fi

step build
{ cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build build -j16 --target tt_ch15_tests tt_generate train_llama; } >"$OUT/build.log" 2>&1 || {
  tail -50 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
tail -3 "$OUT/build.log"

step "ch15 tests (CPU and CUDA)"
ctest --test-dir build -L ch15 --output-on-failure -j4 >"$OUT/ctest.log" 2>&1 || status=1
tail -25 "$OUT/ctest.log"

step "reference tests, verbose (must PASS, not skip)"
build/bin/tt_ch15_tests --gtest_filter='Ch15_Reference*:Ch15_OpsCuda.*:Ch15_ModelCuda.*' \
  >"$OUT/reference.log" 2>&1 || status=1
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED|^\[  SKIPPED" "$OUT/reference.log"

step "a model saved here loads in transformers"
rm -rf /tmp/tt_llama_saved
build/bin/tt_generate --random tiny --device cpu --prompt "1,2,3,4,5,6,7,8" --max-new 4 \
  --save /tmp/tt_llama_saved >"$OUT/hf_load.log" 2>&1 || status=1
python3 reference_data/check_llama_hf_load.py /tmp/tt_llama_saved >>"$OUT/hf_load.log" 2>&1 || status=1
tail -3 "$OUT/hf_load.log"

step "tt_generate on the GPU"
{
  build/bin/tt_generate --random tiny --device cuda --prompt "1,2,3;4,5,6,7" --max-new 64
  build/bin/tt_generate --random tinyllama-1.1b --device cuda --prompt "1,2,3,4,5,6,7,8" --max-new 128
  build/bin/tt_generate --random tinyllama-1.1b --device cuda --prompt "1,2,3,4,5,6,7,8" --max-new 128 --cuda-graph
  build/bin/tt_generate --gpt2 reference_data/ch09/gpt2_tiny.bin --device cuda --prompt "1,2,3" --max-new 16
} >"$OUT/generate.log" 2>&1 || status=1
grep -E "model:|time to first|decode:" "$OUT/generate.log"

step "device_check 15 (memcheck of the ch15 CUDA tests, racecheck of RMSNorm and the KV step)"
BUILD_DIR=build tools/device_check.sh --no-build --no-bench 15 >"$OUT/device_check.log" 2>&1 || status=1
tail -15 "$OUT/device_check.log"

echo "ch15 devrun: exit $status"
exit $status
