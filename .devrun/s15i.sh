#!/usr/bin/env bash
# Session 15, one H200: the decode step at LLaMA-2-7B's shape (bench_decode decode_step_7b: C 4096,
# 32 layers, 32 heads of 128, FFN 11008; random weights), in one launch and launch by launch,
# with the copy and the step kernel's per-phase trace (.devbin/$1.tar.xz: bench_decode), ~2 min.
set -uo pipefail
. .devrun/lib.sh
status=0
decode_setup "${1:-s15i}"
export TT_DECODE_STEP_TRACE=1
decode_bench step7b build/bin/bench_decode --benchmark_filter='decode_step_7b|copy'
step_trace step7b decode_step_7b
stamp "s15i done (status $status)"
exit $status
