#!/usr/bin/env bash
# GPU run for the llamabench branch (issue 26's measured point: a LLaMA training step in bf16 vs
# PyTorch eager and torch.compile of the same model, in the same run). On ONE H100 with torch and
# transformers, from the repository root (.devrun/lib.sh: $OUT, stamp, tt_build). Writes to $OUT:
#   build.log, prep.log                 the build (train_llama, tt_prepare_data) and the data
#   llama_step.txt                      tools/llama_step_gpu's output: the markdown table
#   llama_step.csv                      its CSV (chapters/15_llama/llama_step.csv's content)
#   logs/                               every train_llama and torch_llama_bench.py run's log; the
#                                       per-op trace of ours (ours_bf16_trace.json, _ops.txt) and
#                                       torch.profiler's tables (stderr of torch_<last round>.log)
# Steps and expected times (TOTAL_S, default 420 s, bounds the whole: the tool gets what the build
# and the data left, and skips what would not fit, saying so):
#  1. build train_llama and tt_prepare_data (~2-3 min from nothing);
#  2. data: the repository's Markdown files with the GPT-2 vocabulary (V 50257 on both sides);
#  3. tools/llama_step_gpu: ROUNDS (default 3) rounds of train_llama --precision bf16 (10 steps,
#     the mean of steps 4-10) then torch_llama_bench.py eager + compile (~1 min with the first
#     compilation, less once inductor's cache is warm) at L12 C768 NH12 NKV4 (F 2048), B 8,
#     T 1024; then, if time is left, the tf32 rows and train_llama --trace's per-op breakdown.
set -uo pipefail
. .devrun/lib.sh  # $OUT, stamp, tt_build
TOTAL_S=${TOTAL_S:-420}
ROUNDS=${ROUNDS:-3}
status=0
python3 -c 'import torch, transformers
print("torch", torch.__version__, "transformers", transformers.__version__,
      torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU")'
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader

tt_build train_llama tt_prepare_data || exit 1

data=/tmp/llamabench_data
stamp "data: the repository's Markdown files, GPT-2 vocabulary"
mapfile -t md < <(find chapters docs -maxdepth 2 -name '*.md' | sort)
# shellcheck disable=SC2046
build/bin/tt_prepare_data $(printf -- '--input %s ' README.md "${md[@]}") --gpt2-vocab \
  --format paragraph --val-fraction 0.2 --out "$data" >"$OUT/prep.log" 2>&1 ||
  { tail -5 "$OUT/prep.log"; exit 1; }
tail -2 "$OUT/prep.log"

left=$((TOTAL_S - (SECONDS - t0)))
stamp "tools/llama_step_gpu: $ROUNDS rounds, budget $left s"
python3 tools/llama_step_gpu --build build --data "$data" --rounds "$ROUNDS" --tf32 --trace \
  --torch-profile --csv "$OUT/llama_step.csv" --log-dir "$OUT/logs" --budget-s "$left" \
  2>&1 | tee "$OUT/llama_step.txt"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
stamp "done (status $status)"
exit $status
