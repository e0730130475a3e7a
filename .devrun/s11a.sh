#!/usr/bin/env bash
# Session 11, first call (issue 24: the fused vocab-parallel head), 4 H100s, carried binaries
# (.devbin/s11a.tar.xz: tt_ch10/11/13_tests, train_gpt2, tt_prepare_data built for sm_90):
#  1. the classifier's CUDA tests (ch10, ch11: the split-vocabulary row kernels) and memcheck on
#     the split ones;
#  2. chapter 13's CUDA tests under mpirun at np 2 and 4 (the fused head through NCCL);
#  3. bf16 train_gpt2 --tp, L36 H20 C1280, B=8 T=1024: TP 1, 2, 2+SP, 4, 4+SP, DP2 x TP2, steps
#     4-6 and the peak memory per GPU; then --trace of TP 2 and 4 (tools/trace_ops).
# PARTS selects (default "tests throughput trace").
set -uo pipefail
. .devrun/lib.sh
PARTS=${PARTS:-tests throughput trace}
status=0
tar xJf .devbin/s11a.tar.xz || exit 1
gpus=$(nvidia-smi -L | wc -l)
has() { [[ " $PARTS " == *" $1 "* ]]; }

if has tests; then
  stamp "classifier CUDA tests"
  gtests ch10.log 120 build/bin/tt_ch10_tests '*FusedClassifier*Cuda*' || status=1
  gtests ch11.log 120 build/bin/tt_ch11_tests '*ClassifierBf16Cuda*' || status=1
  sanitize memcheck memcheck10.log build/bin/tt_ch10_tests '*VocabPartCuda*' || status=1
  sanitize memcheck memcheck11.log build/bin/tt_ch11_tests '*ClassifierBf16Cuda.Split*' || status=1
  sanitize racecheck racecheck10.log build/bin/tt_ch10_tests '*VocabPartCuda*' || status=1
  for np in 2 4; do
    stamp "ch13 CUDA tests, np $np"
    $MPI -np $np build/bin/tt_ch13_tests --gtest_color=no --gtest_filter='*Cuda*' >"$OUT/ch13_np$np.log" 2>&1 || status=1
    grep -aE "^\[ +(OK|FAILED|SKIPPED) +\]|Failure" "$OUT/ch13_np$np.log" | sort | uniq -c
  done
fi

data=/tmp/s11_data
prep() {
  [ -d "$data" ] && return
  inputs=()
  for f in chapters/*/README.md docs/*.md README.md; do [ -f "$f" ] && inputs+=(--input "$f"); done
  build/bin/tt_prepare_data "${inputs[@]}" --format paragraph --gpt2-vocab --val-fraction 0.2 \
    --out "$data" >"$OUT/prep.log" 2>&1 || { tail -5 "$OUT/prep.log"; status=1; }
}
# run NP TP "EXTRA": bf16 L36 H20 C1280 B=8 T=1024, killed after step 6.
run() {
  local np=$1 tp=$2 extra=$3 r=/tmp/s11_run
  rm -rf $r
  local cmd="build/bin/train_gpt2 --data $data --out $r --device cuda --precision bf16
    --layers 36 --heads 20 --channels 1280 --T 1024 --B 8 --steps 8 --kill-after-step 6
    --warmup 1 --eval-every 0 --eval-batches 1 --sample-tokens 1 --log-every 1 --tp $tp $extra"
  echo "--- np=$np tp=$tp $extra"
  smi_start $r.mem
  if [ "$np" -gt 1 ]; then $MPI_APP -np "$np" $cmd; else $cmd; fi >$r.log 2>&1
  smi_stop
  grep -aE "^ops:|^step [4-6]/8 \|" $r.log | cut -c1-200
  grep -aE "rror|what\(\)|out of memory" $r.log | head -5
  echo "peak MiB per GPU: $(smi_peaks $r.mem "$np")"
}
if has throughput; then
  stamp "throughput"
  prep
  {
    run 1 1 ""
    run 2 2 ""
    run 2 2 "--sequence-parallel"
    if [ "$gpus" -ge 4 ]; then
      run 4 4 ""
      run 4 4 "--sequence-parallel"
      run 4 2 ""
    fi
  } 2>&1 | tee "$OUT/throughput.log"
fi
if has trace; then
  stamp "trace"
  prep
  for tp in ${TRACE_TPS:-2 4}; do
    r=/tmp/s11_trace
    rm -rf $r
    cmd="build/bin/train_gpt2 --data $data --out $r --device cuda --precision bf16
      --layers 36 --heads 20 --channels 1280 --T 1024 --B 8 --steps 4 --kill-after-step 4
      --warmup 1 --eval-every 0 --eval-batches 1 --sample-tokens 1 --log-every 1 --tp $tp
      --trace $OUT/tp$tp.json --trace-steps 3"
    echo "=== trace tp $tp"
    $MPI_APP -np "$tp" $cmd >$r.log 2>&1
    grep -aE "^step [2-4]/4 \||rror" $r.log | cut -c1-200
    python3 tools/trace_ops "$OUT/tp$tp.json" --top 16 2>&1 | tee "$OUT/tp$tp.ops.txt"
    rm -f "$OUT/tp$tp.json"
  done
fi
stamp "s11a done (status $status)"
exit $status
