#!/usr/bin/env bash
# Session 18, one H200 (.devbin/$1.tar.xz: train_gpt2, tt_prepare_data and bench_gpt2_step of
# HEAD, build/old_train_gpt2 from before this session's LayerNorm kernels), ~6 min:
#  - is s18f's 500-step drift between before and HEAD (0.10 nats, against 0.03 for bf16 vs TF32)
#    a property of that seed? Before and HEAD from two more seeds, 300 steps each; the
#    train.csv files come back for tools/compare_runs;
#  - tools/bf16_step_gpu (no --data): bench_gpt2_step's TF32/bf16/recompute rows and PyTorch's
#    tf32_sdpa, bf16_sdpa and bf16_compile in one run, into $OUT/bf16_step.csv (chapter 11's
#    table and the benchmark report).
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s18g}"
mkdir -p old/bin && mv build/old_train_gpt2 old/bin/train_gpt2
logs_begin
nvidia-smi -L
data=/tmp/s18data
prep_data $data || status=1
for seed in 7 42; do
  for b in old build; do
    stamp "300 steps, $b, seed $seed"
    $b/bin/train_gpt2 --data $data --device cuda --precision bf16 --layers 12 --heads 12 \
      --channels 768 --B 8 --T 1024 --seed $seed --sample-tokens 1 --steps 300 --eval-every 100 \
      --eval-batches 4 --out /tmp/run_${b}_$seed >"$OUT/train_${b}_$seed.log" 2>&1 || status=1
    cp /tmp/run_${b}_$seed/train.csv "$OUT/train300_${b}_$seed.csv"
  done
  python3 tools/compare_runs /tmp/run_old_$seed/train.csv /tmp/run_build_$seed/train.csv --tol 0.05 --window 20
done
stamp "tools/bf16_step_gpu"
timeout 400 python3 tools/bf16_step_gpu --build build --anchors .devbin/anchors \
  --csv "$OUT/bf16_step.csv" 2>&1 | tail -15 || status=1
logs_end
stamp "s18g done (status $status)"
exit $status
