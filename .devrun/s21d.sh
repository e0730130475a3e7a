#!/usr/bin/env bash
# Session 21, one H200 (.devbin/s21d.tar.xz: bench_cuda_matmul and tt_ch07_tests built with the
# warp-tiled SGEMM's K step kBK = 16 (sg16/, main b3c736a) and kBK = 32 (sg32/: half the
# barriers, 99,840 bytes of shared memory, still 2 blocks a multiprocessor)), ~4 min: issue 23
# goal 5 (the hand-written SGEMM at >= 90% of cuBLAS). Registers of both kernels; the sgemm rows
# of both against cuBLAS FP32 (TF32 off) in the same run, three alternating rounds; chapter 07's
# CUDA tests and memcheck, racecheck, synccheck on the warp-tiled kernel's tests with kBK = 32.
set -uo pipefail
. .devrun/lib.sh
begin_run "${1:-s21d}"
nvidia-smi -L
for v in sg16 sg32; do
  echo "$v: $(cuobjdump --dump-resource-usage $v/bench_cuda_matmul 2>/dev/null |
    grep -aA1 sgemm_warptile | grep -ao 'REG:[0-9]*\|STACK:[0-9]*\|SHARED:[0-9]*' | tr '\n' ' ')"
done
for round in 1 2 3; do
  for v in sg16 sg32; do
    stamp "bench sgemm $v, round $round"
    $v/bench_cuda_matmul --benchmark_filter='sgemm/(warptile|cublas)/(2048|4096)' 2>&1 |
      grep -a "sgemm/" | sed "s|^|$v |" | tee -a "$OUT/sgemm.txt" | awk '{print $1, $2, $3, $NF}'
  done
done
gtests ch07.log 300 sg32/tt_ch07_tests '*Cuda*:*CUDA*' | tail -3 || status=1
for tool in memcheck racecheck synccheck; do
  stamp "$tool"
  sanitize $tool $tool.log sg32/tt_ch07_tests 'Ch07_CudaSgemmWarptile.*' || status=1
done
logs_end
stamp "s21d done (status $status)"
exit $status
