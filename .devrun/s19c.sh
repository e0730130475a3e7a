#!/usr/bin/env bash
# Session 19, one H200 host's CPU (.devbin/probe: .devrun/eigen_gemm_probe.cc as eg2 built here with -march=native (Zen 4),
# eg2_spr with -march=sapphirerapids, eg2_avx2 with x86-64-v3; Eigen 3.4's GEMM on GPT-2
# mini-step shapes with its detected cache sizes and three settings of Eigen::setCpuCacheSizes),
# 2 threads on CPUs 0,1, ~1 min.
set -uo pipefail
. .devrun/lib.sh
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$PWD/.devbin/lib
for b in eg2 eg2_spr eg2_avx2; do
  stamp "$b"
  OMP_NUM_THREADS=2 taskset -c 0,1 .devbin/probe/$b
done
