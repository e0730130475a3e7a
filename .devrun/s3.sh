#!/usr/bin/env bash
# Session 3's GPU checks of the merged tree (chapters 13-15 new), on a 4-GPU H100 machine:
#   .devrun/s3.sh A   build everything; every CUDA test of every chapter (MPI/NCCL ones on the
#                     GPUs); compute-sanitizer memcheck of chapter 15's CUDA tests; chapter 15's
#                     transformers load check and tt_generate timings
#   .devrun/s3.sh B   chapter 13's bf16 train_gpt2 --tp throughput (.devrun/ch13b.sh PART=throughput)
#   .devrun/s3.sh C   chapter 14's GPU tests and bubble sweep (.devrun/ch14.sh)
# Logs under $OUT/<part>.tgz.
set -uo pipefail
part=${1:?part}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ -d .devdeps ] && [ ! -f /usr/include/pcre2.h ]; then
  for f in .devdeps/*.deb; do dpkg -x "$f" /; done; ldconfig
fi
FINAL=${OUT:-/tmp/out}; L=/tmp/s3/$part; rm -rf "$L"; mkdir -p "$L" "$FINAL"
t0=$SECONDS
case "$part" in
  A)
    { cmake --preset default -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j "$(nproc)"; } \
      > "$L/build.log" 2>&1; echo "build rc $? ($((SECONDS - t0)) s)"; grep -E "error:|FAILED" "$L/build.log" | head
    timeout 330 ctest --test-dir build -L cuda -j 4 --timeout 240 --output-on-failure > "$L/ctest_cuda.log" 2>&1
    echo "ctest -L cuda rc $? ($((SECONDS - t0)) s)"
    grep -E "tests passed|\(Failed\)|\(Timeout\)|Not Run" "$L/ctest_cuda.log" | head -30
    F='Ch15_*Cuda*'
    TT_CUDA_CACHING=0 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 build/bin/tt_ch15_tests \
      --gtest_filter="$F" > "$L/memcheck15.log" 2>&1
    echo "memcheck ch15 rc $? $(grep -o 'ERROR SUMMARY: [0-9]* errors' "$L/memcheck15.log" | tail -1) ($((SECONDS - t0)) s)"
    TT_CUDA_CACHING=0 timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 build/bin/tt_ch15_tests \
      --gtest_filter="$F" > "$L/racecheck15.log" 2>&1
    echo "racecheck ch15 rc $? $(grep -o 'RACECHECK SUMMARY: [0-9]* hazard[s]*' "$L/racecheck15.log" | tail -1)"
    rm -rf /tmp/tt_llama_saved
    { build/bin/tt_generate --random tiny --device cpu --prompt "1,2,3,4,5,6,7,8" --max-new 4 --save /tmp/tt_llama_saved &&
      python3 reference_data/check_llama_hf_load.py /tmp/tt_llama_saved; } > "$L/hf_load.log" 2>&1
    echo "hf load rc $?"; tail -2 "$L/hf_load.log"
    { timeout 60 build/bin/tt_generate --random tinyllama-1.1b --device cuda --prompt "1,2,3,4,5,6,7,8" --max-new 128
      timeout 60 build/bin/tt_generate --random tinyllama-1.1b --device cuda --prompt "1,2,3,4,5,6,7,8" --max-new 128 --cuda-graph
    } > "$L/generate.log" 2>&1; echo "generate rc $?"; grep -E "model:|time to first|decode" "$L/generate.log" | head -8 ;;
  B) PART=throughput OUT=$L timeout 560 bash .devrun/ch13b.sh 2>&1 | tail -45 ;;
  C) OUT=$L timeout 560 bash .devrun/ch14.sh 2>&1 | tail -45 ;;
esac
echo "part $part: $((SECONDS - t0)) s"
tar czf "$FINAL/$part.tgz" -C /tmp/s3 "$part"
