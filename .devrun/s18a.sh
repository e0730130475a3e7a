#!/usr/bin/env bash
# Session 18, one H200 (.devbin/$1.tar.xz: the test binaries, train_gpt2, tt_prepare_data and
# bench_cuda_matmul of HEAD), ~4 min: cuBLAS and cuBLASLt opened on first use (dlopen) instead of
# linked. Every CUDA test of the chapters that call cuBLAS (07: "matmul" and the SGEMM reference;
# 10: the cuBLASLt linear layers; 11 and 15: bf16 through cuBLASLt, with chapter 11's app tests;
# 12 at world size 1), cuBLAS in the SGEMM bench, and a bf16 smoke run of train_gpt2 (its default
# small shape: the 124M step is not what this call measures).
set -uo pipefail
. .devrun/lib.sh
status=0
carried "${1:-s18a}"
logs_begin
nvidia-smi -L
echo "linked: $(readelf -d build/bin/tt_ch07_tests | grep -o 'lib[a-zA-Z]*\.so[.0-9]*' | tr '\n' ' ')"
stamp "tests"
gtests ch07.log 180 build/bin/tt_ch07_tests '*Cuda*:*CUDA*:*Cublas*' | tail -4 || status=1
gtests ch10.log 300 build/bin/tt_ch10_tests '*Cuda*:*CUDA*' | tail -4 || status=1
gtests ch11.log 300 build/bin/tt_ch11_tests '*Cuda*:*Bf16TrainGpt2*:*GraphedTrainGpt2*' | tail -4 || status=1
gtests ch15.log 300 build/bin/tt_ch15_tests '*Cuda*' | tail -4 || status=1
mpi_tests tt_ch12_tests 1 '*Cuda*' ch12_np1.log || status=1
stamp "bench"
build/bin/bench_cuda_matmul --benchmark_filter='sgemm/(warptile|cublas)/4096' 2>&1 |
  grep -aE "sgemm|rror" | cut -c1-150
data=/tmp/s18data
prep_data $data || status=1
train_run "bf16 train_gpt2, default shape, one process" 1 "" -- || status=1
logs_end
stamp "s18a done (status $status)"
exit $status
