#!/usr/bin/env python3
"""Training curves from a strata_train metrics file (--metrics, JSON lines): loss and
accuracy per epoch, train and test, side by side in one PNG drawn by gnuplot (Debian
gnuplot-nox). Multi-label runs (VOC) plot the test mAP instead of accuracies.

    tools/plot-metrics.py runs/lenet.jsonl runs/lenet.png
    tools/plot-metrics.py runs/lenet.jsonl runs/lenet.png --run 20261127T140305Z-3f9a2c
    tools/plot-metrics.py runs/lenet.jsonl --list           # the runs in the file

A metrics file collects every run that appended to it; each line names its run
(run_id). The newest run is plotted unless --run picks another; lines written before
strata_train had run ids count as one run. When an epoch appears twice in a run (an
epoch redone after a resume from an earlier checkpoint), its last line counts.
--data FILE also writes the table that was plotted. Standard library only.

Exit status: 0 done, 1 an unreadable or empty file, an unknown run, no gnuplot;
2 a usage error.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

NO_ID = "(no run id)"


def fail(msg):
    print(f"plot-metrics: error: {msg}", file=sys.stderr)
    sys.exit(1)


def read_runs(path):
    """{run_id: [line dicts in file order]} and the run ids in order of first appearance."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        fail(f"cannot read '{path}': {e.strerror}")
    runs, order = {}, []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            fail(f"{path}, line {n}: not JSON ({e.msg})")
        if not isinstance(row, dict) or "epoch" not in row:
            fail(f"{path}, line {n}: not a strata_train metrics line (no 'epoch')")
        rid = row.get("run_id") or NO_ID
        if rid not in runs:
            runs[rid] = []
            order.append(rid)
        runs[rid].append(row)
    if not runs:
        fail(f"'{path}' holds no metrics lines")
    return runs, order


def table(rows):
    """One row per epoch (the last line of each): epoch, train/test loss, train/test accuracy or test mAP, in %."""
    by_epoch = {}
    for r in rows:
        by_epoch[int(r["epoch"])] = r
    multilabel = any("test_map" in r for r in rows)

    def pct(v):
        return None if v is None else 100.0 * v

    out = []
    for e in sorted(by_epoch):
        r = by_epoch[e]
        acc = [pct(r.get("test_map"))] if multilabel else [pct(r.get("train_accuracy")), pct(r.get("test_accuracy"))]
        out.append([e, r.get("train_loss"), r.get("test_loss")] + acc)
    return out, multilabel


def fmt(v):
    return "NaN" if v is None else f"{v:.6g}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("metrics", help="a strata_train --metrics file (JSON lines)")
    ap.add_argument("png", nargs="?", help="the PNG to write")
    ap.add_argument("--run", help="the run_id to plot (default: the newest run in the file)")
    ap.add_argument("--list", action="store_true", help="list the runs in the file and exit")
    ap.add_argument("--data", help="also write the plotted table (whitespace-separated, NaN for missing) here")
    ap.add_argument("--title", help="the plot's title (default: dataset, model, backend, dispatch, precision, run)")
    args = ap.parse_args()
    if not args.list and not args.png:
        ap.error("give the PNG to write (or --list)")

    runs, order = read_runs(args.metrics)
    if args.list:
        for rid in order:
            rows = runs[rid]
            last = rows[-1]
            print(f"{rid}\t{len(rows)} line(s), epochs up to {last['epoch']}/{last.get('epochs', '?')}, "
                  f"{last.get('dataset', '?')} {last.get('model', '?')} on {last.get('backend', '?')}, "
                  f"last line at {last.get('time', '?')}")
        return 0
    rid = args.run or order[-1]
    if rid not in runs:
        fail(f"no run '{rid}' in {args.metrics} (runs: {', '.join(order)})")
    rows = runs[rid]
    data, multilabel = table(rows)
    if not shutil.which("gnuplot"):
        fail("gnuplot is not installed (Debian: apt-get install gnuplot-nox, or tools/setup-deps.sh)")

    last = rows[-1]
    title = args.title or (f"{last.get('dataset', '?')}: {last.get('model', '?')} on {last.get('backend', '?')}, "
                           f"{last.get('dispatch', '?')} dispatch, {last.get('precision', '?')}" +
                           ("" if rid == NO_ID else f" (run {rid})"))
    cols = ["epoch", "train_loss", "test_loss"] + (["test_map_pct"] if multilabel else
                                                    ["train_accuracy_pct", "test_accuracy_pct"])
    text = "# " + " ".join(cols) + "\n" + "".join(" ".join(fmt(v) for v in row) + "\n" for row in data)
    if args.data:
        with open(args.data, "w") as f:
            f.write(text)
    epochs = [row[0] for row in data]
    with tempfile.TemporaryDirectory() as tmp:
        dat = os.path.join(tmp, "curves.dat")
        with open(dat, "w") as f:
            f.write(text)
        acc_plot = (f"'{dat}' using 1:4 with linespoints lw 2 pt 7 title 'test mAP'" if multilabel else
                    f"'{dat}' using 1:4 with linespoints lw 2 pt 7 title 'train', "
                    f"'{dat}' using 1:5 with linespoints lw 2 pt 5 title 'test'")
        script = [
            "set terminal pngcairo size 1200,460 font ',10'",
            f"set output '{os.path.abspath(args.png)}'",
            "set datafile missing 'NaN'",
            f"set multiplot layout 1,2 title \"{title}\" noenhanced",
            "set grid", "set key noenhanced", "set xlabel 'epoch'",
            f"set xrange [{min(epochs) - 0.25}:{max(epochs) + 0.25}]", "set xtics 1",
            "set title 'loss' noenhanced", "set ylabel 'loss (mean per image)'", "set key top right",
            f"plot '{dat}' using 1:2 with linespoints lw 2 pt 7 title 'train', "
            f"'{dat}' using 1:3 with linespoints lw 2 pt 5 title 'test'",
            f"set title '{'test mAP' if multilabel else 'accuracy'}' noenhanced",
            f"set ylabel '{'mAP (%)' if multilabel else 'accuracy (%)'}'", "set key bottom right",
            "plot " + acc_plot,
            "unset multiplot",
        ]
        gp = os.path.join(tmp, "curves.gp")
        with open(gp, "w") as f:
            f.write("\n".join(script) + "\n")
        p = subprocess.run(["gnuplot", gp], capture_output=True, text=True)
        if p.returncode != 0:
            fail(f"gnuplot failed: {p.stderr.strip()}")
    print(f"plot-metrics: run {rid}, {len(data)} epoch(s) -> {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
