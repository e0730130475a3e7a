#!/usr/bin/env bash
# Session 20, one H200 host's CPU (.devbin/s20a.tar.xz: bench_cpu_matmul, bench_gpt2_step,
# tt_ch04/09/10_tests of this build, and old/bin/ bench_cpu_matmul + bench_gpt2_step of main
# 997d41d, the last build with Eigen's GEMM as "matmul"), ~7 min: issue 23 goal 4 with chapter
# 04's FMA GEMM (gemm_fma, the default CPU "matmul" and the classifier's "gemm"):
# GEMM rates on 2 pinned cores (old Eigen, new gemm_fma, OpenBLAS, torch.mm: forward shapes
# and the backward's transposed ones); the CPU mini step old/new/PyTorch 2.11, three alternating
# rounds; the per-op profile; the CPU tests of chapters 04, 09, 10 on this Intel CPU (another
# instruction set than the build machine's AMD one) and chapter 10's classifier CUDA tests.
set -uo pipefail
. .devrun/lib.sh
begin_run "${1:-s20a}" tests
lscpu | grep -aE "^Model name|^CPU\(s\)|^Thread|^Core|MHz" | head -6
lscpu | grep -ao "avx512[a-z_0-9]*\|amx[a-z_0-9]*\|avx2\|fma" | sort -u | tr '\n' ' '; echo
gemm_rates old 2 '(eigen|fma|openblas)/(2048|C384)' old
gemm_rates build 2 '(eigen|fma|openblas)/(2048|C384)' build
torch_mm_rates 2
cpu_vs_torch 3 old build || status=1
cpu_step_profile build || status=1
gtests ch04.log 300 build/bin/tt_ch04_tests '*' || status=1
gtests ch09_det.log 300 build/bin/tt_ch09_tests '*Determinism*:*TinyModel*:*Reference*' || status=1
gtests ch10_cls.log 300 build/bin/tt_ch10_tests '*Classifier*:*FastOps*' || status=1
logs_end
stamp "s20a done (status $status)"
exit $status
