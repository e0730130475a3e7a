#!/usr/bin/env bash
# Session 11 (issue 24): the second shape, L24 H16 C2048 (1.3B), B=8 T=1024 bf16, ours
# (train_gpt2 --tp, carried .devbin/s11e.tar.xz) and PyTorch's DTensor TP
# (.devbin/anchors/torch_tp_bench.py) in pairs, so that a cut-short run still compares in-run:
# tp 2, tp 1, tp 4.
set -uo pipefail
. .devrun/lib.sh
tar xJf .devbin/s11e.tar.xz || exit 1
data=/tmp/s11_data
prep_data "$data"
for tp in 2 1 4; do
  r=/tmp/s11_run launch=""
  [ $tp -gt 1 ] && launch="$MPI_APP -np $tp"
  rm -rf $r
  stamp "ours tp $tp"
  smi_start $r.mem
  $launch build/bin/train_gpt2 --data $data --out $r --device cuda --precision bf16 --layers 24 \
    --heads 16 --channels 2048 --T 1024 --B 8 --steps 7 --kill-after-step 5 --warmup 1 \
    --eval-every 0 --eval-batches 1 --sample-tokens 1 --log-every 1 --tp $tp >$r.log 2>&1
  smi_stop
  grep -aE "^step [3-5]/7 \|" $r.log | cut -c1-120
  grep -aE "rror|what\(\)" $r.log | head -3 | cut -c1-300
  echo "peak MiB per GPU: $(smi_peaks $r.mem $tp)"
  stamp "PyTorch tp $tp"
  if [ $tp = 1 ]; then python3 .devbin/anchors/torch_tp_bench.py --L 24 --NH 16 --C 2048 --steps 6
  else torchrun --standalone --nproc_per_node $tp .devbin/anchors/torch_tp_bench.py --L 24 --NH 16 --C 2048 --steps 6
  fi 2>/dev/null | grep -a '^{'
done
stamp "s11e done"
