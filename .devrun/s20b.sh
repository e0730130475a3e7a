#!/usr/bin/env bash
# Session 20, one H200 host's CPU (.devbin/s20b.tar.xz: bench_cpu_matmul, bench_gpt2_step,
# tt_ch04/09_tests of an experiment, where gemm_fma's threads packed each block of the other
# operand together, then waited at a barrier; not kept, see chapter 04's README, "More threads";
# old/bin/bench_cpu_matmul of 7b69130, the kept version, where each thread packs all of it),
# 7 min:
# GEMM rates with 2, 8 and 16 threads (Eigen, gemm_fma old and new, torch.mm), the CPU mini step
# (2 pinned cores) in two more rounds against PyTorch 2.11, chapters 04 and 09's tests here.
set -uo pipefail
. .devrun/lib.sh
begin_run "${1:-s20b}" tests
for n in 16 8 2; do
  for dir in old build; do
    gemm_rates $dir $n '(eigen|fma)/(2048|C384|C768)' ${dir}_$n
  done
  torch_mm_rates $n
done
cpu_vs_torch 2 build || status=1
gtests ch04.log 300 build/bin/tt_ch04_tests '*' || status=1
gtests ch09_det.log 300 build/bin/tt_ch09_tests '*Determinism*:*TinyModel*:*Reference*' || status=1
logs_end
stamp "s20b done (status $status)"
exit $status
