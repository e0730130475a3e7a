#!/usr/bin/env bash
# Gradient-accumulation fusion (issue 25): the weight-gradient GEMM accumulates into .grad
# (beta = 1) instead of the autograd engine adding each micro-batch's gradient. On one H100,
# under 8 minutes; writes to $OUT:
#  1. build the tests of chapters $CHAPTERS (default 10 11), train_gpt2, tt_prepare_data;
#  2. their CUDA tests (--gtest_filter='*Cuda*', ch03: its fusion tests): the wgrad GEMM with
#     beta = 1 equals GEMM + add bit for bit or declines (Ch10_FusedLinearCuda.WgradWithBetaOne*),
#     fused == unfused bit for bit (Ch11_*Cuda.GradientAccumulationFusion*);
#  3. compute-sanitizer memcheck (caching allocator off) on those tests;
#  4. train_gpt2 on one GPU, bf16, B = 1 x 8 micro-steps of T = 1024 (--total-batch 8192), at
#     774M's shape (L36 H20 C1280) then, time permitting, 1.3B's (L24 H16 C2048), with
#     TT_GRAD_ACCUM_FUSION=0 (off) and 1 (on): the mean ms/step of steps 3-8 of 9 (the step
#     lines in $OUT/train_*.txt; the full logs stay in /tmp).
set -uo pipefail
. .devrun/lib.sh
status=0
nvidia-smi -L
# CHAPTERS: the test binaries to build and run (run 1 at 9c13468 passed ch03 5/5, ch12 12/12).
CHAPTERS=${CHAPTERS:-10 11}
# shellcheck disable=SC2046
tt_build $(for ch in $CHAPTERS; do echo tt_ch${ch}_tests; done) train_gpt2 tt_prepare_data ||
  exit 1

for ch in $CHAPTERS; do
  filter='*Cuda*'
  [ $ch = 03 ] && filter='*AccumFusion*:*Cuda*'
  stamp "ch$ch tests ($filter)"
  gtests "ch${ch}_cuda.log" 150 "build/bin/tt_ch${ch}_tests" "$filter" || status=1
done
grep -aE "^\[ +(OK|FAILED) +\].*(AccumulationFusion|WgradWithBeta)|^\[ (fusion|beta=1) \]" \
  "$OUT"/ch1[01]_cuda.log

stamp "compute-sanitizer memcheck (fusion tests)"
for ch in 10 11; do
  sanitize memcheck "memcheck_ch$ch.log" "build/bin/tt_ch${ch}_tests" \
    '*GradientAccumulationFusion*:*WgradWithBetaOne*' || status=1
done

data=/tmp/ch14b_data
if [ ! -f $data/manifest.json ]; then
  mapfile -t md < <(find chapters docs -maxdepth 2 -name '*.md' | sort)
  # shellcheck disable=SC2046
  build/bin/tt_prepare_data $(printf -- '--input %s ' README.md "${md[@]}") --gpt2-vocab \
    --format paragraph --val-fraction 0.2 --out $data >"$OUT/prep.log" 2>&1 || exit 1
fi
timing() {  # name L H C fusion: the log stays in /tmp, only the step lines come back
  local name=$1 L=$2 H=$3 C=$4 f=$5 log=/tmp/ppaccum_train_$1_f$5.log
  stamp "train_gpt2 $name, fusion $f"
  rm -rf /dev/shm/ppaccum_run
  TT_GRAD_ACCUM_FUSION=$f timeout 100 build/bin/train_gpt2 --data $data \
    --out /dev/shm/ppaccum_run --device cuda --precision bf16 --layers "$L" --heads "$H" \
    --channels "$C" --T 1024 --B 1 --total-batch 8192 --steps 9 --warmup 1 --eval-every 0 \
    --eval-batches 1 --sample-tokens 1 --log-every 1 >"$log" 2>&1
  echo "exit $?"
  grep -aE "^step [0-9]+/|rror" "$log" | cut -c1-200 >"$OUT/train_${name}_f$f.txt"
  grep -aE "^step [0-9]+/" "$log" | awk -F'|' '{ n = $1; sub(/^step /, "", n);
    split(n, a, "/"); ms = $5; sub(/ ms.*/, "", ms); if (a[1] >= 3 && a[1] <= 8) { s += ms; k++ } }
    END { if (k) printf "mean ms/step (steps 3-8): %.1f over %d steps\n", s / k, k }'
  grep -aE "^step [0-9]+/" "$log" | tail -1 | cut -c1-200
  rm -rf /dev/shm/ppaccum_run
}
[ "${TIMING:-1}" = 1 ] || { stamp "done (status $status)"; exit $status; }
timing 774m 36 20 1280 0
timing 774m 36 20 1280 1
if [ "${BIG:-1}" = 1 ] && [ $((SECONDS - t0)) -lt 330 ]; then
  timing 1.3b 24 16 2048 0
  timing 1.3b 24 16 2048 1
fi
stamp "done (status $status)"
exit $status
