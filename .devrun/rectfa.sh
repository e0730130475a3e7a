#!/usr/bin/env bash
# Issue 27, chapter 16: ring attention's blocks through chapter 11's bf16 FlashAttention (the
# full, rectangular mode). Run from the repository root on a 4-GPU H100 machine (2 GPUs: the
# np 2 parts only); writes to $OUT: build.log, ch11.log, ch11_memcheck.log, ch16_np{2,4}.log,
# bench_bf16_cp{4,2}.jsonl, profile_cp4.log, bench.log. Each step under a timeout; about 5-7
# minutes in all (the helper's runs of these steps took under 2 minutes after the build).
#  1. build tt_ch11_tests, tt_ch16_tests, tt_ring_attention_bench (solution build, sm_90);
#  2. chapter 11's CUDA FlashAttention tests (causal: unchanged; full mode: new) on one GPU,
#     and compute-sanitizer memcheck on the full mode's tests;
#  3. chapter 16's tests under $MPI -np 2 and -np 4, one GPU per rank (CPU tests, the float32
#     CUDA ring, and the new bf16 CUDA ring: Ch16_RingAttention.CudaBf16*);
#  4. tt_ring_attention_bench --dtype bf16, causal fwd+bwd, B = 1, NH = 4, hs 64 and 128,
#     T = 16k, 32k, 64k: one GPU (bf16 FlashAttention) vs the zigzag and contiguous rings at
#     CP = 4 (then CP = 2), as a table: ms and fraction of ideal (one-GPU time / CP); then
#     chapter 10's per-op profile of the zigzag ring at CP = 4, T = 64k, hs 64 (rank 0).
set -uo pipefail
. .devrun/lib.sh
status=0
tt_build tt_ch11_tests tt_ch16_tests tt_ring_attention_bench || exit 1
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
nvidia-smi -L | head -4

stamp "ch11 CUDA FlashAttention tests (causal and full mode)"
gtests ch11.log 240 build/bin/tt_ch11_tests 'Ch11_FlashBf16*' || status=1
grep -aE "^\[ bf16 err \].*(m=|1024)" "$OUT/ch11.log" | sort -t= -k6 -g | tail -6
stamp "memcheck: full mode"
sanitize memcheck ch11_memcheck.log build/bin/tt_ch11_tests 'Ch11_FlashBf16Cuda.FullMode*' ||
  status=1

for np in 2 4; do
  [ "$gpus" -ge "$np" ] || { echo "mpirun -np $np: skipped, only $gpus GPU(s)"; continue; }
  stamp "ch16 tests under mpirun -np $np"
  timeout 300 $MPI -np "$np" build/bin/tt_ch16_tests --gtest_color=no \
    --gtest_filter='-Ch16_TrainGpt2Cp.*' >"$OUT/ch16_np$np.log" 2>&1 || {
    echo "ch16 np $np FAILED"; status=1; }
  grep -aE "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$OUT/ch16_np$np.log" | sort | uniq -c
  grep -aB6 "Failure$" "$OUT/ch16_np$np.log" | head -30
  # the largest bf16 errors of the ring (rank 0)
  grep -a "^\[ bf16 ring \]" "$OUT/ch16_np$np.log" | sort -t= -k3 -g | tail -3
done

table() {  # the JSON lines of a bench as a compact table
  python3 - "$1" <<'PY'
import json, sys
print(f"{'cp':>3} {'T':>6} {'hs':>4} {'1-GPU ms':>9} {'zigzag ms':>10} {'zz/ideal':>8} "
      f"{'contig ms':>10} {'ct/ideal':>8}")
for line in open(sys.argv[1]):
    if not line.startswith('{'): continue
    r = json.loads(line)
    print(f"{r['cp']:>3} {r['T']:>6} {r['hs']:>4} {r['single_ms']:>9.2f} {r['zigzag_ms']:>10.2f} "
          f"{r['zigzag_of_ideal']:>8.2f} {r['contiguous_ms']:>10.2f} {r['contiguous_of_ideal']:>8.2f}")
PY
}
for np in 4 2; do
  [ "$gpus" -ge "$np" ] || continue
  stamp "bench bf16, causal fwd+bwd, CP = $np, B = 1, NH = 4"
  timeout 240 $MPI -np "$np" build/bin/tt_ring_attention_bench --device cuda --dtype bf16 \
    --seq 16384,32768,65536 --hs 64,128 --heads 4 --reps 3 --warmup 1 \
    >"$OUT/bench_bf16_cp$np.jsonl" 2>>"$OUT/bench.log" || { echo "bench np $np FAILED"; status=1; }
  table "$OUT/bench_bf16_cp$np.jsonl"
done
if [ "$gpus" -ge 4 ]; then
  stamp "per-op profile of the zigzag ring, CP = 4, T = 64k, hs 64 (rank 0)"
  timeout 120 $MPI -np 4 build/bin/tt_ring_attention_bench --device cuda --dtype bf16 \
    --seq 65536 --hs 64 --heads 4 --reps 2 --warmup 1 --profile >"$OUT/profile_cp4.log" \
    2>>"$OUT/bench.log" || { echo "profile FAILED"; status=1; }
  sed -n '/^Per-op profile/,/^Step:/p' "$OUT/profile_cp4.log" | head -24 | cut -c1-120
fi
tail -5 "$OUT/bench.log"
stamp "rectfa done (status $status)"
exit $status
