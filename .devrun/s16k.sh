#!/usr/bin/env bash
# Session 16, one H200: issue 23 goal 1 where it stands after this session's FlashAttention
# forward: GPT-2 124M's bf16 step (bench_gpt2_step cuda_bf16/L12) alternated three times with
# PyTorch's eager and torch.compile bf16 steps in the same call (.devbin/$1.tar.xz:
# bench_gpt2_step; .devbin/anchors/gpt2_torch_bench.py from ../shared/anchors), ~5 min.
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s16k}"
nvidia-smi -L
for rep in 1 2 3; do
  stamp "round $rep: ours"
  build/bin/bench_gpt2_step --benchmark_filter='cuda_bf16/L12' 2>&1 | grep -aE "cuda_bf16/" | cut -c1-150 || status=1
  stamp "round $rep: PyTorch eager and torch.compile, bf16"
  timeout 150 python3 .devbin/anchors/gpt2_torch_bench.py --B 8 --T 1024 --modes bf16_sdpa,bf16_compile \
    2>/dev/null | grep -a '"system"' | cut -c1-220 || status=1
done
stamp "s16k done (status $status)"
exit $status
