#!/usr/bin/env python3
"""A training step's kernels by kind, from Nsight Compute's raw CSV of `gpu__time_duration.sum`.

Sums every kernel of the file by kind (the kernel's name without template arguments or
parameters; cuDNN's and cuBLAS's own kernels as one kind; --names: by each kernel's own name) and divides by --steps, the number of
steps the profiled run took (a warm-up step and a timed one: 2). Prints kind, kernels per step,
ms per step and us per kernel, the dearest first, then the total.

    ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw PROGRAM ... > k.csv
    python3 tools/gpu/ncu_kernels.py k.csv --steps 2
"""
import argparse
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ncu_pass import kernels  # noqa: E402  (the CSV reader both scripts share)


def kind(name):
    if any(s in name for s in ("xmma", "nvjet", "cutlass", "sm90_", "cudnn", "gemv", "splitKreduce", "gemmk")):
        return "cuDNN/cuBLAS: " + ("attention" if re.search(r"fmha|flash|sdpa|attn", name, re.I) else "GEMM or conv")
    name = name.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    return re.sub(r"^void ", "", re.sub(r"<.*", "", name)).split("::")[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--steps", type=float, default=1.0)
    ap.add_argument("--names", action="store_true",
                    help="every kernel by its own name (template arguments dropped), cuDNN's and cuBLAS's too")
    a = ap.parse_args()
    by = defaultdict(lambda: [0, 0.0])
    for name, t in kernels(a.csv, ("gpu__time_duration.sum",), "ncu_kernels"):
        b = by[re.sub(r"\(.*", "", name)[:140] if a.names else kind(name)]
        b[0] += 1
        b[1] += t
    total = sum(t for _, t in by.values())
    for k, (c, t) in sorted(by.items(), key=lambda z: -z[1][1]):
        print(f"{c / a.steps:7.1f} {t / a.steps / 1e6:8.3f} ms {t / c / 1e3:9.1f} us  {k}")
    print(f"{sum(c for c, _ in by.values()) / a.steps:7.1f} {total / a.steps / 1e6:8.3f} ms  all kernels per step")


if __name__ == "__main__":
    main()
