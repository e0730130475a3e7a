#!/usr/bin/env bash
# Session 8, first H100 call: chapter 06's reductions (cuda::sum copies when nothing is reduced:
# Ch06_3 tests + memcheck), then .devrun/fa128.sh (bf16 FlashAttention at hs 128: tests,
# sanitizers, bench next to SDPA).
set -uo pipefail
. .devrun/lib.sh
status=0
tt_build tt_ch06_tests tt_ch11_tests tt_ch15_tests bench_attention || exit 1
stamp "ch06 reductions (CUDA) + memcheck"
gtests ch06.log 120 build/bin/tt_ch06_tests 'Ch06_3*' || status=1
sanitize memcheck ch06_memcheck.log build/bin/tt_ch06_tests 'Ch06_3*Cuda*' || status=1
bash .devrun/fa128.sh || status=1
stamp "s8a done (status $status)"
exit $status
