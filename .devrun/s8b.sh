#!/usr/bin/env bash
# Session 8, the integrated tree (llamacast + ppaccum merged) on ONE H100, ~8 minutes:
#  1. one build of every target below;
#  2. .devrun/ppaccum.sh with CHAPTERS="03 10 11 12" and the 774M timing only (BIG=0): the CUDA
#     tests of chapters 03/10/11/12, memcheck on the fusion tests, train_gpt2 774M B 1 x 8 with
#     TT_GRAD_ACCUM_FUSION=0 and 1;
#  3. chapter 15's CUDA tests and memcheck on its new bf16 kernels (llamacast.sh's checks, without
#     its llamabench: LLAMABENCH=0).
set -uo pipefail
. .devrun/lib.sh
status=0
tt_build tt_ch03_tests tt_ch10_tests tt_ch11_tests tt_ch12_tests tt_ch15_tests train_gpt2 \
  train_llama tt_prepare_data || exit 1
CHAPTERS="03 10 11 12" BIG=0 timeout 330 bash .devrun/ppaccum.sh || status=1
LLAMABENCH=0 timeout 200 bash .devrun/llamacast.sh || status=1
stamp "s8b done (status $status)"
exit $status
