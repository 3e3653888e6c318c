#!/usr/bin/env python3
"""Renders a benchmark run (the CSV that `make bench` gathers) as a Markdown
report with plots.

    python3 bench/report.py RESULTS.csv [REPORT.md]

The CSV has one line per measurement: op, shape, dtype, impl, ms, rate, unit,
ratio_to_baseline, rel_err (bench/bench.h). Within a group (op, shape, dtype)
the line whose impl starts with "baseline:" is what the others are measured
against. Plots are drawn with matplotlib when it can be imported, else with
gnuplot when it is on the PATH; otherwise the report says how to draw them.
The images go beside the report, named after it.
"""
import csv
import datetime
import os
import shutil
import subprocess
import sys
from collections import OrderedDict


def read_rows(path):
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            for key in ("ms", "rate", "ratio_to_baseline", "rel_err"):
                try:
                    r[key] = float(r[key])
                except (TypeError, ValueError):
                    r[key] = 0.0
            rows.append(r)
    return rows


def groups(rows):
    """(op, shape, dtype) -> {"baseline": row or None, "ours": [rows]}, in order.

    A memory-bound op may print its copy ceiling as an op of its own named
    "copy" (same shape and dtype) instead of a "baseline:" line: such a copy
    becomes the baseline of the groups that lack one, and is not listed
    by itself."""
    out = OrderedDict()
    for r in rows:
        g = out.setdefault((r["op"], r["shape"], r["dtype"]), {"baseline": None, "ours": [], "peers": []})
        if r["impl"].startswith("baseline:"):
            g["baseline"] = r
        elif r["impl"].startswith(("peer:", "context:")):
            # another library's, or another op of ours timed beside this one (the GEMM
            # without its epilogue, say): for context, neither ours nor the baseline
            g["peers"].append(r)
        else:
            g["ours"].append(r)
    copies = {(k[1], k[2]): k for k in out if k[0] == "copy"}
    for key, g in out.items():
        ck = copies.get((key[1], key[2]))
        if key[0] != "copy" and g["baseline"] is None and ck and out[ck]["ours"]:
            g["baseline"] = dict(out[ck]["ours"][0], impl="baseline:" + out[ck]["ours"][0]["impl"])
    used = {copies[(k[1], k[2])] for k, g in out.items()
            if k[0] != "copy" and (k[1], k[2]) in copies and g["baseline"] is not None}
    for k in used:
        del out[k]
    return out


def best(rows):
    """Our fastest row: the highest rate, or the least time when there is none."""
    if not rows:
        return None
    if any(r["rate"] > 0 for r in rows):
        return max(rows, key=lambda r: r["rate"])
    return min(rows, key=lambda r: r["ms"])


def flops_of(shape):
    try:
        m, n, k = (int(x) for x in shape.split("x"))
        return m * n * k
    except ValueError:
        return 0


# ---------------------------------------------------------------- plots


def series(gs, pick):
    """Per op: shapes in order and the (baseline, ours) rates, for groups
    that pick() keeps."""
    out = OrderedDict()
    for (op, shape, dtype), g in gs.items():
        if not pick(op, g) or not g["ours"]:
            continue
        b = best(g["ours"])
        s = out.setdefault(op, [])
        s.append((shape + ("" if dtype in ("bf16", "") else " " + dtype), g["baseline"], b))
    return out


