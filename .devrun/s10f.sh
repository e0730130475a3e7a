#!/usr/bin/env bash
# Session 10's last call, one H100, the carried tt_ch15_tests (.devbin/s10f.tar.xz), ~1 minute:
# compute-sanitizer's synccheck and racecheck on the decode GEMV's third version (memcheck ran in
# s10d.sh and s10e.sh) and on the dependent-launch decode path (CUDA-graph decode, greedy).
set -uo pipefail
. .devrun/lib.sh
status=0
tar xJf .devbin/s10f.tar.xz || exit 1
for tool in synccheck racecheck; do
  sanitize $tool $tool.log build/bin/tt_ch15_tests \
    'Ch15_Bf16Cuda.DecodeGemv*:Ch15_ModelCuda.CudaGraph*:Ch15_Bf16Cuda.Logits*' || status=1
done
stamp "s10f done (status $status)"
exit $status
