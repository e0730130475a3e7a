#!/usr/bin/env bash
# GPU run for the ch16 branch (issue 27: context parallelism, ring attention). Run from the
# repository root on a 4-GPU H100 machine (2 GPUs: only the np 2 parts); writes to $OUT:
#   build.log, ch16_np{2,4}.log, bench_cp{2,4}.jsonl, bench_cp4_fp32.jsonl, bench.log,
#   train_cp.log
#  1. build chapter 16's tests, tt_ring_attention_bench and train_gpt2 (solution build, sm_90);
#  2. the ch16 tests under mpirun -np 2 and -np 4, one GPU per rank: the CPU tests and
#     Ch16_RingAttention.CudaMatchesOneProcessAttentionMpi (NCCL, float32 3xTF32);
#  3. tt_ring_attention_bench, attention forward + backward of one causal sequence, B = 1,
#     NH = 4 heads, hs 64 and 128, T = 16k, 32k, 64k, float32 with TF32 tensor cores (and once
#     at CP = 4 in exact fp32; the ring refuses bf16 for now):
#     one GPU (chapter 10's FlashAttention) vs the zigzag ring and the contiguous ring at CP = 2
#     and CP = 4; JSON lines with single_ms, zigzag_ms, contiguous_ms and their fraction of the
#     ideal (single_ms / N);
#  4. train_gpt2 (GPT-2 small's shape, fp32, B = 1, a BPE-1024 tokenizer of the fortunes corpus)
#     at T = 16384 on one GPU and at --cp 4, then at T = 65536 on one GPU (expected to run out
#     of memory) and at --cp 4 (expected to train): train_cp.log.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
status=0
step() { echo "=== $* ==="; }

step build
{ cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build build -j16 --target tt_ch16_tests tt_ring_attention_bench train_gpt2 \
    tt_prepare_data; } >"$OUT/build.log" 2>&1 || {
  tail -50 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
tail -3 "$OUT/build.log"

gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
nvidia-smi -L
mpi="mpirun --oversubscribe --allow-run-as-root"
for np in 2 4; do
  if [ "$gpus" -ge "$np" ]; then
    step "ch16 tests under mpirun -np $np ($gpus GPUs)"
    $mpi -np "$np" -x NCCL_NVLS_ENABLE -x OMP_NUM_THREADS=1 build/bin/tt_ch16_tests \
      --gtest_filter='-Ch16_TrainGpt2Cp.*' >"$OUT/ch16_np$np.log" 2>&1 || status=1
    grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED" "$OUT/ch16_np$np.log" | sort | uniq -c
  else
    echo "=== mpirun -np $np: skipped, only $gpus GPU(s) ==="
  fi
done

step "ring attention fwd+bwd: one GPU vs zigzag vs contiguous (TF32, B=1, NH=4, causal)"
for np in 2 4; do
  [ "$gpus" -ge "$np" ] || continue
  timeout 900 $mpi -np "$np" -x NCCL_NVLS_ENABLE build/bin/tt_ring_attention_bench --device cuda \
    --seq 16384,32768,65536 --hs 64,128 --heads 4 --reps 3 --warmup 1 --tf32 \
    >"$OUT/bench_cp$np.jsonl" 2>>"$OUT/bench.log" || { echo "bench np $np FAILED"; status=1; }
  cat "$OUT/bench_cp$np.jsonl"
done
if [ "$gpus" -ge 4 ]; then
  step "the same at CP = 4 in exact float32 (3xTF32 FlashAttention, fp32 cuBLAS)"
  timeout 900 $mpi -np 4 -x NCCL_NVLS_ENABLE build/bin/tt_ring_attention_bench --device cuda \
    --seq 16384,32768,65536 --hs 64,128 --heads 4 --reps 2 --warmup 1 \
    >"$OUT/bench_cp4_fp32.jsonl" 2>>"$OUT/bench.log" || { echo "bench fp32 FAILED"; status=1; }
  cat "$OUT/bench_cp4_fp32.jsonl"
fi

if [ "$gpus" -ge 4 ]; then
  data=/tmp/ch16_data
  mkdir -p "$data"
  # The device image has no fortunes, and one README is too short for T = 65536: the chapters'
  # text concatenated (~865k tokens of a 1024-id BPE), as .devrun/s10e.sh does.
  if [ -d /usr/share/games/fortunes ]; then corpus=/usr/share/games/fortunes; else
    corpus=/tmp/ch16_corpus && mkdir -p $corpus &&
      cat chapters/*/README.md chapters/*/src/*.cc chapters/*/src/*.cu >$corpus/chapters.txt
  fi
  build/bin/tt_prepare_data --input "$corpus" --out "$data" --vocab-size 1024 --val-fraction 0.1 \
    --overwrite >>"$OUT/train_cp.log" 2>&1
  # GPT-2 small's shape (L=12, C=768, NH=12), fp32, B = 1, no evaluation or sampling.
  train() {  # np T steps [extra]
    local np=$1 T=$2 steps=$3; shift 3
    echo "--- train_gpt2 -np $np --T $T $* ---" >>"$OUT/train_cp.log"
    timeout 600 $mpi -np "$np" -x NCCL_NVLS_ENABLE build/bin/train_gpt2 --data "$data" \
      --out /tmp/ch16_run_"$np"_"$T" --overwrite --device cuda --precision fp32 --layers 12 \
      --heads 12 --channels 768 --T "$T" --B 1 --steps "$steps" --warmup 1 --eval-every 0 \
      --sample-every 0 --checkpoint-every 0 "$@" >>"$OUT/train_cp.log" 2>&1
    echo "exit status $?" | tee -a "$OUT/train_cp.log"
  }
  step "train_gpt2 at T = 16384: one GPU, then --cp 4 (3 steps each)"
  train 1 16384 3
  train 4 16384 3 --cp 4
  step "train_gpt2 at T = 65536: one GPU (expected to run out of memory), then --cp 4"
  train 1 65536 2
  train 4 65536 3 --cp 4
  grep -E "^step|out of memory|exit status|train_gpt2:" "$OUT/train_cp.log" | tail -30
fi
exit $status
