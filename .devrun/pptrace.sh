#!/usr/bin/env bash
# Where a pipeline stage's time goes (issue 25: the first stage's slow backward, 1.2x PyTorch at
# 1.3B): train_gpt2 --pp with --trace (chapter 12's Chrome trace, CUDA events per op) for SHAPE
# (default 1.3b: L24 H16 C2048; 774m: L36 H20 C1280) at PP = $P (default 2), bf16, B = 8,
# T = 1024, 1F1B over 8 one-row micro-batches, 4 steps traced (trace_ops reads the last; the trace is written at the run's end, so the run
# is not killed and writes its final checkpoint into /dev/shm), then
# tools/trace_ops per rank: each rank's span, busy and idle time and its top ops. Also one GPU
# (no --pp) at B = ONE_B (default 1, the micro-batch's shape) for the per-op cost without a
# pipeline; P=1 skips the pipeline (SHAPE=124m P=1 ONE_B=8: GPT-2 124M's bf16 step, issue 23). About
# 2-3 minutes after the build. Writes $OUT/pptrace_*.json.gz, $OUT/pptrace_*.txt.
set -uo pipefail
. .devrun/lib.sh
SHAPE=${SHAPE:-1.3b} P=${P:-2}
case $SHAPE in 774m) L=36 H=20 C=1280 ;; 1.3b) L=24 H=16 C=2048 ;; 124m) L=12 H=12 C=768 ;; esac
[ -x build/bin/train_gpt2 ] || tt_build train_gpt2 tt_prepare_data || exit 1
data=/tmp/ch14b_data
if [ ! -f $data/manifest.json ]; then
  mapfile -t md < <(find chapters docs -maxdepth 2 -name '*.md' | sort)
  # shellcheck disable=SC2046
  build/bin/tt_prepare_data $(printf -- '--input %s ' README.md "${md[@]}") --gpt2-vocab \
    --format paragraph --val-fraction 0.2 --out $data >"$OUT/prep.log" 2>&1 || exit 1
fi
trace_run() {  # name np B [flags...]
  local name=$1 np=$2 b=$3
  shift 3
  stamp "trace $name: np $np B $b $*"
  rm -rf /dev/shm/pptrace_run
  local cmd="build/bin/train_gpt2 --data $data --out /dev/shm/pptrace_run --device cuda
    --precision bf16 --layers $L --heads $H --channels $C --T 1024 --B $b --steps 4 --warmup 1
    --eval-every 0 --eval-batches 1 --sample-tokens 1 --log-every 1
    --trace /dev/shm/pptrace_$name.json --trace-steps 4 $*"
  # shellcheck disable=SC2086
  if [ "$np" -gt 1 ]; then timeout 200 $MPI_APP -np "$np" $cmd; else timeout 200 $cmd; fi \
    >"$OUT/pptrace_$name.log" 2>&1
  grep -aE "^step [0-9]+/" "$OUT/pptrace_$name.log" | tail -2
  python3 tools/trace_ops /dev/shm/pptrace_$name.json --top 14 | tee "$OUT/pptrace_$name.txt"
  gzip -c /dev/shm/pptrace_$name.json >"$OUT/pptrace_$name.json.gz"
}
[ "$P" -gt 1 ] && trace_run "${SHAPE}_pp$P" "$P" 8 --pp "$P" --micro-batches 8  # P=1: skip
ONE_B=${ONE_B:-1}  # the one-GPU run's batch (1: a micro-batch's shape; 8: the whole step's)
[ "${ONE:-1}" = 1 ] && trace_run "${SHAPE}_one_b$ONE_B" 1 "$ONE_B"  # ONE=0: skip
stamp done
