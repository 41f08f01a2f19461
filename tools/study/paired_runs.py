#!/usr/bin/env python3
"""Each layer's paired cost (`dispatch_overhead --paired`) over several processes, not one.

One process's 95 % interval is an interval within that process: two runs in one H200 call gave
medians 2x apart with intervals that do not overlap (eigen relu64 front end 276 [274, 279] vs 122
[120, 123] ns), so a single run says less than its interval suggests. This runs the binary RUNS
times, one process after another, and writes dispatch_paired.json in the format tools/study/
make_page.py reads, each row now
  median_ns          the median over the processes of their medians
  lo_ns, hi_ns       the lowest and highest bound of any process's interval (their union): the
                     page calls a layer resolved only where no process's interval reaches 0
  process_median_ns  every process's median, in run order
  processes, rounds  how many processes, and the interleaved rounds each ran
and prints, per row, the median, the range of the processes' medians and whether it is resolved.

    tools/study/paired_runs.py --bin .gpu/bin/dispatch_overhead --runs 5 --json dispatch_paired.json

paired() is the binary's rule for one process in Python, for paired figures that come as rounds
(GPT-2 decoding's ways, tools/study/study_data.py); aggregate() then combines processes alike.
Standard library only.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile


def median(v):
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def paired(diffs):
    """(median, lo, hi) of paired differences a - b, one per interleaved round: the rule of
    dispatch_overhead --paired (the sorted differences' middle element, and the ranks
    n/2 -/+ 1.96 sqrt(n)/2 as a distribution-free 95 % interval of the median), for figures that
    come with their rounds (gpt2_forward --json) rather than as rows."""
    d = sorted(diffs)
    if not d:
        raise ValueError("paired: no rounds")
    n = len(d)
    half = 1.96 * math.sqrt(n) / 2

    def rank(x):
        return int(min(max(x, 0), n - 1))
    return d[n // 2], d[rank(math.floor(n / 2 - half))], d[rank(math.ceil(n / 2 + half))]


def run_once(binary, rounds, timeout):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "paired.json")
        cmd = [binary, "--paired", "--paired-rounds", str(rounds), "--paired-json", path]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0 or not os.path.exists(path):
            raise SystemExit(f"paired_runs: {' '.join(cmd)} failed (exit {p.returncode}): {p.stderr.strip()[-500:]}")
        with open(path) as f:
            return json.load(f)["paired"]


def aggregate(runs):
    """runs: one list of rows per process, each row {op, backend, layer, median_ns, lo_ns, hi_ns, rounds}."""
    by_key, order = {}, []
    for rows in runs:
        for r in rows:
            key = (r["op"], r["backend"], r["layer"])
            if key not in by_key:
                by_key[key] = []
                order.append(key)
            by_key[key].append(r)
    out = []
    for key in order:
        rs = by_key[key]
        meds = [r["median_ns"] for r in rs]
        out.append({"op": key[0], "backend": key[1], "layer": key[2], "median_ns": median(meds),
                    "lo_ns": min(r["lo_ns"] for r in rs), "hi_ns": max(r["hi_ns"] for r in rs),
                    "process_median_ns": meds, "processes": len(rs), "rounds": rs[0]["rounds"]})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="the dispatch_overhead binary")
    ap.add_argument("--runs", type=int, default=5, help="processes, one after another (at least 2)")
    ap.add_argument("--rounds", type=int, default=21, help="interleaved rounds per process (--paired-rounds)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per process")
    ap.add_argument("--json", required=True, help="where to write the aggregated rows")
    a = ap.parse_args()
    if a.runs < 2:
        raise SystemExit("paired_runs: --runs must be at least 2 (one process is what this replaces)")
    if not os.access(a.bin, os.X_OK):
        raise SystemExit(f"paired_runs: --bin {a.bin} is not an executable file")
    runs = []
    for i in range(a.runs):
        runs.append(run_once(a.bin, a.rounds, a.timeout))
        print(f"paired_runs: process {i + 1} of {a.runs} done", flush=True)
    rows = aggregate(runs)
    tmp = f"{a.json}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump({"paired": rows, "processes": a.runs}, f, indent=1)
        f.write("\n")
    os.replace(tmp, a.json)
    print(f"{'op':<8} {'backend':<10} {'layer':<46} {'median':>8}  range of process medians    resolved")
    for r in rows:
        resolved = "no (an interval reaches 0)" if r["lo_ns"] <= 0 <= r["hi_ns"] else "yes"
        spread = f"[{min(r['process_median_ns']):.0f}, {max(r['process_median_ns']):.0f}]"
        print(f"{r['op']:<8} {r['backend']:<10} {r['layer']:<46} {r['median_ns']:8.0f}  {spread:<26} {resolved}")
    print(f"({a.runs} processes of {a.rounds} interleaved rounds each; ns per call)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
