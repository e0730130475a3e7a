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
carried s12b
mpi_tests tt_ch13_tests 2 '*Cuda*' ch13_np2.log || status=1
grep -a "worst" "$OUT/ch13_np2.log" | head -8
[ "$gpus" -ge 4 ] && { mpi_tests tt_ch13_tests 4 '*Cuda*' ch13_np4.log || status=1; }
gtests ch11.log 120 build/bin/tt_ch11_tests '*LinearBf16*' || status=1
data=/tmp/s12_data
prep_data "$data" || status=1
m774="--layers 36 --heads 20 --channels 1280"
m13="--layers 24 --heads 16 --channels 2048"
train_run 774_tp1 1 "$m774"
train_run 774_tp2 2 "$m774" -- --tp 2
train_run 774_tp2sp 2 "$m774" -- --tp 2 --sequence-parallel
if [ "$gpus" -ge 4 ]; then
  train_run 774_tp4 4 "$m774" -- --tp 4
  train_run 774_tp4sp 4 "$m774" -- --tp 4 --sequence-parallel
  train_run 774_tp4sp_keep 4 "$m774" TT_TP_SP_REGATHER=0 -- --tp 4 --sequence-parallel
fi
train_run 13_tp1 1 "$m13"
train_run 13_tp2 2 "$m13" -- --tp 2
[ "$gpus" -ge 4 ] && train_run 13_tp4sp 4 "$m13" -- --tp 4 --sequence-parallel
train_run 774_tp2sp_keep 2 "$m774" TT_TP_SP_REGATHER=0 -- --tp 2 --sequence-parallel
train_run 13_tp2sp 2 "$m13" -- --tp 2 --sequence-parallel
stamp "s12b done (status $status)"
exit $status
