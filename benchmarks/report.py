#!/usr/bin/env python3
"""Turns Google Benchmark JSON files into a Markdown report and PNG plots.

  benchmarks/report.py OUT_DIR results1.json [results2.json ...]

Benchmark names follow  family/variant/arg[/arg...]  (a leading "BM_" is dropped), e.g.
  matmul/eigen/1024   layernorm_fwd/cuda/8192x768   add/cpu/6291456
Within one family and argument set, variants are compared:
  * speed-up over a baseline variant: "cpu" (for cuda) or "naive" (for optimized versions);
  * percentage of a reference variant: "openblas", "cublas", "torch", "memcpy" or "copy".
Benchmarks that skipped themselves (e.g. CUDA without a GPU) are listed as skipped.
Writes OUT_DIR/report.md and, when gnuplot is installed, OUT_DIR/*.png.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

BASELINES = ["naive", "cpu"]
REFERENCES = ["openblas", "cublas", "torch", "memcpy", "copy"]


def parse_name(name: str):
    name = re.sub(r"^BM_", "", name)
    name = re.sub(r"/(manual_time|real_time|process_time)$", "", name)
    parts = name.split("/")
    family = parts[0]
    variant = parts[1] if len(parts) > 1 else "default"
    args = "/".join(parts[2:]) if len(parts) > 2 else ""
    return family, variant, args


def throughput(b: dict):
    """(value, unit) of the most meaningful rate of a benchmark, or (None, '')."""
    for key, unit, scale in (("TFLOP/s", "TFLOP/s", 1), ("GFLOP/s", "GFLOP/s", 1),
                             ("FLOPS", "GFLOP/s", 1e-9), ("flops", "GFLOP/s", 1e-9),
                             ("GB/s", "GB/s", 1), ("bytes_per_second", "GB/s", 1e-9),
                             ("tok/s", "tok/s", 1), ("items_per_second", "items/s", 1)):
        if key in b:
            return float(b[key]) * scale, unit
    return None, ""


def time_ms(b: dict) -> float:
    unit = b.get("time_unit", "ns")
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[unit]
    return float(b["real_time"]) * scale


def size_key(args: str):
    nums = [int(x) for x in re.findall(r"\d+", args)]
    prod = 1
    for n in nums:
        prod *= n
    return (prod, args)


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    rows, skipped, contexts = [], [], []
    for f in sys.argv[2:]:
        data = json.loads(Path(f).read_text())
        contexts.append((Path(f).name, data.get("context", {})))
        for b in data.get("benchmarks", []):
            if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
                continue
            family, variant, args = parse_name(b.get("run_name", b["name"]))
            if b.get("error_occurred") or b.get("skipped"):
                skipped.append((family, variant, args, b.get("error_message", "skipped")))
                continue
            value, unit = throughput(b)
            rows.append(dict(family=family, variant=variant, args=args, ms=time_ms(b),
                             value=value, unit=unit))

    groups = defaultdict(dict)
    for r in rows:
        groups[(r["family"], r["args"])][r["variant"]] = r

    md = ["# Benchmark report", ""]
    for name, ctx in contexts:
        md.append(f"- `{name}`: {ctx.get('date', '?')}, host {ctx.get('host_name', '?')}, "
                  f"{ctx.get('num_cpus', '?')} CPUs @ {ctx.get('mhz_per_cpu', '?')} MHz"
                  + (f", {ctx['gpu']}" if "gpu" in ctx else ""))
    md += ["", "| benchmark | size | variant | time (ms) | throughput | vs baseline | vs reference |",
           "|---|---|---|---:|---:|---:|---:|"]
    speedups = []
    for (family, args) in sorted(groups, key=lambda k: (k[0], size_key(k[1]))):
        variants = groups[(family, args)]
        base = next((variants[v] for v in BASELINES if v in variants), None)
        ref = next((variants[v] for v in REFERENCES if v in variants), None)
        for v, r in sorted(variants.items()):
            tp = f"{r['value']:.2f} {r['unit']}" if r["value"] is not None else ""
            vs_base = vs_ref = ""
            if base is not None and r is not base:
                x = base["ms"] / r["ms"]
                vs_base = f"{x:.2f}x vs {base['variant']}"
                if base["variant"] == "cpu":
                    speedups.append((family, args, v, x))
            if ref is not None and r is not ref:
                vs_ref = f"{100 * ref['ms'] / r['ms']:.0f}% of {ref['variant']}"
            md.append(f"| {family} | {args} | {v} | {r['ms']:.4g} | {tp} | {vs_base} | {vs_ref} |")
    if skipped:
        md += ["", f"Skipped ({len(skipped)}): " + "; ".join(
            sorted({f"{f}/{v}: {msg}" for f, v, _, msg in skipped})[:12])]
        if any("cuda" in v or "GPU" in m or "CUDA" in m for _, v, _, m in skipped):
            md.append("")
            md.append("**The CUDA part was skipped: no GPU on this machine.**")

    # Plots (gnuplot, optional).
    plots = []
    if shutil.which("gnuplot"):
        for family in sorted({f for f, _ in groups}):
            series = defaultdict(list)
            for (f, args), variants in groups.items():
                if f != family:
                    continue
                for v, r in variants.items():
                    if r["value"] is not None:
                        series[v].append((size_key(args)[0], r["value"], r["unit"]))
            if len(series) < 2 or max(len(s) for s in series.values()) < 2:
                continue
            unit = next(iter(series.values()))[0][2]
            dat = out / f"{family}.dat"
            with dat.open("w") as fh:
                for v, pts in series.items():
                    fh.write(f'"{v}"\n')
                    for x, y, _ in sorted(pts):
                        fh.write(f"{x} {y}\n")
                    fh.write("\n\n")
            png = out / f"{family}.png"
            script = (f'set terminal pngcairo noenhanced size 900,520; set output "{png}";'
                      f'set title "{family}"; set logscale x 2; set xlabel "size (product of the size arguments)";'
                      f'set ylabel "{unit}"; set key left top; set grid;'
                      f'plot for [i=0:{len(series) - 1}] "{dat}" index i using 1:2 with linespoints title columnheader(1)')
            subprocess.run(["gnuplot", "-e", script], check=True)
            dat.unlink()
            plots.append(png.name)
        if speedups:
            dat = out / "speedup.dat"
            best = {}
            for family, args, v, x in speedups:
                if family not in best or size_key(args) > size_key(best[family][0]):
                    best[family] = (args, x)
            with dat.open("w") as fh:
                for family, (args, x) in sorted(best.items()):
                    fh.write(f'"{family}" {x}\n')
            png = out / "cuda_speedup.png"
            script = (f'set terminal pngcairo noenhanced size 900,520; set output "{png}";'
                      'set title "CUDA speed-up over CPU (largest size)"; set style fill solid;'
                      'set boxwidth 0.6; set logscale y; set ylabel "x"; set xtics rotate by -30; set grid ytics;'
                      f'plot "{dat}" using 0:2:xtic(1) with boxes notitle')
            subprocess.run(["gnuplot", "-e", script], check=True)
            dat.unlink()
            plots.append(png.name)
    if plots:
        md += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    (out / "report.md").write_text("\n".join(md) + "\n")
    print(f"report: {out / 'report.md'} ({len(rows)} results, {len(skipped)} skipped, {len(plots)} plots)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
