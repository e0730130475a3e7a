#!/usr/bin/env bash
# Session 16, one H200: the profile of chapter 11's bf16 FlashAttention before changing it
# (.devbin/$1.tar.xz: bench_attention built here for sm_90), ~4 min:
#  1. bench_attention's bf16 rows (fwd and fwd + bwd, hs 64 and 128) and SDPA at the same shapes
#     in the same call (.devrun/sdpa_hs.py), twice each, alternating;
#  2. Nsight Compute on our forward, dQ and dK/dV kernels and on SDPA's flash kernels at
#     B8 T4096 (hs 64, NH 12 and hs 128, NH 6).
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s16a}"
nvidia-smi -L
for round in 1 2; do
  stamp "bench_attention bf16, round $round"
  attn_bench r$round cuda_bf16
  stamp "SDPA, round $round"
  python3 .devrun/sdpa_hs.py 2>&1 | tee "$OUT/sdpa_r$round.jsonl" || status=1
done
NCU="ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section InstructionStats --section SchedulerStats"
for shape in B8_NH12_T4096_hs64 B8_NH6_T4096_hs128; do
  stamp "ncu ours $shape"
  timeout 150 $NCU --kernel-name regex:flash_bf16 --launch-skip 3 --launch-count 3 \
    build/bin/bench_attention --benchmark_filter="attention_flash/cuda_bf16/$shape" \
    --benchmark_min_time=0.01s >"$OUT/ncu_ours_$shape.txt" 2>&1 || status=1
  grep -aE "flash_bf16|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Compute \(SM\) Throughput|Memory Throughput|Block Limit|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Shared Memory Configuration Size|Dynamic Shared" "$OUT/ncu_ours_$shape.txt" | head -60
done
for hs in 64 128; do
  stamp "ncu SDPA T4096 hs $hs"
  timeout 150 $NCU --kernel-name regex:flash --launch-skip 2 --launch-count 3 \
    python3 .devrun/sdpa_hs.py --one 4096 $hs >"$OUT/ncu_sdpa_$hs.txt" 2>&1 || status=1
  grep -aE "flash|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Compute \(SM\) Throughput|Memory Throughput|Block Limit|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Block Size|Grid Size|Dynamic Shared" "$OUT/ncu_sdpa_$hs.txt" | head -60
done
stamp "s16a done (status $status)"
exit $status
