#!/usr/bin/env bash
# Session 21, one H200 host (.devbin/s21b.tar.xz: build/bin of this session's CPU-step changes,
# old/bin/bench_gpt2_step of main f6a483a = 44c8283's kernels), ~7 min: issue 23 goal 4.
# The CPU mini step old/new/PyTorch 2.11 in four alternating rounds on 2 pinned cores, the
# per-op profile of the new step, the CPU tests of chapters 04, 05, 09, 10 on this Intel CPU,
# and the CUDA tests that run matmul_backward (chapter 04's, now with W's gradient computed in
# W's layout) on the GPU: chapters 09 and 10.
set -uo pipefail
. .devrun/lib.sh
begin_run "${1:-s21b}" tests
cpu_vs_torch 4 old build || status=1
cpu_step_profile build || status=1
gtests ch04.log 300 build/bin/tt_ch04_tests '*' || status=1
gtests ch05.log 300 build/bin/tt_ch05_tests '*' || status=1
gtests ch09.log 400 build/bin/tt_ch09_tests '*' || status=1
gtests ch10.log 400 build/bin/tt_ch10_tests '*' || status=1
logs_end
stamp "s21b done (status $status)"
exit $status
