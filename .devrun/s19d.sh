#!/usr/bin/env bash
# Session 19, one H200 host's CPU (.devbin/s19d.tar.xz: bench_gpt2_step of this build and
# old/bin/bench_gpt2_step of main 309e8d3), ~3.5 min: the CPU mini step (cpu and cpu_fast rows),
# 2 threads on CPUs 0,1, four alternating rounds of: old; new with TT_CPU_CACHING=0; new; each
# with its minor page faults (getrusage of the child).
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s19d}"
cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag
step() {  # TAG ENV... BINARY
  local tag=$1
  shift
  OMP_NUM_THREADS=2 taskset -c 0,1 python3 -c '
import resource, subprocess, sys
out = subprocess.run(sys.argv[2:], capture_output=True, text=True).stdout
rows = [l.split()[0].split("/")[1] + " " + l.split()[1] for l in out.splitlines() if l.startswith("gpt2_train_step")]
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(sys.argv[1], " ".join(rows), "ms; minor faults", r.ru_minflt, flush=True)' "$tag" "$@" ||
    status=1
}
for round in 1 2 3 4; do
  stamp "round $round"
  step old old/bin/bench_gpt2_step --benchmark_filter='gpt2_train_step/cpu(_fast)?/L6'
  step "new, caching off" env TT_CPU_CACHING=0 build/bin/bench_gpt2_step \
    --benchmark_filter='gpt2_train_step/cpu(_fast)?/L6'
  step new build/bin/bench_gpt2_step --benchmark_filter='gpt2_train_step/cpu(_fast)?/L6'
done
stamp "s19d done (status $status)"
exit $status
