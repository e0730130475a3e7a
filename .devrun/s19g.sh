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
ln='Ch10_8_ResidualLayerNormCuda.*:Ch11_ResidualLayerNormBf16Cuda.*'
for tool in memcheck racecheck synccheck; do
  sanitize $tool ln_${tool}_10.log build/bin/tt_ch10_tests "$ln" || status=1
  sanitize $tool ln_${tool}_11.log build/bin/tt_ch11_tests "$ln" || status=1
done
stamp "bf16 GPT-2 124M step"
build/bin/bench_gpt2_step --benchmark_filter='cuda_bf16/L12' 2>&1 | grep -aE "cuda_bf16/" |
  cut -c1-150 || status=1
stamp "s19g done (status $status)"
exit $status
