#!/usr/bin/env python3
"""Summarises ncu's per-instruction source page of one kernel.

Input: the CSV of `ncu -i REPORT --page source --csv --print-source sass`,
from a report taken with `--section SourceCounters --section
WarpStateStats` (gpu-run.sh and bench/NOTES.md, session 24). Prints:
  - the stall reasons over all samples, largest first;
  - the instruction mix weighted by how often each instruction ran;
  - the TOP instructions with the most samples and their main reasons.

Mind what the profile does to the kernel: with SourceCounters the D 64
causal FlashAttention ran 185 M warp instructions against 165.6 M in a
metrics-only run, the difference being the producer's mbarrier retry
loop (it spins longer when the profiled kernel runs slower). Count
instructions with `--metrics smsp__inst_executed.sum` before believing a
spin loop costs anything.

Usage: ncu_source_summary.py SOURCE.csv [TOP]
"""
import collections
import csv
import re
import sys


def as_int(text):
    try:
        return int(text.replace(",", "")) if text else 0
    except ValueError:
        return 0


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    with open(sys.argv[1], newline="") as f:
        rows = list(csv.reader(f))
    # The first row names the kernel; the header is the row holding "Source".
    head = next(i for i, r in enumerate(rows) if "Source" in r)
    hdr = rows[head]
    col = {h: i for i, h in enumerate(hdr)}
    for need in ("Source", "Instructions Executed", "Warp Stall Sampling (All Samples)"):
        if need not in col:
            sys.exit(f"{sys.argv[1]}: no '{need}' column (was the report taken with SourceCounters?)")
    reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    stalls = collections.Counter()
    mix = collections.Counter()
    mix_samples = collections.Counter()
    lines = []
    samples = executed = 0
    for k, r in enumerate(rows[head + 1:]):
        if len(r) < len(hdr):
            continue
        n = as_int(r[col["Warp Stall Sampling (All Samples)"]])
        ran = as_int(r[col["Instructions Executed"]])
        text = r[col["Source"]].strip()
        samples += n
        executed += ran
        why = collections.Counter({h[6:]: as_int(r[col[h]]) for h in reasons})
        stalls.update(why)
        opcode = re.sub(r"^@!?U?P\w+\s+", "", text).split()
        opcode = opcode[0] if opcode else "?"
        mix[opcode] += ran
        mix_samples[opcode] += n
        lines.append((n, k, ran, text, why))
    print(f"{rows[0][1] if len(rows[0]) > 1 else ''}: {samples} samples, {executed} warp instructions executed")
    print("\nstall reasons (share of all samples):")
    for why, n in stalls.most_common():
        if n:
            print(f"  {why:22s} {n:8d} {100 * n / max(samples, 1):5.1f} %")
    unnamed = samples - sum(stalls.values())
    if unnamed > 0:
        print(f"  {'(not in the export)':22s} {unnamed:8d} {100 * unnamed / samples:5.1f} %")
    print("\ninstruction mix (share of executed):")
    for op, ran in mix.most_common(30):
        print(f"  {op:32s} {ran:11d} {100 * ran / max(executed, 1):5.1f} %  samples {mix_samples[op]}")
    print(f"\nthe {top} instructions with the most samples (index, executed, text, main reasons):")
    for n, k, ran, text, why in sorted(lines, key=lambda x: -x[0])[:top]:
        main_why = " ".join(f"{w}:{v}" for w, v in why.most_common(3) if v)
        print(f"  {n:6d} {k:5d} {ran:9d}  {text[:64]:64s} {main_why}")


if __name__ == "__main__":
    main()
