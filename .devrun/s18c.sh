#!/usr/bin/env bash
# Session 18, one H200 (.devbin/$1.tar.xz: s18b's), ~5 min: issue 23 goal 1 after chapter 10's
# register-row residual + LayerNorm kernels: train_gpt2 bf16 GPT-2 124M before (old) and after
# (build), 60 steps each, median step time of steps 11-60, and bench_gpt2_step cuda_bf16/L12 with
# PyTorch eager and torch.compile (bf16, ../shared/anchors/gpt2_torch_bench.py) in the same call,
# alternated three times.
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s18b}"
mkdir -p old/bin && mv build/old_train_gpt2 old/bin/train_gpt2
nvidia-smi -L
data=/tmp/s18data
prep_data $data || status=1
for rep in 1 2 3; do
  stamp "round $rep"
  for b in build old; do gpt2_steps $b 60 || status=1; done
  vs_torch || status=1
done
stamp "s18c done (status $status)"
exit $status
