#!/usr/bin/env bash
# Session 18, one H200 (.devbin/$1.tar.xz: tests, train_gpt2, tt_prepare_data, bench_gpt2_step of
# HEAD, and build/old_train_gpt2 from s18a, before the change), ~5 min: chapter 10's register-row
# residual + LayerNorm kernels (forward and backward; bf16 dy read and the delta's bf16 gradient
# written by the backward itself), for issue 23 goal 1:
#  - the CUDA tests of chapters 10, 11 (with the bf16 and graphed app tests) and 12 (np 1);
#    memcheck, racecheck and synccheck on the residual LayerNorm tests;
#  - chapter 10's per-op profile of step 20 of a bf16 GPT-2 124M step, before and after;
#  - 500 steps before and after from one seed: tools/compare_runs (0.05 nats, 20-step windows)
#    and the median step time of each run (steps 11-500 of train.csv).
# The timing rounds against PyTorch are s18c.sh (same tarball).
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s18b}"
mkdir -p old/bin && mv build/old_train_gpt2 old/bin/train_gpt2
logs_begin
nvidia-smi -L
stamp "tests"
gtests ch10.log 300 build/bin/tt_ch10_tests '*Cuda*:*CUDA*' | tail -4 || status=1
gtests ch11.log 300 build/bin/tt_ch11_tests '*Cuda*:*Bf16TrainGpt2*:*GraphedTrainGpt2*' | tail -4 || status=1
mpi_tests tt_ch12_tests 1 '*Cuda*' ch12_np1.log || status=1
stamp "sanitizers"
F='Ch10_8_ResidualLayerNormCuda.*:Ch11_ResidualLayerNormBf16Cuda.*'
for tool in memcheck racecheck synccheck; do
  sanitize $tool $tool.log build/bin/tt_ch10_tests "$F" || status=1
done
sanitize memcheck memcheck_11.log build/bin/tt_ch11_tests "$F" || status=1
data=/tmp/s18data
prep_data $data || status=1
for b in old build; do gpt2_profile $b || status=1; done
gpt2_124m_flags
for b in old build; do
  stamp "500 steps, $b"
  $b/bin/train_gpt2 "${GPT2_124M[@]}" --steps 500 --eval-every 100 --eval-batches 4 --out /tmp/run_$b \
    >"$OUT/train_$b.log" 2>&1 || status=1
  grep -aE "^step (100|300|500)/500" "$OUT/train_$b.log" | cut -c1-120
  grep -aE "rror|what\(\)" "$OUT/train_$b.log" | head -3
  cp /tmp/run_$b/train.csv "$OUT/train_$b.csv"
  step_median /tmp/run_$b/train.csv
done
stamp "compare_runs old vs new"
python3 tools/compare_runs /tmp/run_old/train.csv /tmp/run_build/train.csv --tol 0.05 --window 20 || status=1
logs_end
stamp "s18b done (status $status)"
exit $status