def plot_matplotlib(data, title, ylabel, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(data)
    fig, axes = plt.subplots(n, 1, figsize=(10, 3.6 * n), squeeze=False)
    for ax, (op, pts) in zip(axes[:, 0], data.items()):
        x = range(len(pts))
        ax.plot(x, [p[2]["rate"] for p in pts], "o-", label="libtilec (best)")
        if any(p[1] for p in pts):
            ax.plot(x, [p[1]["rate"] if p[1] else float("nan") for p in pts], "s--",
                    label=(pts[0][1] or {}).get("impl", "baseline").replace("baseline:", ""))
        ax.set_xticks(list(x))
        ax.set_xticklabels([p[0] for p in pts], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(ylabel)
        ax.set_title("%s: %s" % (title, op))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_gnuplot(data, title, ylabel, path):
    base = os.path.splitext(path)[0]
    script = ["set terminal pngcairo size 1000,%d" % (360 * len(data)), "set output '%s'" % path,
              "set multiplot layout %d,1" % len(data), "set grid", "set xtics rotate by -30 font ',8'",
              "set ylabel '%s'" % ylabel, "set datafile separator '\\t'"]
    for i, (op, pts) in enumerate(data.items()):
        dat = "%s-%d.dat" % (base, i)
        with open(dat, "w") as f:
            for j, p in enumerate(pts):
                f.write("%d\t%s\t%g\t%s\n" % (j, p[0], p[2]["rate"], p[1]["rate"] if p[1] else "NaN"))
        script.append("set title '%s: %s'" % (title, op))
        script.append("plot '%s' using 1:3:xtic(2) with linespoints title 'libtilec (best)', "
                      "'' using 1:4 with linespoints dt 2 title 'baseline'" % dat)
    script.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(script), text=True, check=True)


def renderer():
    try:
        import matplotlib  # noqa: F401

        return "matplotlib", plot_matplotlib
    except ImportError:
        pass
    if shutil.which("gnuplot"):
        return "gnuplot", plot_gnuplot
    return None, None


# ---------------------------------------------------------------- report


def summary_table(gs):
    lines = ["| op | shape | dtype | baseline | its rate | best of libtilec | its rate | ratio | rel err |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (op, shape, dtype), g in gs.items():
        b, o = g["baseline"], best(g["ours"])
        if not o:
            continue
        unit = o["unit"]
        ratio = o["ratio_to_baseline"] if b else 0
        lines.append("| %s | %s | %s | %s | %s | %s | %.1f %s | %s | %.1e |" % (
            op, shape, dtype, b["impl"].replace("baseline:", "") if b else "-",
            ("%.1f %s" % (b["rate"], unit)) if b else "-", o["impl"], o["rate"], unit,
            ("%.3f" % ratio) if b else "-", o["rel_err"]))
    return lines


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: report.py RESULTS.csv [REPORT.md]\n")
        return 2
    src = argv[1]
    dst = argv[2] if len(argv) > 2 else os.path.splitext(src)[0] + ".md"
    rows = read_rows(src)
    gs = groups(rows)
    base = os.path.splitext(dst)[0]
    name = os.path.basename(base)
    md = ["# Benchmarks: %s" % name, "",
          "Gathered by `make bench` (bench/run.sh) from `%s`, rendered %s by bench/report.py." % (
              os.path.basename(src), datetime.date.today().isoformat()),
          "Ratios are to the baseline measured in the same run (cuBLAS for GEMM, a device-to-device",
          "copy for memory-bound ops); only ratios compare across runs.", "",
          "## Each op against its baseline", ""]
    md += summary_table(gs)
    tool, plot = renderer()
    plots = [
        ("gemm", "TFLOP/s against size, our GEMM and cuBLAS", "TFLOP/s",
         lambda op, g: op.startswith("gemm") and g["ours"][:1] and g["ours"][0]["unit"] == "TFLOP/s"),
        ("bandwidth", "bandwidth against the copy ceiling", "GB/s",
         lambda op, g: g["ours"][:1] and g["ours"][0]["unit"] == "GB/s"),
        ("attention", "attention TFLOP/s over the grid", "TFLOP/s",
         lambda op, g: ("attn" in op or "attention" in op) and g["ours"][:1] and g["ours"][0]["unit"] == "TFLOP/s"),
    ]
    md += ["", "## Plots", ""]
    for key, title, ylabel, pick in plots:
        data = series(gs, pick)
        if key == "gemm":
            for op in data:
                data[op].sort(key=lambda p: flops_of(p[0].split()[0]))
        if not data:
            md.append("- %s: no measurements in this run" % title)
            continue
        img = "%s-%s.png" % (base, key)
        if plot:
            plot(data, title, ylabel, img)
            md += ["### %s" % title, "", "![%s](%s)" % (title, os.path.basename(img)), ""]
        else:
            md.append("- %s: not drawn (neither matplotlib nor gnuplot here)" % title)
    md += ["", "## Rendering elsewhere", "",
           "The plots were drawn with %s. To draw them again, or on another machine:" % (tool or "nothing"), "",
           "```sh", "python3 bench/report.py %s %s" % (os.path.basename(src), os.path.basename(dst)), "```", "",
           "with matplotlib installed (`pip install matplotlib`), or gnuplot on the PATH",
           "(`apt-get install gnuplot-nox`). The CSV is plain: any plotting tool reads it.", ""]
    with open(dst, "w") as f:
        f.write("\n".join(md))
    print("wrote %s%s" % (dst, " and its plots (%s)" % tool if tool else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
