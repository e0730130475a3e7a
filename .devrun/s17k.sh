#!/usr/bin/env bash
# Session 17, two H200s (.devbin/$1.tar.xz: this session's train_gpt2, tt_prepare_data and
# tt_ch12_tests in build/bin; train_gpt2 of b254b24 in build/old_train_gpt2), ~4 min:
#  1. chapter 12's CUDA tests at np 2 (DDP's gradients in the buckets, bucket_view_min_numel);
#  2. tools/scaling_gpu --gpus 1,2 --precision bf16 (one plain process, DDP x1 and x2);
#  3. scaling_gpu's float32 check (DDP on 2 GPUs, B=8 each, against one GPU with B=16) with the
#     binary of b254b24 and of this session (it failed in .devrun/s17a.sh).
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s17k}"
mkdir -p old/bin && mv build/old_train_gpt2 old/bin/train_gpt2
logs_begin
nvidia-smi -L
[ "$gpus" -ge 2 ] || { echo "needs two GPUs"; exit 1; }
mpi_tests tt_ch12_tests 2 '*Cuda*' ch12_np2.log || status=1
data=/tmp/s17data
prep_data $data || status=1
stamp "scaling_gpu bf16 x1, x2"
timeout 200 python3 tools/scaling_gpu --build build --data $data --gpus 1,2 --strategies ddp \
  --precision bf16 --steps 50 --check-steps 0 --out /tmp/scaling_bf16 \
  --csv "$OUT/scaling_bf16.csv" 2>&1 | tee "$OUT/scaling_bf16.txt" | grep -a "^| ours" || status=1
for b in old build; do
  f32_check $b
done
logs_end
stamp "s17k done (status $status)"
exit $status
