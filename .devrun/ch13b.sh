#!/usr/bin/env bash
# GPU run for the ch13b branch (issue 24: vocab-parallel loss, GPT-2 split by heads, sequence
# parallelism, train_gpt2 --tp). On a 2- or 4-GPU H100 machine, from the repository root:
#  1. build chapter 13's tests and train_gpt2 (solution build);
#  2. chapter 13's tests as one process and under mpirun with NCCL, one rank per GPU (the CUDA
#     tests check the split MLP and the split GPT-2 on GPUs against the CPU model);
#  3. bf16 train_gpt2 throughput at TP = 1, 2, 4 (and SP, DP2 x TP2 where 4 GPUs) for the
#     issue's shapes L36 H20 C1280 and L24 H16 C2048, B=8, T=1024, a few steps: tok/s and memory
#     per GPU. Run directories go to /tmp; $OUT gets at most 6 small logs.
set -uo pipefail
OUT=${OUT:-out}
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
step "ch13 tests: one process, then mpirun -np 2 and 4 ($gpus GPUs)"
{
  build/bin/tt_ch13_tests --gtest_brief=1 2>&1 | tail -25
  for np in 2 4; do
    if [ "$gpus" -ge "$np" ]; then
      echo "--- np $np: CUDA tests, verbose"
      $MPIRUN -np "$np" build/bin/tt_ch13_tests --gtest_filter='*Cuda*' 2>&1 |
        grep -E "^\[ +(OK|FAILED|SKIPPED) \]|Failure|error|Expected|Which is" | sort | uniq -c
      echo "--- np $np: every test"
      $MPIRUN -np "$np" build/bin/tt_ch13_tests --gtest_brief=1 2>&1 | tail -15
    fi
  done
} >"$OUT/tests.log" 2>&1
grep -E "PASSED|FAILED|SKIPPED|^---" "$OUT/tests.log" | sort | uniq -c
grep -q "FAILED" "$OUT/tests.log" && status=1

step "data (GPT-2 vocabulary, the chapter READMEs)"
data=/tmp/ch13b_data
rm -rf "$data"
inputs=()
for f in chapters/*/README.md docs/*.md README.md; do [ -f "$f" ] && inputs+=(--input "$f"); done
build/bin/tt_prepare_data "${inputs[@]}" --format paragraph --gpt2-vocab --val-fraction 0.2 \
  --out "$data" >"$OUT/prep.log" 2>&1 || { tail -5 "$OUT/prep.log"; status=1; }
tail -2 "$OUT/prep.log"

# One bf16 run of `steps` steps: prints the shape, the layout, the last step line (tok/s, MFU)
# and the memory per rank.
measure() {  # np tp extra L H C
  local np=$1 tp=$2 extra=$3 L=$4 H=$5 C=$6
  local run=/tmp/ch13b_run_${L}_${np}_${tp}${extra// /}
  rm -rf "$run"
  local cmd="build/bin/train_gpt2 --data $data --out $run --device cuda --precision bf16 \
    --layers $L --heads $H --channels $C --T 1024 --B 8 --steps 6 --warmup 1 --eval-every 0 \
    --eval-batches 1 --sample-tokens 1 --log-every 1 --tp $tp $extra"
  echo "--- L$L H$H C$C: np=$np tp=$tp $extra"
  if [ "$np" -gt 1 ]; then $MPIRUN -np "$np" $cmd; else $cmd; fi >"$run.log" 2>&1
  echo "rc $?"
  grep -E "^ops:|^parallel:|^model:" "$run.log" | cut -c1-200
  grep -E "step +[0-9]+/6 \|" "$run.log" | tail -3
  grep -E "memory per rank|Error|error:|what\(\)" "$run.log" | head -5
  rm -rf "$run"
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
exit $status
