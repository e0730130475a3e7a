#!/usr/bin/env bash
# GPU run (issue 25, chapter 14): partition by MEASURED cost against the FLOP model. On 4 H100s,
# tt_pipeline_bench at 774M's shape (L36 H20 C1280, one row of T = 1024 per micro-batch, bf16),
# p = 4, m = 8, 1F1B, once with --partition flops and once with --partition measured: each run
# prints its costs, the cut and the predicted max stage vs the mean ("partition ..."), then the
# step time and the measured bubble ("pipeline ..."); the per-rank busy F/B milliseconds of the
# last step come from the timelines (CSV in $OUT/tl_<partition>/).
set -uo pipefail
. .devrun/lib.sh
tt_build tt_pipeline_bench || exit 1
SHAPE="--layers 36 --heads 20 --channels 1280 --batch 1 --seq 1024 --ops bf16"
for part in flops measured; do
  stamp "774M bf16, p=4 m=8 1f1b, --partition $part"
  mkdir -p "$OUT/tl_$part"
  timeout 110 $MPI_APP -np 4 build/bin/tt_pipeline_bench --device cuda $SHAPE --schedule 1f1b \
    --micro-batches 8 --steps 6 --warmup 2 --partition "$part" --timeline-dir "$OUT/tl_$part" \
    >"$OUT/bench_$part.log" 2>&1
  echo "exit $?"
  grep -aE "^partition|^pipeline|^memory|rror" "$OUT/bench_$part.log" | cut -c1-900
  # Per rank: F and B milliseconds of the last step (busy), from the measured timeline.
  for f in "$OUT/tl_$part"/1f1b_p4_m8_rank?.csv; do
    [ -f "$f" ] && awk -F, 'NR > 1 && $2 == "F" { f += $7 - $6; nf++ } NR > 1 && $2 == "B" {
      b += $7 - $6; nb++ } END { printf "%s: F %.2f ms (%d, %.2f each), B %.2f ms (%d, %.2f each)\n",
      FILENAME, f, nf, f / (nf ? nf : 1), b, nb, b / (nb ? nb : 1) }' "$f"
  done
done
stamp "done"
