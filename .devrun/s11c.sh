#!/usr/bin/env bash
# Session 11, third call (issue 24), 2-4 GPUs, carried train_gpt2 (.devbin/s11c.tar.xz) with the
# vocab-parallel lookup's spread rows: --trace of bf16 GPT-2 774M's shape at TP 2 and TP 2 + SP
# (steps 2-4), tools/trace_ops, and the casts of the traced step grouped by shape (where the
# extra casts of a split step come from). Logs tarred into $OUT/s11c.tar.gz.
set -uo pipefail
. .devrun/lib.sh
tar xJf .devbin/s11c.tar.xz || exit 1
data=/tmp/s11_data
prep_data "$data"
for extra in "" "--sequence-parallel"; do
  r=/tmp/s11_trace
  rm -rf $r
  name=tp2${extra:+_sp}
  stamp "trace tp 2 $extra"
  $MPI_APP -np 2 build/bin/train_gpt2 --data $data --out $r --device cuda --precision bf16 \
    --layers 36 --heads 20 --channels 1280 --T 1024 --B 8 --steps 4 --warmup 1 --eval-every 0 \
    --eval-batches 1 --sample-tokens 1 --log-every 1 --tp 2 $extra --trace "$OUT/$name.json" \
    --trace-steps 3 >$r.log 2>&1
  grep -aE "^step [2-4]/4 \||rror" $r.log | cut -c1-120
  python3 tools/trace_ops "$OUT/$name.json" --top 24 2>&1 | tee "$OUT/$name.ops.txt"
  python3 - "$OUT/$name.json" <<'PY' | tee "$OUT/$name.casts.txt"
import collections, json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
ops = [e for e in ev if e.get("ph") == "X" and e.get("pid", 0) == 0 and "args" in e]
# The last traced step of rank 0: events after the last "step" marker, if any; else all.
steps = [e for e in ops if str(e.get("name", "")).startswith("step")]
t0 = max((e["ts"] for e in steps), default=0)
by = collections.defaultdict(lambda: [0, 0.0])
for e in ops:
    if e.get("name") == "cast" and e["ts"] >= t0:
        k = e["args"].get("shapes", "?")
        by[k][0] += 1
        by[k][1] += e.get("dur", 0) / 1e3
print("casts of rank 0 by shape (count, ms):")
for k, (n, ms) in sorted(by.items(), key=lambda kv: -kv[1][1])[:14]:
    print(f"  {n:4d} {ms:8.3f}  {k}")
PY
  rm -rf $r "$OUT/$name.json"
done
(cd "$OUT" && tar czf s11c.tar.gz --remove-files ./*.log ./*.txt 2>/dev/null)
stamp "s11c done"
