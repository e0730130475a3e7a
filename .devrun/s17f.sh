#!/usr/bin/env bash
# Session 17, one H200 (.devbin/$1.tar.xz: train_gpt2 and tt_prepare_data of this session), ~4
# min: issue 23 goal 3 at world size 1 in bf16, with more samples than s17b/s17c: four rounds
# of tools/scaling_gpu --gpus 1 (one plain process, then DDP under mpirun -np 1; medians of
# steps 11-50 of each run).
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s17e}"
mkdir -p old/bin && mv build/old_train_gpt2 old/bin/train_gpt2
logs_begin
nvidia-smi -L
data=/tmp/s17data
prep_data $data || status=1
ddp_x1_rounds 4 || status=1
logs_end
stamp "s17f done (status $status)"
exit $status
