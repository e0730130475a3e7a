#!/usr/bin/env bash
# For the next session (issue 24): SP's replicated gradients summed by one all-reduce (3d6bc48,
# chapter 12's Reducer with kSum) measured on GPUs. Carried binaries (.devbin/s13a.tar.xz:
# tt_ch12_tests, tt_ch13_tests, train_gpt2, tt_prepare_data built for sm_90):
#  1. chapter 12's CUDA tests at np 2 (the Reducer's op), chapter 13's at np 4;
#  2. bf16 train_gpt2 at B=8 T=1024, steps 3-5, nvidia-smi peaks: 774M (L36 H20 C1280) at tp 1,
#     tp 4, tp 4 + SP, tp 4 + SP without the re-gather (TT_TP_SP_REGATHER=0), tp 2 + SP;
#     1.3B (L24 H16 C2048) at tp 1 and tp 4 + SP (the 1.80x of session 12);
#  3. --trace of 774M tp 4 + SP (tools/trace_ops: where SP's step goes);
#  4. (first, after the tests) the pp, cp, tp and mixed layouts against one GPU
#     (layouts_vs_one_gpu), after this session's all-reduce changes.
# Session 13 put first (issue 27, before any change to the ring): tt_ring_attention_bench in
# bf16 at CP 4 with 32 heads (ring-flash-attention's benchmark config, Llama-3-8B's attention)
# beside the 4 heads of the chapter's table, and the per-op profile at 16k, hs 64, 32 heads.
set -uo pipefail
. .devrun/lib.sh
status=0
carried s13a
cp=$((gpus >= 4 ? 4 : 2))  # a 2-GPU machine when no 4-GPU one is lent: cp 2 and tp 2
ring_bench $cp
tp_cuda_tests
data=/tmp/s13_data  # the corpus train_run reads
prep_data "$data" || status=1
layouts_vs_one_gpu
m774="--layers 36 --heads 20 --channels 1280"
m13="--layers 24 --heads 16 --channels 2048"
train_run 774_tp1 1 "$m774"
if [ "$gpus" -ge 4 ]; then
  train_run 774_tp4 4 "$m774" -- --tp 4
  train_run 774_tp4sp 4 "$m774" -- --tp 4 --sequence-parallel
else
  train_run 774_tp2 2 "$m774" -- --tp 2
  train_run 774_tp2sp 2 "$m774" -- --tp 2 --sequence-parallel
fi
train_run 13_tp1 1 "$m13"
[ "$gpus" -ge 4 ] && train_run 13_tp4sp 4 "$m13" -- --tp 4 --sequence-parallel
[ "$gpus" -ge 4 ] || train_run 13_tp2 2 "$m13" -- --tp 2
if [ "$gpus" -ge 4 ]; then
  stamp "trace 774M tp 4 + SP"
  r=/tmp/s13_trace
  rm -rf $r
  $MPI_APP -np 4 build/bin/train_gpt2 --data $data --out $r --device cuda --precision bf16 \
    $m774 --T 1024 --B 8 --steps 4 --warmup 1 --eval-every 0 --eval-batches 1 \
    --sample-tokens 1 --log-every 1 --tp 4 --sequence-parallel --trace "$OUT/tp4sp.json" \
    --trace-steps 3 >$r.log 2>&1
  grep -aE "^step [2-4]/4 \||rror" $r.log | cut -c1-120
  python3 tools/trace_ops "$OUT/tp4sp.json" --top 14 2>&1 | tee "$OUT/tp4sp.ops.txt" | head -20
  rm -f "$OUT/tp4sp.json"
fi
stamp "s13a done (status $status)"
exit $status
