#!/usr/bin/env bash
# PP x CP on GPUs (chapter 16's "Pipeline and context parallelism together"), on a 4-GPU H100
# machine: train_gpt2 --pp 2 --cp 2 (one GPU per rank, NCCL: pipeline transfers on the pp
# groups, ring attention on the cp groups, gradients over the dp x cp split) against one GPU,
# fp32, a small GPT-2 shape at T = 1024; the losses, gradient norms and validation losses of both
# logs side by side. Then --pp 2 --cp 2 --schedule afab, and --pp 2 --cp 2 resuming the one-GPU
# checkpoint of step 4 (the one-process format under PP x CP on GPUs). About 5 minutes with the
# build.
set -uo pipefail
. .devrun/lib.sh  # $OUT, $MPI_APP, .devdeps, stamp, tt_build
nvidia-smi -L
# BIN=build-cpu/bin SKIP_BUILD=1 DEVICE=cpu SHAPE=... : a dry run of this script on a CPU machine.
BIN=${BIN:-build/bin}
[ -n "${SKIP_BUILD:-}" ] || tt_build train_gpt2 tt_prepare_data || exit 1

data=/tmp/ppcp_data
mkdir -p "$data"
# The corpus: fortunes where installed, else the repository's Markdown (README.md alone is too
# small for a validation shard of B*T+1 tokens).
if [ -d /usr/share/games/fortunes ]; then inputs=(--input /usr/share/games/fortunes); else
  mapfile -t md < <(find . -maxdepth 3 -name '*.md' -not -path './build*' | sort)
  inputs=(); for f in "${md[@]}"; do inputs+=(--input "$f"); done
fi
"$BIN/tt_prepare_data" "${inputs[@]}" --out "$data" --vocab-size 1024 --val-fraction 0.1 \
  --overwrite >"$OUT/prepare.log" 2>&1 || { tail -5 "$OUT/prepare.log"; exit 1; }

DEVICE=${DEVICE:-cuda}
SHAPE=${SHAPE:---layers 4 --heads 4 --channels 256 --T 1024 --B 4 --total-batch 8192}
status=0
train() {  # np name [extra...]: a run in /tmp/ppcp_<name>, its log and train.csv in $OUT
  local np=$1 name=$2
  shift 2
  stamp "train_gpt2 -np $np $*"
  # shellcheck disable=SC2086
  timeout 240 $MPI_APP -np "$np" "$BIN/train_gpt2" --data "$data" --out "/tmp/ppcp_$name" \
    --device "$DEVICE" --precision fp32 $SHAPE --warmup 2 --eval-every 4 --eval-batches 2 \
    --checkpoint-every 4 "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "exit $rc"
  [ $rc = 0 ] || [ -n "${KILLED:-}" ] || { tail -20 "$OUT/$name.log"; status=1; }
  grep -aE "^parallel|context parallel \(|grid dp" "$OUT/$name.log" | head -3 | cut -c1-300
  cp "/tmp/ppcp_$name/train.csv" "$OUT/$name.csv" 2>/dev/null
}
train 1 one --overwrite --steps 8
train 4 pp2cp2 --overwrite --steps 8 --pp 2 --cp 2 --micro-batches 2
train 4 pp2cp2_afab --overwrite --steps 8 --pp 2 --cp 2 --micro-batches 2 --schedule afab
# One GPU killed after step 5 (its checkpoint: step 4), then PP2 x CP2 resumes it to step 8: the
# uninterrupted one-GPU run's steps 5-8.
KILLED=1 train 1 resumed --overwrite --steps 8 --kill-after-step 5
train 4 resumed --resume --steps 8 --pp 2 --cp 2 --micro-batches 2
stamp "step, loss, grad_norm, val_loss: one GPU | pp2cp2 | pp2cp2 afab | resumed at 4 by pp2cp2"
paste -d'|' <(cut -d, -f1,2,4,7 "$OUT/one.csv") <(cut -d, -f2,4,7 "$OUT/pp2cp2.csv") \
  <(cut -d, -f2,4,7 "$OUT/pp2cp2_afab.csv") <(cut -d, -f2,4,7 "$OUT/resumed.csv")
exit $status
