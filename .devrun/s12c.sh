#!/usr/bin/env bash
# Session 12, third call (4 GPUs). Carried binaries (.devbin/s12c.tar.xz: tt_ch12_tests,
# tt_ch13_tests, train_gpt2, tt_prepare_data, sm_90), at c9c5de4 (out-of-place all-reduce):
#  1. chapter 12's CUDA tests at np 2 (the out-of-place all-reduce on NCCL), chapter 13's at np 4
#     and np 2 (the bf16 activation bytes of TP, SP, SP with the re-gather);
#  2. bf16 train_gpt2 at B=8 T=1024, steps 3-5, nvidia-smi peaks: 774M (L36 H20 C1280) at tp 2,
#     tp 4, tp 4 + SP; 1.3B (L24 H16 C2048) at tp 4 and tp 2 + SP.
set -uo pipefail
. .devrun/lib.sh
status=0
tar xJf .devbin/s12c.tar.xz || exit 1
gpus=$(nvidia-smi -L | wc -l)
mpi_tests tt_ch12_tests 2 '*Cuda*' ch12_np2.log || status=1
[ "$gpus" -ge 4 ] && { mpi_tests tt_ch13_tests 4 '*Cuda*' ch13_np4.log || status=1; }
grep -a "activations\|worst" "$OUT/ch13_np4.log" | sort -u | head -12
mpi_tests tt_ch13_tests 2 '*Cuda*' ch13_np2.log || status=1
grep -a "activations" "$OUT/ch13_np2.log" | sort -u | head -4
data=/tmp/s12_data
prep_data "$data" || status=1
run() {  # NAME NP SHAPE [FLAGS...]
  local name=$1 np=$2 shape=$3 r=/tmp/s12_run threads=$(($(nproc) / $2))
  shift 3
  rm -rf $r
  stamp "$name"
  smi_start "$OUT/smi.csv"
  OMP_NUM_THREADS=$threads $MPI_APP -np "$np" -x OMP_NUM_THREADS build/bin/train_gpt2 \
    --data $data --out $r --device cuda --precision bf16 $shape --T 1024 --B 8 --steps 6 \
    --kill-after-step 5 --warmup 1 --eval-every 0 --eval-batches 1 --sample-tokens 1 \
    --log-every 1 "$@" >$r.log 2>&1
  smi_stop
  grep -aE "^step [3-5]/6 \|" $r.log | cut -c1-110
  echo "peak MiB per GPU: $(smi_peaks "$OUT/smi.csv" "$np")"
  grep -aE "rror|what\(\)" $r.log | head -3 | cut -c1-300
}
m774="--layers 36 --heads 20 --channels 1280"
m13="--layers 24 --heads 16 --channels 2048"
run 774_tp2 2 "$m774" --tp 2
if [ "$gpus" -ge 4 ]; then
  run 774_tp4 4 "$m774" --tp 4
  run 774_tp4sp 4 "$m774" --tp 4 --sequence-parallel
  run 13_tp4 4 "$m13" --tp 4
fi
run 13_tp2sp 2 "$m13" --tp 2 --sequence-parallel
rm -f "$OUT/smi.csv"
stamp "s12c done (status $status)"
exit $status
