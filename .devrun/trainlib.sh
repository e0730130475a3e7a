#!/usr/bin/env bash
# GPU check of the training library branch (issue 22, items 2 and 6): train_gpt2 through the
# library on CUDA (default bf16, --cuda-graph, fp32/tf32) and the app tests of chapters 09-12.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/configure.log" 2>&1 || { tail -50 "$OUT/configure.log"; exit 1; }
cmake --build build -j16 --target train_gpt2 tt_ch09_tests tt_ch10_tests tt_ch11_tests tt_ch12_tests \
  > "$OUT/build.log" 2>&1 || { tail -80 "$OUT/build.log"; exit 1; }
cd build
ctest -R 'Ch09_Train|Ch10_GraphedTrainGpt2|Ch11_Bf16TrainGpt2|Ch12_TrainGpt2App' -j4 --output-on-failure \
  > "$OUT/ctest.log" 2>&1
echo "ctest rc $?"; tail -30 "$OUT/ctest.log"
cd ..
# The ops line on a GPU (must still name cuBLASLt there) and a short default run.
mkdir -p "$OUT/data"
./build/bin/tt_prepare_data --input chapters/09_gpt2/README.md --input chapters/10_fast_step/README.md --input chapters/12_data_parallel/README.md --format paragraph --out "$OUT/data" --vocab-size 512 > "$OUT/prep.log" 2>&1 || tail -5 "$OUT/prep.log"
./build/bin/train_gpt2 --data "$OUT/data" --out "$OUT/run" --steps 20 --warmup 5 --B 8 --T 64 --eval-every 10 \
  > "$OUT/run.log" 2>&1; echo "train rc $?"; grep -E "^ops:|model:|trained" "$OUT/run.log"
./build/bin/train_gpt2 --data "$OUT/data" --out "$OUT/run" --steps 30 --warmup 5 --B 8 --T 64 --eval-every 10 \
  --resume --override steps --cuda-graph > "$OUT/resume.log" 2>&1; echo "resume rc $?"
grep -E "resumed|step: |trained" "$OUT/resume.log"
