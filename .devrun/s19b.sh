#!/usr/bin/env bash
# Session 19, one H200 (.devbin/s19b.tar.xz: bench_cpu_matmul, train_gpt2, tt_prepare_data,
# tt_ch10_tests, tt_ch11_tests; .devbin/lib has OpenBLAS and libgfortran), ~2 min:
# the host's CPU and which CPUs 0 and 1 are; GEMM rates on them with 2 threads: ours (Eigen,
# blocked), OpenBLAS and PyTorch's torch.mm (oneDNN/MKL), on GPT-2 mini-step shapes; the two app
# tests of s19a that had no train_gpt2 beside them.
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s19b}"
logs_begin
lscpu | grep -aE "^Model name|^CPU\(s\)|^Thread|^Core|^Socket|^NUMA node\(s\)|^Flags" | cut -c1-100
lscpu | grep -ao "avx512[a-z_0-9]*\|amx[a-z_0-9]*\|avx2\|fma" | sort -u | tr '\n' ' '; echo
for c in 0 1; do echo "cpu$c siblings $(cat /sys/devices/system/cpu/cpu$c/topology/thread_siblings_list)"; done
stamp "bench_cpu_matmul, 2 threads on CPUs 0,1"
OMP_NUM_THREADS=2 taskset -c 0,1 build/bin/bench_cpu_matmul \
  --benchmark_filter='(eigen|blocked|openblas)/(2048|C384)' 2>&1 | tee "$OUT/cpu_matmul.txt" |
  grep -aE "threads|/real_time" | cut -c1-110
stamp "torch.mm, 2 threads on CPUs 0,1"
OMP_NUM_THREADS=2 taskset -c 0,1 python3 - <<'PY' 2>&1 | tee "$OUT/torch_mm.txt"
import time, torch
torch.set_num_threads(2)
print(torch.__config__.show().split("\n")[0:12])
for (M, K, N) in [(2048, 2048, 2048), (2048, 384, 1152), (2048, 384, 8192), (2048, 1536, 384), (384, 2048, 1536)]:
    a, b = torch.randn(M, K), torch.randn(K, N)
    for _ in range(2): a @ b
    n = 5; t = time.perf_counter()
    for _ in range(n): a @ b
    dt = (time.perf_counter() - t) / n
    print(f"torch.mm {M}x{K}x{N}: {dt*1e3:.2f} ms {2*M*N*K/dt/1e9:.1f} GFLOP/s")
PY
gtests ch10_graph.log 300 build/bin/tt_ch10_tests 'Ch10_10_GraphedTrainGpt2Cuda.*' || status=1
gtests ch11_app.log 300 build/bin/tt_ch11_tests 'Ch11_Bf16TrainGpt2.*' || status=1
logs_end
stamp "s19b done (status $status)"
exit $status
