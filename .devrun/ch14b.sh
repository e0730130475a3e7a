#!/usr/bin/env bash
# GPU run for the ch14b branch (issue 25: train_gpt2 --pp through the training library, DP x PP
# and TP x PP, the bubble measured on GPUs, PyTorch's torch.distributed.pipelining as the anchor).
# On a 4-GPU H100 machine, from the repository root. Every part stays under ~8 minutes; on a
# 10-minute command limit run them one by one on the same warm machine (the build is kept):
#   PART=build   build train_gpt2, tt_prepare_data, tt_pipeline_bench, tt_ch14_tests (solution)
#   PART=tests   chapter 14's tests as one process, then under mpirun -np 2 and 4 (NCCL, one GPU
#                per rank for the CUDA tests; the CPU ones on the CPU)
#   PART=app     bf16 train_gpt2 for each shape of SHAPES (default "774m 1.3b": L36 H20 C1280 and
#                L24 H16 C2048) and each layout of LAYOUTS (default "pp1 pp2 pp4 dp2pp2 tp2pp2";
#                pp1 is one GPU without --pp, the baseline), B=$B T=$T, 1F1B with M=$M
#                micro-batches per batch: ms/step, tok/s and MFU (mean of steps 3..KILL), the
#                peak memory per GPU (nvidia-smi every 200 ms: what the process holds, CUDA
#                context and allocator cache included) and the losses; each run is killed after
#                step KILL (default 6), so no multi-GB checkpoint is written. One JSON line per
#                run in $OUT/app.jsonl. On a 10-minute limit: SHAPES=774m, then SHAPES=1.3b.
#                KILL=0: no kill; each run does STEPS steps (default 8), ends normally, saves
#                its one-process checkpoint into RUN_DIR (default /dev/shm, RAM) and prints the
#                allocator's "memory per rank" line (peak tensors), in app.jsonl too.
#   PART=bubble  tt_pipeline_bench (bf16 operation set, shape SWEEP_SHAPE, SWEEP_B rows per
#                micro-batch, T=$T) for p in {2,4} x m in {4,8,16}, 1F1B, plus AFAB at p=4 m=8
#                and interleaved (v=2) at p=2, 4 and m=8:
#                the bubble measured from the CUDA-event timelines next to (p-1)/(m+p-1) and the
#                replay, step time, tok/s, memory (the allocator's: mean peak, rank 0's static =
#                parameters + moments, the peak above static + gradients on rank 0 and its max
#                over the ranks, peak chunks in flight on rank 0; nvidia-smi's peak per GPU):
#                $OUT/bubble.csv; timelines of p=4 m=8 (CSV and gnuplot PNGs when gnuplot is
#                installed) in $OUT/timelines.tgz
#   PART=memory  AFAB against 1F1B, p=4 (and 2) m=8, tt_pipeline_bench at shape MEM_SHAPE
#                (default 1.3b), MEM_B rows per micro-batch: the activation memory (allocator
#                peak above the rank's parameters, moments and gradients) per rank, whose ratio
#                1F1B/AFAB on rank 0 theory puts at p/m: $OUT/memory.csv (bubble.csv's columns)
#                and the per-rank lines in $OUT/memory.log
#   PART=torch   benchmarks/torch_pipeline_bench.py (ScheduleGPipe, Schedule1F1B; bf16 autocast,
#                SDPA; the same shapes, B, T and M, the same cost-balanced stages) at p = 2 and 4:
#                one JSON line per run in $OUT/torch.jsonl (PyTorch's own peak of allocated
#                memory and nvidia-smi's, comparable with PART=app's)
# PART=all (the default) runs them all (more than 8 minutes with both shapes). PARTS="a b ..."
# runs several in that order (PART=x is PARTS=x). BUDGET_S (default: none) is the run's budget
# in seconds: a measurement that would start after BUDGET_S - 40 s is skipped (and says so), so
# a run under a command limit still writes what it measured. Each part prints its start time.
set -uo pipefail
OUT=${OUT:-out}
PARTS=${PARTS:-${PART:-all}}
BUDGET_S=${BUDGET_S:-0}
SHAPES=${SHAPES:-"774m 1.3b"}
LAYOUTS=${LAYOUTS:-"pp1 pp2 pp4 dp2pp2 tp2pp2"}
B=${B:-8}
T=${T:-1024}
M=${M:-8}
KILL=${KILL:-6}
STEPS=${STEPS:-8}
RUN_DIR=${RUN_DIR:-/dev/shm}
SWEEP_SHAPE=${SWEEP_SHAPE:-774m}
SWEEP_B=${SWEEP_B:-1}
MEM_SHAPE=${MEM_SHAPE:-1.3b}
MEM_B=${MEM_B:-1}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
MPIRUN="mpirun --oversubscribe --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE"
status=0
step() { echo "=== [${SECONDS}s] $* ==="; }
want() { [[ " $PARTS " == *" all "* || " $PARTS " == *" $1 "* ]]; }
# False (after saying so) when the budget leaves no time to start `what`.
in_budget() {
  [ "$BUDGET_S" -le 0 ] || [ "$SECONDS" -le $((BUDGET_S - 40)) ] && return 0
  echo "--- SKIPPED for time (${SECONDS}s of BUDGET_S=$BUDGET_S): $*"
  return 1
}
# nvidia-smi's memory.used per GPU every 200 ms into $1 (smi_stop ends it).
smi_start() {
  nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 200 >"$1" &
  smi=$!
}
smi_stop() {
  kill "$smi" 2>/dev/null
  wait "$smi" 2>/dev/null
}
# The peak MiB per GPU of a file of smi_start, the first $2 GPUs, as a JSON list.
smi_peaks() {
  python3 - "$1" "$2" <<'PY'
import json, sys
peak = {}
for line in open(sys.argv[1]):
    try:
        g, used = (int(x) for x in line.split(","))
        peak[g] = max(peak.get(g, 0), used)
    except ValueError:
        pass
print(json.dumps([peak[g] for g in sorted(peak)][: int(sys.argv[2])]))
PY
}
shape_args() {  # 774m | 1.3b | 124m | tiny -> L H C
  case $1 in
    774m) echo "36 20 1280" ;;
    1.3b) echo "24 16 2048" ;;
    124m) echo "12 12 768" ;;
    tiny) echo "4 2 64" ;;  # a dry run of this script (PATH with stand-ins for the tools)
    *) echo "unknown shape $1" >&2; return 1 ;;
  esac
}
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)

