#!/usr/bin/env bash
# Session 21, one H200 host (.devbin/s21e.tar.xz: bench_gpt2_step of main 1759407, the code
# s21c.sh measured), ~4 min: issue 23 goal 4, four more alternating rounds of our CPU mini step
# and PyTorch 2.11's on 2 pinned cores (cpu_vs_torch), for the medians over all rounds.
set -uo pipefail
. .devrun/lib.sh
begin_run "${1:-s21e}"
cpu_vs_torch 4 build || status=1
logs_end
stamp "s21e done (status $status)"
exit $status
