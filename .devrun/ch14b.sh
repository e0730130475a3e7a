#!/usr/bin/env bash
# GPU runs of chapter 14 (issue 25): train_gpt2 --pp layouts, the bubble and the activation
# memory of the schedules measured with tt_pipeline_bench, PyTorch's torch.distributed.pipelining
# as the anchor. On a 4-GPU H100 machine, from the repository root (.devrun/lib.sh: $OUT, $MPI
# for the tests, $MPI_APP for the app and the bench, whose 1.3B random init on the CPU needs
# threads, .devdeps, stamp, tt_build). PARTS="a b ..." runs parts in that order (PART=x is PARTS=x;
# "all": every part, in the order below). Expected times on 4xH100 at the 1.3B shape:
#   build   (~60 s) train_gpt2, tt_prepare_data, tt_pipeline_bench, tt_ch14_tests (solution)
#   tests   (~30 s at TEST_NP="2 4"; add 1 for one process) chapter 14's tests under mpirun
#           (NCCL, one GPU per rank for the CUDA tests; the CPU ones on the CPU)
#   app     (~30-40 s a run) bf16 train_gpt2 for each shape of SHAPES (774m: L36 H20 C1280;
#           1.3b: L24 H16 C2048) and each layout of LAYOUTS (pp1 is one GPU without --pp), B=$B
#           T=$T, 1F1B with M=$M micro-batches per batch: ms/step, tok/s and MFU (mean of steps
#           3..KILL), the peak memory per GPU (nvidia-smi every 200 ms: what the process holds,
#           CUDA context and allocator cache included), the allocator's peak (train_gpt2's
#           "memory per rank" line, max over the ranks) and the losses: $OUT/app.jsonl, the logs
#           in $OUT/app_<shape>_<layout>.log. Each run is killed after step KILL (default 6; it
#           prints its memory line first), so no multi-GB checkpoint is written (KILL=0: STEPS
#           steps, a normal end with a checkpoint in RUN_DIR, and samples and the llm.c export
#           of pp1: minutes at 1.3B).
#   memory  (~50 s a run) tt_pipeline_bench at SWEEP_SHAPE, AFAB and 1F1B at m=8, p in MEMORY_NP:
#           each rank's allocator peak above its parameters, moments and gradients (the
#           activations in flight) on rank 0, where 1F1B/AFAB should be about p/m; rows in
#           $OUT/bubble.csv, the comparison printed and in $OUT/memory.txt
#   bubble  (~30 s a run) tt_pipeline_bench (bf16 operation set, SWEEP_SHAPE, SWEEP_B rows per
#           micro-batch, T=$T): p in {2,4} x m in {4,8,16} 1F1B, AFAB at m=8, interleaved (v=2)
#           at m=8 (the rows PART=memory measured are not run again): the bubble measured from
#           the CUDA-event timelines next to (p-1)/(vm+p-1) and the replay, step time, tok/s,
#           memory (mean allocator peak, rank 0's static = parameters + moments, the peak above
#           static + gradients on rank 0 and its max over the ranks, peak chunks in flight,
#           nvidia-smi's peak): $OUT/bubble.csv; the timelines of 1F1B p=4 m=8 (CSV, gnuplot
#           PNGs when gnuplot is installed) in $OUT/timelines.tgz; BUBBLE_RUNS="np:schedule:m[:v]
#           ..." runs only those (e.g. "2:1f1b:8 2:afab:8 2:interleaved:8:2")
#   torch   (~40 s a run) benchmarks/torch_pipeline_bench.py (bf16 autocast, SDPA; the same
#           shapes, B, T, M and cost-balanced stages) for each schedule of TORCH_SCHEDULES
#           (1f1b gpipe) at p = 2 and 4: $OUT/torch.jsonl (PyTorch's peak of allocated memory
#           and nvidia-smi's, comparable with PART=app's)
# BUDGET_S (default: none) is the run's budget in seconds: a measurement that would start after
# BUDGET_S - 40 s is skipped and says so, so a run under a command limit still writes what it
# measured.
set -uo pipefail
PARTS=${PARTS:-${PART:-all}}
BUDGET_S=${BUDGET_S:-0}
TEST_NP=${TEST_NP:-"1 2 4"}
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
TORCH_SCHEDULES=${TORCH_SCHEDULES:-"1f1b gpipe"}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-240}
MEMORY_NP=${MEMORY_NP:-"4 2"}
. .devrun/lib.sh  # $OUT, $MPI, .devdeps, stamp, tt_build
status=0
want() { [[ " $PARTS " == *" all "* || " $PARTS " == *" $1 "* ]]; }
# False (after saying so) when the budget leaves no time to start `what`.
in_budget() {
  [ "$BUDGET_S" -le 0 ] || [ "$((SECONDS - t0))" -le $((BUDGET_S - 40)) ] && return 0
  echo "--- SKIPPED for time ($((SECONDS - t0)) s of BUDGET_S=$BUDGET_S): $*"
  return 1
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
  tt_build train_gpt2 tt_prepare_data tt_pipeline_bench tt_ch14_tests || exit 1
fi

part_tests() {
  stamp "ch14 tests: np in $TEST_NP ($gpus GPUs)"
  for np in $TEST_NP; do
    [ "$gpus" -ge "$np" ] || continue
    echo "--- np $np"
    if [ "$np" = 1 ]; then
      timeout 200 build/bin/tt_ch14_tests --gtest_brief=1 2>&1 | tail -15
    else
      timeout 200 $MPI -np "$np" build/bin/tt_ch14_tests --gtest_brief=1 \
        --gtest_filter='*Mpi*:*Cuda*' 2>&1 | tail -20
    fi
  done >"$OUT/tests.log" 2>&1
  grep -aE "PASSED|FAILED|SKIPPED|^---" "$OUT/tests.log" | sort | uniq -c
  grep -aq "FAILED" "$OUT/tests.log" && status=1
}

data=/tmp/ch14b_data
prepare_data() {
  stamp "data: the repository's Markdown files, GPT-2 vocabulary (only the shapes matter here)"
  mapfile -t md < <(find chapters docs -maxdepth 2 -name '*.md' | sort)
  # shellcheck disable=SC2046
  build/bin/tt_prepare_data $(printf -- '--input %s ' README.md "${md[@]}") --gpt2-vocab \
    --format paragraph --val-fraction 0.2 --out "$data" >"$OUT/prep.log" 2>&1 ||
    { tail -5 "$OUT/prep.log"; status=1; }
}

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
  if [ "$np" -gt 1 ]; then timeout 240 $MPI_APP -np "$np" $cmd; else timeout 240 $cmd; fi \
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
def mean(k):
    v = [float(r[k]) for r in steady if r.get(k)]
    return round(sum(v) / len(v), 4) if v else None
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

part_app() {
  [ -f "$data/manifest.json" ] || prepare_data
  stamp "bf16 train_gpt2, B=$B T=$T, 1F1B M=$M: shapes $SHAPES, layouts $LAYOUTS"
  for shape in $SHAPES; do
    for layout in $LAYOUTS; do measure "$shape" "$layout"; done
  done
}

# One tt_pipeline_bench run at SWEEP_SHAPE (bf16, SWEEP_B rows per micro-batch, T=$T): np,
# schedule, m [extra args] -> a row of $OUT/bubble.csv (nvidia-smi's peak over the GPUs last),
# the log appended to $OUT/bench.log. A (p, schedule, m) already in the csv is not run again.
# 1F1B at p=4, m=8 also writes its timelines into $OUT/timelines.tgz.
bench() {
  local np=$1 sched=$2 m=$3 timelines=()
  shift 3
  [ "$gpus" -ge "$np" ] || return 0
  grep -q ",$sched,$np,$m," "$OUT/bubble.csv" 2>/dev/null && return 0
  in_budget "bench np=$np $sched m=$m" || return 0
  read -r L H C <<<"$(shape_args "$SWEEP_SHAPE")"
  [ -f "$OUT/bubble.csv" ] ||
    echo "layers,channels,B,ops,schedule,p,m,v,bubble_measured,bubble_theory,bubble_replay,\
step_ms,tok_s,peak_mib,static_mib_rank0,act_mib_rank0,act_mib_max,in_flight_rank0,\
bubble_busiest_rank,imbalance,smi_peak_mib" \
      >"$OUT/bubble.csv"
  if [ "$np/$sched/$m" = 4/1f1b/8 ]; then
    rm -rf /tmp/ch14b_timelines && mkdir -p /tmp/ch14b_timelines
    timelines=(--timeline-dir /tmp/ch14b_timelines)
  fi
  smi_start /tmp/ch14b_bench.mem
  # The host's cores shared by the ranks (the random init of the model is threaded).
  timeout "$BENCH_TIMEOUT" $MPI_APP -x OMP_NUM_THREADS=$(($(nproc) / np)) -np "$np" \
    build/bin/tt_pipeline_bench --device cuda --ops bf16 \
    --schedule "$sched" --micro-batches "$m" --layers "$L" --heads "$H" --channels "$C" \
    --batch "$SWEEP_B" --seq "$T" --steps 3 --warmup 2 "${timelines[@]}" "$@" \
    >/tmp/ch14b_bench.log 2>&1 ||
    { echo "bench np=$np $sched m=$m FAILED (exit $?; 124: over BENCH_TIMEOUT=$BENCH_TIMEOUT s)"
      tail -5 /tmp/ch14b_bench.log; status=1; }
  smi_stop
  [ ${#timelines[@]} = 0 ] || tar czf "$OUT/timelines.tgz" -C /tmp ch14b_timelines 2>/dev/null
  cat /tmp/ch14b_bench.log >>"$OUT/bench.log"
  local smi_peak
  smi_peak=$(smi_peaks /tmp/ch14b_bench.mem "$np" | tr -d '[] ' | tr ',' ' ' |
    awk '{m = 0; for (i = 1; i <= NF; ++i) if ($i > m) m = $i; print m}')
  grep -a '^csv,' /tmp/ch14b_bench.log | tail -1 | sed "s/^csv,//; s/$/,$smi_peak/" \
    >>"$OUT/bubble.csv"
  grep -a '^pipeline \|^memory rank\|^ranks' /tmp/ch14b_bench.log | tail -6
}

part_memory() {
  stamp "activation memory, AFAB vs 1F1B at m=8: tt_pipeline_bench, $SWEEP_SHAPE, B=$SWEEP_B, T=$T"
  for np in $MEMORY_NP; do
    for sched in afab 1f1b; do bench "$np" "$sched" 8; done
  done
  python3 - "$OUT/bubble.csv" <<'PY' | tee "$OUT/memory.txt"
import csv, sys
rows = {(r["p"], r["schedule"], r["m"]): r for r in csv.DictReader(open(sys.argv[1]))}
for p in ("4", "2"):
    a, b = rows.get((p, "afab", "8")), rows.get((p, "1f1b", "8"))
    if a and b and float(a["act_mib_rank0"]) > 0:
        print(f"p={p} m=8: activations on rank 0 (allocator peak above parameters, moments and "
              f"gradients) 1F1B {b['act_mib_rank0']} MiB / AFAB {a['act_mib_rank0']} MiB = "
              f"{float(b['act_mib_rank0']) / float(a['act_mib_rank0']):.3f} (theory p/m = "
              f"{int(p) / 8:.3f}); max over the ranks {b['act_mib_max']} / {a['act_mib_max']} MiB; "
              f"nvidia-smi peak {b['smi_peak_mib']} / {a['smi_peak_mib']} MiB")
PY
}

part_bubble() {
  stamp "bubble sweep: tt_pipeline_bench, $SWEEP_SHAPE, $SWEEP_B row(s) per micro-batch, T=$T"
  if [ -n "${BUBBLE_RUNS:-}" ]; then  # "np:schedule:m[:chunks] ...": only these runs
    local run np sched m v
    for run in $BUBBLE_RUNS; do
      IFS=: read -r np sched m v <<<"$run"
      bench "$np" "$sched" "$m" ${v:+--chunks "$v"}
    done
    return
  fi
  bench 4 1f1b 8
  bench 4 interleaved 8 --chunks 2
  for np in 4 2; do
    for m in 4 8 16; do bench "$np" 1f1b "$m"; done
  done
  bench 2 interleaved 8 --chunks 2
  bench 4 afab 8
  bench 2 afab 8
}

part_torch() {
  stamp "PyTorch torch.distributed.pipelining (bf16 autocast, SDPA), B=$B T=$T M=$M"
  for shape in $SHAPES; do
    read -r L H C <<<"$(shape_args "$shape")"
    for sched in $TORCH_SCHEDULES; do
      for np in 2 4; do
        [ "$gpus" -ge "$np" ] || continue
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
}
# The parts in the order PARTS names them ("all": this order).
[[ " $PARTS " == *" all "* ]] && PARTS="tests app memory bubble torch"
for part in $PARTS; do
  case $part in
    build) ;;
    tests | app | memory | bubble | torch) "part_$part" ;;
    *) echo "unknown part $part"; status=1 ;;
  esac
done
exit $status
