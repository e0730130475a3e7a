#!/usr/bin/env bash
# Session 21, one H200 host (.devbin/s21c.tar.xz: build/bin of this session's CPU-step changes
# with train_gpt2, old/bin of main f6a483a (= 44c8283's kernels), pf/bin: the new build with the
# C tile prefetched one micro-kernel ahead in gemm_fma, /work/notes/s21/prefetch_c.diff), ~7 min:
# issue 23 goal 4. The CPU mini step old/new/prefetch/PyTorch 2.11 in five alternating rounds on
# 2 pinned cores; GEMM rates new vs prefetch; the per-op profile of the new step; chapter 09's
# and 10's tests that run train_gpt2 (s21b did not carry it).
set -uo pipefail
. .devrun/lib.sh
begin_run "${1:-s21c}" tests
cpu_vs_torch 5 old build pf || status=1
gemm_rates build 2 'fma/C384' build
gemm_rates pf 2 'fma/C384' pf
cpu_step_profile build || status=1
gtests ch09.log 400 build/bin/tt_ch09_tests '*Train*' || status=1
gtests ch10.log 400 build/bin/tt_ch10_tests '*Graphed*' || status=1
logs_end
stamp "s21c done (status $status)"
exit $status
