#!/usr/bin/env python3
"""Turns Google Benchmark JSON files into a Markdown report and PNG plots.

  benchmarks/report.py OUT_DIR results1.json [results2.json ...]

Benchmark names follow  family/variant/arg[/arg...]  (a leading "BM_" and Google Benchmark's
suffixes such as /min_time:0.300 or /manual_time are dropped), e.g.
  matmul/eigen/1024   layernorm_fwd/cuda/8192x768   add/cpu/8x1024x768
Within one family and argument set, variants are compared:
  * "cpu" against "cuda": the CPU vs CUDA table and the speed-up bar plot (cuda_speedup.png);
  * speed-up over a baseline variant: "naive" (for optimized versions) or "cpu" (for cuda);
  * percentage of a reference variant: "openblas", "cublas", "torch", "memcpy" or "copy".
Benchmarks that skipped themselves say why (e.g. "no GPU", "built without CUDA"); the report
lists them and says explicitly when the CUDA part was skipped.
The GPT-2 training steps (family gpt2_train_step: cuda, cuda_tf32 and chapter 10's
cuda_nowaste_tf32, cuda_fast_tf32 and their _graph variants) also get a table of their own:
ms/step, tok/s, the speed-up over cuda_tf32, the caching allocator's peak, host
synchronizations and cudaMallocs per step.

Data-parallel scaling (chapter 12) is not a Google Benchmark: tools/scaling_gpu measures it on
a machine with several GPUs and writes chapters/12_data_parallel/scaling_gpu.csv (its first
line says where and when); when that file exists the report shows it as a section of its own.

The header (date, GPU, CPU, commit) comes from the JSON contexts and, when present, the files
that tools/run_benchmarks writes next to them in OUT_DIR: gpu.txt, cpu.txt and commit.txt.
Writes OUT_DIR/report.md and, when gnuplot is installed, OUT_DIR/*.png.
"""
from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

BASELINES = ["naive", "cpu"]
STEP_FAMILY = "gpt2_train_step"
STEP_BASELINE = "cuda_tf32"  # chapter 09's TF32 step: what chapter 10 speeds up
STEP_COUNTERS = ["tok/s", "peak_MiB", "syncs/step", "mallocs/step", "graph_nodes"]
REFERENCES = ["openblas", "cublas", "torch", "memcpy", "copy"]
DEVICES = ["cpu", "cuda"]
# Google Benchmark appends these to a name (run options); they are not arguments.
OPTION_PART = re.compile(r"^(manual_time|real_time|process_time|"
                         r"(min_time|min_warmup_time|iterations|repeats|threads):.*)$")


def parse_name(name: str):
    parts = [p for p in re.sub(r"^BM_", "", name).split("/") if not OPTION_PART.match(p)]
    family = parts[0]
    variant = parts[1] if len(parts) > 1 else "default"
    args = "/".join(parts[2:]) if len(parts) > 2 else ""
    return family, variant, args


def throughput(b: dict):
    """(value, unit) of the most meaningful rate of a benchmark, or (None, '')."""
    for key, unit, scale in (("tok/s", "tok/s", 1), ("TFLOP/s", "TFLOP/s", 1),
                             ("GFLOP/s", "GFLOP/s", 1), ("GFLOP", "GFLOP/s", 1),
                             ("FLOPS", "GFLOP/s", 1e-9), ("flops", "GFLOP/s", 1e-9),
                             ("GB/s", "GB/s", 1), ("bytes_per_second", "GB/s", 1e-9),
                             ("items_per_second", "items/s", 1)):
        if key in b:
            return float(b[key]) * scale, unit
    return None, ""


def time_ms(b: dict) -> float:
    unit = b.get("time_unit", "ns")
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[unit]
    return float(b["real_time"]) * scale


def size_key(args: str):
    """(product of the numbers in args, args); "1024^3" counts as 1024 * 1024 * 1024."""
    prod = 1
    for base, power in re.findall(r"(\d+)(?:\^(\d+))?", args):
        prod *= int(base) ** int(power or 1)
    return (prod, args)


