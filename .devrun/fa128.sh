#!/usr/bin/env bash
# bf16 FlashAttention at hs 128 (branch fa128: chapter 11's kernels instantiated for D = 128,
# the backward compiled for 2 blocks per multiprocessor; ptxas here: forward 167 registers,
# dQ 230, dK/dV 255 with 32 bytes of spill). On one H100, about 6 minutes:
#  1. chapter 11's CUDA tests (hs 128 cases in Ch11_FlashBf16Cuda) and chapter 15's GQA and bf16
#     tests (Ch15_GqaCuda now with bf16 hs 128);
#  2. compute-sanitizer memcheck, racecheck and synccheck on the bf16 FlashAttention tests;
#  3. bench_attention's bf16 rows (hs 64 and 128) next to PyTorch SDPA at the same shapes
#     (.devrun/sdpa_hs.py).
set -uo pipefail
. .devrun/lib.sh
status=0
tt_build tt_ch11_tests tt_ch15_tests bench_attention || exit 1
stamp "ch11 CUDA tests"
timeout 150 build/bin/tt_ch11_tests --gtest_color=no --gtest_filter='*Cuda*' >"$OUT/ch11.log" 2>&1 || status=1
grep -aE "^\[ +(OK|FAILED) +\] Ch11_FlashBf16|^\[  (PASSED|FAILED)" "$OUT/ch11.log"
stamp "ch15 GQA and bf16 CUDA tests"
timeout 150 build/bin/tt_ch15_tests --gtest_color=no --gtest_filter='Ch15_GqaCuda.*:Ch15_Bf16*Cuda*' \
  >"$OUT/ch15.log" 2>&1 || status=1
grep -aE "^\[ +(OK|FAILED) +\]|^\[  (PASSED|FAILED)" "$OUT/ch15.log"
for tool in memcheck racecheck synccheck; do
  stamp "compute-sanitizer $tool"
  TT_CUDA_CACHING=0 timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 \
    build/bin/tt_ch11_tests --gtest_color=no \
    --gtest_filter='Ch11_FlashBf16Cuda.ForwardMatchesReference:Ch11_FlashBf16Cuda.BackwardMatchesReference' \
    >"$OUT/$tool.log" 2>&1 || status=1
  grep -aE "ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED)" "$OUT/$tool.log"
done
stamp "bench_attention bf16 (hs 64, 128)"
build/bin/bench_attention --benchmark_filter='cuda_bf16' --benchmark_format=json \
  >"$OUT/bench_attention.json" 2>"$OUT/bench_attention.err" || status=1
python3 - "$OUT/bench_attention.json" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
for b in json.loads(text[text.index("{"):])["benchmarks"]:
    print(f"{b['name']:60s} {b['real_time']:9.3f} {b.get('time_unit', '')}")
PY
stamp "PyTorch SDPA bf16 at the same shapes (hs 64 and 128)"
python3 .devrun/sdpa_hs.py 2>&1 | tee "$OUT/sdpa.jsonl" || status=1
stamp "done (status $status)"
exit $status
