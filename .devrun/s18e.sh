#!/usr/bin/env bash
# Session 18, one H200 (.devbin/$1.tar.xz: s18d's), ~5 min: issue 23 goal 1 after this session.
#  - Is the 500-step drift between s18b's before and after (0.16 nats in 20-step averages) what
#    any rounding change gives? The BEFORE binary with 2 micro-batches of 4 rows instead of 1 of 8
#    (the same step up to summation order), and HEAD, 500 steps each, from the seed of s18b; the
#    train.csv files come back (compare_runs against s18b's train_old.csv here);
#  - HEAD's step (train_gpt2, 60 steps; bench_gpt2_step cuda_bf16/L12) with PyTorch eager and
#    torch.compile (bf16) in the same call, alternated twice.
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s18d}"
mkdir -p old/bin && mv build/old_train_gpt2 old/bin/train_gpt2
logs_begin
nvidia-smi -L
data=/tmp/s18data
prep_data $data || status=1
M=(--data $data --device cuda --precision bf16 --layers 12 --heads 12 --channels 768 --T 1024
   --seed 1337 --sample-tokens 1)
for run in "old --B 4 --total-batch 8192" "build --B 8"; do
  set -- $run
  b=$1
  shift
  stamp "500 steps, $b $*"
  $b/bin/train_gpt2 "${M[@]}" "$@" --steps 500 --eval-every 100 --eval-batches 4 --out /tmp/run_$b \
    >"$OUT/train_$b.log" 2>&1 || status=1
  grep -aE "^batch|^step (100|300|500)/500" "$OUT/train_$b.log" | cut -c1-120
  cp /tmp/run_$b/train.csv "$OUT/train500_$b.csv"
  step_median /tmp/run_$b/train.csv
done
for rep in 1 2; do
  stamp "round $rep"
  gpt2_steps build 60 || status=1
  vs_torch || status=1
done
logs_end
stamp "s18e done (status $status)"
exit $status
