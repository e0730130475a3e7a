#!/usr/bin/env bash
# Session 10, one H100, binaries built on the CPU machine for sm_90 and carried as
# .devbin/s10b.tar.xz (tt_ch15_tests, tt_generate, bench_decode), ~5 minutes: the rewritten
# decode GEMV (chapter 15, issue 26's bandwidth goal):
#  1. chapter 15's bf16 CUDA tests (the GEMV against float32 with each prologue, greedy decoding
#     with the GEMV on and off), compute-sanitizer memcheck and racecheck on the GEMV's tests;
#  2. bench_decode: each projection and a whole step's projections, GEMV against cuBLASLt, in
#     CUDA graphs (programmatic dependent launch on, then the step's projections with it off);
#  3. tt_generate on TinyLlama-1.1B's shape, bf16, batch 1 and 8, CUDA graph, GEMV on and off,
#     with the device's copy bandwidth; batch 1 again with TT_DECODE_PDL=0.
set -uo pipefail
. .devrun/lib.sh
status=0
[ -f .devbin/s10b.tar.xz ] && tar xJf .devbin/s10b.tar.xz
# Google Benchmark 1.7.1 (Debian's, which bench_decode was linked with), if the image lacks it.
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$PWD/.devbin/lib
nvidia-smi -L
gtests ch15.log 200 build/bin/tt_ch15_tests 'Ch15_Bf16Cuda.*:Ch15_ModelCuda.*' | tail -8 || status=1
GEMV=on,off
grep -aq "^\[       OK \] Ch15_Bf16Cuda.DecodeGemv" "$OUT/ch15.log" || { GEMV=off; echo "GEMV test failed"; }
if [ $GEMV = on,off ]; then
  sanitize memcheck memcheck.log build/bin/tt_ch15_tests 'Ch15_Bf16Cuda.DecodeGemv*' || status=1
  sanitize racecheck racecheck.log build/bin/tt_ch15_tests 'Ch15_Bf16Cuda.DecodeGemv*' || status=1
  stamp "bench_decode"
  timeout 200 build/bin/bench_decode --benchmark_min_time=0.2 >"$OUT/bench_decode.log" 2>&1 ||
    status=1
  grep -a "decode_" "$OUT/bench_decode.log" | sed 's/manual_time//' | awk '{print $1, $2, $NF}'
  TT_DECODE_PDL=0 timeout 100 build/bin/bench_decode --benchmark_min_time=0.2 \
    --benchmark_filter='decode_layers/gemv' 2>&1 | grep -a "decode_" | sed 's/manual_time/PDL off/' |
    awk '{print $1, $2, $3, $NF}'
fi
run_gen() {  # label, then tt_generate flags
  local label=$1; shift
  stamp "tt_generate $label"
  timeout 200 build/bin/tt_generate --random tinyllama-1.1b --device cuda --json --runs 2 \
    --dtype bf16 --prompt-len 128 --max-new 256 --modes graph "$@" \
    >"$OUT/gen_$label.log" 2>&1 || { status=1; tail -5 "$OUT/gen_$label.log"; }
  grep -a "copy bandwidth" "$OUT/gen_$label.log"
  grep -a "^{" "$OUT/gen_$label.log" | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print("B={batch:<3} {g:8} {decode_ms_per_step:7.3f} ms/step {tokens_per_s:9.1f} tok/s "
          "{effective_gbps:7.1f} GB/s ({pct:.1f}% of copy {copy_gbps:.0f})".format(
              g="gemv" if r["gemv"] else "cuBLASLt",
              pct=100 * r["effective_gbps"] / max(r["copy_gbps"], 1e-9), **r))'
}
run_gen pdl --batch 1,8 --gemv $GEMV --copy-bandwidth
[ $GEMV = on,off ] && TT_DECODE_PDL=0 run_gen nopdl --batch 1 --gemv on --copy-bandwidth
stamp "s10b done (status $status)"
exit $status
