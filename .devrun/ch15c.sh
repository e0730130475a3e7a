#!/usr/bin/env bash
# Chapter 15 bfloat16 inference on one H100 (issue 26), under 9 minutes; writes to $OUT:
#  1. build tt_generate and tt_ch15_tests (.devrun/lib.sh: sm_90, solution);
#  2. ch15's CUDA tests and model tests (Ch15_Bf16Cuda: bf16 kernels and decode vs float32);
#  3. tt_generate on TinyLlama-1.1B's shape (random weights), one process: the 1 GiB device copy
#     bandwidth, then float32 and bf16 at batch 1, 8, 32, prompts of 128 and 512 ids (TTFT),
#     256 new tokens, eager and --cuda-graph, bf16 with the decode GEMV and with cuBLASLt: JSON
#     lines in tt.jsonl, a table on stdout;
#  4. benchmarks/hf_generate_bench.py: transformers' eager generate on the same shape in bf16,
#     the same batches, prompt and new tokens, and a 512-token TTFT: hf.jsonl;
#  5. compute-sanitizer memcheck and racecheck on the bf16 tests (caching allocator off).
# HF=0 skips step 4 (a second run on the same kind of GPU); tt_generate --profile prints the
# per-op profile of one eager decode step per combination (profiles.txt).
set -uo pipefail
. .devrun/lib.sh
status=0
nvidia-smi -L
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
tt_build tt_generate tt_ch15_tests || exit 1

stamp "ch15 CUDA and model tests"
timeout 150 build/bin/tt_ch15_tests --gtest_color=no \
  --gtest_filter='Ch15_OpsCuda.*:Ch15_ModelCuda.*:Ch15_Bf16Cuda.*:Ch15_Llama.*:Ch15_Generate*' \
  >"$OUT/tests.log" 2>&1 || status=1
grep -aE "^\[ +(OK|FAILED|SKIPPED) +\]|^\[  PASSED|greedy:" "$OUT/tests.log"
grep -aB5 "Failure$" "$OUT/tests.log" | head -40

# The decode GEMV is measured only when its tests passed (a crash would lose the other numbers).
GEMV=on,off
if ! grep -aq "^\[       OK \] Ch15_Bf16Cuda.DecodeGemv" "$OUT/tests.log" ||
  ! grep -aq "^\[       OK \] Ch15_Bf16Cuda.LogitsAndGreedy" "$OUT/tests.log"; then
  GEMV=off
  echo "decode GEMV tests did not pass: measuring --gemv off only"
fi
# One process (the random initialisation of 1.1B parameters takes a minute of CPU): float32
# then the same weights converted to bfloat16, prompts of 128 and 512 ids, batch 1, 8, 32,
# eager and CUDA graph, bf16 with and without the decode GEMV; each the second of two runs.
stamp "tt_generate (TinyLlama-1.1B shape, f32 then bf16)"
timeout 300 build/bin/tt_generate --random tinyllama-1.1b --device cuda --json --runs 2 \
  --dtype f32,bf16 --prompt-len 128,512 --batch 1,8,32 --modes eager,graph --gemv $GEMV \
  --max-new 256 --profile \
  --copy-bandwidth >"$OUT/tt_generate.log" 2>&1 || { status=1; tail -5 "$OUT/tt_generate.log"; }
grep -a "^{" "$OUT/tt_generate.log" >"$OUT/tt.jsonl"
grep -a "copy bandwidth" "$OUT/tt_generate.log"
grep -aE "^(float32|bfloat16), batch|^Per-op|^[a-z_0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+%|^Step:" \
  "$OUT/tt_generate.log" >"$OUT/profiles.txt"
grep -aA12 "^bfloat16, batch 1, prompt 128, eager" "$OUT/profiles.txt" | head -28
python3 - "$OUT/tt.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print("{dtype:4} B={batch:<3} P={prompt_len:<4} {mode:5} {g:4}  TTFT {ttft_ms:8.2f} ms  "
          "{decode_ms_per_step:7.3f} ms/step  {tokens_per_s:9.1f} tok/s  "
          "{effective_gbps:7.1f} GB/s ({pct:.0f}% of copy)".format(
              mode="graph" if r["cuda_graph"] else "eager", g="gemv" if r["gemv"] else "",
              pct=100 * r["effective_gbps"] / max(r["copy_gbps"], 1e-9), **r))
PY

if [ "${HF:-1}" = 1 ]; then
stamp "transformers generate (bf16, eager)"
timeout 200 python3 benchmarks/hf_generate_bench.py --batch 1,8,32 --prompt-len 128 \
  --new-tokens 256 --runs 2 >"$OUT/hf.jsonl" 2>"$OUT/hf.log" || { status=1; tail -5 "$OUT/hf.log"; }
timeout 60 python3 benchmarks/hf_generate_bench.py --batch 1 --prompt-len 512 --new-tokens 8 \
  --runs 3 >>"$OUT/hf.jsonl" 2>>"$OUT/hf.log" || { status=1; tail -5 "$OUT/hf.log"; }
cat "$OUT/hf.jsonl"
fi

stamp "compute-sanitizer memcheck (bf16 tests)"
TT_CUDA_CACHING=0 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 \
  build/bin/tt_ch15_tests --gtest_filter='Ch15_Bf16Cuda.*:Ch15_OpsCuda.Argmax*' >"$OUT/memcheck.log" 2>&1 || status=1
grep -aE "ERROR SUMMARY|^\[  (PASSED|FAILED)" "$OUT/memcheck.log"
stamp "compute-sanitizer racecheck (bf16 kernels)"
TT_CUDA_CACHING=0 timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 \
  build/bin/tt_ch15_tests \
  --gtest_filter='Ch15_Bf16Cuda.RmsNorm*:Ch15_Bf16Cuda.KvCacheStep*:Ch15_Bf16Cuda.DecodeGemv*:Ch15_Bf16Cuda.RopeAppend*:Ch15_OpsCuda.Argmax*' \
  >"$OUT/racecheck.log" 2>&1 || status=1
grep -aE "RACECHECK SUMMARY|ERROR SUMMARY|^\[  (PASSED|FAILED)" "$OUT/racecheck.log"
stamp "done (status $status)"
exit $status
