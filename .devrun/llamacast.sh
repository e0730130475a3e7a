#!/usr/bin/env bash
# GPU run for the llamacast branch (issue 26: the casts of the LLaMA bf16 step). From the
# repository root on ONE H100 (.devrun/lib.sh: $OUT, stamp, tt_build). Writes to $OUT:
#   build.log                      the build (tt_ch15_tests, tt_ch11_tests, train_llama, tt_prepare_data)
#   ch15_cuda.log, ch11_cuda.log   every '*Cuda*' test of chapters 15 and 11 (no MPI ones)
#   memcheck.log                   compute-sanitizer memcheck of the new CUDA test (no caching allocator)
#   llama_step.txt, llama_step.csv, logs/   .devrun/llamabench.sh (ours vs torch.compile, per-op trace)
#   casts.txt                      the traced step's "cast" ops by enclosing op, neighbours and shape
# Steps and expected times (the whole under 8.5 minutes: each step has its own timeout):
#  1. build (~3 min from nothing, 240 s limit);
#  2. chapter 15's and 11's CUDA tests (~40 s, 90 + 60 s limits);
#  3. memcheck of Ch15_Bf16Cuda.TrainingProjectionsRopeSwigluMatchTheCpu and
#     Ch15_OpsCuda.Swiglu* (~30 s, 60 s limit);
#  4. ROUNDS=2 llamabench.sh with TOTAL_S = what is left of 490 s (at most 300);
#  5. casts.txt from its trace (seconds).
set -uo pipefail
. .devrun/lib.sh  # $OUT, stamp, tt_build
status=0
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
timeout 240 bash -c '. .devrun/lib.sh; tt_build tt_ch15_tests tt_ch11_tests train_llama tt_prepare_data' ||
  { echo "BUILD FAILED or timed out"; tail -30 "$OUT/build.log"; exit 1; }

stamp "chapter 15 CUDA tests"
timeout 90 build/bin/tt_ch15_tests --gtest_filter='*Cuda*:-*Mpi*' >"$OUT/ch15_cuda.log" 2>&1 ||
  status=1
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]|Failure|max \|" "$OUT/ch15_cuda.log" | head -30
stamp "chapter 11 CUDA tests"
timeout 60 build/bin/tt_ch11_tests --gtest_filter='*Cuda*:-*Mpi*' >"$OUT/ch11_cuda.log" 2>&1 ||
  status=1
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]|Failure" "$OUT/ch11_cuda.log" | head -20

stamp "memcheck (TT_CUDA_CACHING=0)"
TT_CUDA_CACHING=0 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 \
  build/bin/tt_ch15_tests \
  --gtest_filter='Ch15_Bf16Cuda.TrainingProjectionsRopeSwigluMatchTheCpu:Ch15_OpsCuda.Swiglu*' \
  >"$OUT/memcheck.log" 2>&1 || status=1
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | head -10

[ "${LLAMABENCH:-1}" = 1 ] || { stamp "done (status $status)"; exit $status; }
stamp "llamabench (ROUNDS=2)"
left=$((490 - (SECONDS - t0)))
[ "$left" -gt 300 ] && left=300
ROUNDS=2 TOTAL_S=$left timeout $((left + 15)) bash .devrun/llamabench.sh || status=1
stamp "the casts of ours' traced step, by enclosing op, neighbours and shape"
trace="$OUT/logs/ours_bf16_trace.json"
if [ -f "$trace" ]; then
  python3 - "$trace" >"$OUT/casts.txt" 2>&1 <<'PY'
import collections, json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
st = sorted([e for e in ev if e.get("cat") == "step"], key=lambda e: e["ts"])[-1]
ops = sorted([e for e in ev if e.get("cat") == "op" and st["ts"] <= e["ts"] <= st["ts"] + st["dur"]],
             key=lambda e: (e["ts"], -e["dur"]))
stack, rows = [], collections.Counter()
for i, e in enumerate(ops):
    while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
        stack.pop()
    if e["name"] == "cast":
        parent = stack[-1]["name"] if stack else "-"
        prev = ops[i - 1]["name"] if i else "-"
        nxt = ops[i + 1]["name"] if i + 1 < len(ops) else "-"
        rows[(parent, prev, e["args"].get("shapes", "?"), nxt)] += 1
    stack.append(e)
print(f"{st['name']}: {sum(rows.values())} casts; count, enclosing op, previous op, shapes, next op")
for (parent, prev, shapes, nxt), n in rows.most_common():
    print(f"{n:4d}  in {parent:24s} after {prev:28s} {shapes:36s} before {nxt}")
PY
  head -40 "$OUT/casts.txt"
else
  echo "no trace at $trace"
fi
stamp "done (status $status)"
exit $status
