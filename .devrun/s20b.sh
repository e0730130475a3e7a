#!/usr/bin/env bash
# Session 20, one H200 host's CPU (.devbin/s20b.tar.xz: bench_cpu_matmul, bench_gpt2_step,
# tt_ch04/09_tests of an experiment, where gemm_fma's threads packed each block of the other
# operand together, then waited at a barrier; not kept, see chapter 04's README, "More threads";
# old/bin/bench_cpu_matmul of 7b69130, the kept version, where each thread packs all of it),
# 7 min:
# GEMM rates with 2, 8 and 16 threads (Eigen, gemm_fma old and new, torch.mm), the CPU mini step
# (2 pinned cores) in two more rounds against PyTorch 2.11, chapters 04 and 09's tests here.
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s20b}"
mkdir -p /work && ln -sfn "$PWD" /work/main  # the tests find reference_data/ by absolute path
logs_begin
for n in 16 8 2; do
  cpus=$(seq -s, 0 $((n - 1)))
  for dir in old build; do
    stamp "bench_cpu_matmul of $dir, $n threads on CPUs $cpus"
    OMP_NUM_THREADS=$n taskset -c "$cpus" $dir/bin/bench_cpu_matmul \
      --benchmark_filter='(eigen|fma)/(2048|C384|C768)' --benchmark_repetitions=3 \
      --benchmark_report_aggregates_only=true 2>&1 | tee "$OUT/cpu_matmul_${dir}_$n.txt" |
      grep -aE "_median" | awk '{for(i=1;i<=NF;i++) if ($i ~ /GFLOP=/) g=$i; print $1, g}'
  done
  stamp "torch.mm, $n threads"
  OMP_NUM_THREADS=$n taskset -c "$cpus" python3 - "$n" <<'PY' 2>&1 | tee "$OUT/torch_mm_$n.txt"
import sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
for (M, K, N) in [(2048, 2048, 2048), (2048, 384, 1152), (2048, 768, 2304), (2048, 3072, 768)]:
    a, b = torch.randn(M, K), torch.randn(K, N)
    for _ in range(3): a @ b
    best = 1e9
    for r in range(3):
        n = 5; t = time.perf_counter()
        for _ in range(n): a @ b
        best = min(best, (time.perf_counter() - t) / n)
    print(f"torch.mm {M}x{K}x{N}: {2*M*N*K/best/1e9:.1f} GFLOP/s")
PY
done
cpu_vs_torch 2 build || status=1
gtests ch04.log 300 build/bin/tt_ch04_tests '*' || status=1
gtests ch09_det.log 300 build/bin/tt_ch09_tests '*Determinism*:*TinyModel*:*Reference*' || status=1
logs_end
stamp "s20b done (status $status)"
exit $status
