#!/usr/bin/env bash
# Session 4's GPU batch on a 4-GPU H100 machine, in two calls of under 10 minutes on the same
# warm machine (PART=1, then PART=2; the build of PART=1 is kept):
#   PART=1  build (solution, sm_90, warnings not errors: the device's newer g++), then the CUDA
#           tests that the session's changes touch, one GPU per rank through NCCL: chapter 16
#           (ring attention, train_gpt2 --cp) at np 2 and 4, chapter 14 (pipelines, --pp) at
#           np 2 and 4, chapter 12's collectives (the new async batch_send_recv), chapter 13's.
#   PART=2  measurements: the ring-attention bench at CP 4 (one GPU vs zigzag vs contiguous),
#           the TP trace after the TF32 change (.devrun/s4_tptrace.sh), train_gpt2 --pp layouts
#           of the 774M shape (.devrun/ch14b.sh PART=app), and PyTorch's pipelining anchor.
set -uo pipefail
PART=${PART:-1}
. .devrun/lib.sh  # $OUT, $MPI, .devdeps, stamp
nvidia-smi -L

if [ "$PART" = 1 ] || [ ! -x build/bin/tt_ring_attention_bench ]; then
  stamp build
  { cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 -DTT_STARTER_TESTS=OFF \
      -DTT_WARNINGS_AS_ERRORS=OFF &&
    cmake --build build -j16 --target train_gpt2 tt_prepare_data tt_ch12_tests tt_ch13_tests \
      tt_ch14_tests tt_ch16_tests tt_ring_attention_bench tt_pipeline_bench; } \
    >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
  tail -1 "$OUT/build.log"
fi

if [ "$PART" = 1 ]; then
  mpi_tests tt_ch16_tests 4 '-Ch16_TrainGpt2Cp.*' ch16_np4.log
  mpi_tests tt_ch16_tests 2 '*Cuda*' ch16_np2.log
  mpi_tests tt_ch14_tests 4 '*Cuda*:Ch14_PipelineStrategy.*' ch14_np4.log
  mpi_tests tt_ch14_tests 2 '*Cuda*' ch14_np2.log
  mpi_tests tt_ch12_tests 2 '*Cuda*:*P2P*:*BatchSendRecv*' ch12_np2.log
  mpi_tests tt_ch13_tests 2 '*Cuda*' ch13_np2.log
  stamp done
fi

if [ "$PART" = 2 ]; then
  stamp "ring attention bench, CP 4 (TF32, B=1, NH=4, causal)"
  timeout 200 $MPI -np 4 build/bin/tt_ring_attention_bench --device cuda \
    --seq 16384,32768,65536 --hs 64,128 --heads 4 --reps 2 --warmup 1 --tf32 \
    >"$OUT/bench_cp4.jsonl" 2>"$OUT/bench.log"
  echo "exit $?"
  cat "$OUT/bench_cp4.jsonl"
  tail -3 "$OUT/bench.log"
  stamp "TP trace after the TF32 change"
  TPS="1 2" timeout 200 .devrun/s4_tptrace.sh >"$OUT/tptrace.log" 2>&1
  grep -aE "^===|^step [2-4]|^rank|matmul |cast " "$OUT/tptrace.log" | head -30
  stamp "train_gpt2 --pp, 774M shape"
  PART=app SHAPES=774m LAYOUTS="${LAYOUTS:-pp2 pp4 dp2pp2 tp2pp2}" KILL=5 timeout 220 \
    .devrun/ch14b.sh >"$OUT/pp_app.log" 2>&1
  echo "exit $?"
  tail -25 "$OUT/pp_app.log"
  if [ "${TORCH:-1}" = 1 ]; then
    stamp "PyTorch pipelining anchor, 774M shape"
    PART=torch SHAPES=774m timeout 150 .devrun/ch14b.sh >"$OUT/pp_torch.log" 2>&1
    echo "exit $?"
    tail -12 "$OUT/pp_torch.log"
  fi
  stamp done
fi
