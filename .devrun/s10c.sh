#!/usr/bin/env bash
# Session 10, one H100, binaries built on the CPU machine for sm_90 and carried as
# .devbin/s10c.tar.xz (tt_ch15_tests, tt_generate, bench_decode), ~4 minutes: the decode GEMV's
# second version (a persistent grid, two chunks in flight per warp across rows, one prologue per
# block; chapter 15, issue 26's bandwidth goal). (s10b.sh measured the first version: one row
# per warp, every block its own prologue: 1.1-1.5 TB/s.)
#  1. chapter 15's bf16 CUDA tests, compute-sanitizer memcheck, racecheck and synccheck on the
#     GEMV's test;
#  2. bench_decode: the copy bandwidth, each projection and a step's projections, GEMV against
#     cuBLASLt (M = 1, 4, 8), in CUDA graphs; the step's projections with programmatic
#     dependent launch off, and with 1, 3 or 4 GEMV blocks per SM (TT_DECODE_GEMV_BLOCKS);
#  3. tt_generate on TinyLlama-1.1B's shape, bf16, batch 1 and 4, CUDA graph, GEMV on and off.
set -uo pipefail
. .devrun/lib.sh
status=0
[ -f .devbin/s10c.tar.xz ] && tar xJf .devbin/s10c.tar.xz
# Google Benchmark 1.7.1 (Debian's, which bench_decode was linked with), if the image lacks it.
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$PWD/.devbin/lib
nvidia-smi -L
gtests ch15.log 200 build/bin/tt_ch15_tests 'Ch15_Bf16Cuda.*:Ch15_ModelCuda.*' | tail -8 || status=1
GEMV=on,off
grep -aq "^\[       OK \] Ch15_Bf16Cuda.DecodeGemv" "$OUT/ch15.log" || { GEMV=off; echo "GEMV test failed"; }
bench() {  # label, then flags
  local label=$1; shift
  timeout 200 build/bin/bench_decode --benchmark_min_time=0.2 "$@" >"$OUT/bench_$label.log" 2>&1 ||
    status=1
  grep -a "decode_\|copy/" "$OUT/bench_$label.log" | sed "s/manual_time/$label/" |
    awk '{print $1, $2, $NF}'
}
if [ $GEMV = on,off ]; then
  for tool in memcheck racecheck synccheck; do
    sanitize $tool $tool.log build/bin/tt_ch15_tests 'Ch15_Bf16Cuda.DecodeGemv*' || status=1
  done
  stamp "bench_decode"
  bench all
  TT_DECODE_PDL=0 bench nopdl --benchmark_filter='decode_layers/gemv/[14]'
  for b in 1 3 4; do
    TT_DECODE_GEMV_BLOCKS=$b bench blocks$b --benchmark_filter='decode_(layers|proj)/gemv/.*1/'
  done
fi
stamp "tt_generate"
timeout 200 build/bin/tt_generate --random tinyllama-1.1b --device cuda --json --runs 2 \
  --dtype bf16 --prompt-len 128 --max-new 256 --modes graph --batch 1,4 --gemv $GEMV \
  --copy-bandwidth >"$OUT/gen.log" 2>&1 || { status=1; tail -5 "$OUT/gen.log"; }
grep -a "copy bandwidth" "$OUT/gen.log"
grep -a "^{" "$OUT/gen.log" | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print("B={batch:<3} {g:8} {decode_ms_per_step:7.3f} ms/step {tokens_per_s:9.1f} tok/s "
          "{effective_gbps:7.1f} GB/s ({pct:.1f}% of copy {copy_gbps:.0f})".format(
              g="gemv" if r["gemv"] else "cuBLASLt",
              pct=100 * r["effective_gbps"] / max(r["copy_gbps"], 1e-9), **r))'
stamp "s10c done (status $status)"
exit $status
