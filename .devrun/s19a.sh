#!/usr/bin/env bash
# Session 19, one H200 (.devbin/s19a.tar.xz: bench_gpt2_step, tt_ch05/07/10/11 tests, and
# old/bin/bench_gpt2_step of main 309e8d3), ~5 min:
# the host CPU; issue 23 goal 4, the CPU mini step before/after (the CPU allocator's cache of
# large blocks, AdamW vectorized and in parallel) against PyTorch 2.11 on 2 pinned cores, three
# alternating rounds; the allocator's share (TT_CPU_CACHING=0); the per-op profile after;
# the CUDA tests of chapters 07, 10 and 11 with the new build (every CPU reference changed
# allocator, and -fno-math-errno); sanitizers on the residual + LayerNorm kernels (one alignment
# rule now); the bf16 step.
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s19a}"
logs_begin
lscpu | grep -aE "^Model name|^CPU\(s\)|^Thread|^Core|^Socket|^NUMA node\(s\)|MHz" | head -8
lscpu | grep -ao "avx512[a-z_0-9]*\|amx[a-z_0-9]*" | sort -u | tr '\n' ' '; echo
cat /sys/kernel/mm/transparent_hugepage/enabled
python3 -c "import torch; print('torch', torch.__version__, torch.backends.mkldnn.is_available())"
cpu_vs_torch 3 old build || status=1
stamp "new build, TT_CPU_CACHING=0"
TT_CPU_CACHING=0 OMP_NUM_THREADS=2 taskset -c 0,1 build/bin/bench_gpt2_step \
  --benchmark_filter='gpt2_train_step/cpu(_fast)?/L6' 2>&1 | grep -a "^gpt2_train_step" | cut -c1-120
stamp "per-op profile, new build, cpu_fast"
OMP_NUM_THREADS=2 taskset -c 0,1 build/bin/bench_gpt2_step --profile \
  --benchmark_filter='gpt2_train_step/cpu_fast/L6' >"$OUT/prof_cpu_fast.log" 2>&1 || status=1
grep -aA24 "^Per-op" "$OUT/prof_cpu_fast.log" | cut -c1-130 | head -26
stamp "profile, old build, cpu_fast"
OMP_NUM_THREADS=2 taskset -c 0,1 old/bin/bench_gpt2_step --profile \
  --benchmark_filter='gpt2_train_step/cpu_fast/L6' >"$OUT/prof_cpu_fast_old.log" 2>&1 || status=1
grep -aA24 "^Per-op" "$OUT/prof_cpu_fast_old.log" | cut -c1-130 | head -26
for ch in 07 10 11; do
  gtests ch${ch}_cuda.log 300 build/bin/tt_ch${ch}_tests '*Cuda*' || status=1
done
# residual_layernorm_cuda.cu: one alignment rule (row_packs), load4/store4_bf16 through
# load_as/store_as.
ln_sanitize_and_step
logs_end
stamp "s19a done (status $status)"
exit $status
