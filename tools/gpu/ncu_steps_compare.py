#!/usr/bin/env python3
"""Two Nsight Compute runs of the same training, step by step and kernel by kernel: which
kernels of B take longer than the same kernels of A (dist_ncu.sh: a rank of a 2-rank job against
the same GPU alone).

Reads two `ncu --csv --page raw --metrics gpu__time_duration.sum` logs (gzip or plain), cuts each
into training steps at the optimizer's multi-tensor launches (a step: from after one run of them
to the end of the next), leaves out NCCL's kernels (reported apart), checks that each pair of steps
runs the same kernels in the same order, and prints per step the total, the ratio by kind of
kernel, and the kernels that grew most.

    python3 tools/gpu/ncu_steps_compare.py alone.csv.gz rank1.csv.gz
"""
import argparse
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ncu_pass import kernels  # noqa: E402

KINDS = [("nccl", "NCCL"), ("xmma", "convolution (cuDNN)"), ("nvjet", "GEMM (cuBLAS)"), ("bn_sums", "batch norm statistics"),
         ("finish", "batch norm finishing"), ("bn_apply", "batch norm apply"), ("convert", "conversions"),
         ("multi_tensor", "optimizer"), ("pool", "pooling"), ("binary", "element-wise (residual adds)")]


def kind(name):
    return next((label for key, label in KINDS if key in name), "other")


def read(path):
    return kernels(path, ("gpu__time_duration.sum",), "ncu_steps_compare")


def steps(k):
    """The kernels between the ends of consecutive optimizer runs (one run: consecutive launches)."""
    ends = [i for i, (n, _) in enumerate(k) if "multi_tensor" in n and (i + 1 == len(k) or "multi_tensor" not in k[i + 1][0])]
    return [k[a + 1:b + 1] for a, b in zip(ends, ends[1:])]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--top", type=int, default=6, help="kernels that grew most, per step")
    args = ap.parse_args()
    sa, sb = steps(read(args.a)), steps(read(args.b))
    if not sa or not sb:
        sys.exit("ncu_steps_compare: no whole step (two runs of the optimizer's launches) in one of the logs")
    for i, (x, y) in enumerate(zip(sa, sb)):
        nccl = sum(t for n, t in y if kind(n) == "NCCL") + sum(t for n, t in x if kind(n) == "NCCL")
        x = [(n, t) for n, t in x if kind(n) != "NCCL"]
        y = [(n, t) for n, t in y if kind(n) != "NCCL"]
        if [n for n, _ in x] != [n for n, _ in y]:
            print(f"step {i}: the kernels differ ({len(x)} against {len(y)}); not compared")
            continue
        ta, tb = sum(t for _, t in x) / 1e6, sum(t for _, t in y) / 1e6
        print(f"step {i}: {len(x)} kernels, A {ta:.3f} ms, B {tb:.3f} ms ({tb / ta:.4f}x); NCCL {nccl / 1e6:.3f} ms")
        by = defaultdict(lambda: [0, 0.0, 0.0])
        for (n, p), (_, q) in zip(x, y):
            b = by[kind(n)]
            b[0] += 1
            b[1] += p
            b[2] += q
        for k, (c, p, q) in sorted(by.items(), key=lambda z: -z[1][1]):
            print(f"  {k:<30} {c:4d}  A {p / 1e6:7.3f}  B {q / 1e6:7.3f} ms  {q / p:.4f}x")
        for d, n, p, q in sorted(((q - p, n, p, q) for (n, p), (_, q) in zip(x, y)), reverse=True)[:args.top]:
            print(f"    +{d / 1e3:5.1f} us  {p / 1e3:7.1f} -> {q / 1e3:7.1f}  {n[:100]}")


if __name__ == "__main__":
    main()
