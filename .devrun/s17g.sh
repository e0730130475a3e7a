#!/usr/bin/env bash
# Session 17, one H200 (.devbin/$1.tar.xz: train_gpt2 and tt_prepare_data of this session), ~2
# min: where DDP's world-size-1 overhead goes in bf16 (issue 23 goal 3): chapter 10's per-op
# profile (--profile-step) of step 20 of GPT-2 124M, B=8, T=1024, one plain process against DDP
# under mpirun -np 1, twice each, alternating.
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s17e}"
logs_begin
nvidia-smi -L
data=/tmp/s17data
prep_data $data || status=1
M=(--data $data --device cuda --precision bf16 --layers 12 --heads 12 --channels 768 --B 8 --T 1024
   --steps 24 --warmup 5 --eval-every 0 --eval-batches 1 --sample-tokens 1 --log-every 1)
for round in 1 2; do
  for s in single ddp; do
    pre=()
    [ $s = ddp ] && pre=($MPI_APP -np 1)
    stamp "$s, round $round"
    "${pre[@]}" build/bin/train_gpt2 "${M[@]}" --profile-step 20 --out /tmp/prof_${s}_$round \
      >"$OUT/prof_${s}_$round.log" 2>&1 || { status=1; tail -3 "$OUT/prof_${s}_$round.log"; }
    grep -aE "^step (1[5-9]|2[0-4])/" "$OUT/prof_${s}_$round.log" | awk '{print $1, $2, $11, $12}' | tr '\n' ' '
    echo
  done
done
stamp "profile tables (round 2)"
for s in single ddp; do
  echo "--- $s"
  grep -avE "^step |^sample|^batch|^model|^data|^ops" "$OUT/prof_${s}_2.log" | head -60
done
logs_end
stamp "s17g done (status $status)"
exit $status
