#!/usr/bin/env bash
# Session 12, second call (2 GPUs; 4 when the machine has them). Carried binaries
# (.devbin/s12b.tar.xz: tt_ch13_tests, tt_ch11_tests, train_gpt2, tt_prepare_data, sm_90):
#  1. chapter 13's CUDA tests at np 2 (the bf16 curves: TP2 + SP now whole sequences with the
#     re-gather, TP2 with the early reduce) and chapter 11's bf16 linear CUDA tests;
#  2. bf16 train_gpt2 at B=8 T=1024, steps 3-5, nvidia-smi peaks: GPT-2 774M's shape (L36 H20
#     C1280) at tp 1, tp 2, tp 2 + SP (whole sequences, re-gather), tp 2 + SP without the
#     re-gather; the 1.3B shape (L24 H16 C2048) at tp 1, tp 2, tp 2 + SP; with 4 GPUs also tp 4
#     and tp 4 + SP with and without the re-gather.
set -uo pipefail
. .devrun/lib.sh
status=0
tar xJf .devbin/s12b.tar.xz || exit 1
gpus=$(nvidia-smi -L | wc -l)
mpi_tests tt_ch13_tests 2 '*Cuda*' ch13_np2.log || status=1
grep -a "worst" "$OUT/ch13_np2.log" | head -8
[ "$gpus" -ge 4 ] && { mpi_tests tt_ch13_tests 4 '*Cuda*' ch13_np4.log || status=1; }
gtests ch11.log 120 build/bin/tt_ch11_tests '*LinearBf16*' || status=1
data=/tmp/s12_data
prep_data "$data" || status=1
run() {  # NAME NP SHAPE [ENV=V...] -- [FLAGS...]
  local name=$1 np=$2 shape=$3 r=/tmp/s12_run envs=() threads=$(($(nproc) / $2))
  shift 3
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  rm -rf $r
  stamp "$name"
  smi_start "$OUT/smi_$name.csv"
  env "${envs[@]}" OMP_NUM_THREADS=$threads $MPI_APP -np "$np" -x OMP_NUM_THREADS \
    -x TT_TP_SP_REGATHER -x TT_TP_EARLY_GRAD_REDUCE build/bin/train_gpt2 --data $data --out $r \
    --device cuda --precision bf16 $shape --T 1024 --B 8 --steps 6 --kill-after-step 5 \
    --warmup 1 --eval-every 0 --eval-batches 1 --sample-tokens 1 --log-every 1 "$@" >$r.log 2>&1
  smi_stop
  grep -aE "^step [3-5]/6 \|" $r.log | cut -c1-110
  echo "peak MiB per GPU: $(smi_peaks "$OUT/smi_$name.csv" "$np")"
  grep -aE "rror|what\(\)" $r.log | head -3 | cut -c1-300
}
export TT_TP_SP_REGATHER=1 TT_TP_EARLY_GRAD_REDUCE=1
m774="--layers 36 --heads 20 --channels 1280"
m13="--layers 24 --heads 16 --channels 2048"
run 774_tp1 1 "$m774"
run 774_tp2 2 "$m774" -- --tp 2
run 774_tp2sp 2 "$m774" -- --tp 2 --sequence-parallel
if [ "$gpus" -ge 4 ]; then
  run 774_tp4 4 "$m774" -- --tp 4
  run 774_tp4sp 4 "$m774" -- --tp 4 --sequence-parallel
  run 774_tp4sp_keep 4 "$m774" TT_TP_SP_REGATHER=0 -- --tp 4 --sequence-parallel
fi
run 13_tp1 1 "$m13"
run 13_tp2 2 "$m13" -- --tp 2
[ "$gpus" -ge 4 ] && run 13_tp4sp 4 "$m13" -- --tp 4 --sequence-parallel
run 774_tp2sp_keep 2 "$m774" TT_TP_SP_REGATHER=0 -- --tp 2 --sequence-parallel
run 13_tp2sp 2 "$m13" -- --tp 2 --sequence-parallel
tar czf "$OUT/smi.tgz" -C "$OUT" $(cd "$OUT" && ls smi_*.csv) && rm -f "$OUT"/smi_*.csv
stamp "s12b done (status $status)"
exit $status
