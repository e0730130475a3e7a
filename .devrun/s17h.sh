#!/usr/bin/env bash
# Session 17, one H200 (.devbin/$1.tar.xz: tt_ch12_tests with DDP's gradients in the buckets and
# the one-bucket poll), ~1 min: chapter 12's CUDA tests at world size 1 (one GPU): DDP on a GPU
# must equal one process on that GPU bit for bit (Ch12_TrainCudaMpi.DdpOnGpusEqualsOneProcess...).
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s17e}"
nvidia-smi -L
mpi_tests tt_ch12_tests 1 '*Cuda*' ch12_np1.log || status=1
grep -aE "^\[ +(OK|FAILED) +\]" "$OUT/ch12_np1.log" | cut -c1-120
stamp "s17h done (status $status)"
exit $status
