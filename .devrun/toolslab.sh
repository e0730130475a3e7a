#!/usr/bin/env bash
# The tools lab of chapter 12 (issue 22, item 5) on an H100 machine: every output excerpt of the
# README's "Tools lab" section, written into $OUT.
#   .devrun/toolslab.sh          part 1 (one GPU), and part 2 when a second GPU exists
#   .devrun/toolslab.sh 1        part 1 only: tests, ncu on FlashAttention, NVTX, profile, traces
#   .devrun/toolslab.sh 2        part 2 only: NCCL_DEBUG=INFO DDP, all-reduce busbw, DDP trace
# Part 1 takes some 5 minutes (ncu --set full replays each kernel ~40 times), part 2 about 2.
set -uo pipefail
OUT=${OUT:-/tmp/toolslab_out}
mkdir -p "$OUT"
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
PART=${1:-all}
NCU=/usr/local/cuda/bin/ncu
MPI="mpirun --allow-run-as-root --bind-to none -np 2 -x NCCL_NVLS_ENABLE -x PATH -x LD_LIBRARY_PATH"
export NCCL_NVLS_ENABLE=0
ATT_FILTER='^attention_flash/cuda_tf32/B8_NH12_T1024_hs64$'

{ nvidia-smi; nvidia-smi topo -m; "$NCU" --version; } > "$OUT/machine.txt" 2>&1

echo "== build"
cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/configure.log" 2>&1 &&
  cmake --build build -j16 --target tt_ch12_tests bench_attention bench_gpt2_step tt_ddp_demo \
    tt_allreduce_bench > "$OUT/build.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then tail -60 "$OUT/configure.log" "$OUT/build.log"; exit $rc; fi

# run NAME CMD...: the command's stdout+stderr into $OUT/NAME.txt (with its exit status), and
# the last lines on the console.
run() {
  local name=$1
  shift
  echo "== $name: $*"
  local t0=$SECONDS
  "$@" > "$OUT/$name.txt" 2>&1
  local rc=$?
  echo "exit status $rc, $((SECONDS - t0)) s" >> "$OUT/$name.txt"
  tail -n 8 "$OUT/$name.txt"
}

# The overlap of each bucket's all-reduce with backward, read from a DDP trace (tt/trace.h).
overlap() {
  python3 - "$1" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
ev = [e for e in doc["traceEvents"] if e["ph"] != "M"]
for pid in sorted({e["pid"] for e in ev}):
    mine = [e for e in ev if e["pid"] == pid]
    steps = sorted((e for e in mine if e["cat"] == "step" and e["tid"] == 1), key=lambda e: e["ts"]) or \
            sorted((e for e in mine if e["cat"] == "step" and e["tid"] == 0), key=lambda e: e["ts"])
    for s in steps:
        t0, t1 = s["ts"], s["ts"] + s["dur"]
        inside = lambda e: t0 <= e["ts"] <= t1
        ops = [e for e in mine if e["cat"] == "op" and inside(e)]
        comm = sorted((e for e in mine if e["cat"] == "comm" and e["ph"] == "X" and inside(e)),
                      key=lambda e: e["ts"])
        ends = [e["ts"] for e in mine if e["cat"] == "mark" and inside(e)]
        bwd_end = ends[0] if ends else t1
        print(f"rank {pid} {s['name']}: {len(ops)} kernels, step {s['dur'] / 1e3:.3f} ms, "
              f"backward's kernels end at {(bwd_end - t0) / 1e3:.3f} ms")
        print("  all-reduce            bytes   start ms    end ms   hidden")
        for c in comm:
            b, e = c["ts"] - t0, c["ts"] + c["dur"] - t0
            hid = (1.0 if e <= bwd_end - t0 else 0.0) if c["dur"] == 0 else \
                max(0.0, min(e, bwd_end - t0) - b) / c["dur"]
            print(f"  {c['name']:<18} {c['args'].get('bytes', ''):>11} {b / 1e3:10.3f} {e / 1e3:9.3f}  {100 * hid:5.1f} %")
PY
}

if [ "$PART" = all ] || [ "$PART" = 1 ]; then
  echo "### part 1: one GPU"
  run tests_lab build/bin/tt_ch12_tests --gtest_filter='Ch12_5*:Ch12_6*'
  run ctest_lab ctest --test-dir build -R 'Ch12_5|Ch12_6' --output-on-failure
  # Nsight Compute on chapter 10's TF32 FlashAttention (forward + the three backward kernels).
  run ncu_flash_full "$NCU" --set full -k regex:flash -c 4 build/bin/bench_attention \
    --benchmark_filter="$ATT_FILTER"
  run ncu_flash_metrics "$NCU" -k regex:flash -c 4 --metrics \
gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,\
sm__maximum_warps_per_active_cycle_pct,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,\
smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio \
    build/bin/bench_attention --benchmark_filter="$ATT_FILTER"
  # NVTX: the kernel picked by the op's range, and the range stack it ran in.
  run ncu_flash_nvtx env TT_NVTX=1 "$NCU" --nvtx --nvtx-include "flash_attention_forward/" -c 1 \
    --section SpeedOfLight build/bin/bench_attention --benchmark_filter="$ATT_FILTER"
  # The chapter's own profiler on the same kernels inside a GPT-2 124M step (same shape).
  run profile_fast build/bin/bench_gpt2_step --profile --benchmark_filter='cuda_fast_tf32/L12'
  # Traces: a GPT-2 step (one GPU) and a DDP step on one GPU.
  run trace_gpt2 build/bin/bench_gpt2_step --trace="$OUT" --trace-steps=2 \
    --benchmark_filter='cuda_fast_tf32/L12'
  run trace_ddp_1gpu build/bin/tt_ddp_demo --device cuda --layers 8 --hidden 4096 \
    --bucket-kb 16384 --steps 10 --trace "$OUT/trace_ddp_1gpu.json" --trace-steps 2
  [ -f "$OUT/trace_ddp_1gpu.json" ] && overlap "$OUT/trace_ddp_1gpu.json" > "$OUT/overlap_ddp_1gpu.txt" 2>&1
fi

if { [ "$PART" = all ] && [ "$NGPU" -ge 2 ]; } || [ "$PART" = 2 ]; then
  echo "### part 2: two GPUs"
  run nccl_debug_ddp env NCCL_DEBUG=INFO $MPI -x NCCL_DEBUG build/bin/tt_ddp_demo --device cuda \
    --steps 5
  run busbw $MPI build/bin/tt_allreduce_bench --device cuda --max-mib 1024 --iters 20 --warmup 5 \
    --link-gbps 450 --json "$OUT/busbw.json"
  run trace_ddp_2gpu $MPI build/bin/tt_ddp_demo --device cuda --layers 8 --hidden 4096 \
    --bucket-kb 16384 --steps 10 --trace "$OUT/trace_ddp_2gpu.json" --trace-steps 2
  [ -f "$OUT/trace_ddp_2gpu.json" ] && overlap "$OUT/trace_ddp_2gpu.json" > "$OUT/overlap_ddp_2gpu.txt" 2>&1
  run ctest_lab_mpi ctest --test-dir build -R 'Ch12_5_TraceWriterMpi' --output-on-failure
  run nccl_debug_coll env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL $MPI -x NCCL_DEBUG \
    -x NCCL_DEBUG_SUBSYS build/bin/tt_allreduce_bench --device cuda --min-bytes 1048576 \
    --max-mib 1 --iters 2 --warmup 1
fi
ls -la "$OUT"
