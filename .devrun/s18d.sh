#!/usr/bin/env bash
# Session 18, one H200 (.devbin/$1.tar.xz: tests, train_gpt2 and tt_prepare_data of HEAD (v2 of
# the register-row LayerNorm backward: the sums in shared memory, dr_in loaded with the row; and
# the float4 scale_), build/a_train_gpt2 (v1, s18b's) and build/old_train_gpt2 (before)), ~5 min:
#  - the CUDA tests of chapters 07 (scale_), 10 and 11; memcheck, racecheck and synccheck on the
#    residual LayerNorm tests, memcheck on chapter 07's optimizer tests;
#  - chapter 10's per-op profile of step 20 (bf16 GPT-2 124M) of v1 and v2;
#  - before, v1 and v2 alternated twice, 60 steps each (median of steps 11-60).
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s18d}"
mkdir -p old/bin a/bin && mv build/old_train_gpt2 old/bin/train_gpt2 && mv build/a_train_gpt2 a/bin/train_gpt2
logs_begin
nvidia-smi -L
stamp "tests"
gtests ch07.log 200 build/bin/tt_ch07_tests '*Cuda*:*CUDA*' | tail -4 || status=1
gtests ch10.log 300 build/bin/tt_ch10_tests '*Cuda*:*CUDA*' | tail -4 || status=1
gtests ch11.log 300 build/bin/tt_ch11_tests '*Cuda*:*Bf16TrainGpt2*:*GraphedTrainGpt2*' | tail -4 || status=1
stamp "sanitizers"
F='Ch10_8_ResidualLayerNormCuda.*:Ch11_ResidualLayerNormBf16Cuda.*'
for tool in memcheck racecheck synccheck; do
  sanitize $tool ${tool}_10.log build/bin/tt_ch10_tests "$F" || status=1
  sanitize $tool ${tool}_11.log build/bin/tt_ch11_tests "$F" || status=1
done
sanitize memcheck memcheck_07.log build/bin/tt_ch07_tests 'Ch07_CudaOptimizers.*:Ch07_5_CudaAdamW.*' || status=1
data=/tmp/s18data
prep_data $data || status=1
PROF_OPS='residual_layernorm|cast |scale_|sum_of_squares'
for b in a build; do gpt2_profile $b || status=1; done
for rep in 1 2; do
  stamp "round $rep"
  for b in old a build; do gpt2_steps $b 60 || status=1; done
done
logs_end
stamp "s18d done (status $status)"
exit $status
