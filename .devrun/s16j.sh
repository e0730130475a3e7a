#!/usr/bin/env bash
# Session 16, one H200: GPT-2 124M trained 500 steps in bf16 (the retiled portable FlashAttention
# forward, the default) against TF32 from the same seed (B 8, T 1024, the chapters' READMEs as a
# GPT-2-tokenized corpus), tools/compare_runs on the two logs (.devbin/$1.tar.xz: train_gpt2,
# tt_prepare_data), ~2 min.
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s16j}"
data=/tmp/s16j_data
prep_data $data || exit 1
for prec in bf16 tf32; do
  stamp "train_gpt2 124M, $prec, 500 steps"
  build/bin/train_gpt2 --data $data --out /tmp/run_$prec --device cuda --precision $prec \
    --layers 12 --heads 12 --channels 768 --B 8 --T 1024 --steps 500 --seed 1337 \
    --eval-every 100 --eval-batches 4 --sample-tokens 1 >"$OUT/train_$prec.log" 2>&1 || status=1
  grep -aE "^step (100|200|300|400|500)/500" "$OUT/train_$prec.log" | cut -c1-120
  grep -aE "rror|what\(\)" "$OUT/train_$prec.log" | head -3
  cp /tmp/run_$prec/train.csv "$OUT/train_$prec.csv" 2>/dev/null
done
stamp "compare_runs bf16 vs tf32"
python3 tools/compare_runs /tmp/run_bf16/train.csv /tmp/run_tf32/train.csv --tol 0.05 --window 20 || status=1
stamp "s16j done (status $status)"
exit $status
