#!/usr/bin/env python3
"""bench/peers/lenet_table.py: on made-up records of two lenet_latency processes (the second
one 2x slower throughout), a PyTorch process with an implementation that cannot run, a JAX
process and a libtorch_cpu_bench process, it prints per variant the median over processes with
their range, the ratio to the fastest strata row (never the null backend's), the same-process
ratio to each framework's baseline mode, the rows not run, and strata / LibTorch from the same
process; a failed check makes it exit 1 with the row marked; an unreadable file is named among
the sources; no LeNet rows at all is an error.

usage: lenet_table_test.py REPO_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile

from checks import expect, finish

TOOL = os.path.join(sys.argv[1], "bench", "peers", "lenet_table.py")


def rounds(median):
    return {"median": median, "min": median * 0.9, "max": median * 1.1, "rounds": [median * 0.9, median, median * 1.1]}


def row(framework, backend, mode, e2e, status="ok", **extra):
    r = {"framework": framework, "variant": "keras", "backend": backend, "mode": mode, "status": status,
         "e2e_us": rounds(e2e), "resident_us": rounds(e2e * 0.95),
         "checks": {"max_abs_diff_vs_reference": 3e-8, "tolerance_abs": 1e-4}}
    r.update(extra)
    return r


def strata(scale, failed=False):
    rows = [row("strata", "onednn", "virtual", 110 * scale), row("strata", "onednn", "direct", 100 * scale),
            row("strata", "null", "virtual", 7 * scale), row("strata", "null", "direct", 2 * scale)]
    for r in rows:
        if r["backend"] != "null":
            r["checks"].update({"bitwise_equal": not failed, "bitwise_equal_to": "virtual"})
        else:
            del r["checks"]
    if failed:
        rows[1]["status"] = "check failed"
    return {"program": "lenet_latency", "version": "0.1.0", "results": rows,
            "environment": {"backends": "built: reference, null, onednn", "OMP_NUM_THREADS": "1"}}


PYTORCH = {"program": "pytorch_lenet", "version": "torch 9.9", "device": {"name": "cpu"}, "results": [
    row("pytorch", "cpu", "eager", 300),
    {"framework": "pytorch", "variant": "keras", "backend": "cpu", "mode": "cudagraph", "status": "unavailable",
     "note": "CUDA graphs need a GPU"}]}
JAX = {"program": "jax_lenet", "version": "jax 0.0", "device": {"device_kind": "cpu"},
       "results": [row("jax", "cpu", "jit", 150), row("jax", "cpu", "eager", 600)]}
LIBTORCH = {"environment": {"libtorch": "LibTorch 1.13", "OMP_NUM_THREADS": "1"}, "workloads": [
    {"workload": "lenet_keras_infer_b1_28", "output_checks": [], "rows": [
        {"impl": "libtorch", "backend": "", "mode": "no_grad", "median_s": 400e-6, "p10_s": 380e-6, "p90_s": 450e-6},
        {"impl": "strata", "backend": "onednn", "mode": "direct", "median_s": 100e-6, "p10_s": 1e-4, "p90_s": 1e-4}]},
    {"workload": "relu64", "rows": []}]}


def cells(out, prefix):
    for line in out.splitlines():
        if line.startswith(prefix):
            return [c.strip() for c in line.strip("|").split("|")]
    return []


with tempfile.TemporaryDirectory() as d:
    def write(name, doc):
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))
        return path

    def run(*paths):
        p = subprocess.run([sys.executable, TOOL, *paths, "--note", "machine: made up"], capture_output=True,
                           text=True, timeout=60)
        return p.returncode, p.stdout, p.stderr

    files = [write("strata_p1.json", strata(1)), write("strata_p2.json", strata(2)),
             write("pytorch_p1.json", PYTORCH), write("jax_p1.json", JAX), write("libtorch_p1.json", LIBTORCH)]
    rc, out, err = run(*files)
    expect(rc == 0, "exit 0", out + err)
    expect("- machine: made up" in out and "### LeNet-5, keras variant, batch 1" in out, "the note and the variant",
           out)
    c = cells(out, "| strata | onednn | virtual |")
    expect(c[3:4] == ["165 (110–220; rounds 99.0–242)"], "median of 110 and 220 µs, their range, all rounds'", out)
    expect(c[5:7] == ["1.10", "1.10 (1.10–1.10)"], "÷ the fastest strata row and ÷ direct in the same process", out)
    expect("÷ strata onednn direct" in out, "the fastest strata row is onednn direct, not null", out)
    c = cells(out, "| strata | null | virtual |")
    expect(c[5:7] == ["-", "3.50 (3.50–3.50)"] and "computes nothing" in c[-1], "null: no ratio to the others", out)
    c = cells(out, "| pytorch | cpu | eager |")
    expect(c[5:7] == ["2.00", "1.00"], "PyTorch: 300 µs over strata's 150; its own baseline", out)
    c = cells(out, "| jax | cpu | eager |")
    expect(c[6:7] == ["4.00"], "JAX op by op ÷ jit in the same process", out)
    c = cells(out, "| libtorch | cpu | no_grad |")
    expect(c[3:5] == ["400 (p10–p90 380–450)", "-"], "LibTorch: its own statistic, one time", out)
    expect("Not run here: pytorch cudagraph (CUDA graphs need a GPU)." in out, "the unavailable row listed", out)
    expect("| onednn | direct | 0.25 |" in out, "strata ÷ LibTorch in the same process", out)
    expect("`pytorch_p1.json`" in out or "pytorch_p1.json" in out, "the sources named", out)

    files[1] = write("strata_p2.json", strata(2, failed=True))
    files.append(write("broken_p1.json", "{not json"))
    rc, out, err = run(*files)
    c = cells(out, "| strata | onednn | direct |")
    expect(rc == 1 and "check failed" in c[-1], "a failed check: exit 1, the row says so", out + err)
    expect("NOT bitwise = virtual" in out, "the bitwise check shown", out)
    expect("broken_p1.json" in out and "not read" in out, "an unreadable file named among the sources", out)

    rc, out, err = run(write("other.json", {"workloads": [{"workload": "relu64", "rows": []}]}))
    expect(rc == 1 and "no LeNet rows" in err and "Traceback" not in err, "no LeNet rows: named error", out + err)

finish()