if want build || [ ! -x build/bin/train_gpt2 ]; then
  step build
  { cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 &&
    cmake --build build -j16 --target train_gpt2 tt_prepare_data tt_pipeline_bench tt_ch14_tests; } \
    >"$OUT/build.log" 2>&1 || { tail -60 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
  tail -2 "$OUT/build.log"
fi

if want tests; then
  step "ch14 tests: one process, then mpirun -np 2 and 4 ($gpus GPUs)"
  {
    build/bin/tt_ch14_tests --gtest_brief=1 2>&1 | tail -15
    for np in 2 4; do
      [ "$gpus" -ge "$np" ] || continue
      echo "--- np $np"
      $MPIRUN -np "$np" -x OMP_NUM_THREADS=1 build/bin/tt_ch14_tests --gtest_brief=1 \
        --gtest_filter='*Mpi*:*Cuda*' 2>&1 | tail -20
    done
  } >"$OUT/tests.log" 2>&1
  grep -aE "PASSED|FAILED|SKIPPED|^---" "$OUT/tests.log" | sort | uniq -c
  grep -aq "FAILED" "$OUT/tests.log" && status=1
fi

data=/tmp/ch14b_data
if want app && [ ! -f "$data/manifest.json" ]; then
  step "data: the repository's Markdown files, GPT-2 vocabulary (only the shapes matter here)"
  mapfile -t md < <(find chapters docs -maxdepth 2 -name '*.md' | sort)
  # shellcheck disable=SC2046
  build/bin/tt_prepare_data $(printf -- '--input %s ' README.md "${md[@]}") --gpt2-vocab \
    --format paragraph --val-fraction 0.2 --out "$data" >"$OUT/prep.log" 2>&1 ||
    { tail -5 "$OUT/prep.log"; status=1; }
fi

# One bf16 train_gpt2 run: shape name, layout name -> a JSON line in $OUT/app.jsonl.
measure() {
  local shape=$1 layout=$2 np flags
  read -r L H C <<<"$(shape_args "$shape")"
  case $layout in
    pp1) np=1 flags="" ;;
    pp2) np=2 flags="--pp 2 --micro-batches $M" ;;
    pp4) np=4 flags="--pp 4 --micro-batches $M" ;;
    dp2pp2) np=4 flags="--pp 2 --micro-batches $M" ;;
    tp2pp2) np=4 flags="--pp 2 --tp 2 --micro-batches $M" ;;
    *) echo "unknown layout $layout"; return ;;
  esac
  [ "$gpus" -ge "$np" ] || { echo "--- $shape $layout: skipped, $gpus GPU(s)"; return; }
  in_budget "$shape $layout" || return
  local run=$RUN_DIR/ch14b_run
  rm -rf "$run" "$run.mem" "$run.log"
  local steps="--steps $((KILL + 2)) --kill-after-step $KILL"
  [ "$KILL" -gt 0 ] || steps="--steps $STEPS"
  local cmd="build/bin/train_gpt2 --data $data --out $run --device cuda --precision bf16
    --layers $L --heads $H --channels $C --T $T --B $B $steps --warmup 1 --eval-every 0
    --eval-batches 1 --sample-tokens 1 --log-every 1 $flags"
  echo "--- $shape ($L/$H/$C) $layout: np=$np $flags"
  smi_start "$run.mem"
  local t0=$SECONDS
  if [ "$np" -gt 1 ]; then timeout 240 $MPIRUN -np "$np" $cmd; else timeout 240 $cmd; fi \
    >"$run.log" 2>&1
  smi_stop
  local wall=$((SECONDS - t0))
  grep -aE "^parallel:|^step: pipeline|^ops:|^model:|^memory|^checkpoint|sampl|llm.c" "$run.log" |
    cut -c1-400
  grep -aE "^step [0-9]+/[0-9]+ \|" "$run.log" | tail -3
  grep -aE "rror|what\(\)|out of memory" "$run.log" | head -5 && status=1
  local tensors
  tensors=$(grep -aoE "peak tensors [0-9.]+ MiB" "$run.log" | grep -oE "[0-9.]+" | head -1)
  python3 - "$shape" "$layout" "$np" "$run/train.csv" "$(smi_peaks "$run.mem" "$np")" "$wall" \
    "$B" "$T" "$M" "${tensors:-}" >>"$OUT/app.jsonl" <<'PY'
