#!/usr/bin/env bash
# Session 13 (issue 27): the ring's fused sums measured. Carried binaries (.devbin/s13b.tar.xz:
# tt_ch16_tests, tt_ring_attention_bench built for sm_90; with 4 GPUs also what s13a needs):
#  1. chapter 16's CUDA tests: the new kernels (cp_merge_rows, cp_add_rows) against the
#     composition on one GPU, under compute-sanitizer memcheck, racecheck and synccheck, and
#     the bf16 ring at np 2 (np 4 on 4 GPUs);
#  2. tt_ring_attention_bench in bf16 at CP 2 (or 4) with 4 and 32 heads, T 16k/32k/64k, hs 64
#     and 128, and the per-op profile at 16k, hs 64, 32 heads (before: .devrun/s13a.sh);
#  2b. PyTorch's context_parallel on the same shapes and ranks (benchmarks/torch_ring_bench.py);
#  3. on 4 GPUs, what s13a could not do on 2 (issue 24): ch13's CUDA tests at np 4, GPT-2 774M
#     at tp 1, tp 4 and tp 4 + SP, 1.3B at tp 4 + SP (bf16, B 8, T 1024).
# Argument: the name of the carried archive (default s13b; s13c: the merge kernel with 32 rows
# per warp, slower, reverted; s13d: a warp per row again, PyTorch's buffers left sharded; s13e:
# the backward's first terms without zeros and adds, its rectangles read in place).
set -uo pipefail
. .devrun/lib.sh
status=0
name=${1:-s13b}
carried "$name"
gtests ch16_rows.log 120 build/bin/tt_ch16_tests '*MergeRowsAndAddRows*' || status=1
for tool in memcheck racecheck synccheck; do
  stamp "compute-sanitizer $tool: the ring's kernels"
  sanitize $tool san_$tool.log build/bin/tt_ch16_tests '*CudaMergeRowsAndAddRows*' || status=1
done
cp=$((gpus >= 4 ? 4 : 2))
mpi_tests tt_ch16_tests $cp '*Cuda*' ch16_np$cp.log || status=1
stamp "compute-sanitizer memcheck: the bf16 ring at np 2 (its rectangles read in place)"
TT_CUDA_CACHING=0 timeout 240 $MPI -np 2 compute-sanitizer --tool memcheck --report-api-errors no \
  --error-exitcode 3 \
  build/bin/tt_ch16_tests --gtest_color=no --gtest_filter='*CudaBf16MatchesOneProcess*' \
  >"$OUT/san_ring_np2.log" 2>&1 || { echo "ring memcheck FAILED"; status=1; }
grep -aE "ERROR SUMMARY|^\[  (PASSED|FAILED)" "$OUT/san_ring_np2.log" | sort | uniq -c
ring_bench $cp
stamp "PyTorch context_parallel, cp $cp, 32 heads"  # the same shapes, the same call
timeout 240 torchrun --standalone --nproc_per_node $cp benchmarks/torch_ring_bench.py --heads 32 \
  2>&1 | grep -aE "^\{|Error|error" | head -12 | tee -a "$OUT/torch_ring.jsonl"
if [ "$gpus" -ge 4 ]; then
  mpi_tests tt_ch13_tests 4 '*Cuda*' ch13_np4.log || status=1
  grep -a "activations\|worst" "$OUT/ch13_np4.log" | sort -u | head -12
  data=/tmp/s13_data
  prep_data "$data" || status=1
  m774="--layers 36 --heads 20 --channels 1280"
  train_run 774_tp1 1 "$m774"
  train_run 774_tp4 4 "$m774" -- --tp 4
  train_run 774_tp4sp 4 "$m774" -- --tp 4 --sequence-parallel
  train_run 13_tp4sp 4 "--layers 24 --heads 16 --channels 2048" -- --tp 4 --sequence-parallel
fi
stamp "$name done (status $status)"
exit $status
