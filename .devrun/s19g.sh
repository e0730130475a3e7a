#!/usr/bin/env bash
# Session 19, one H200 (.devbin/s19g.tar.xz: the build of main 5337abb in the CI clone
# /work/ci-19b, sm_90), ~2 min: after row_packs' fix, chapters 10 and 11's CUDA tests,
# compute-sanitizer memcheck/racecheck/synccheck on the residual + LayerNorm tests, the bf16 step.
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s19g}"
mkdir -p /work && ln -sfn "$PWD" /work/ci-19b
for ch in 10 11; do
  gtests ch${ch}_cuda.log 300 build/bin/tt_ch${ch}_tests '*Cuda*' | tail -4 || status=1
done
ln_sanitize_and_step
stamp "s19g done (status $status)"
exit $status