import csv, json, sys
shape, layout, np_, path, peaks, wall, B, T, M, tensors = sys.argv[1:]
rows = []
try:
    rows = [r for r in csv.DictReader(open(path)) if r.get("loss")]
except OSError:
    pass
steady = [r for r in rows if int(r["step"]) >= 3]
mean = lambda k: round(sum(float(r[k]) for r in steady) / len(steady), 4) if steady else None
print(json.dumps(dict(system="tt-train_gpt2-bf16", shape=shape, layout=layout, gpus=int(np_),
                      B=int(B), T=int(T), micro_batches=None if layout == "pp1" else int(M),
                      schedule=None if layout == "pp1" else "1f1b", ms_per_step=mean("ms"),
                      tok_s=mean("tok_per_s"), mfu=mean("mfu"),
                      peak_mem_mib_per_gpu=json.loads(peaks),
                      allocator_peak_mib_max_rank=float(tensors) if tensors else None,
                      losses=[float(r["loss"]) for r in rows], wall_s=int(wall))))
PY
  tail -1 "$OUT/app.jsonl"
  cp "$run.log" "$OUT/app_${shape}_${layout}.log"
  rm -rf "$run" "$run.mem" "$run.log"
}

if want app; then
  step "bf16 train_gpt2, B=$B T=$T, 1F1B M=$M: shapes $SHAPES, layouts $LAYOUTS"
  for shape in $SHAPES; do
    for layout in $LAYOUTS; do measure "$shape" "$layout"; done
  done
fi

bench_header="layers,channels,B,ops,schedule,p,m,v,bubble_measured,bubble_theory,bubble_replay,\
step_ms,tok_s,peak_mib,static_mib_rank0,act_mib_rank0,act_mib_max,in_flight_rank0,smi_peak_mib"
# One tt_pipeline_bench run (bf16, shape $L $H $C, T=$T): csv file, log file, rows per
# micro-batch, np, schedule, m [extra args] -> a row of the csv (nvidia-smi's peak per GPU last).
bench() {
  local csv=$1 log=$2 rows=$3 np=$4 sched=$5 m=$6
  shift 6
  [ "$gpus" -ge "$np" ] || return 0
  in_budget "bench np=$np $sched m=$m B=$rows" || return 0
  smi_start /tmp/ch14b_bench.mem
  timeout 150 $MPIRUN -np "$np" build/bin/tt_pipeline_bench --device cuda --ops bf16 \
    --schedule "$sched" --micro-batches "$m" --layers "$L" --heads "$H" --channels "$C" \
    --batch "$rows" --seq "$T" --steps 3 --warmup 2 "$@" >/tmp/ch14b_bench.log 2>&1 ||
    { echo "bench np=$np $sched m=$m FAILED"; tail -5 /tmp/ch14b_bench.log; status=1; }
  smi_stop
  cat /tmp/ch14b_bench.log >>"$log"
  local smi_peak
  smi_peak=$(smi_peaks /tmp/ch14b_bench.mem "$np" | tr -d '[] ' | tr ',' ' ' |
    awk '{m = 0; for (i = 1; i <= NF; ++i) if ($i > m) m = $i; print m}')
  grep -a '^csv,' /tmp/ch14b_bench.log | tail -1 | sed "s/^csv,//; s/$/,$smi_peak/" >>"$csv"
  grep -a '^pipeline \|^memory rank' /tmp/ch14b_bench.log | tail -5
}

