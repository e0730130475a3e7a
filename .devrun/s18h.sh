#!/usr/bin/env bash
# Session 18, one H200 (.devbin/$1.tar.xz: tt_ch10_tests, tt_ch11_tests, train_gpt2,
# tt_prepare_data and bench_classifier of HEAD with the classifier rows' exp on __expf;
# build/a_train_gpt2 and build/a_bench_classifier without it), ~4 min: the fused classifier's
# CUDA tests of chapters 10 and 11 (and chapter 11's bf16 app tests); bench_classifier's fused
# GPT-2 rows, before and after; chapter 10's per-op profile of a bf16 GPT-2 124M step (the
# classifier_xent_rows row), before and after; one round of 60 steps each. Result: no gain (the
# row kernel 0.81 -> 0.93 ms in the profile, bench_classifier unchanged), so the change was
# reverted; the chapter 10 README records it ("A failed experiment: a faster exp").
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s18h}"
mkdir -p a/bin && mv build/a_train_gpt2 a/bin/train_gpt2 && mv build/a_bench_classifier a/bin/bench_classifier
logs_begin
nvidia-smi -L
gtests ch10.log 300 build/bin/tt_ch10_tests '*Classifier*Cuda*:*ClassifierCuda*:*Gpt2*Cuda*' | tail -4 || status=1
gtests ch11.log 300 build/bin/tt_ch11_tests '*Classifier*:*Bf16TrainGpt2*:*Bf16Gpt2Cuda*' | tail -4 || status=1
for b in a build; do
  stamp "bench_classifier, $b"
  $b/bin/bench_classifier --benchmark_filter='classifier_fused/cuda' 2>&1 | grep -aE "^classifier" | cut -c1-120
done
data=/tmp/s18data
prep_data $data || status=1
PROF_OPS='classifier|matmul_lt_gemm'
for b in a build; do gpt2_profile $b || status=1; done
for b in a build; do gpt2_steps $b 60 || status=1; done
logs_end
stamp "s18h done (status $status)"
exit $status
