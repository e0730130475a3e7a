#!/usr/bin/env bash
# GPU run (issue 25) after the AFAB hang on 4 H100s (tt_pipeline_bench --schedule afab at 124M
# and 774M, p=4 m=8: no output in 60 s and in 240 s, while 1F1B ran in 12 s and 50 s): the fix
# is connect_peers (tt/pipeline.h), every pipeline link connected before the first step. This
# run checks AFAB at 124M first (40 s limit; on a hang, each rank's stacks by gdb into
# $OUT/afab_stacks.txt), then .devrun/ch14b.sh's memory part (AFAB vs 1F1B at m=8, p=4 then 2)
# and as much of the bubble sweep as BUDGET_S allows, at 774M with one row per micro-batch.
set -uo pipefail
. .devrun/lib.sh
tt_build train_gpt2 tt_prepare_data tt_pipeline_bench tt_ch14_tests || exit 1
stamp "AFAB at 124M, p=4 m=8 (a hang before connect_peers)"
timeout 40 $MPI_APP -np 4 build/bin/tt_pipeline_bench --device cuda --ops bf16 --schedule afab \
  --micro-batches 8 --layers 12 --heads 12 --channels 768 --batch 1 --seq 1024 --steps 3 \
  --warmup 2 >"$OUT/afab124.log" 2>&1 &
job=$!
for _ in $(seq 38); do kill -0 "$job" 2>/dev/null || break; sleep 1; done
if kill -0 "$job" 2>/dev/null; then
  echo "AFAB still running after 38 s: stacks into afab_stacks.txt"
  for p in $(pgrep -f "tt_pipeline_bench --device"); do
    echo "=== pid $p"
    if command -v gdb >/dev/null; then gdb -p "$p" -batch -ex "thread apply all bt 12" 2>&1 |
      grep -E "^#|^Thread" | head -80; else cat /proc/"$p"/task/*/stack 2>&1 | head -40; fi
  done >"$OUT/afab_stacks.txt" 2>&1
fi
wait "$job"; echo "afab 124M exit $?"
grep -a "^pipeline" "$OUT/afab124.log" | cut -c1-300
echo "--- CUDA tests, np 4 (Cuda, Executor)"
timeout 120 $MPI -np 4 build/bin/tt_ch14_tests --gtest_brief=1 --gtest_color=no \
  --gtest_filter='*Cuda*:Ch14_Executor*' 2>&1 | grep -aE "PASSED|FAILED|rror" | sort | uniq -c
export PARTS=${PARTS:-"memory bubble"} SWEEP_SHAPE=${SWEEP_SHAPE:-774m} MEMORY_NP=${MEMORY_NP:-4}
export BUDGET_S=${BUDGET_S:-$((540 - SECONDS))} BENCH_TIMEOUT=${BENCH_TIMEOUT:-100}
exec bash .devrun/ch14b.sh
