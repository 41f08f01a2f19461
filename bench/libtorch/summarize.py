#!/usr/bin/env python3
"""Markdown tables from libtorch_cpu_bench JSON files (one per thread count and
allocator setting, as bench/libtorch/run.sh writes them):

  summarize.py [--cpu] results/*.json     (--cpu: process CPU time instead of wall time)

  1. strata time / LibTorch time (median over median; LibTorch's fastest no_grad form, as
     the bench compares) per workload, backend and mode;
  2. openblas convolution GFLOP/s against OpenBLAS's own sgemm of the same size;
  3. the tiny op: relu on 64 floats (and 65536, which strata hands to oneDNN), strata
     minus the raw oneDNN execute.
"""
import json
import sys


def load(paths):
    runs = []
    for p in paths:
        with open(p) as f:
            d = json.load(f)
        env = d["environment"]
        label = f'{env["omp_get_max_threads"]} thr'
        label += ", malloc default" if env.get("GLIBC_TUNABLES", "(unset)") == "(unset)" else ", malloc keeps memory"
        policy = env.get("OMP_WAIT_POLICY", "(unset)")
        label += "" if policy.startswith("(unset") else f", OMP_WAIT_POLICY={policy}"
        runs.append((label, env, {w["workload"]: w["rows"] for w in d["workloads"]}))
    return runs


KEY = "median_s"  # or "cpu_median_s" (--cpu)


def med(rows, impl, backend=None, mode=None):
    for r in rows:
        if r["impl"] == impl and (backend is None or r["backend"] == backend) and (mode is None or r["mode"] == mode):
            return r[KEY]
    return None


def fmt_ms(s):
    return "–" if s is None else f"{s * 1e3:.1f}"


def libtorch_ms(rows):
    """LibTorch's fastest no_grad form of a workload (or its only case), as the bench compares."""
    forms = [r for r in rows if r["impl"] == "libtorch"]
    fastest = None
    for r in forms:
        if fastest is None or (r["mode"].startswith("no_grad") and r[KEY] < fastest[KEY]):
            fastest = r
    return None if fastest is None else fastest[KEY]


def ratios(runs):
    # Only the columns some run measured (--backends, --modes), the plain modes first.
    present = {(r["backend"], r["mode"]) for _, _, w in runs for rows in w.values() for r in rows
               if r["impl"] == "strata"}
    plain = ["virtual", "static", "direct"]
    cols = [(b, m) for b in ["onednn", "openblas", "eigen"] for m in plain if (b, m) in present]
    cols += sorted(c for c in present if c[1] not in plain)
    print("| workload | run | LibTorch ms | " + " | ".join(f"{b} {m}" for b, m in cols) + " |")
    print("|---|---|---:|" + "---:|" * len(cols))
    workloads = []
    for _, _, w in runs:
        workloads += [k for k in w if k not in workloads and not k.startswith("relu")]
    for wl in workloads:
        for label, _, w in runs:
            rows = w.get(wl)
            if not rows:
                continue
            torch = libtorch_ms(rows)
            cells = []
            for b, m in cols:
                s = med(rows, "strata", b, m)
                cells.append("–" if s is None or torch is None else f"{s / torch:.2f} ({s * 1e3:.1f})")
            print(f"| {wl} | {label} | {fmt_ms(torch)} | " + " | ".join(cells) + " |")


def gflops(r):
    """GFLOP/s by the chosen clock (the bench reports them by wall time)."""
    return r["gflops"] * r["median_s"] / r[KEY]


def gemm(runs):
    if not any("conv3x3_fwd" in w for _, _, w in runs):
        return
    print("| run | OpenBLAS sgemm GFLOP/s, beside fwd / beside fwd+bwd | openblas conv fwd: GFLOP/s (% of sgemm), "
          "virtual / static / direct | conv fwd+bwd: GFLOP/s (% of sgemm) |")
    print("|---|---:|---|---|")
    for label, _, w in runs:
        fwd, train = w.get("conv3x3_fwd"), w.get("conv3x3_train")
        if not fwd:
            continue
        sg = next((gflops(r) for r in fwd if r["impl"] == "raw" and r["mode"] == "sgemm whole batch"), None)
        sg3 = next((gflops(r) for r in train or [] if r["impl"] == "raw" and r["mode"].startswith("sgemm")), sg)
        if sg is None:
            continue

        def cells(rows, sg):
            out = []
            for m in ["virtual", "static", "direct"]:
                g = next((gflops(r) for r in rows or [] if r["impl"] == "strata" and r["backend"] == "openblas"
                          and r["mode"] == m), None)
                out.append("–" if g is None else f"{g:.1f} ({100 * g / sg:.0f}%)")
            return " / ".join(out)

        print(f"| {label} | {sg:.1f} / {sg3:.1f} | {cells(fwd, sg)} | {cells(train, sg3)} |")


def tiny(runs):
    if not any(wl in w for _, _, w in runs for wl in ["relu64", "relu65536"]):
        return
    print("| relu on | run | raw oneDNN execute µs | strata onednn virtual / static / direct µs | strata − raw µs "
          "| + tape (virtual / static) µs | LibTorch no grad / grad µs |")
    print("|---|---|---:|---|---|---|---|")
    for wl, label, w in [(wl, label, w) for wl in ["relu64", "relu65536"] for label, _, w in runs]:
        rows = w.get(wl)
        if not rows:
            continue
        raw = med(rows, "raw", "onednn")
        us = lambda s: "–" if s is None else f"{s * 1e6:.3f}"
        s = [med(rows, "strata", "onednn", m) for m in ["virtual", "static", "direct"]]
        g = [med(rows, "strata", "onednn", m) for m in ["virtual+grad", "static+grad"]]
        d = ["–" if x is None or raw is None else f"{(x - raw) * 1e6:+.3f}" for x in s]
        t = [med(rows, "libtorch", None, m) for m in ["no_grad", "grad"]]
        print(f"| {wl[4:]} floats | {label} | {us(raw)} | {' / '.join(map(us, s))} | {' / '.join(d)} | {' / '.join(map(us, g))} "
              f"| {' / '.join(map(us, t))} |")


def main():
    global KEY
    args = sys.argv[1:]
    if args and args[0] == "--cpu":
        KEY, args = "cpu_median_s", args[1:]
        print("(process CPU time per call instead of wall time)\n")
    runs = load(args)
    for label, env, _ in runs:
        print(f"- {label}: load {env['loadavg_start']} at start; OMP_WAIT_POLICY={env['OMP_WAIT_POLICY']}; "
              f"{env['libtorch']}; " + "; ".join(env["describe"]))
    print()
    for table in (ratios, gemm, tiny):
        print()
        table(runs)


if __name__ == "__main__":
    main()
