#!/usr/bin/env bash
# Session 11, last call (issue 24), 4 GPUs, carried binaries (.devbin/s11d.tar.xz): the world's
# NCCL communicator freed once the grids are split (release_world_gpus) and f's forward a view:
# chapter 13's CUDA tests at np 4, then bf16 train_gpt2 L36 H20 C1280 B=8 T=1024 at TP 1, 2, 4
# and 4 + SP (steps 4-6, peak memory per GPU).
set -uo pipefail
. .devrun/lib.sh
status=0
tar xJf .devbin/s11d.tar.xz || exit 1
stamp "ch13 CUDA tests np 4"
$MPI -np 4 build/bin/tt_ch13_tests --gtest_color=no --gtest_filter='*Cuda*' >"$OUT/ch13_np4.log" 2>&1 || status=1
grep -aE "^\[ +(OK|FAILED|SKIPPED) +\]|Failure|worst" "$OUT/ch13_np4.log" | sed 's/ ([0-9]* ms)//' | sort | uniq -c
data=/tmp/s11_data
prep_data "$data"
run() {
  local np=$1 tp=$2 extra=$3 r=/tmp/s11_run launch=""
  [ "$np" -gt 1 ] && launch="$MPI_APP -np $np"
  rm -rf $r
  echo "--- np=$np tp=$tp $extra"
  smi_start $r.mem
  $launch build/bin/train_gpt2 --data $data --out $r --device cuda --precision bf16 --layers 36 \
    --heads 20 --channels 1280 --T 1024 --B 8 --steps 8 --kill-after-step 6 --warmup 1 \
    --eval-every 0 --eval-batches 1 --sample-tokens 1 --log-every 1 --tp $tp $extra >$r.log 2>&1
  smi_stop
  grep -aE "^step [4-6]/8 \|" $r.log | cut -c1-120
  grep -aE "rror|what\(\)" $r.log | head -3 | cut -c1-300
  echo "peak MiB per GPU: $(smi_peaks $r.mem "$np")"
}
stamp "throughput"
run 1 1 ""
run 2 2 ""
run 4 4 ""
run 4 4 "--sequence-parallel"
stamp "s11d done (status $status)"
exit $status
