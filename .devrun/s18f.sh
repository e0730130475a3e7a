#!/usr/bin/env bash
# Session 18, one H200 (.devbin/$1.tar.xz: tt_ch11_tests, train_gpt2 and tt_prepare_data of HEAD,
# build/old_train_gpt2 from before this session's LayerNorm kernels), ~3 min:
#  - chapter 11's residual LayerNorm CUDA tests (the kernel-level no-cast test, fixed), memcheck;
#  - how far apart bf16 GPT-2 124M runs drift over 500 steps on this corpus when only the
#    rounding differs: before vs HEAD in bf16 (s18b's question, now on one corpus), and before
#    in bf16 vs before in TF32 (session 16's yardstick: 0.033 nats then). The train.csv files
#    come back for tools/compare_runs.
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s18f}"
mkdir -p old/bin && mv build/old_train_gpt2 old/bin/train_gpt2
logs_begin
nvidia-smi -L
gtests ch11.log 200 build/bin/tt_ch11_tests 'Ch11_ResidualLayerNormBf16Cuda.*' | tail -4 || status=1
sanitize memcheck memcheck_11.log build/bin/tt_ch11_tests 'Ch11_ResidualLayerNormBf16Cuda.*' || status=1
data=/tmp/s18data
prep_data $data || status=1
for run in "old bf16" "build bf16" "old tf32"; do
  set -- $run
  stamp "500 steps, $1 $2"
  $1/bin/train_gpt2 --data $data --device cuda --precision $2 --layers 12 --heads 12 --channels 768 \
    --B 8 --T 1024 --seed 1337 --sample-tokens 1 --steps 500 --eval-every 100 --eval-batches 4 \
    --out /tmp/run_$1_$2 >"$OUT/train_$1_$2.log" 2>&1 || status=1
  grep -aE "^step (100|300|500)/500" "$OUT/train_$1_$2.log" | cut -c1-120
  cp /tmp/run_$1_$2/train.csv "$OUT/train500_$1_$2.csv"
  step_median /tmp/run_$1_$2/train.csv
done
stamp "compare_runs"
python3 tools/compare_runs /tmp/run_old_bf16/train.csv /tmp/run_build_bf16/train.csv --tol 0.05 --window 20
python3 tools/compare_runs /tmp/run_old_bf16/train.csv /tmp/run_old_tf32/train.csv --tol 0.05 --window 20
logs_end
stamp "s18f done (status $status)"
exit $status