if want bubble; then
  read -r L H C <<<"$(shape_args "$SWEEP_SHAPE")"
  step "bubble sweep: tt_pipeline_bench, bf16, L$L H$H C$C, $SWEEP_B row(s) per micro-batch, T=$T"
  echo "$bench_header" >"$OUT/bubble.csv"
  for np in 2 4; do
    for m in 4 8 16; do bench "$OUT/bubble.csv" "$OUT/bench.log" "$SWEEP_B" "$np" 1f1b "$m"; done
  done
  bench "$OUT/bubble.csv" "$OUT/bench.log" "$SWEEP_B" 4 afab 8
  bench "$OUT/bubble.csv" "$OUT/bench.log" "$SWEEP_B" 2 interleaved 8 --chunks 2
  bench "$OUT/bubble.csv" "$OUT/bench.log" "$SWEEP_B" 4 interleaved 8 --chunks 2
  if [ "$gpus" -ge 4 ]; then
    rm -rf /tmp/ch14b_timelines && mkdir -p /tmp/ch14b_timelines
    bench "$OUT/bubble.csv" "$OUT/bench.log" "$SWEEP_B" 4 1f1b 8 --timeline-dir /tmp/ch14b_timelines
    tar czf "$OUT/timelines.tgz" -C /tmp ch14b_timelines 2>/dev/null || true
  fi
fi

if want memory; then
  read -r L H C <<<"$(shape_args "$MEM_SHAPE")"
  step "activation memory, AFAB vs 1F1B: tt_pipeline_bench, bf16, L$L H$H C$C, B=$MEM_B, T=$T, m=8"
  echo "$bench_header" >"$OUT/memory.csv"
  for np in 4 2; do
    for sched in afab 1f1b; do bench "$OUT/memory.csv" "$OUT/memory.log" "$MEM_B" "$np" "$sched" 8; done
  done
  python3 - "$OUT/memory.csv" <<'PY'
import csv, sys
rows = {(r["p"], r["schedule"]): r for r in csv.DictReader(open(sys.argv[1]))}
for p in ("4", "2"):
    a, b = rows.get((p, "afab")), rows.get((p, "1f1b"))
    if a and b and float(a["act_mib_rank0"]) > 0:
        print(f"p={p} m=8: activations on rank 0 1F1B {b['act_mib_rank0']} MiB / AFAB "
              f"{a['act_mib_rank0']} MiB = {float(b['act_mib_rank0']) / float(a['act_mib_rank0']):.3f}"
              f" (theory p/m = {int(p) / 8:.3f}); max over ranks {b['act_mib_max']} / "
              f"{a['act_mib_max']}; nvidia-smi peak {b['smi_peak_mib']} / {a['smi_peak_mib']} MiB")
PY
fi

if want torch; then
  step "PyTorch torch.distributed.pipelining (bf16 autocast, SDPA), B=$B T=$T M=$M"
  for shape in $SHAPES; do
    read -r L H C <<<"$(shape_args "$shape")"
    for np in 2 4; do
      [ "$gpus" -ge "$np" ] || continue
      for sched in gpipe 1f1b; do
        in_budget "torch $shape np=$np $sched" || continue
        smi_start /tmp/ch14b_torch.mem
        timeout 200 torchrun --standalone --nproc_per_node "$np" benchmarks/torch_pipeline_bench.py \
          --schedule "$sched" --L "$L" --NH "$H" --C "$C" --B "$B" --T "$T" \
          --micro-batches "$M" >"$OUT/torch_last.log" 2>&1 ||
          { echo "torch $shape np=$np $sched FAILED"; tail -5 "$OUT/torch_last.log"; status=1; }
        smi_stop
        cat "$OUT/torch_last.log" >>"$OUT/torch.log"
        # The JSON line, with nvidia-smi's peak per GPU (as PART=app measures train_gpt2).
        grep -a '^{' "$OUT/torch_last.log" | tail -1 |
          python3 -c 'import json, sys
line = sys.stdin.read().strip()
if line:
    d = json.loads(line)
    d["smi_peak_mem_mib_per_gpu"] = json.loads(sys.argv[1])
    print(json.dumps(d))' "$(smi_peaks /tmp/ch14b_torch.mem "$np")" | tee -a "$OUT/torch.jsonl"
      done
    done
  done
  rm -f "$OUT/torch_last.log"
fi
exit $status
