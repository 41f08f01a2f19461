#!/usr/bin/env python3
"""tools/plot-metrics.py: on a metrics file with two runs (one resumed, with an epoch
written twice) it plots the newest run, or the one --run names, from the last line of
each epoch; the plotted table is checked value by value and the PNG by its signature;
bad input exits 1 (unreadable file, bad JSON, unknown run) or 2 (usage).

usage: plot_metrics_test.py REPO_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile

from checks import expect, finish

TOOL = os.path.join(sys.argv[1], "tools", "plot-metrics.py")


def run(args):
    p = subprocess.run([sys.executable, TOOL] + args, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def line(run_id, epoch, train_loss, test_loss, train_acc, test_acc, **extra):
    d = {"run_id": run_id, "time": "2026-11-27T14:05:41Z", "epoch": epoch, "epochs": 3, "dataset": "fashion-mnist",
         "model": "lenet", "backend": "onednn", "dispatch": "direct", "precision": "fp32",
         "train_loss": train_loss, "test_loss": test_loss, "train_accuracy": train_acc, "test_accuracy": test_acc}
    d.update(extra)
    return json.dumps(d)


def read_table(path):
    with open(path) as f:
        return [[None if v == "NaN" else float(v) for v in l.split()] for l in f if not l.startswith("#")]


with tempfile.TemporaryDirectory() as tmp:
    m = os.path.join(tmp, "m.jsonl")
    with open(m, "w") as f:
        f.write("\n".join([
            line("A", 1, 0.9, 0.8, 0.70, 0.75),
            line("A", 2, 0.6, 0.55, 0.80, 0.82),
            line("B", 1, 0.5, 0.4, 0.85, 0.86),
            line("B", 2, 0.45, 0.39, 0.87, 0.88),   # written before an interruption...
            line("B", 2, 0.44, 0.38, 0.875, None),  # ...and again after the resume: this one counts
            line("B", 3, 0.40, 0.35, 0.89, 0.90),
        ]) + "\n")

    png, dat = os.path.join(tmp, "b.png"), os.path.join(tmp, "b.dat")
    rc, out = run([m, png, "--data", dat])
    expect(rc == 0 and "run B, 3 epoch(s)" in out, "the newest run is plotted", out)
    with open(png, "rb") as f:
        expect(f.read(8) == b"\x89PNG\r\n\x1a\n", "the output is a PNG")
    expect(read_table(dat) == [[1, 0.5, 0.4, 85, 86], [2, 0.44, 0.38, 87.5, None], [3, 0.4, 0.35, 89, 90]],
           "table of run B: the last line of epoch 2, accuracies in %, null as missing", str(read_table(dat)))

    rc, out = run([m, os.path.join(tmp, "a.png"), "--run", "A", "--data", dat])
    expect(rc == 0 and read_table(dat) == [[1, 0.9, 0.8, 70, 75], [2, 0.6, 0.55, 80, 82]], "--run A", out)
    rc, out = run([m, "--list"])
    expect(rc == 0 and out.index("A\t2 line(s)") < out.index("B\t4 line(s)"), "--list names both runs", out)

    voc = os.path.join(tmp, "voc.jsonl")
    with open(voc, "w") as f:
        f.write(json.dumps({"epoch": 1, "train_loss": 0.3, "test_loss": 0.2, "train_accuracy": None,
                            "test_map": 0.41}) + "\n")
    rc, out = run([voc, os.path.join(tmp, "voc.png"), "--data", dat])
    expect(rc == 0 and "(no run id)" in out and read_table(dat) == [[1, 0.3, 0.2, 41]],
           "a multi-label file without run ids: the test mAP", out)

    rc, out = run([os.path.join(tmp, "missing.jsonl"), png])
    expect(rc == 1 and "cannot read" in out, "a missing file: exit 1", out)
    bad = os.path.join(tmp, "bad.jsonl")
    with open(bad, "w") as f:
        f.write(line("A", 1, 1, 1, 0.5, 0.5) + "\n{oops\n")
    rc, out = run([bad, png])
    expect(rc == 1 and "line 2: not JSON" in out, "bad JSON: exit 1 naming the line", out)
    rc, out = run([m, png, "--run", "C"])
    expect(rc == 1 and "no run 'C'" in out and "A, B" in out, "an unknown run: exit 1 listing the runs", out)
    rc, out = run([m])
    expect(rc == 2 and "give the PNG" in out, "no PNG: usage error, exit 2", out)

finish()
