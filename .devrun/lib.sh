# Shared preamble of the .devrun scripts (source it from the repository root on a GPU machine):
# $OUT created, NCCL's NVLink multicast off, $MPI (one process per GPU), Debian's pcre2 and
# nlohmann-json unpacked from .devdeps (the device image lacks them), stamp "what" (seconds since
# start), and tt_build TARGET... (configure once: solution, sm_90, warnings not errors because
# the device's compiler is newer; the log in $OUT/build.log).
OUT=${OUT:-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
# $MPI pins one CPU thread per rank (tests: 4 ranks on the host's cores); $MPI_APP leaves the
# thread count alone (a 1.3B model's random init on the CPU took 80 s on one thread).
MPI_APP="mpirun --oversubscribe --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE"
MPI="$MPI_APP -x OMP_NUM_THREADS=1"
if [ -d .devdeps ] && [ ! -f /usr/include/pcre2.h ]; then
  for f in .devdeps/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
t0=$SECONDS
stamp() { echo "=== [$((SECONDS - t0)) s] $* ==="; }
tt_build() {
  stamp "build $*"
  { [ -f build/build.ninja ] || cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DTT_STARTER_TESTS=OFF -DTT_WARNINGS_AS_ERRORS=OFF; } >>"$OUT/build.log" 2>&1 &&
    cmake --build build -j16 --target "$@" >>"$OUT/build.log" 2>&1 ||
    { tail -40 "$OUT/build.log"; echo "BUILD FAILED"; return 1; }
  tail -1 "$OUT/build.log"
}
# gtests LOG TIMEOUT BINARY FILTER: runs a gtest binary's FILTER into $OUT/LOG under a timeout,
# prints its summary and the lines before each failure; returns the binary's status.
gtests() {
  local log=$OUT/$1 rc
  timeout "$2" "$3" --gtest_color=no --gtest_filter="$4" >"$log" 2>&1
  rc=$?
  [ $rc = 0 ] || echo "$(basename "$3") '$4' FAILED (rc $rc)"
  grep -aE "^\[  (PASSED|FAILED)|^\[  FAILED  \]|^\[  SKIPPED \]|tests ran" "$log"
  grep -aB8 "Failure$" "$log" | head -60
  return $rc
}
# sanitize TOOL LOG BINARY FILTER: compute-sanitizer --tool TOOL (caching allocator off, 200 s)
# on FILTER of a gtest binary into $OUT/LOG; prints its summary; non-zero on an error.
sanitize() {
  TT_CUDA_CACHING=0 timeout 200 compute-sanitizer --tool "$1" --error-exitcode 3 "$3" \
    --gtest_color=no --gtest_filter="$4" >"$OUT/$2" 2>&1
  local rc=$?
  grep -aE "ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED)" "$OUT/$2"
  return $rc
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
# gen_table FILE: the JSON lines of tt_generate --json in FILE as a table (batch, GEMV, ms/step,
# tokens/s, effective GB/s and its share of the copy bandwidth, time to first token).
gen_table() {
  grep -a "^{" "$1" | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print("{dtype} B={batch:<3} P={prompt_len:<5} {g:4} {decode_ms_per_step:7.3f} ms/step "
          "{tokens_per_s:9.1f} tok/s {effective_gbps:7.1f} GB/s ({pct:.1f}% of copy "
          "{copy_gbps:.0f}) TTFT {ttft_ms:.2f} ms".format(
                      g=r.get("decode", "on" if r["gemv"] else "off"),
                      pct=100 * r["effective_gbps"] / max(r["copy_gbps"], 1e-9), **r))'
}
# mpi_tests EXE NP FILTER LOG: a gtest binary of build/bin under $MPI -np NP into $OUT/LOG;
# prints the count of each outcome and the failures; returns the job's status.
mpi_tests() {
  local exe=$1 np=$2 filter=$3 log=$4 rc
  stamp "$exe -np $np $filter"
  timeout 240 $MPI -np "$np" "build/bin/$exe" --gtest_color=no --gtest_filter="$filter" \
    >"$OUT/$log" 2>&1
  rc=$?
  [ $rc = 0 ] || echo "$exe np $np FAILED (exit $rc)"
  grep -aE "^\[ +(OK|FAILED|SKIPPED) +\]" "$OUT/$log" | awk '{print $1, $2, $3}' | sort | uniq -c
  grep -aE "^\[  FAILED  \]|Failure$" "$OUT/$log" | sort -u | head -10
  return $rc
}
# prep_data DIR: the chapters' READMEs (and docs/, README.md) as a GPT-2-tokenized corpus in DIR
# (tt_prepare_data, 20% validation), once; the log in $OUT/prep.log.
prep_data() {
  [ -d "$1" ] && return 0
  local inputs=() f
  for f in chapters/*/README.md docs/*.md README.md; do [ -f "$f" ] && inputs+=(--input "$f"); done
  build/bin/tt_prepare_data "${inputs[@]}" --format paragraph --gpt2-vocab --val-fraction 0.2 \
    --out "$1" >"$OUT/prep.log" 2>&1 || { tail -5 "$OUT/prep.log"; return 1; }
}
# train_run NAME NP SHAPE [VAR=VALUE...] -- [FLAGS...]: bf16 train_gpt2 on NP GPUs (B=8, T=1024,
# steps 3-5 of 6, the model SHAPE's --layers/--heads/--channels) on the corpus $data, the VARs
# set and passed to every rank; prints the steps, nvidia-smi's peak MiB per GPU and any error;
# returns 1 when step 5 was not logged.
train_run() {
  local name=$1 np=$2 shape=$3 r=/tmp/train_run envs=() xs=() threads=$(($(nproc) / $2))
  shift 3
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); xs+=(-x "${1%%=*}"); shift; done
  [ $# -gt 0 ] && shift
  rm -rf $r
  stamp "$name"
  smi_start "$OUT/smi.csv"
  env "${envs[@]}" OMP_NUM_THREADS=$threads $MPI_APP -np "$np" -x OMP_NUM_THREADS "${xs[@]}" \
    build/bin/train_gpt2 --data "$data" --out $r --device cuda --precision bf16 $shape --T 1024 \
    --B 8 --steps 6 --kill-after-step 5 --warmup 1 --eval-every 0 --eval-batches 1 \
    --sample-tokens 1 --log-every 1 "$@" >$r.log 2>&1
  local rc=$?
  smi_stop
  grep -aE "^step [3-5]/6 \|" $r.log | cut -c1-110
  echo "peak MiB per GPU: $(smi_peaks "$OUT/smi.csv" "$np")"
  rm -f "$OUT/smi.csv"
  grep -aE "rror|what\(\)" $r.log | head -3 | cut -c1-300
  # --kill-after-step 5 ends the job with the kill's status: a run that logged step 5 is a success.
  grep -aqE "^step 5/6 \|" $r.log || { echo "train_run $name: no step 5 (exit $rc)"; return 1; }
}
# begin_run NAME [tests]: a device script's preamble after sourcing this file: status=0, the
# binaries of .devbin/NAME.tar.xz (carried), with `tests` the /work/main link by which the tests
# find reference_data/, then logs_begin.
begin_run() {
  status=0
  carried "$1"
  if [ "${2:-}" = tests ]; then mkdir -p /work && ln -sfn "$PWD" /work/main; fi
  logs_begin
}
# carried NAME: unpacks the binaries carried in .devbin/NAME.tar.xz (built for sm_90; exits when
# it is missing), puts the carried Google Benchmark library (.devbin/lib) on the library path and
# sets $gpus to the machine's GPU count.
carried() {
  tar xJf ".devbin/$1.tar.xz" || exit 1
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$PWD/.devbin/lib
  gpus=$(nvidia-smi -L | wc -l)
}
# tp_cuda_tests: chapter 12's CUDA tests at np 2 and chapter 13's at np 4 (np 2 on a 2-GPU
# machine), printing the activation bytes and the bf16 curves' worst differences; status=1 on a
# failure.
tp_cuda_tests() {
  mpi_tests tt_ch12_tests 2 '*Cuda*' ch12_np2.log || status=1
  local np=$((gpus >= 4 ? 4 : 2))
  mpi_tests tt_ch13_tests $np '*Cuda*' ch13_np$np.log || status=1
  grep -a "activations\|worst" "$OUT/ch13_np$np.log" | sort -u | head -12
}
# layouts_vs_one_gpu: a small GPT-2 (L4 C256, T 256, B 8, 12 steps) on the corpus $data under
# --pp 2, --cp 2, --tp 2 and (4 GPUs) --pp 2 --cp 2, --tp 2 --cp 2 against one GPU, float32 and
# bf16 (tools/compare_runs, per step: 2e-4 and 2e-2; GPU reduction orders differ by layout).
layouts_vs_one_gpu() {
  local prec tol r
  small() {  # NAME NP PRECISION [FLAGS...]: into /tmp/layout_NAME
    local name=$1 np=$2 p=$3 out=/tmp/layout_$1
    shift 3
    rm -rf $out
    $MPI_APP -np "$np" build/bin/train_gpt2 --data "$data" --out $out --device cuda \
      --precision "$p" --layers 4 --heads 4 --channels 256 --T 256 --B 8 --steps 12 --warmup 2 \
      --eval-every 0 --eval-batches 1 --sample-tokens 1 --log-every 1 --seed 7 "$@" \
      >$out.log 2>&1 || { echo "$name FAILED"; tail -5 $out.log | cut -c1-300; status=1; }
  }
  stamp "pp/cp/tp strategies against one GPU"
  for prec in fp32 bf16; do
    small one_$prec 1 $prec
    small pp2_$prec 2 $prec --pp 2 --micro-batches 2
    small cp2_$prec 2 $prec --cp 2
    small tp2_$prec 2 $prec --tp 2
    if [ "$gpus" -ge 4 ]; then
      small pp2cp2_$prec 4 $prec --pp 2 --cp 2 --micro-batches 2
      small tp2cp2_$prec 4 $prec --tp 2 --cp 2
    fi
    tol=2e-4
    [ $prec = bf16 ] && tol=2e-2
    for r in pp2 cp2 tp2 pp2cp2 tp2cp2; do
      [ -f /tmp/layout_${r}_$prec/train.csv ] || continue
      echo "--- $r $prec vs one GPU"
      python3 tools/compare_runs /tmp/layout_one_$prec/train.csv \
        /tmp/layout_${r}_$prec/train.csv --tol $tol --window 1 2>&1 | head -4 || status=1
    done
  done
  grep -ah "^step 12/12 |" /tmp/layout_*.log | cut -c1-100 | head -12
}
# ring_bench NP: tt_ring_attention_bench in bf16 over NP GPUs (B 1, causal, T 16k/32k/64k, hs 64
# and 128) with 4 heads (the chapter's first table) and 32 (ring-flash-attention's benchmark:
# Llama-3-8B's attention), JSON lines into $OUT/ring.jsonl, then the per-op profile of one
# zigzag ring at 16k, hs 64, 32 heads (its first table).
ring_bench() {
  local h
  for h in 4 32; do
    stamp "ring bench bf16 cp $1, $h heads"
    timeout 150 $MPI -np "$1" build/bin/tt_ring_attention_bench --device cuda --dtype bf16 \
      --seq 16384,32768,65536 --hs 64,128 --heads $h 2>&1 | grep -a "^{" | tee -a "$OUT/ring.jsonl"
  done
  stamp "ring profile 16k hs 64, 32 heads"
  timeout 60 $MPI -np "$1" build/bin/tt_ring_attention_bench --device cuda --dtype bf16 \
    --seq 16384 --hs 64 --heads 32 --profile 2>&1 | grep -aB3 -A20 "^Op  " | head -26
}
# ----- chapter 15's decode measurements (session 14) --------------------------------------------
# decode_setup [NEW]: the carried Google Benchmark library on the library path, the binaries of
# .devbin/s14base.tar.xz (tt_generate, bench_decode at 6f2769d) in base/, those of
# .devbin/NEW.tar.xz over build/; prints the GPU.
decode_setup() {
  mkdir -p base && tar xJf .devbin/s14base.tar.xz -C base
  if [ -n "${1:-}" ]; then
    carried "$1"
  else
    export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$PWD/.devbin/lib
  fi
  nvidia-smi -L
}
# ch15_cuda_checks FILTER: chapter 15's single-GPU CUDA tests, then compute-sanitizer memcheck,
# racecheck and synccheck on FILTER; status=1 on a failure.
ch15_cuda_checks() {
  gtests ch15.log 300 build/bin/tt_ch15_tests \
    'Ch15_Bf16Cuda.*:Ch15_ModelCuda.*:Ch15_OpsCuda.*:Ch15_GqaCuda.*' | tail -12 || status=1
  local tool
  for tool in memcheck racecheck synccheck; do
    sanitize $tool $tool.log build/bin/tt_ch15_tests "$1" || status=1
  done
}
# decode_begin NEW FILTER: decode_setup NEW, then ch15_cuda_checks FILTER (status=0 before).
decode_begin() {
  status=0
  decode_setup "$1"
  ch15_cuda_checks "$2"
}
# decode_bench LABEL BINARY FLAGS...: bench_decode with FLAGS into $OUT/bench_LABEL.log; prints
# each row's name (LABEL in place of manual_time), time and GB/s; status=1 on a failure.
decode_bench() {
  local label=$1 bin=$2
  shift 2
  timeout 120 "$bin" --benchmark_min_time=0.2 "$@" >"$OUT/bench_$label.log" 2>&1 ||
    { status=1; tail -3 "$OUT/bench_$label.log"; }
  grep -a "decode_\|copy/" "$OUT/bench_$label.log" | sed "s/manual_time/$label/" |
    awk '{print $1, $2, $NF}'
}
# step_trace LABEL [ROWS]: the last trace (bench_decode under TT_DECODE_STEP_TRACE) before each
# ROWS/one row (default decode_step) of $OUT/bench_LABEL.log.
step_trace() {
  awk -v rows="${2:-decode_step}" '/decode step trace/{t=""; on=1}
       on && !/manual_time/{t=t $0 "\n"}
       $1 ~ "^" rows "/one/[0-9]+/manual_time"{print $1; printf "%s", t; on=0}' "$OUT/bench_$1.log"
}
# decode_gen LABEL BINARY [PROMPT_LENS [FLAGS...]]: tt_generate, TinyLlama-1.1B's shape (random
# weights), bf16, batch 1, CUDA graph, 256 new tokens after each prompt length (default 128), the
# second of two runs, with FLAGS (e.g. --gemv step,on), into $OUT/gen_LABEL.log; prints
# gen_table; status=1 on a failure.
decode_gen() {
  local label=$1 bin=$2 lens=${3:-128}
  shift 2
  [ $# -gt 0 ] && shift
  timeout 200 "$bin" --random tinyllama-1.1b --device cuda --json --runs 2 --dtype bf16 \
    --prompt-len "$lens" --max-new 256 --modes graph --batch 1 --copy-bandwidth "$@" \
    >"$OUT/gen_$label.log" 2>&1 || { status=1; tail -5 "$OUT/gen_$label.log"; }
  echo "$label:"
  gen_table "$OUT/gen_$label.log"
}
# attn_bench LABEL FILTER: bench_attention's rows matching FILTER into $OUT/bench_LABEL.json;
# prints LABEL, each row's name and time (ms); status=1 on a failure.
attn_bench() {
  build/bin/bench_attention --benchmark_filter="$2" --benchmark_format=json \
    >"$OUT/bench_$1.json" 2>"$OUT/bench_$1.err" || status=1
  python3 - "$OUT/bench_$1.json" "$1" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
for b in json.loads(text[text.index("{"):])["benchmarks"]:
    print(f"{sys.argv[2]:4s} {b['name'].split('/iter')[0]:56s} {b['real_time']:8.3f}")
PY
}
# logs_begin / logs_end: what the calls between them write under $OUT goes to $OUT/logs, which
# comes back as one archive, $OUT/logs.tar.gz (a device call returns a limited number of files).
logs_begin() {
  OUT_SAVED=$OUT
  OUT=$OUT/logs
  mkdir -p "$OUT"
}
logs_end() {
  OUT=$OUT_SAVED
  tar czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
}
# f32_check BUILD: tools/scaling_gpu's float32 check (DDP on 2 GPUs, B=8 each, against one GPU
# with B=16, 20 steps) with the train_gpt2 of BUILD/bin on the corpus $data, into
# $OUT/check_BUILD.txt; prints the verdict and both runs' logged losses; status=1 on a failure.
f32_check() {
  stamp "float32 check, binary of $1"
  timeout 200 python3 tools/scaling_gpu --build "$1" --data "$data" --gpus 2 --strategies ddp \
    --check-only --check-steps 20 --out "/tmp/check_$1" 2>&1 | tee "$OUT/check_$1.txt" |
    grep -a "check" || status=1
  local r
  for r in check_one check_ddp; do
    cut -d, -f1,2 "/tmp/check_$1/$r/train.csv" | tr '\n' ' ' | cut -c1-400
    echo
  done
}
# step_median CSV: the median step time (ms) of steps 11.. of a train_gpt2 train.csv.
step_median() {
  python3 -c 'import csv, statistics, sys
r = [float(x["ms"]) for x in csv.DictReader(open(sys.argv[1])) if x.get("ms")]
print("%.2f ms (median of %d steps)" % (statistics.median(r[10:]), len(r[10:])))' "$1"
}
# GPT2_124M: train_gpt2's flags for bf16 GPT-2 124M (B 8, T 1024, seed 1337) on the corpus $data.
gpt2_124m_flags() {
  GPT2_124M=(--data "$data" --device cuda --precision bf16 --layers 12 --heads 12 --channels 768
             --B 8 --T 1024 --seed 1337 --sample-tokens 1)
}
# gpt2_profile DIR: chapter 10's per-op profile of step 20 of GPT-2 124M by DIR/bin/train_gpt2
# into $OUT/prof_DIR.log; prints the profile's header and the rows of the ops named in $PROF_OPS
# (an extended regex); returns 1 when the run failed.
gpt2_profile() {
  gpt2_124m_flags
  stamp "profile, $1"
  "$1/bin/train_gpt2" "${GPT2_124M[@]}" --steps 24 --warmup 5 --eval-every 0 --eval-batches 1 \
    --profile-step 20 --out "/tmp/prof_$1" >"$OUT/prof_$1.log" 2>&1 ||
    { tail -3 "$OUT/prof_$1.log"; return 1; }
  grep -aE "^Per-op|^(${PROF_OPS:-residual_layernorm|cast })" "$OUT/prof_$1.log" | cut -c1-130
}
# gpt2_steps DIR N: GPT-2 124M by DIR/bin/train_gpt2 for N steps; prints the median step time.
gpt2_steps() {
  gpt2_124m_flags
  stamp "$2 steps, $1"
  "$1/bin/train_gpt2" "${GPT2_124M[@]}" --steps "$2" --eval-every 0 --eval-batches 1 \
    --out "/tmp/steps_$1" >/dev/null 2>&1 || return 1
  step_median "/tmp/steps_$1/train.csv"
}
# vs_torch: bench_gpt2_step's cuda_bf16/L12 row, then PyTorch's eager and torch.compile bf16
# steps (.devbin/anchors/gpt2_torch_bench.py), on this GPU; returns 1 when either failed.
vs_torch() {
  local rc=0
  stamp "bench_gpt2_step"
  build/bin/bench_gpt2_step --benchmark_filter='cuda_bf16/L12' 2>&1 | grep -aE "cuda_bf16/" |
    cut -c1-150 || rc=1
  stamp "PyTorch eager and torch.compile, bf16"
  timeout 200 python3 .devbin/anchors/gpt2_torch_bench.py --B 8 --T 1024 \
    --modes bf16_sdpa,bf16_compile 2>/dev/null | grep -a '"system"' | cut -c1-220 || rc=1
  return $rc
}
# ddp_x1_rounds N: N rounds of tools/scaling_gpu --gpus 1 --strategies ddp in bf16 (one plain
# process, then DDP under mpirun -np 1; 50 steps, medians of steps 11-50) on the corpus $data;
# prints each round's rows and keeps their tables in $OUT/scaling_ROUND.{txt,csv}.
ddp_x1_rounds() {
  local round rc=0
  for round in $(seq "$1"); do
    stamp "scaling_gpu bf16 x1, round $round"
    timeout 200 python3 tools/scaling_gpu --build build --data "$data" --gpus 1 --strategies ddp \
      --precision bf16 --steps 50 --check-steps 0 --out "/tmp/scaling_$round" \
      --csv "$OUT/scaling_$round.csv" 2>&1 | tee "$OUT/scaling_$round.txt" | grep -a "^| ours" ||
      rc=1
  done
  return $rc
}
# cpu_vs_torch N DIR...: N rounds of chapter 10's CPU mini step (L6 H6 C384 V8192, B 8, T 256;
# bench_gpt2_step's cpu and cpu_fast rows) by each DIR/bin/bench_gpt2_step in turn, then PyTorch's
# (.devbin/anchors/gpt2_torch_bench.py, naive attention and SDPA), all pinned to CPUs 0 and 1
# with 2 threads (CPUS=8,9 pins to others); the rows in $OUT/cpu_ROUND.txt; returns 1 when any
# run failed.
cpu_vs_torch() {
  local rounds=$1 round dir rc=0
  shift
  for round in $(seq "$rounds"); do
    for dir in "$@"; do
      stamp "CPU mini step, $dir, round $round"
      OMP_NUM_THREADS=2 taskset -c "${CPUS:-0,1}" "$dir/bin/bench_gpt2_step" \
        --benchmark_filter='gpt2_train_step/cpu(_fast)?/L6' 2>&1 | grep -a "^gpt2_train_step" |
        sed "s|^|$dir |" | tee -a "$OUT/cpu_$round.txt" | cut -c1-120 || rc=1
    done
    stamp "CPU mini step, PyTorch, round $round"
    OMP_NUM_THREADS=2 taskset -c "${CPUS:-0,1}" timeout 200 python3 .devbin/anchors/gpt2_torch_bench.py \
      --device cpu --threads 2 --B 8 --T 256 --steps 6 --warmup 2 \
      --config L=6,NH=6,C=384,V=8192,Vp=8192,maxT=256 --modes fp32_naive,tf32_sdpa 2>&1 |
      grep -a '"system"' | tee -a "$OUT/cpu_$round.txt" | cut -c1-160 || rc=1
  done
  return $rc
}
# ln_sanitize_and_step: compute-sanitizer memcheck, racecheck and synccheck on the residual +
# LayerNorm tests of chapters 10 and 11, then the bf16 GPT-2 124M step of bench_gpt2_step;
# status=1 on a failure.
ln_sanitize_and_step() {
  local tool ln='Ch10_8_ResidualLayerNormCuda.*:Ch11_ResidualLayerNormBf16Cuda.*'
  for tool in memcheck racecheck synccheck; do
    sanitize $tool ln_${tool}_10.log build/bin/tt_ch10_tests "$ln" || status=1
    sanitize $tool ln_${tool}_11.log build/bin/tt_ch11_tests "$ln" || status=1
  done
  stamp "bf16 GPT-2 124M step"
  build/bin/bench_gpt2_step --benchmark_filter='cuda_bf16/L12' 2>&1 | grep -aE "cuda_bf16/" |
    cut -c1-150 || status=1
}
# cpu_step_profile DIR: the per-op profile of DIR/bin/bench_gpt2_step's CPU mini step (cpu_fast,
# 2 threads pinned to CPUs 0 and 1) into $OUT/prof_cpu_fast.log; prints the table by op and the
# timed row; returns the benchmark's status.
cpu_step_profile() {
  local rc
  stamp "per-op profile, $1, cpu_fast"
  OMP_NUM_THREADS=2 taskset -c 0,1 "$1/bin/bench_gpt2_step" --profile \
    --benchmark_filter='gpt2_train_step/cpu_fast/L6' >"$OUT/prof_cpu_fast.log" 2>&1
  rc=$?
  grep -aA24 "^Per-op" "$OUT/prof_cpu_fast.log" | cut -c1-130 | head -26
  grep -a "^gpt2_train_step" "$OUT/prof_cpu_fast.log" | cut -c1-130
  return $rc
}
# gemm_rates DIR THREADS FILTER TAG: DIR/bin/bench_cpu_matmul's FILTER rows (medians of 3) with
# THREADS threads pinned to CPUs 0..THREADS-1, into $OUT/cpu_matmul_TAG.txt; GFLOP/s printed.
gemm_rates() {
  local dir=$1 n=$2 filter=$3 tag=$4 cpus
  cpus=$(seq -s, 0 $((n - 1)))
  stamp "bench_cpu_matmul of $dir, $n threads on CPUs $cpus"
  OMP_NUM_THREADS=$n taskset -c "$cpus" "$dir/bin/bench_cpu_matmul" --benchmark_filter="$filter" \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>&1 |
    tee "$OUT/cpu_matmul_$tag.txt" | grep -aE "_median" |
    awk '{for(i=1;i<=NF;i++) if ($i ~ /GFLOP=/) g=$i; print $1, g}'
}
# torch_mm_rates THREADS: PyTorch's torch.mm (oneMKL) on 2048^3 and the GPT-2 shapes of
# bench_cpu_matmul (the fc layer in its three layouts too), pinned like gemm_rates, into
# $OUT/torch_mm_THREADS.txt; GFLOP/s printed.
torch_mm_rates() {
  local n=$1 cpus
  cpus=$(seq -s, 0 $((n - 1)))
  stamp "torch.mm, $n threads on CPUs $cpus"
  OMP_NUM_THREADS=$n taskset -c "$cpus" python3 - "$n" <<'PY' 2>&1 | tee "$OUT/torch_mm_$n.txt"
import sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
# (M, K, N, layout): nn = a @ b; nt = a @ b^T with b [N, K] (a linear's forward); tn = a^T @ b
# with a [K, M] (its weight gradient): bench_cpu_matmul's fc_fwd_nt, fc_dw_tn (fc_dx_nn is
# 2048x1536x384 nn).
for (M, K, N, lay) in [(2048, 2048, 2048, "nn"), (2048, 384, 1152, "nn"), (2048, 384, 384, "nn"),
                       (2048, 384, 1536, "nn"), (2048, 1536, 384, "nn"), (2048, 768, 2304, "nn"),
                       (2048, 3072, 768, "nn"), (2048, 384, 1536, "nt"), (1536, 2048, 384, "tn")]:
    a = torch.randn(K, M).t() if lay == "tn" else torch.randn(M, K)
    b = torch.randn(N, K).t() if lay == "nt" else torch.randn(K, N)
    for _ in range(3): a @ b
    best = 1e9
    for r in range(3):
        n = 5; t = time.perf_counter()
        for _ in range(n): a @ b
        best = min(best, (time.perf_counter() - t) / n)
    print(f"torch.mm {M}x{K}x{N} {lay}: {best*1e3:.2f} ms {2*M*N*K/best/1e9:.1f} GFLOP/s")
PY
}
