#!/usr/bin/env bash
# GPU check of the thin train_gpt2 (issue 22, item 6): the app tests of chapters 09-12 on CUDA,
# a default (bf16) run, a --cuda-graph resume, and --trace on one GPU and (2 GPUs) under DDP.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/configure.log" 2>&1 || { tail -50 "$OUT/configure.log"; exit 1; }
cmake --build build -j16 --target train_gpt2 tt_prepare_data tt_ch09_tests tt_ch10_tests tt_ch11_tests tt_ch12_tests \
  > "$OUT/build.log" 2>&1 || { tail -80 "$OUT/build.log"; exit 1; }
(cd build && ctest -R 'Ch09_Train|Ch10_GraphedTrainGpt2|Ch11_Bf16TrainGpt2|Ch12_TrainGpt2' -j4 \
  --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc $?"; tail -30 "$OUT/ctest.log")
./build/bin/tt_prepare_data --input chapters/09_gpt2/README.md --input chapters/10_fast_step/README.md --input chapters/12_data_parallel/README.md --format paragraph --out "$OUT/data" --vocab-size 512 > "$OUT/prep.log" 2>&1 || tail -5 "$OUT/prep.log"
A=(--data "$OUT/data" --B 8 --T 64 --eval-every 10 --warmup 2)
./build/bin/train_gpt2 "${A[@]}" --out "$OUT/run" --steps 20 > "$OUT/run.log" 2>&1
echo "train rc $?"; grep -E "^ops:|model:|trained" "$OUT/run.log"
./build/bin/train_gpt2 "${A[@]}" --out "$OUT/run" --steps 30 --resume --override steps --cuda-graph \
  > "$OUT/resume.log" 2>&1; echo "resume rc $?"; grep -E "resumed|step: |trained" "$OUT/resume.log"
./build/bin/train_gpt2 "${A[@]}" --out "$OUT/traced" --steps 5 --trace "$OUT/trace_gpt2.json" \
  --trace-steps 2 > "$OUT/trace.log" 2>&1; echo "trace rc $?"; grep -E "trace of" "$OUT/trace.log"
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  NCCL_NVLS_ENABLE=0 mpirun --allow-run-as-root -np 2 ./build/bin/train_gpt2 "${A[@]}" --out "$OUT/traced2" \
    --steps 5 --trace "$OUT/trace_gpt2_ddp.json" --trace-steps 2 > "$OUT/trace2.log" 2>&1
  echo "ddp trace rc $?"; grep -E "trace of|parallel:" "$OUT/trace2.log"
  tools/trace_overlap "$OUT/trace_gpt2_ddp.json" | head -20
fi
