#!/usr/bin/env bash
# Session 16, one H200: where the Hopper bf16 FlashAttention kernels wait (Nsight Compute's warp
# state statistics with details) against the portable ones, B8 T4096 hs 64 and 128, ~2 min
# (.devbin/$1.tar.xz: bench_attention).
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s16f}"
logs_begin
NCU="ncu --section SpeedOfLight --section WarpStateStats --section Occupancy --section ComputeWorkloadAnalysis --print-details all"
prof() {  # LABEL CFG FILTER KERNELREGEX COUNT
  stamp "ncu $1"
  TT_FLASH_SM90_CFG=$2 timeout 100 $NCU --kernel-name "regex:$4" --launch-skip 0 --launch-count "$5" \
    build/bin/bench_attention --benchmark_filter="$3" --benchmark_min_time=0.001 \
    >"$OUT/ncu_$1.txt" 2>&1 || status=1
  grep -aE "^  [a-z].*kernel|Duration|Stall|Issue Slots Busy|Achieved Occupancy|Registers|Tensor|Pipe" "$OUT/ncu_$1.txt" | cut -c1-120 | head -60
}
prof sm90_fwd64 1 'attention_flash_fwd/cuda_bf16/B8_NH12_T4096_hs64' sm90a_forward 1
prof sm90_bwd64 0 'attention_flash/cuda_bf16/B8_NH12_T4096_hs64' sm90a_backward 2
prof port_fwd64 0 'attention_flash_fwd/cuda_bf16_portable/B8_NH12_T4096_hs64' flash_bf16_forward 1
prof port_bwd64 0 'attention_flash/cuda_bf16_portable/B8_NH12_T4096_hs64' flash_bf16_backward 2
logs_end
stamp "s16f done (status $status)"
exit $status
