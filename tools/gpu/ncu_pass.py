#!/usr/bin/env python3
"""One batch of a ResNet-50 inference run, kernel by kernel, from Nsight Compute's raw CSV.

Reads `ncu --csv --page raw --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum`
output, takes the kernels from one input conversion (a float-to-bf16 copy reading more than
100 MB: the batch's images) to the next, and prints them as CSV (kernel, ns, DRAM bytes read,
written), then a summary by kind to stderr. The `--pass` argument picks which batch (default:
the first whole one in the file).

    python3 tools/gpu/ncu_pass.py ncu.csv [--pass N] > one_batch.csv
"""
import argparse
import csv
import gzip
import io
import re
import sys
from collections import defaultdict

METRICS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum")


def kernels(path, metrics=METRICS, tool="ncu_pass"):
    """(kernel name without its parameters, *metrics) for every kernel of an ncu raw CSV (gzip or plain)."""
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        sys.exit(f"{tool}: cannot read {path}: {e.strerror}")
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        sys.exit(f"{tool}: {path} holds no Nsight Compute raw CSV (no header line starting with \"ID\")")
    reader = csv.DictReader(io.StringIO("\n".join(lines[start:])))
    missing = [k for k in ("Kernel Name",) + tuple(metrics) if k not in (reader.fieldnames or [])]
    if missing:
        sys.exit(f"{tool}: {path} has no column {', '.join(missing)} (run ncu with --metrics {','.join(metrics)})")
    rows = list(reader)[1:]  # the second row holds units

    def num(r, k):
        try:
            return float(r[k].replace(",", ""))
        except ValueError:
            sys.exit(f"{tool}: {path}: {k} of kernel {r['Kernel Name'][:60]} is '{r[k]}', not a number")

    return [(re.sub(r"\(.*", "", r["Kernel Name"]), *(num(r, k) for k in metrics)) for r in rows]


def kind(name):
    if any(s in name for s in ("xmma", "nvjet", "cutlass")):
        return "cuDNN/cuBLAS convolution or GEMM"
    return re.sub(r"^void ", "", re.sub(r"<.*", "", name.replace("<unnamed>::", "")))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--pass", dest="which", type=int, default=0)
    a = ap.parse_args()
    k = kernels(a.csv)
    starts = [i for i, (n, _, rd, _) in enumerate(k) if "ConvertFn<float, __nv_bfloat16>" in n and rd > 1e8]
    if len(starts) < a.which + 2:
        sys.exit(f"ncu_pass: {a.csv} holds {max(len(starts) - 1, 0)} whole batches; --pass {a.which} is not one")
    one = k[starts[a.which]:starts[a.which + 1]]
    w = csv.writer(sys.stdout)
    w.writerow(["kernel", "ns", "dram_read_bytes", "dram_write_bytes"])
    by = defaultdict(lambda: [0, 0.0, 0.0])
    for n, t, rd, wr in one:
        w.writerow([n, int(t), int(rd), int(wr)])
        b = by[kind(n)]
        b[0] += 1
        b[1] += t
        b[2] += rd + wr
    print(f"{len(one)} kernels, {sum(t for _, t, _, _ in one) / 1e6:.3f} ms", file=sys.stderr)
    for n, (c, t, byt) in sorted(by.items(), key=lambda z: -z[1][1]):
        print(f"{c:4d} {t / 1e6:8.3f} ms {byt / 1e9:7.2f} GB  {n}", file=sys.stderr)


if __name__ == "__main__":
    main()
