#!/usr/bin/env bash
# Where does a tensor-parallel step's time go? (issue 24: TP 2 measured slower than one GPU.)
# On a 2- or 4-GPU H100 machine: bf16 train_gpt2, GPT-2 774M's shape (L36 H20 C1280), B=8
# T=1024, TP 1 and TP 2, each with --trace of steps 1-4; tools/trace_ops prints per rank the
# device span of the last traced step, the sum of its ops, the top ops and the idle time.
# Needs build/bin/train_gpt2 and tt_prepare_data (built here if missing).
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
MPIRUN="mpirun --oversubscribe --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE"
if [ ! -x build/bin/train_gpt2 ] || [ ! -x build/bin/tt_prepare_data ]; then
  { cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 &&
    cmake --build build -j16 --target train_gpt2 tt_prepare_data; } >"$OUT/tptrace_build.log" 2>&1 ||
    { tail -30 "$OUT/tptrace_build.log"; exit 1; }
fi
data=/tmp/s4_data
if [ ! -d "$data" ]; then
  inputs=()
  for f in chapters/*/README.md docs/*.md README.md; do [ -f "$f" ] && inputs+=(--input "$f"); done
  build/bin/tt_prepare_data "${inputs[@]}" --format paragraph --gpt2-vocab --val-fraction 0.2 \
    --out "$data" >"$OUT/tptrace_prep.log" 2>&1 || { tail -5 "$OUT/tptrace_prep.log"; exit 1; }
fi
for tp in ${TPS:-1 2}; do
  run=/tmp/s4_tp$tp
  rm -rf "$run"
  cmd="build/bin/train_gpt2 --data $data --out $run --device cuda --precision bf16
    --layers 36 --heads 20 --channels 1280 --T 1024 --B 8 --steps 4
    --warmup 1 --eval-every 0 --eval-batches 1 --sample-tokens 1 --log-every 1 --tp $tp
    --trace $OUT/tp$tp.json --trace-steps 3 ${EXTRA:-}"
  echo "=== tp $tp ${EXTRA:-}"
  if [ "$tp" -gt 1 ]; then $MPIRUN -np "$tp" $cmd; else $cmd; fi >"$run.log" 2>&1
  grep -aE "^ops:|^step [2-4]/4 \||rror|trace" "$run.log" | cut -c1-200
  python3 tools/trace_ops "$OUT/tp$tp.json" --top 14 2>&1 | tee "$OUT/tp$tp.ops.txt"
  gzip -f "$OUT/tp$tp.json"
  rm -rf "$run"
done
