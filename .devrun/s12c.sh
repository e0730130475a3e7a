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
carried s12c
tp_cuda_tests
mpi_tests tt_ch13_tests 2 '*Cuda*' ch13_np2.log || status=1
grep -a "activations" "$OUT/ch13_np2.log" | sort -u | head -4
data=/tmp/s12_data
prep_data "$data" || status=1
m774="--layers 36 --heads 20 --channels 1280"
m13="--layers 24 --heads 16 --channels 2048"
train_run 774_tp2 2 "$m774" -- --tp 2
if [ "$gpus" -ge 4 ]; then
  train_run 774_tp4 4 "$m774" -- --tp 4
  train_run 774_tp4sp 4 "$m774" -- --tp 4 --sequence-parallel
  train_run 13_tp4 4 "$m13" -- --tp 4
fi
train_run 13_tp2sp 2 "$m13" -- --tp 2 --sequence-parallel
stamp "s12c done (status $status)"
exit $status
