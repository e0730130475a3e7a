#!/usr/bin/env bash
# Session 17, two H200s (.devbin/$1.tar.xz: train_gpt2, tt_prepare_data, tt_ch06/10/11/12/15
# tests, bench_optim; .devbin/anchors: gpt2_torch_bench.py; .devbin/lib: libbenchmark), ~9 min:
#  1. the CUDA tests of the chapters this session's edits touch: chapter 06 (the shared-memory
#     opt-in helper), 10 and 11 (FlashAttention through it; chapter 11's stage_next, both kernel
#     sets), 15 (the decode GEMV and step through it), 12 under mpirun -np 2 (DDP's gradients
#     zeroed in its buckets); memcheck, racecheck and synccheck on chapter 11's kernels;
#  2. issue 23 goal 3: tools/scaling_gpu --gpus 1,2 (one plain process, DDP x1, DDP x2, PyTorch
#     DDP x1 and x2 in the same run), bf16 then TF32, and the float32 2-GPU check; Chrome
#     traces of a bf16 step in one process and under DDP x1;
#  3. issue 23 goal 5: bench_optim's AdamW against a copy of the same bytes, Nsight Compute.
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s17a}"
logs_begin
nvidia-smi -L
stamp "tests"
gtests ch06.log 300 build/bin/tt_ch06_tests '*Cuda*:*CUDA*' | tail -3 || status=1
gtests ch11.log 300 build/bin/tt_ch11_tests '*Cuda*:*Bf16TrainGpt2*' | tail -3 || status=1
gtests ch10.log 300 build/bin/tt_ch10_tests '*Cuda*:*CUDA*' | tail -3 || status=1
gtests ch15.log 300 build/bin/tt_ch15_tests 'Ch15_GqaCuda.*:Ch15_Bf16Cuda.*:Ch15_ModelCuda.*' | tail -3 || status=1
mpi_tests tt_ch12_tests 2 '*Cuda*:*Mpi*' ch12_np2.log || status=1
for tool in memcheck racecheck synccheck; do
  stamp "$tool"
  sanitize $tool $tool.log build/bin/tt_ch11_tests \
    'Ch11_FlashBf16Cuda.ForwardMatchesReference:Ch11_FlashBf16Cuda.BackwardMatchesReference:Ch11_FlashBf16Cuda.FullModeMatchesReference' || status=1
done
stamp "bench_optim (AdamW and a copy of the same bytes), twice; Nsight Compute on adamw_kernel"
for rep in 1 2; do
  build/bin/bench_optim --benchmark_filter='adamw/(cuda|memcpy)' 2>&1 | grep -a "adamw/" | cut -c1-150
done
timeout 120 ncu --kernel-name regex:adamw_kernel --launch-count 1 --section SpeedOfLight \
  --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
  build/bin/bench_optim --benchmark_filter='adamw/cuda' --benchmark_min_time=0.01 \
  >"$OUT/ncu_adamw.txt" 2>&1
grep -aE "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Grid Size|Waves" "$OUT/ncu_adamw.txt" | head -12
data=/tmp/s17data
prep_data $data || status=1
for prec in bf16 tf32; do
  stamp "scaling_gpu $prec"
  checks=0
  [ $prec = tf32 ] && checks=20
  timeout 420 python3 tools/scaling_gpu --build build --data $data --anchors .devbin/anchors \
    --gpus 1,2 --strategies ddp --precision $prec --check-steps $checks --out /tmp/scaling_$prec \
    --csv "$OUT/scaling_$prec.csv" 2>&1 | tee "$OUT/scaling_$prec.txt" | grep -av "^  ours\|^  torch" || status=1
done
stamp "Chrome traces of two bf16 steps: one process and DDP x1"
for s in single ddp; do
  pre=()
  [ $s = ddp ] && pre=($MPI_APP -np 1)
  "${pre[@]}" build/bin/train_gpt2 --data $data --out /tmp/trace_$s --device cuda --precision bf16 \
    --layers 12 --heads 12 --channels 768 --B 8 --T 1024 --steps 8 --warmup 2 --eval-every 0 \
    --eval-batches 1 --sample-tokens 1 --log-every 1 --trace "$OUT/trace_$s.json" --trace-steps 2 \
    >"$OUT/trace_$s.log" 2>&1 || { echo "trace $s failed"; tail -3 "$OUT/trace_$s.log"; }
done
logs_end
stamp "s17a done (status $status)"
exit $status
