#!/usr/bin/env bash
# Session 11, second call (issue 24), 4 GPUs, carried binaries (.devbin/s11b.tar.xz) and the
# PyTorch anchor (.devbin/anchors/torch_tp_bench.py):
#  1. chapter 13's CUDA tests at np 2 and 4 (bf16 loss curves against one GPU, ncclCommSplit);
#  2. in the same run, L36 H20 C1280 B=8 T=1024 bf16: PyTorch DTensor TP (eager, autocast) at
#     TP 1, 2, 4 and ours (train_gpt2 --tp) at TP 1, 2, 4;
#  3. TT_CUDA_MEMORY_LIMIT_MIB=16384: TP 1 runs out of memory, TP 4 trains;
#  4. --trace of TP 2 (steps 2-4; tools/trace_ops), for where the time goes now.
# Logs are tarred into $OUT/s11b.tar.gz (few files come back).
set -uo pipefail
. .devrun/lib.sh
status=0
tar xJf .devbin/s11b.tar.xz || exit 1
L=(--layers 36 --heads 20 --channels 1280)

stamp "ch13 CUDA tests"
for np in 2 4; do
  $MPI -np $np build/bin/tt_ch13_tests --gtest_color=no --gtest_filter='*Cuda*' >"$OUT/ch13_np$np.log" 2>&1 || status=1
  grep -aE "^\[ +(OK|FAILED|SKIPPED) +\]|Failure|worst" "$OUT/ch13_np$np.log" | sed 's/ ([0-9]* ms)//' | sort | uniq -c
done

data=/tmp/s11_data
prep_data "$data" || status=1

stamp "PyTorch DTensor TP (eager, bf16 autocast)"
for tp in 1 2 4; do
  if [ $tp = 1 ]; then python3 .devbin/anchors/torch_tp_bench.py --L 36 --NH 20 --C 1280
  else torchrun --standalone --nproc_per_node $tp .devbin/anchors/torch_tp_bench.py --L 36 --NH 20 --C 1280
  fi 2>"$OUT/torch_tp$tp.err" | grep -a '^{' || tail -3 "$OUT/torch_tp$tp.err"
done

# ours NP TP [ENV...]: steps 4-6 of 8, killed after step 6 (no checkpoint written).
ours() {
  local np=$1 tp=$2 r=/tmp/s11_run
  shift 2
  rm -rf $r
  echo "--- ours np=$np tp=$tp $*"
  smi_start $r.mem
  local launch="$MPI_APP -np $np"
  [ "$np" = 1 ] && launch=""
  env "$@" $launch build/bin/train_gpt2 --data $data --out $r --device cuda --precision bf16 \
    "${L[@]}" --T 1024 --B 8 --steps 8 --kill-after-step 6 --warmup 1 --eval-every 0 \
    --eval-batches 1 --sample-tokens 1 --log-every 1 --tp $tp >$r.log 2>&1
  smi_stop
  grep -aE "^step [4-6]/8 \|" $r.log | cut -c1-120
  grep -aE "rror|what\(\)|out of memory" $r.log | head -3 | cut -c1-300
  echo "peak MiB per GPU: $(smi_peaks $r.mem "$np")"
}
stamp "ours"
for tp in 1 2 4; do ours $tp $tp; done
stamp "memory cap 16384 MiB"
ours 1 1 TT_CUDA_MEMORY_LIMIT_MIB=16384
ours 4 4 TT_CUDA_MEMORY_LIMIT_MIB=16384

stamp "trace tp 2"
r=/tmp/s11_trace
rm -rf $r
$MPI_APP -np 2 build/bin/train_gpt2 --data $data --out $r --device cuda --precision bf16 "${L[@]}" \
  --T 1024 --B 8 --steps 4 --warmup 1 --eval-every 0 --eval-batches 1 --sample-tokens 1 \
  --log-every 1 --tp 2 --trace "$OUT/tp2.json" --trace-steps 3 >$r.log 2>&1
grep -aE "^step [2-4]/4 \||rror" $r.log | cut -c1-120
python3 tools/trace_ops "$OUT/tp2.json" --top 18 2>&1 | tee "$OUT/tp2.ops.txt"
rm -rf $r "$OUT/tp2.json"
(cd "$OUT" && tar czf s11b.tar.gz --remove-files ./*.log ./*.txt ./*.err 2>/dev/null)
stamp "s11b done (status $status)"
exit $status
