#!/usr/bin/env bash
# Session 17, one H200 (.devbin/$1.tar.xz: tt_ch06/07/10/11/15_tests of HEAD), ~3 min: the CUDA
# tests of every chapter whose CUDA sources this session changed, after the last edit (chapter
# 06's attribute cache and shared-memory opt-in, chapter 07's warp-tiled SGEMM and balanced
# multi-tensor grid, chapters 10/11/15 through the opt-in, chapter 11's stage_next); memcheck on
# chapter 06's and 07's, memcheck and racecheck on chapter 11's kernels.
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s17l}"
logs_begin
nvidia-smi -L
stamp "tests"
gtests ch06.log 120 build/bin/tt_ch06_tests '*Cuda*:*CUDA*' | tail -3 || status=1
gtests ch07.log 120 build/bin/tt_ch07_tests '*Cuda*:*CUDA*' | tail -3 || status=1
gtests ch10.log 300 build/bin/tt_ch10_tests '*Cuda*:*CUDA*' | tail -3 || status=1
gtests ch11.log 300 build/bin/tt_ch11_tests '*Cuda*' | tail -3 || status=1
gtests ch15.log 300 build/bin/tt_ch15_tests 'Ch15_GqaCuda.*:Ch15_Bf16Cuda.*:Ch15_ModelCuda.*' | tail -3 || status=1
stamp "memcheck"
sanitize memcheck mc06.log build/bin/tt_ch06_tests 'Ch06_Cuda*' || status=1
sanitize memcheck mc07.log build/bin/tt_ch07_tests 'Ch07_CudaSgemmWarptile.*:Ch07_5_CudaAdamW.*:Ch07_CudaOptimizers.*' || status=1
F11='Ch11_FlashBf16Cuda.ForwardMatchesReference:Ch11_FlashBf16Cuda.BackwardMatchesReference'
sanitize memcheck mc11.log build/bin/tt_ch11_tests "$F11" || status=1
stamp "racecheck"
sanitize racecheck rc11.log build/bin/tt_ch11_tests "$F11" || status=1
logs_end
stamp "s17l done (status $status)"
exit $status
