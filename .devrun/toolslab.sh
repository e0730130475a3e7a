#!/usr/bin/env bash
# The tools lab of chapter 12 (issue 22, item 5) on an H100 machine: every output excerpt of the
# README's "Tools lab" section, written into $OUT.
#   .devrun/toolslab.sh          build, part 1 (one GPU), and part 2 when a second GPU exists
#   .devrun/toolslab.sh build    only the build (the targets below; long on a fresh machine)
#   .devrun/toolslab.sh 1        part 1: ncu on FlashAttention, NVTX (= ncu), then 1b
#   .devrun/toolslab.sh ncu      the ncu runs of part 1 only
#   .devrun/toolslab.sh 1b       the rest of part 1: the lab's tests, profile, GPT-2 and DDP traces
#   .devrun/toolslab.sh 2        part 2: NCCL_DEBUG=INFO DDP, all-reduce busbw, DDP trace (2 GPUs)
# Every part builds first (nothing to do once built). ncu --set full replays each kernel some 40
# times: the ncu part takes a few minutes.
set -uo pipefail
OUT=${OUT:-/tmp/toolslab_out}
mkdir -p "$OUT"
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
PART=${1:-all}
NCU=/usr/local/cuda/bin/ncu
MPI="mpirun --allow-run-as-root --bind-to none -np 2 -x NCCL_NVLS_ENABLE"
export NCCL_NVLS_ENABLE=0
ATT_FILTER='^attention_flash/cuda_tf32/B8_NH12_T1024_hs64/'

{ nvidia-smi; nvidia-smi topo -m; "$NCU" --version; } > "$OUT/machine.txt" 2>&1

echo "== build"
cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/configure.log" 2>&1 &&
  cmake --build build -j16 --target tt_ch12_tests bench_attention bench_gpt2_step tt_ddp_demo \
    tt_allreduce_bench > "$OUT/build.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then tail -60 "$OUT/configure.log" "$OUT/build.log"; exit $rc; fi
[ "$PART" = build ] && exit 0

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


if [ "$PART" = all ] || [ "$PART" = 1 ] || [ "$PART" = ncu ]; then
  echo "### part 1: one GPU (ncu)"
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
fi

if [ "$PART" = all ] || [ "$PART" = 1 ] || [ "$PART" = 1b ]; then
  echo "### part 1b: one GPU (tests, profile, traces)"
  run tests_lab build/bin/tt_ch12_tests --gtest_filter='Ch12_5*:Ch12_6*'
  run ctest_lab ctest --test-dir build -R 'Ch12_5|Ch12_6' --output-on-failure
  # The chapter's own profiler on the same kernels inside a GPT-2 124M step (same shape).
  run profile_fast build/bin/bench_gpt2_step --profile --benchmark_filter='cuda_fast_tf32/L12'
  # Traces: a GPT-2 step (one GPU) and a DDP step on one GPU.
  run trace_gpt2 build/bin/bench_gpt2_step --trace="$OUT" --trace-steps=2 \
    --benchmark_filter='cuda_fast_tf32/L12'
  run trace_ddp_1gpu build/bin/tt_ddp_demo --device cuda --layers 8 --hidden 4096 \
    --bucket-kb 16384 --steps 10 --trace "$OUT/trace_ddp_1gpu.json" --trace-steps 2
  [ -f "$OUT/trace_ddp_1gpu.json" ] && tools/trace_overlap "$OUT/trace_ddp_1gpu.json" > "$OUT/overlap_ddp_1gpu.txt" 2>&1
fi

if { [ "$PART" = all ] && [ "$NGPU" -ge 2 ]; } || [ "$PART" = 2 ]; then
  echo "### part 2: two GPUs"
  run nccl_debug_ddp env NCCL_DEBUG=INFO $MPI -x NCCL_DEBUG build/bin/tt_ddp_demo --device cuda \
    --steps 5
  run busbw $MPI build/bin/tt_allreduce_bench --device cuda --max-mib 1024 --iters 20 --warmup 5 \
    --link-gbps 450 --json "$OUT/busbw.json"
  run trace_ddp_2gpu $MPI build/bin/tt_ddp_demo --device cuda --layers 8 --hidden 4096 \
    --bucket-kb 16384 --steps 10 --trace "$OUT/trace_ddp_2gpu.json" --trace-steps 2
  [ -f "$OUT/trace_ddp_2gpu.json" ] && tools/trace_overlap "$OUT/trace_ddp_2gpu.json" > "$OUT/overlap_ddp_2gpu.txt" 2>&1
  run ctest_lab_mpi ctest --test-dir build -R 'Ch12_5_TraceWriterMpi' --output-on-failure
  run nccl_debug_coll env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL $MPI -x NCCL_DEBUG \
    -x NCCL_DEBUG_SUBSYS build/bin/tt_allreduce_bench --device cuda --min-bytes 1048576 \
    --max-mib 1 --iters 2 --warmup 1
fi
ls -la "$OUT"
