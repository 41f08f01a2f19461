#!/usr/bin/env python3
"""A training step's kernels by kind, from Nsight Compute's raw CSV of `gpu__time_duration.sum`.

Sums every kernel of the file by kind (the kernel's name without template arguments or
parameters; cuDNN's and cuBLAS's own kernels as one kind) and divides by --steps, the number of
steps the profiled run took (a warm-up step and a timed one: 2). Prints kind, kernels per step,
ms per step and us per kernel, the dearest first, then the total.

    ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw PROGRAM ... > k.csv
    python3 tools/gpu/ncu_kernels.py k.csv --steps 2
"""
import argparse
import csv
import io
import re
import sys
from collections import defaultdict


def kind(name):
    if any(s in name for s in ("xmma", "nvjet", "cutlass", "sm90_", "cudnn", "gemv", "splitKreduce", "gemmk")):
        return "cuDNN/cuBLAS: " + ("attention" if re.search(r"fmha|flash|sdpa|attn", name, re.I) else "GEMM or conv")
    name = re.sub(r"\(.*", "", name.replace("(anonymous namespace)::", "").replace("<unnamed>::", ""))
    base = re.sub(r"<.*", "", name)
    return re.sub(r"^void ", "", base).split("::")[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--steps", type=float, default=1.0)
    a = ap.parse_args()
    try:
        lines = open(a.csv, encoding="utf-8", errors="replace").read().splitlines()
    except OSError as e:
        sys.exit(f"ncu_kernels: cannot read {a.csv}: {e.strerror}")
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        sys.exit(f"ncu_kernels: {a.csv} holds no Nsight Compute raw CSV (no header line starting with \"ID\")")
    reader = csv.DictReader(io.StringIO("\n".join(lines[start:])))
    metric = "gpu__time_duration.sum"
    if metric not in (reader.fieldnames or []):
        sys.exit(f"ncu_kernels: {a.csv} has no column {metric}")
    by = defaultdict(lambda: [0, 0.0])
    for r in list(reader)[1:]:  # the second row holds units
        try:
            t = float(r[metric].replace(",", ""))
        except ValueError:
            sys.exit(f"ncu_kernels: {metric} of {r['Kernel Name'][:60]} is '{r[metric]}', not a number")
        b = by[kind(r["Kernel Name"])]
        b[0] += 1
        b[1] += t
    total = sum(t for _, t in by.values())
    for k, (c, t) in sorted(by.items(), key=lambda z: -z[1][1]):
        print(f"{c / a.steps:7.1f} {t / a.steps / 1e6:8.3f} ms {t / c / 1e3:9.1f} us  {k}")
    print(f"{sum(c for c, _ in by.values()) / a.steps:7.1f} {total / a.steps / 1e6:8.3f} ms  all kernels per step")


if __name__ == "__main__":
    main()
