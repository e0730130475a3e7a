#!/usr/bin/env bash
# Session 17, two H200s or one (.devbin/$1.tar.xz: train_gpt2, tt_prepare_data, tt_ch12_tests of
# this session in build/bin (DDP's poll asks one bucket a mark; reduce_bucket compares pointers
# with the views made once), train_gpt2 of b254b24 in build/old_train_gpt2; .devbin/adamw_micro;
# .devbin/anchors), ~6 min:
#  1. issue 23 goal 5: .devrun/adamw/micro.cu's AdamW variants against a copy of the same bytes;
#  2. issue 23 goal 3: tools/scaling_gpu --precision bf16 twice (one plain process, DDP x1 and,
#     on two GPUs, x2 and PyTorch DDP x1 and x2);
#  3. on two GPUs: chapter 12's CUDA tests at np 2, and scaling_gpu's float32 check (DDP on 2
#     GPUs, B=8 each, against one GPU with B=16) with the binary of b254b24 and of this session.
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s17c}"
mkdir -p old/bin && mv build/old_train_gpt2 old/bin/train_gpt2
logs_begin
nvidia-smi -L
stamp "AdamW variants"
.devbin/adamw_micro 2>&1 | tee "$OUT/adamw_micro.txt"
if [ "$gpus" -ge 2 ]; then
  mpi_tests tt_ch12_tests 2 '*Cuda*:*Mpi*' ch12_np2.log || status=1
fi
data=/tmp/s17data
prep_data $data || status=1
for round in 1 2; do
  stamp "scaling_gpu bf16, round $round"
  anchors=()
  [ $round = 1 ] && [ "$gpus" -ge 2 ] && anchors=(--anchors .devbin/anchors)
  timeout 300 python3 tools/scaling_gpu --build build --data $data "${anchors[@]}" \
    --gpus 1,2 --strategies ddp --precision bf16 --check-steps 0 --out /tmp/scaling_bf16_$round \
    --csv "$OUT/scaling_bf16_$round.csv" 2>&1 | tee "$OUT/scaling_bf16_$round.txt" | grep -a "^|" || status=1
done
for b in $([ "$gpus" -ge 2 ] && echo old build); do
  f32_check $b
done
logs_end
stamp "s17c done (status $status)"
exit $status
