#!/usr/bin/env bash
# For the next session (issue 24): measure TpOptions::early_grad_reduce on 2-4 GPUs. Carried
# binaries (.devbin/s12a.tar.xz: tt_ch13_tests, train_gpt2, tt_prepare_data built for sm_90):
#  1. chapter 13's CUDA tests at np 2 (the bf16 curve test has an early-reduce layout);
#  2. bf16 train_gpt2, L36 H20 C1280, B=8 T=1024, tp 2 and (4 GPUs) tp 4, with and without
#     TT_TP_EARLY_GRAD_REDUCE=1, steps 4-6, in the same call;
#  3. --trace of tp 2 with it (tools/trace_ops: the idle time against 23.2 ms without).
set -uo pipefail
. .devrun/lib.sh
status=0
tar xJf .devbin/s12a.tar.xz || exit 1
gpus=$(nvidia-smi -L | wc -l)
stamp "ch13 CUDA tests np 2"
$MPI -np 2 build/bin/tt_ch13_tests --gtest_color=no --gtest_filter='*Cuda*' >"$OUT/ch13_np2.log" 2>&1 || status=1
grep -aE "^\[ +(OK|FAILED|SKIPPED) +\]|Failure|worst" "$OUT/ch13_np2.log" | sed 's/ ([0-9]* ms)//' | sort | uniq -c
data=/tmp/s12_data
prep_data "$data" || status=1
run() {  # NP [ENV...]
  local np=$1 r=/tmp/s12_run
  shift
  rm -rf $r
  echo "--- tp $np $*"
  env "$@" $MPI_APP -np "$np" build/bin/train_gpt2 --data $data --out $r --device cuda \
    --precision bf16 --layers 36 --heads 20 --channels 1280 --T 1024 --B 8 --steps 8 \
    --kill-after-step 6 --warmup 1 --eval-every 0 --eval-batches 1 --sample-tokens 1 \
    --log-every 1 --tp "$np" >$r.log 2>&1
  grep -aE "^step [4-6]/8 \|" $r.log | cut -c1-120
  grep -aE "rror|what\(\)" $r.log | head -3 | cut -c1-300
}
stamp "throughput"
for np in 2 4; do
  [ "$gpus" -ge $np ] || continue
  run $np
  run $np TT_TP_EARLY_GRAD_REDUCE=1
done
stamp "trace tp 2, early reduce"
r=/tmp/s12_trace
rm -rf $r
TT_TP_EARLY_GRAD_REDUCE=1 $MPI_APP -np 2 -x TT_TP_EARLY_GRAD_REDUCE build/bin/train_gpt2 \
  --data $data --out $r --device cuda --precision bf16 --layers 36 --heads 20 --channels 1280 \
  --T 1024 --B 8 --steps 4 --warmup 1 --eval-every 0 --eval-batches 1 --sample-tokens 1 \
  --log-every 1 --tp 2 --trace "$OUT/tp2e.json" --trace-steps 3 >$r.log 2>&1
grep -aE "^step [2-4]/4 \||rror" $r.log | cut -c1-120
python3 tools/trace_ops "$OUT/tp2e.json" --top 12 2>&1 | tee "$OUT/tp2e.ops.txt"
rm -rf $r "$OUT/tp2e.json"
stamp "s12a done (status $status)"
exit $status
