#!/usr/bin/env bash
# GPU run for the ch13b branch (issue 24: vocab-parallel loss, GPT-2 split by heads, sequence
# parallelism, train_gpt2 --tp). On a 2- or 4-GPU H100 machine, from the repository root:
#  1. build chapter 13's tests, train_gpt2 and tt_prepare_data (solution build);
#  2. PART=tests: chapter 13's tests as one process and under mpirun with NCCL, one rank per GPU
#     (the CUDA tests check the split MLP and the split GPT-2 on GPUs against the CPU model);
#  3. PART=throughput: bf16 train_gpt2 at TP = 1, 2 (+SP) and, with 4 GPUs, TP = 4 (+SP) and
#     DP2 x TP2, for the shapes L36 H20 C1280 and L24 H16 C2048 at B=8, T=1024: the step
#     lines (ms, tok/s, MFU) of steps 4-6 and the peak memory per GPU (nvidia-smi, sampled every
#     200 ms: what the process holds, CUDA context and allocator cache included). Each run is
#     killed after step 6 (--kill-after-step), so no multi-GB checkpoint or llm.c file is written.
# PART=all (default) does both; on a 10-minute command limit run PART=tests, then
# PART=throughput on the same warm machine (the build is kept). $OUT gets at most 5 small logs.
set -uo pipefail
OUT=${OUT:-out}
PART=${PART:-all}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
MPIRUN="mpirun --oversubscribe --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE"
status=0
step() { echo "=== $* ==="; }

step build
{ cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build build -j16 --target tt_ch13_tests train_gpt2 tt_prepare_data; } \
  >"$OUT/build.log" 2>&1 || { tail -60 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
tail -2 "$OUT/build.log"
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)

if [ "$PART" = all ] || [ "$PART" = tests ]; then
  step "ch13 tests: one process, then mpirun -np 2 and 4 ($gpus GPUs)"
  {
    build/bin/tt_ch13_tests --gtest_brief=1 2>&1 | tail -25
    for np in 2 4; do
      if [ "$gpus" -ge "$np" ]; then
        echo "--- np $np: the CUDA tests"
        $MPIRUN -np "$np" build/bin/tt_ch13_tests --gtest_filter='*Cuda*' 2>&1 |
          grep -aE "^\[ +(OK|FAILED|SKIPPED) +\]|Failure|Expected|Which is|error" | sort | uniq -c
        echo "--- np $np: every test"
        $MPIRUN -np "$np" build/bin/tt_ch13_tests --gtest_brief=1 2>&1 | tail -15
      fi
    done
  } >"$OUT/tests.log" 2>&1
  grep -aE "PASSED|FAILED|SKIPPED|^---" "$OUT/tests.log" | sort | uniq -c
  grep -aq "FAILED" "$OUT/tests.log" && status=1
fi

if [ "$PART" = all ] || [ "$PART" = throughput ]; then
  step "data (GPT-2 vocabulary, the chapter READMEs)"
  data=/tmp/ch13b_data
  if [ ! -f "$data/manifest.json" ] && [ ! -d "$data" ]; then
    inputs=()
    for f in chapters/*/README.md docs/*.md README.md; do [ -f "$f" ] && inputs+=(--input "$f"); done
    build/bin/tt_prepare_data "${inputs[@]}" --format paragraph --gpt2-vocab --val-fraction 0.2 \
      --out "$data" >"$OUT/prep.log" 2>&1 || { tail -5 "$OUT/prep.log"; status=1; }
    tail -2 "$OUT/prep.log"
  fi

  # One bf16 run: np ranks, --tp tp, extra flags, shape L H C.
  measure() {
    local np=$1 tp=$2 extra=$3 L=$4 H=$5 C=$6
    local run=/tmp/ch13b_run
    rm -rf "$run" "$run.mem"
    local cmd="build/bin/train_gpt2 --data $data --out $run --device cuda --precision bf16
      --layers $L --heads $H --channels $C --T 1024 --B 8 --steps 8 --kill-after-step 6
      --warmup 1 --eval-every 0 --eval-batches 1 --sample-tokens 1 --log-every 1 --tp $tp $extra"
    echo "--- L$L H$H C$C: np=$np tp=$tp $extra"
    nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 200 >"$run.mem" &
    local smi=$!
    local t0=$SECONDS
    if [ "$np" -gt 1 ]; then $MPIRUN -np "$np" $cmd; else $cmd; fi >"$run.log" 2>&1
    kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
    echo "wall $((SECONDS - t0)) s (killed after step 6 on purpose)"
    grep -aE "^ops:|^parallel:|^model:" "$run.log" | cut -c1-220
    grep -aE "^step [4-6]/8 \|" "$run.log"
    grep -aE "rror|what\(\)|out of memory" "$run.log" | head -5
    awk -F', ' '{ if ($2 + 0 > m[$1]) m[$1] = $2 + 0 } END { s = "peak memory per GPU (MiB):";
      for (g = 0; g < 8; g++) if (g in m) s = s " gpu" g "=" m[g]; print s }' "$run.mem"
    rm -rf "$run" "$run.mem" "$run.log"
  }

  step "bf16 throughput, B=8 T=1024"
  {
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1
    for shape in "36 20 1280" "24 16 2048"; do
      set -- $shape
      measure 1 1 "" "$@"
      if [ "$gpus" -ge 2 ]; then
        measure 2 2 "" "$@"
        measure 2 2 "--sequence-parallel" "$@"
      fi
      if [ "$gpus" -ge 4 ]; then
        measure 4 4 "" "$@"
        measure 4 4 "--sequence-parallel" "$@"
        measure 4 2 "" "$@"  # DP2 x TP2 (B=8 per replica)
      fi
    done
  } >"$OUT/throughput.log" 2>&1
  cat "$OUT/throughput.log"
fi
exit $status
