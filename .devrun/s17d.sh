#!/usr/bin/env bash
# Session 17, one H200 (.devbin/$1.tar.xz: this session's tt_ch07_tests, bench_cuda_matmul,
# bench_optim, train_gpt2 in build/bin; train_gpt2 of b254b24 in build/old_train_gpt2;
# .devbin/adamw_micro), ~5 min:
#  1. chapter 07's CUDA tests (the warp-tiled SGEMM, the balanced multi-tensor grid); memcheck,
#     racecheck and synccheck on the SGEMM tests;
#  2. bench_cuda_matmul's sgemm rows (every hand-written kernel against cuBLAS FP32 in the same
#     run) and bench_optim's AdamW against a copy, twice; the AdamW micro with v9 (the access
#     pattern without the arithmetic);
#  3. the float32 check's question on one GPU: GPT-2 124M, exact float32, 20 steps, one process
#     with B = 16 against B = 8 with two micro-batches (--total-batch 16384: the gradient sum of
#     DDP on 2 GPUs with B = 8 each, without DDP), with the binary of b254b24 and of this session.
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s17d}"
mkdir -p old/bin && mv build/old_train_gpt2 old/bin/train_gpt2
logs_begin
nvidia-smi -L
stamp "chapter 07 CUDA tests"
gtests ch07.log 300 build/bin/tt_ch07_tests '*Cuda*:*CUDA*' | tail -3 || status=1
for tool in memcheck racecheck synccheck; do
  stamp "$tool"
  sanitize $tool $tool.log build/bin/tt_ch07_tests 'Ch07_CudaSgemmWarptile.*:Ch07_5_CudaAdamW.*' || status=1
done
for round in 1 2; do
  stamp "bench sgemm and AdamW, round $round"
  build/bin/bench_cuda_matmul --benchmark_filter='sgemm/(vec4|warptile|cublas)/' 2>&1 | grep -a "sgemm/" | cut -c1-150
  build/bin/bench_optim --benchmark_filter='adamw/(cuda|memcpy)' 2>&1 | grep -a "adamw/" | cut -c1-150
done
stamp "AdamW micro"
.devbin/adamw_micro 2>&1 | tee "$OUT/adamw_micro.txt" | tail -22
data=/tmp/s17data
prep_data $data || status=1
exact=(--precision fp32 --attention naive --fused off --T 1024 --steps 20 --warmup 2 --log-every 5
       --layers 12 --heads 12 --channels 768 --eval-every 0 --eval-batches 1 --sample-tokens 1)
for b in old build; do
  for run in "b16 --B 16" "b8x2 --B 8 --total-batch 16384"; do
    set -- $run
    name=$1
    shift
    stamp "float32, $b binary, $name"
    timeout 200 $b/bin/train_gpt2 --data $data --device cuda "${exact[@]}" "$@" \
      --out /tmp/f32_${b}_$name >"$OUT/f32_${b}_$name.log" 2>&1 || { status=1; tail -3 "$OUT/f32_${b}_$name.log"; }
  done
  python3 tools/compare_runs /tmp/f32_${b}_b16/train.csv /tmp/f32_${b}_b8x2/train.csv --tol 1e-3 \
    --window 1 2>&1 | head -4
  for name in b16 b8x2; do
    echo "$b $name: $(cut -d, -f1,2 /tmp/f32_${b}_$name/train.csv | tail -4 | tr '\n' ' ')"
  done
done
logs_end
stamp "s17d done (status $status)"
exit $status
