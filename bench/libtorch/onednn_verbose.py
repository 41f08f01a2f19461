#!/usr/bin/env python3
"""Where one ResNet forward's time goes inside oneDNN, from ONEDNN_VERBOSE=1 output.

Splits the executed primitives into forwards (each starts at the stem: a convolution with 3
input channels), keeps the forwards with the last one's primitive count, takes each position's
median time over them (the first --skip forwards left out: plans and weights being made), and
prints the total, the time per kind (1x1, Winograd, strided and other convolutions, reorders,
...) and, with --calls, every convolution with its GFLOP/s (2 * ic * oc * oh * ow * kh * kw per
image over its median time). Compare the rates with bench/cpu_peak's peaks.

    ONEDNN_VERBOSE=1 OMP_NUM_THREADS=2 build/bin/libtorch_cpu_bench --no-libtorch --rounds 1 \\
        --workloads resnet50_infer_b1_224 --backends onednn --modes direct/folded_nhwc > verbose.log
    python3 bench/libtorch/onednn_verbose.py verbose.log [--calls] [--skip N]
"""
import argparse
import re
import statistics
import sys
from collections import defaultdict

SHAPE = re.compile(r"(mb|ic|oc|oh|ow|kh|kw|sh)(\d+)")


def primitives(path):
    try:
        lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError as e:
        sys.exit(f"onednn_verbose: cannot read {path}: {e.strerror}")
    out = []
    for n, line in enumerate(lines, 1):
        if not line.startswith("onednn_verbose,exec,"):
            continue
        f = line.split(",")
        try:
            ms = float(f[-1])
        except ValueError:
            sys.exit(f"onednn_verbose: {path}:{n}: the time '{f[-1]}' is not a number")
        if len(f) < 8:
            sys.exit(f"onednn_verbose: {path}:{n}: {len(f)} fields, an exec line has at least 8")
        out.append((f[3], f[4].split(":")[0], f[-2], ms))
    return out


def kind(prim, impl, desc):
    if prim != "convolution":
        return f"{prim} {impl}"
    g = dict((k, int(v)) for k, v in SHAPE.findall(desc))
    if g.get("ic") == 3:
        return "convolution stem"
    if "wino" in impl:
        return f"convolution {g.get('kh')}x{g.get('kw')} Winograd ({impl})"
    shape = f"{g.get('kh')}x{g.get('kw')}"
    return f"convolution {shape} stride {g['sh']}" if g.get("sh", 1) > 1 else f"convolution {shape}"


def gflop(desc):
    g = dict((k, int(v)) for k, v in SHAPE.findall(desc))
    if not all(k in g for k in ("ic", "oc", "oh", "ow", "kh", "kw")):
        return None
    return 2 * g.get("mb", 1) * g["ic"] * g["oc"] * g["oh"] * g["ow"] * g["kh"] * g["kw"] / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--calls", action="store_true", help="every convolution with its GFLOP/s")
    ap.add_argument("--skip", type=int, default=2, help="forwards left out at the start (default 2)")
    a = ap.parse_args()
    forwards, cur = [], None
    for p in primitives(a.log):
        prim, _, desc, _ = p
        if prim == "convolution" and "ic3oc" in desc:
            cur = []
            forwards.append(cur)
        if cur is not None:
            cur.append(p)
    if not forwards:
        sys.exit(f"onednn_verbose: {a.log} holds no forward (no executed convolution with 3 input channels; "
                 "was ONEDNN_VERBOSE=1 set?)")
    n = len(forwards[-1])
    same = [f for f in forwards if len(f) == n]
    use = same[a.skip:] if len(same) > a.skip else same[-1:]
    med = [statistics.median(f[i][3] for f in use) for i in range(n)]
    last = forwards[-1]
    print(f"{len(use)} forwards of {n} primitives (median per position); total {sum(med):.2f} ms")
    by = defaultdict(lambda: [0, 0.0, 0.0])
    for (prim, impl, desc, _), ms in zip(last, med):
        k = by[kind(prim, impl, desc)]
        k[0] += 1
        k[1] += ms
        k[2] += (gflop(desc) or 0) if prim == "convolution" else 0
    print(f"{'calls':>5} {'ms':>8} {'GFLOP':>7} {'GFLOP/s':>8}  kind")
    for name, (count, ms, gf) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        rate = f"{gf / ms * 1e3:8.1f}" if gf else f"{'':8}"
        print(f"{count:5d} {ms:8.2f} {gf:7.3f} {rate}  {name}")
    if a.calls:
        for (prim, impl, desc, _), ms in zip(last, med):
            if prim == "convolution":
                print(f"{ms:7.3f} ms {gflop(desc) / ms * 1e3:7.1f} GFLOP/s  {impl}  {desc}")


if __name__ == "__main__":
    main()
