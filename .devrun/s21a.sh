#!/usr/bin/env bash
# Session 21, one H200 host's CPU (.devbin/s21a.tar.xz: bench_cpu_matmul and bench_gpt2_step of
# main 44c8283 + the layout rows of bench_cpu_matmul), ~4 min: issue 23 goal 4, profile first.
# PyTorch's CPU mini step under torch.profiler (.devrun/torch_cpu_profile.py) beside ours
# (bench_gpt2_step --profile), and the fc layer's GEMM in its three layouts (forward x W^T,
# dY W, dY^T X) for gemm_fma and torch.mm, 2 pinned cores.
set -uo pipefail
. .devrun/lib.sh
begin_run "${1:-s21a}"
lscpu | grep -aE "^Model name|^CPU\(s\)|MHz|L1d|L2|L3" | head -8
stamp "PyTorch CPU step profile"
OMP_NUM_THREADS=2 taskset -c 0,1 timeout 200 python3 .devrun/torch_cpu_profile.py --threads 2 \
  >"$OUT/torch_prof.log" 2>&1 || status=1
head -45 "$OUT/torch_prof.log" | cut -c1-200
cpu_step_profile build || status=1
gemm_rates build 2 'fma/(2048|C384)' build
torch_mm_rates 2
stamp "PyTorch CPU step profile, again"
OMP_NUM_THREADS=2 taskset -c 0,1 timeout 200 python3 .devrun/torch_cpu_profile.py --threads 2 \
  >"$OUT/torch_prof2.log" 2>&1 || status=1
head -1 "$OUT/torch_prof2.log"
logs_end
stamp "s21a done (status $status)"
exit $status