def fmt_rate(r: dict) -> str:
    return f"{r['value']:.4g} {r['unit']}" if r.get("value") is not None else ""


def read_text(path: Path) -> str | None:
    return path.read_text().strip() if path.is_file() else None


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def load(files):
    """(results, skipped, contexts): results and skips as dicts with family/variant/args."""
    results, skipped, contexts = [], [], []
    for f in files:
        data = json.loads(Path(f).read_text())
        contexts.append((Path(f).name, data.get("context", {})))
        for b in data.get("benchmarks", []):
            if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
                continue
            family, variant, args = parse_name(b.get("run_name", b["name"]))
            entry = dict(family=family, variant=variant, args=args)
            if b.get("error_occurred") or b.get("skipped"):
                entry["reason"] = b.get("error_message") or b.get("skip_message") or "skipped"
                skipped.append(entry)
                continue
            entry["value"], entry["unit"] = throughput(b)
            entry["ms"] = time_ms(b)
            entry["counters"] = {k: b[k] for k in STEP_COUNTERS if k in b}
            results.append(entry)
    return results, skipped, contexts


def header(out: Path, contexts) -> list[str]:
    dates = sorted(ctx["date"] for _, ctx in contexts if "date" in ctx)
    gpus = sorted({ctx["gpu"] for _, ctx in contexts if "gpu" in ctx})
    gpu = read_text(out / "gpu.txt") or (", ".join(gpus) if gpus else "none")
    ctx0 = contexts[0][1] if contexts else {}
    cpu = read_text(out / "cpu.txt") or (f"{ctx0.get('num_cpus', '?')} CPUs @ "
                                         f"{ctx0.get('mhz_per_cpu', '?')} MHz")
    md = ["# Benchmark report", "",
          f"- date: {dates[0] if dates else '?'}",
          f"- GPU: {gpu}",
          f"- CPU: {cpu}",
          f"- commit: {read_text(out / 'commit.txt') or git_commit()}", ""]
    for name, ctx in contexts:
        md.append(f"- `{name}`: {ctx.get('date', '?')}, host {ctx.get('host_name', '?')}, "
                  f"{ctx.get('num_cpus', '?')} CPUs @ {ctx.get('mhz_per_cpu', '?')} MHz"
                  + (f", {ctx['gpu']}" if "gpu" in ctx else "")
                  + (f", CUDA {ctx['cuda']}" if "cuda" in ctx else ""))
    return md


def cuda_skip_line(skipped) -> list[str]:
    """The explicit line saying that (and why) the CUDA part was skipped, or nothing."""
    reasons = defaultdict(int)
    for s in skipped:
        if s["variant"] in ("cuda", "memcpy", "cublas") or "GPU" in s["reason"] or \
                "CUDA" in s["reason"]:
            reasons[s["reason"]] += 1
    if not reasons:
        return []
    why = "; ".join(f"{r} ({n} benchmarks)" for r, n in sorted(reasons.items()))
    return ["", f"**The CUDA part was skipped: {why}.** Only the CPU variants ran; run "
            "`tools/run_benchmarks` on a machine with a GPU for the CUDA columns."]


def device_table(order, groups, skips) -> tuple[list[str], list]:
    """The CPU vs CUDA table and the (label, speed-up) pairs of the bar plot."""
    md = ["## CPU vs CUDA", "",
          "Same kernel, same arguments on both devices; speed-up = CPU time / CUDA time.", "",
          "| kernel | args | CPU time (ms) | CUDA time (ms) | CUDA speed-up | CPU rate "
          "| CUDA rate |",
          "|---|---|---:|---:|---:|---:|---:|"]
    bars = []
    paired = defaultdict(int)  # family -> number of arg sets with both devices measured
    for key in order:
        if all(v in groups[key] for v in DEVICES):
            paired[key[0]] += 1
    n_rows = 0
    for key in order:
        ran, skip = groups[key], skips[key]
        if not any(v in ran or v in skip for v in DEVICES):
            continue
        n_rows += 1
        cells = []
        for v in DEVICES:
            if v in ran:
                cells.append(f"{ran[v]['ms']:.4g}")
            elif v in skip:
                cells.append(f"skipped: {skip[v]}")
            else:
                cells.append("—")
        speedup = ""
        if "cpu" in ran and "cuda" in ran:
            x = ran["cpu"]["ms"] / ran["cuda"]["ms"]
            speedup = f"{x:.1f}x"
            label = key[0] if paired[key[0]] == 1 else f"{key[0]} {key[1]}"
            bars.append((label, x))
        rates = [fmt_rate(ran[v]) if v in ran else "" for v in DEVICES]
        md.append(f"| {key[0]} | {key[1]} | {cells[0]} | {cells[1]} | {speedup} | "
                  f"{rates[0]} | {rates[1]} |")
    return (md if n_rows else []), bars


