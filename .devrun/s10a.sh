#!/usr/bin/env bash
# Session 10's first call, on a 4-GPU H100 machine, with binaries built on the CPU machine for
# sm_90 at c677ff4 and carried as .devbin/s10a.tar.xz (no build here), ~6 minutes:
#  1. the multi-GPU CUDA tests of chapters 12-16 on the session-9 tree (chapter 14 at np 4 and 2,
#     chapters 12, 13, 15 and 16 at np 2; chapter 15's CUDA DDP test had never run on GPUs);
#  2. the bubble rows session 9 did not measure in the new form (busiest rank, imbalance):
#     p = 2 at m = 8 and 16, interleaved p = 2, AFAB at p = 2 and 4 (.devrun/ch14b.sh BUBBLE_RUNS).
set -uo pipefail
. .devrun/lib.sh
status=0
tar xJf .devbin/s10a.tar.xz || { echo "unpack failed"; exit 1; }
nvidia-smi -L
mpi_tests tt_ch14_tests 4 '*Cuda*:Ch14_PipelineStrategy.*' ch14_np4.log || status=1
mpi_tests tt_ch14_tests 2 '*Cuda*' ch14_np2.log || status=1
mpi_tests tt_ch12_tests 2 '*Cuda*' ch12_np2.log || status=1
mpi_tests tt_ch13_tests 2 '*Cuda*' ch13_np2.log || status=1
mpi_tests tt_ch15_tests 2 '*CudaMpi*' ch15_np2.log || status=1
mpi_tests tt_ch16_tests 2 '*Cuda*' ch16_np2.log || status=1
PARTS=bubble BUBBLE_RUNS=${BUBBLE_RUNS:-"2:1f1b:8 2:1f1b:16 2:afab:8 4:afab:8 2:interleaved:8:2"} \
  BUDGET_S=${SWEEP_S:-300} timeout 330 bash .devrun/ch14b.sh 2>&1 | cut -c1-260 |
  grep -a "^ranks\|^pipeline\|FAILED\|SKIPPED\|^===" | cut -c1-220 || status=1
cat "$OUT/bubble.csv" 2>/dev/null
stamp "s10a done (status $status)"
exit $status
