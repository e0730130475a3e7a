#!/usr/bin/env bash
# Session 17, two H200s, or one (.devbin/$1.tar.xz: train_gpt2, tt_prepare_data, tt_ch06_tests of this session in
# build/bin, train_gpt2 of b254b24 (before it) in old/bin; .devbin/adamw_micro; .devbin/anchors),
# ~5 min:
#  1. issue 23 goal 5: .devrun/adamw/micro.cu's AdamW variants against a copy of the same bytes,
#     .devrun/sgemm/micro.cu's warp-tiled SGEMMs against cuBLAS FP32 (.devbin/*_micro);
#  2. issue 23 goal 3: tools/scaling_gpu --gpus 1,2 --precision bf16 (one plain process, DDP x1
#     and x2, PyTorch DDP x1 and x2, in the same run);
#  3. scaling_gpu's float32 check (DDP on 2 GPUs, B=8 each, against one GPU with B=16) with the
#     binary before this session (b254b24) and after: s17a found it failing after.
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s17b}"
mkdir -p old/bin && mv build/old_train_gpt2 old/bin/train_gpt2
logs_begin
nvidia-smi -L
stamp "chapter 06's CUDA tests (the device-attribute cache)"
gtests ch06.log 120 build/bin/tt_ch06_tests '*Cuda*:*CUDA*' | tail -3 || status=1
stamp "AdamW variants"
.devbin/adamw_micro 2>&1 | tee "$OUT/adamw_micro.txt"
stamp "SGEMM variants (.devrun/sgemm/micro.cu) against cuBLAS FP32"
# .devrun/sgemm/micro.cu was removed after this session (git show 1f6c9cc:.devrun/sgemm/micro.cu)
timeout 120 .devbin/sgemm_micro 2>&1 | tee "$OUT/sgemm_micro.txt" | tail -60
data=/tmp/s17data
prep_data $data || status=1
stamp "scaling_gpu bf16"
timeout 300 python3 tools/scaling_gpu --build build --data $data --anchors .devbin/anchors \
  --gpus 1,2 --strategies ddp --precision bf16 --check-steps 0 --out /tmp/scaling_bf16 \
  --csv "$OUT/scaling_bf16.csv" 2>&1 | tee "$OUT/scaling_bf16.txt" | grep -av "^  torch" || status=1
# (Two GPUs only; on one, scaling_gpu measures N = 1 and the check is skipped.)
[ "$gpus" -ge 2 ] || echo "one GPU: no DDP x2, no float32 check"
for b in $([ "$gpus" -ge 2 ] && echo old build); do
  f32_check $b
done
logs_end
stamp "s17b done (status $status)"
exit $status
