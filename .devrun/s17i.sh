#!/usr/bin/env bash
# Session 17, one H200 (.devbin/$1.tar.xz: train_gpt2, tt_prepare_data, tt_ch12_tests; ran as
# `s17i.sh s17i` with DdpOptions::bucket_view_min_numel, and as `s17i.sh s17j` with train_step
# also reading the loss after queueing backward), ~4 min:
# chapter 12's CUDA tests at world size 1; DDP x1 against one process in bf16, four rounds of
# tools/scaling_gpu --gpus 1 --steps 50 (as .devrun/s17f.sh); the per-op profile of step 20 under
# DDP (as .devrun/s17g.sh).
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s17i}"
logs_begin
nvidia-smi -L
mpi_tests tt_ch12_tests 1 '*Cuda*' ch12_np1.log || status=1
data=/tmp/s17data
prep_data $data || status=1
ddp_x1_rounds 4 || status=1
stamp "per-op profile of step 20 under DDP x1"
$MPI_APP -np 1 build/bin/train_gpt2 --data $data --device cuda --precision bf16 --layers 12 \
  --heads 12 --channels 768 --B 8 --T 1024 --steps 24 --warmup 5 --eval-every 0 --eval-batches 1 \
  --sample-tokens 1 --log-every 1 --profile-step 20 --out /tmp/prof_ddp >"$OUT/prof_ddp.log" 2>&1 || status=1
sed 's/  */ /g' "$OUT/prof_ddp.log" | grep -aE "^Step:|^add |^fill" | cut -c1-160
logs_end
stamp "s17i ($1) done (status $status)"
exit $status