def variants_table(order, groups) -> list[str]:
    """The results of every family and size that has variants other than cpu and cuda (naive,
    optimized versions, references), with the speed-up over the baseline and the share of the
    reference."""
    order = [k for k in order if any(v not in DEVICES for v in groups[k])]
    if not order:
        return []
    md = ["## Naive vs optimized, share of the reference", "",
          "| benchmark | size | variant | time (ms) | throughput | vs baseline | vs reference |",
          "|---|---|---|---:|---:|---:|---:|"]
    for key in sorted(order, key=lambda k: (k[0], size_key(k[1]))):
        variants = groups[key]
        base = next((variants[v] for v in BASELINES if v in variants), None)
        ref = next((variants[v] for v in REFERENCES if v in variants), None)
        for v, r in sorted(variants.items()):
            vs_base = vs_ref = ""
            if base is not None and r is not base:
                vs_base = f"{base['ms'] / r['ms']:.2f}x vs {base['variant']}"
            if ref is not None and r is not ref:
                vs_ref = f"{100 * ref['ms'] / r['ms']:.0f}% of {ref['variant']}"
            md.append(f"| {key[0]} | {key[1]} | {v} | {r['ms']:.4g} | {fmt_rate(r)} | {vs_base} "
                      f"| {vs_ref} |")
    return md


def step_table(order, groups, skips) -> list[str]:
    """The GPT-2 training steps, one row per variant and shape: time, tokens/s, speed-up over
    cuda_tf32, and the counters of a step without waste (chapter 10)."""
    keys = [k for k in order if k[0] == STEP_FAMILY]
    if not keys:
        return []
    md = ["## GPT-2 training step (chapters 09-10)", "",
          "One step (forward, backward, AdamW). peak MiB: the caching allocator's peak bytes "
          "allocated; syncs and mallocs: host synchronizations and cudaMalloc calls per step "
          f"(chapter 10, \"A step without waste\"); speed-up over `{STEP_BASELINE}`.", "",
          "| shape | variant | ms/step | tok/s | vs cuda_tf32 | peak MiB | syncs/step "
          "| mallocs/step |",
          "|---|---|---:|---:|---:|---:|---:|---:|"]
    for key in keys:
        ran = groups[key]
        base = ran.get(STEP_BASELINE)
        for v, r in sorted(ran.items()):
            c = r.get("counters", {})
            vs = f"{base['ms'] / r['ms']:.2f}x" if base is not None and r is not base else ""
            cell = lambda name, f: f.format(c[name]) if name in c else ""  # noqa: E731
            md.append(f"| {key[1]} | {v} | {r['ms']:.4g} | {cell('tok/s', '{:.4g}')} | {vs} | "
                      f"{cell('peak_MiB', '{:.0f}')} | {cell('syncs/step', '{:.3g}')} | "
                      f"{cell('mallocs/step', '{:.3g}')} |")
        for v, why in sorted(skips[key].items()):
            md.append(f"| {key[1]} | {v} | skipped: {why} | | | | | |")
    return md


def read_measured_csv(path: Path):
    """(note from the '#' lines, rows) of a committed CSV of measured points, or None."""
    if not path.exists():
        return None
    lines = path.read_text().splitlines()
    note = " ".join(l[1:].strip() for l in lines if l.startswith("#"))
    return note, list(csv.DictReader(l for l in lines if not l.startswith("#")))


