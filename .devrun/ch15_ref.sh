#!/usr/bin/env bash
# Chapter 15 against transformers at ~125M parameters, on one H100 (issue 26): the reference of
# `gen_llama_reference.py --preset 100m` (V 32000, C 768, L 12, NH 12, NKV 4, F 2048; written
# here, not committed) through the same tests as the committed tiny one (Ch15_Reference* with
# TT_LLAMA_REFERENCE: logits, loss, gradients on the CPU and CUDA, 64 greedy tokens), then the
# round trip ours -> safetensors -> transformers -> safetensors -> ours, compared byte for byte.
set -uo pipefail
. .devrun/lib.sh
status=0
tt_build tt_ch15_tests tt_generate || exit 1
ref=/tmp/ref100m
stamp "reference: gen_llama_reference.py --preset 100m"
python3 reference_data/gen_llama_reference.py --preset 100m --out $ref --threads 8 2>&1 | tail -3
grep -v "^ch15/" $ref/MANIFEST | head -3 >"$OUT/ref100m_manifest_head.txt"
stamp "Ch15_Reference* on the 100m reference (CPU and CUDA)"
TT_LLAMA_REFERENCE=$ref build/bin/tt_ch15_tests --gtest_filter='Ch15_Reference*' --gtest_color=no \
  >"$OUT/ref100m_tests.log" 2>&1 || status=1
grep -aE "^\[ +(OK|FAILED|SKIPPED) +\]|max abs err" "$OUT/ref100m_tests.log"
stamp "round trip ours -> transformers -> ours"
rm -rf /tmp/rt1 /tmp/rt2 /tmp/rt3
build/bin/tt_generate --model $ref --device cpu --prompt 1,2,3,4 --max-new 1 --save /tmp/rt1 \
  >"$OUT/rt.log" 2>&1 || status=1
python3 reference_data/check_llama_hf_load.py /tmp/rt1 --resave /tmp/rt2 2>&1 | tee -a "$OUT/rt.log" |
  tail -2 || status=1
build/bin/tt_generate --model /tmp/rt2 --device cpu --prompt 1,2,3,4 --max-new 1 --save /tmp/rt3 \
  >>"$OUT/rt.log" 2>&1 || status=1
for f in model.safetensors config.json; do
  if cmp /tmp/rt1/$f /tmp/rt3/$f; then echo "round trip: $f identical ($(stat -c %s /tmp/rt1/$f) bytes)"
  else echo "round trip: $f DIFFERS"; status=1; fi
done
stamp "done (status $status)"
exit $status
