#!/usr/bin/env bash
# Issue 23, goal 3: where does DDP's overhead at world size 1 go? GPT-2 124M, B=8, T=1024, on
# one GPU: a plain process against `mpirun -np 1` (DDP), TF32 and bf16, alternated twice, the
# median step time of each run's train.csv; then a Chrome trace of two steps of each.
#   .devrun/perf_ddp.sh [build|run]      (no argument: both)
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 OMP_NUM_THREADS=4
if [ -d .devdeps ] && [ ! -f /usr/include/pcre2.h ]; then
  for f in .devdeps/*.deb; do dpkg -x "$f" /; done; ldconfig
fi
part=${1:-all}
if [ "$part" != run ]; then
  { cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 &&
    cmake --build build -j "$(nproc)" --target train_gpt2 tt_prepare_data; } > "$OUT/build.log" 2>&1 ||
    { tail -60 "$OUT/build.log"; exit 1; }
  echo "build ok"
fi
[ "$part" = build ] && exit 0
D=/tmp/perf_ddp
rm -rf $D; mkdir -p $D
./build/bin/tt_prepare_data --gpt2-vocab --input chapters/09_gpt2/README.md \
  --input chapters/10_fast_step/README.md --input chapters/12_data_parallel/README.md \
  --input chapters/11_mixed_precision/README.md --format paragraph --out $D/data > $D/prep.log 2>&1 ||
  { tail -5 $D/prep.log; exit 1; }
MPI=(mpirun --allow-run-as-root --bind-to none -np 1)
M=(--data $D/data --device cuda --layers 12 --heads 12 --channels 768 --block-size 1024 --B 8
   --T 1024 --warmup 5 --eval-every 0 --eval-batches 1 --sample-tokens 4 --log-every 10)
median() {  # median step ms of train.csv after the first 10 steps
  python3 - "$1" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
key = "ms"
v = [float(r[key]) for r in rows[10:] if r.get(key)]
print(f"{statistics.median(v):.2f}" if v else "?")
EOF
}
for prec in tf32 bf16; do
  for rep in 1 2; do
    for s in single ddp; do
      pre=(); [ $s = ddp ] && pre=("${MPI[@]}")
      "${pre[@]}" ./build/bin/train_gpt2 "${M[@]}" --precision $prec --steps 30 --out $D/$s-$prec-$rep \
        > $D/$s-$prec-$rep.log 2>&1 || { echo "$s $prec failed"; tail -20 $D/$s-$prec-$rep.log; }
      echo "$prec $s rep$rep: $(median $D/$s-$prec-$rep/train.csv) ms/step"
    done
  done
done | tee "$OUT/steps.txt"
head -3 $D/single-tf32-1/train.csv
for s in single ddp; do
  pre=(); [ $s = ddp ] && pre=("${MPI[@]}")
  "${pre[@]}" ./build/bin/train_gpt2 "${M[@]}" --precision bf16 --steps 8 --out $D/trace-$s \
    --trace $D/trace_$s.json --trace-steps 2 > $D/trace-$s.log 2>&1 || tail -20 $D/trace-$s.log
  "${pre[@]}" ./build/bin/train_gpt2 "${M[@]}" --precision bf16 --steps 8 --out $D/prof-$s \
    --profile-step 6 > $D/prof-$s.log 2>&1 || tail -20 $D/prof-$s.log
done
tar czf "$OUT/perf_ddp.tgz" -C $D --exclude data --exclude '*.ttckpt' --exclude '*.bin' .
ls -la "$OUT"