SCALING_CSV = Path(__file__).resolve().parent.parent / "chapters" / "12_data_parallel" / \
    "scaling_gpu.csv"


def scaling_section(path: Path = SCALING_CSV) -> list[str]:
    """The data-parallel scaling table from tools/scaling_gpu's CSV, or nothing."""
    measured = read_measured_csv(path)
    if measured is None:
        return []
    note, rows = measured
    md = ["## Data-parallel scaling (chapter 12)", "",
          f"Measured by `tools/scaling_gpu` (not part of this run): {note}. Weak scaling: every "
          "GPU keeps B=8 rows of T=1024 tokens; efficiency = tok/s on N GPUs / (N x tok/s of "
          "the one-GPU baseline).", "",
          "| system | GPUs | ms/step | tok/s | efficiency | peak GiB per GPU | optimizer state GiB |",
          "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        eff = f"{100 * float(r['efficiency']):.1f}%" if r.get("efficiency") else ""
        md.append(f"| {r['system']} | {r['gpus']} | {r['ms_per_step']} | {r['tok_s']} | {eff} | "
                  f"{r['peak_mem_gib']} | {r.get('opt_state_gib') or ''} |")
    return md


BF16_DIR = Path(__file__).resolve().parent.parent / "chapters" / "11_mixed_precision"


def bf16_section(step_csv: Path = BF16_DIR / "bf16_step.csv",
                 fits_csv: Path = BF16_DIR / "bf16_fits.csv") -> list[str]:
    """The bf16 step against torch.compile (and llm.c when the CSV has its row), and the memory
    grid, from tools/bf16_step_gpu's CSVs, or nothing."""
    step = read_measured_csv(step_csv)
    if step is None:
        return []
    note, rows = step
    anchors = [(name, next((float(r["ms_per_step"]) for r in rows if r["system"].startswith(key)),
                           None)) for name, key in [("torch.compile", "PyTorch bf16_compile"),
                                                    ("llm.c", "llm.c")]]
    anchors = [(name, ms) for name, ms in anchors if ms]
    md = ["## GPT-2 step in bf16 (chapter 11)", "",
          f"Measured by `tools/bf16_step_gpu` (not part of this run): {note}. A ratio above 1 is "
          "faster than the anchor.", "",
          "| system | ms/step | tok/s | peak MiB |" + "".join(f" vs {n} |" for n, _ in anchors),
          "|---|---:|---:|---:|" + "---:|" * len(anchors)]
    for r in rows:
        vs = "".join(f" {ms / float(r['ms_per_step']):.2f}x |" for _, ms in anchors)
        md.append(f"| {r['system']} | {r['ms_per_step']} | {r['tok_s']} | {r['peak_mib']} |{vs}")
    fits = read_measured_csv(fits_csv)
    if fits is not None:
        note, rows = fits
        md += ["", f"What fits: {note}.", "", "| precision | B | fits | peak MiB | ms/step | tok/s |",
               "|---|---:|---|---:|---:|---:|"]
        md += [f"| {r['precision']} | {r['B']} | {r['fits']} | {r['peak_mib']} | "
               f"{r['ms_per_step']} | {r['tok_s']} |" for r in rows]
    return md


def gnuplot(script: str) -> None:
    subprocess.run(["gnuplot", "-e", script], check=True)


def plot_families(out: Path, groups) -> list[str]:
    """One line plot per family with at least two variants over at least two sizes (the
    naive-vs-optimized progressions; the device variants have their own bar plot). Only sizes
    written as numbers (1024^3, 8x1024x768) are points of a progression: named shapes
    (C768/qkv, lm_head_8192x50257x768) are in the tables, not on a size axis. Each series is
    drawn in size order; the x ticks are the sizes as the benchmarks name them."""
    plots = []
    for family in sorted({f for f, _ in groups}):
        series = defaultdict(dict)
        for (f, args), variants in groups.items():
            if f != family or not re.fullmatch(r"[\d^x]+", args):
                continue
            for v, r in variants.items():
                if r["value"] is not None and v not in DEVICES:
                    series[v][size_key(args)[0]] = (args, r["value"], r["unit"])
        if len(series) < 2 or max(len(s) for s in series.values()) < 2:
            continue
        unit = next(iter(next(iter(series.values())).values()))[2]
        dat = out / f"{family}.dat"
        with dat.open("w") as fh:
            for v, pts in sorted(series.items()):
                fh.write(f'"{v}"\n')
                for x in sorted(pts):
                    args, y, _ = pts[x]
                    fh.write(f'{x} {y} "{args}"\n')
                fh.write("\n\n")
        png = out / f"{family}.png"
        gnuplot(f'set terminal pngcairo noenhanced size 900,520; set output "{png}";'
                f'set title "{family}"; set logscale x 2;'
                'set xlabel "size (the benchmark\'s size arguments)";'
                f'set ylabel "{unit}"; set key left top; set grid; set yrange [0:*];'
                'set offsets graph 0.04, graph 0.04, 0, 0;'
                f'plot for [i=0:{sum(1 for _ in series) - 1}] "{dat}" index i using 1:2:xtic(3) '
                'with linespoints title columnheader(1)')
        dat.unlink()
        plots.append(png.name)
    return plots


def plot_speedups(out: Path, bars) -> list[str]:
    """cuda_speedup.png: one bar per CPU/CUDA pair (log scale)."""
    if not bars:
        return []
    dat = out / "speedup.dat"
    with dat.open("w") as fh:
        for label, x in bars:
            fh.write(f'"{label}" {x}\n')
    png = out / "cuda_speedup.png"
    width = max(900, 40 * len(bars) + 200)
    gnuplot(f'set terminal pngcairo noenhanced size {width},600; set output "{png}";'
            'set title "CUDA speed-up over the CPU (same kernel, same arguments)";'
            'set style fill solid; set boxwidth 0.6; set logscale y;'
            'set ylabel "x (CPU time / CUDA time)";'
            'set xtics rotate by 45 right font ",9"; set grid ytics; set bmargin 12;'
            'set lmargin 12;'
            f'plot "{dat}" using 0:2:xtic(1) with boxes notitle,'
            f' "" using 0:2:(sprintf("%.0f", $2)) with labels offset 0,0.7 notitle')
    dat.unlink()
    return [png.name]


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    results, skipped, contexts = load(sys.argv[2:])

    order = []  # (family, args) in the order of the JSON files (registration order)
    groups, skips = defaultdict(dict), defaultdict(dict)
    for r in results + skipped:
        key = (r["family"], r["args"])
        if key not in groups and key not in skips:
            order.append(key)
        if "reason" in r:
            skips[key][r["variant"]] = r["reason"]
        else:
            groups[key][r["variant"]] = r

    md = header(out, contexts) + cuda_skip_line(skipped)
    table, bars = device_table(order, groups, skips)
    md += ([""] if table else []) + table
    variants = variants_table([k for k in order if groups[k] and k[0] != STEP_FAMILY], groups)
    md += ([""] if variants else []) + variants
    steps = step_table(order, groups, skips)
    md += ([""] if steps else []) + steps
    bf16 = bf16_section()
    md += ([""] if bf16 else []) + bf16
    scaling = scaling_section()
    md += ([""] if scaling else []) + scaling
    if skipped:
        by_reason = defaultdict(list)
        for s in skipped:
            by_reason[s["reason"]].append(f"{s['family']}/{s['variant']}/{s['args']}")
        md += ["", "## Skipped", ""]
        md += [f"- {reason} ({len(names)}): " + ", ".join(f"`{n}`" for n in names)
               for reason, names in sorted(by_reason.items())]

    plots = []
    if shutil.which("gnuplot"):
        plots = plot_families(out, groups) + plot_speedups(out, bars)
    else:
        md += ["", "(gnuplot not found: no plots)"]
    if plots:
        md += ["", "## Plots"] + [line for p in plots for line in ("", f"![{p}]({p})")]
    (out / "report.md").write_text("\n".join(md) + "\n")
    print(f"report: {out / 'report.md'} ({len(results)} results, {len(skipped)} skipped, "
          f"{len(plots)} plots)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
