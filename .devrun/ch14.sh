#!/usr/bin/env bash
# GPU run for the ch14 branch (issue 25, pipeline parallelism): NCCL batched send/recv, the
# executor and GPT-2 pipelines on GPUs, and the bubble measured from CUDA-event timelines.
# Run from the repository root on a 2- or 4-GPU H100 machine; writes at most 8 files to $OUT.
#  1. build chapter 14's tests and tt_pipeline_bench (solution build);
#  2. the ch14 tests under mpirun with 2 and 4 ranks (CPU tests and the CUDA p2p test);
#  3. tt_pipeline_bench on the GPUs: GPT-2 124M shapes (L=12, C=768, B=4, T=1024, fp32) at
#     p = 2 and 4, AFAB and 1F1B with m = 4, 8, 16, interleaved v = 2 with m = 8:
#     bubble measured vs theory vs replay, step time, tok/s, peak memory (one line each in
#     bubble.csv); GPT-2 774M and a 1.3B shape at p = 2, 4 (B = 1); and the timelines of
#     p = 4 1F1B m = 8 (PNGs only when gnuplot is installed).
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
status=0
step() { echo "=== $* ==="; }

step build
{ cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build build -j16 --target tt_ch14_tests tt_pipeline_bench; } >"$OUT/build.log" 2>&1 || {
  tail -50 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
tail -3 "$OUT/build.log"

gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
mpi="mpirun --oversubscribe --allow-run-as-root"
for np in 2 4; do
  if [ "$gpus" -ge "$np" ]; then
    step "ch14 tests under mpirun -np $np ($gpus GPUs)"
    $mpi -np "$np" -x NCCL_NVLS_ENABLE -x OMP_NUM_THREADS=1 build/bin/tt_ch14_tests \
      >"$OUT/ch14_np$np.log" 2>&1 || status=1
    grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED" "$OUT/ch14_np$np.log" | sort | uniq -c
  else
    echo "=== mpirun -np $np: skipped, only $gpus GPU(s) ==="
  fi
done

step "bubble measurements (GPT-2 124M shape, fp32, B=4 T=1024 per micro-batch)"
echo "layers,channels,B,schedule,p,m,v,bubble_measured,bubble_theory,bubble_replay,step_ms,tok_s,peak_mib" >"$OUT/bubble.csv"
bench() {  # np schedule m v [extra args]
  local np=$1 sched=$2 m=$3 v=$4; shift 4
  [ "$gpus" -ge "$np" ] || return 0
  $mpi -np "$np" -x NCCL_NVLS_ENABLE build/bin/tt_pipeline_bench --device cuda \
    --schedule "$sched" --micro-batches "$m" --chunks "$v" --batch 4 --seq 1024 \
    --steps 4 --warmup 2 "$@" >>"$OUT/bench.log" 2>&1 || { echo "bench $np $sched $m $v FAILED"; status=1; }
  grep '^csv,' "$OUT/bench.log" | tail -1 | sed 's/^csv,//' >>"$OUT/bubble.csv"
  grep '^pipeline ' "$OUT/bench.log" | tail -1
}
for np in 2 4; do
  for m in 4 8 16; do
    bench "$np" afab "$m" 1
    bench "$np" 1f1b "$m" 1
  done
  bench "$np" interleaved 8 2
done
step "larger shapes: GPT-2 774M (L=36 C=1280) and a 1.3B shape (L=24 C=2048), B=1, 1F1B m=8"
for np in 2 4; do
  bench "$np" 1f1b 8 1 --layers 36 --heads 20 --channels 1280 --batch 1 --steps 3
  bench "$np" 1f1b 8 1 --layers 24 --heads 16 --channels 2048 --batch 1 --steps 3
done
if [ "$gpus" -ge 4 ]; then
  mkdir -p timelines
  bench 4 1f1b 8 1 --timeline-dir timelines
  tar czf "$OUT/timelines.tgz" timelines 2>/dev/null || true
fi
exit $status
