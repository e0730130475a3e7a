#!/usr/bin/env bash
# Session 14, one H200, ~3 minutes, carried binaries (.devbin/s14base.tar.xz: tt_generate,
# bench_decode at 6f2769d): where a bf16 batch-1 decode step of TinyLlama-1.1B's shape goes.
#  1. tt_generate as a CUDA graph (the step's ms and GB/s) and the eager per-op profile;
#  2. nsys (if installed) on the graph decode, its kernels traced per node: every kernel's
#     duration and the gaps between them over decode steps.
set -uo pipefail
. .devrun/lib.sh
tar xJf .devbin/${1:-s14base}.tar.xz
nvidia-smi -L
stamp tt_generate
timeout 200 build/bin/tt_generate --random tinyllama-1.1b --device cuda --json --runs 2 \
  --dtype bf16 --prompt-len 128 --max-new 256 --modes graph,eager --batch 1 --copy-bandwidth \
  --profile >"$OUT/gen.log" 2>&1 || tail -5 "$OUT/gen.log"
grep -a "copy bandwidth" "$OUT/gen.log"
gen_table "$OUT/gen.log"
grep -aA40 "profile\|Profile" "$OUT/gen.log" | head -60
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
if [ -n "$NSYS" ]; then
  stamp "nsys $NSYS"
  timeout 200 "$NSYS" profile -o "$OUT/dec" --cuda-graph-trace=node -t cuda --force-overwrite true \
    build/bin/tt_generate --random tinyllama-1.1b --device cuda --runs 1 --dtype bf16 \
    --prompt-len 128 --max-new 64 --modes graph --batch 1 >"$OUT/nsys.log" 2>&1 || tail -5 "$OUT/nsys.log"
  timeout 100 "$NSYS" stats -q --report cuda_gpu_trace --format csv -o "$OUT/trace" "$OUT/dec.nsys-rep" >/dev/null 2>&1
  ls "$OUT"
  python3 - "$OUT"/trace*.csv <<'PY'
import csv, sys, collections
rows = list(csv.DictReader(open(sys.argv[1])))
ks = [r for r in rows if r.get("Name") and "memcpy" not in r["Name"].lower() and "memset" not in r["Name"].lower()]
start = [float(r["Start (ns)"]) for r in ks]; dur = [float(r["Duration (ns)"]) for r in ks]
name = [r["Name"][:60] for r in ks]
# the last 20 decode steps: steps start at the embedding kernel
emb = [i for i, n in enumerate(name) if "embedding" in n.lower()]
print("kernels", len(ks), "embedding launches", len(emb))
if len(emb) > 22:
    a, b = emb[-21], emb[-1]
    tot = start[b] - start[a]
    steps = 20
    per = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for i in range(a, b):
        gap = start[i + 1] - (start[i] + dur[i])
        p = per[name[i]]; p[0] += 1; p[1] += dur[i]; p[2] += gap
    print("step %.1f us" % (tot / steps / 1e3))
    for n, (c, d, g) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        print("%-60s %5d/step  %8.1f us/step busy  %7.1f us/step gap after  %6.2f us avg" % (n, c // steps, d / steps / 1e3, g / steps / 1e3, d / c / 1e3))
    one = [(name[i], dur[i] / 1e3, (start[i + 1] - start[i] - dur[i]) / 1e3) for i in range(emb[-2], emb[-1])]
    for n, d, g in one[:16] + one[-6:]:
        print("  %-60s %7.2f us  gap %6.2f" % (n, d, g))
PY
else
  echo "no nsys"
fi
stamp done
