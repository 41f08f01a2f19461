"""What the LeNet peers (pytorch_lenet.py, jax_lenet.py) share with bench/lenet_latency.cpp: the
exported weights, the timing protocol, the check and the JSON record. numpy and the standard
library only, so that either peer imports it without the other's framework.

Protocol (the same as lenet_latency's): `warmup` untimed calls of each implementation (both
kinds), then `rounds` rounds in which each implementation takes a turn: `warm_calls` untimed
calls, then `calls` timed calls host-to-host ("e2e": the image in host memory to the logits in
host memory) and `calls` timed calls on the device ("resident": the input already there, the
result waited for). Round r visits the implementations rotated by r // 2, reversed when r is
odd (ABCD, DCBA, BCDA, ADCB, ...). A round's time is the median of its calls; a row gives the
median over rounds and their min-max.
"""
import argparse
import json
import statistics
import struct
import sys
import time

import numpy as np

_DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32, "U8": np.uint8}


def load_safetensors(path):
    """(tensors, metadata) of a safetensors file: numpy arrays (writable copies) by name."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise SystemExit(f"{path}: not a safetensors file ({len(data)} bytes)")
    (n,) = struct.unpack("<Q", data[:8])
    try:
        if 8 + n > len(data):
            raise ValueError(f"header of {n} bytes in a file of {len(data)}")
        header = json.loads(data[8:8 + n])
    except ValueError as e:
        raise SystemExit(f"{path}: not a safetensors file ({e})") from None
    meta = header.pop("__metadata__", {}) or {}
    base = 8 + n
    out = {}
    for name, e in header.items():
        if e["dtype"] not in _DTYPES:
            raise SystemExit(f"{path}: tensor {name} has dtype {e['dtype']}, which this reader does not know")
        b, end = e["data_offsets"]
        a = np.frombuffer(data[base + b:base + end], dtype=_DTYPES[e["dtype"]]).copy()
        out[name] = a.reshape(e["shape"])
    return out, meta


class LeNetIO:
    """One exported variant (lenet_latency --export): weights by PyTorch's names, the input, the
    reference backend's logits, and the architecture read from the weights' shapes."""

    def __init__(self, path):
        t, meta = load_safetensors(path)
        missing = [k for k in ("conv1.weight", "conv2.weight", "fc1.weight", "fc2.weight", "input", "logits")
                   if k not in t]
        if missing or "variant" not in meta or "padding" not in meta:
            raise SystemExit(f"{path}: not written by lenet_latency --export (missing {missing or 'metadata'})")
        self.path = path
        self.variant = meta["variant"]
        self.padding = int(meta["padding"])
        self.describe = meta.get("describe", "")
        self.input = t.pop("input").astype(np.float32)
        self.logits = t.pop("logits").astype(np.float32)
        self.weights = t
        self.c1 = t["conv1.weight"].shape[0]
        self.c2 = t["conv2.weight"].shape[0]
        self.hidden, self.flat = t["fc1.weight"].shape
        self.classes = t["fc2.weight"].shape[0]

    def check(self, got, tolerance):
        """{"max_abs_diff_vs_reference", "tolerance_abs", "ok"} of logits `got` against the export's,
        the tolerance relative to the largest reference logit (at least 1)."""
        got = np.asarray(got, dtype=np.float64).reshape(self.logits.shape)
        diff = float(np.max(np.abs(got - self.logits.astype(np.float64))))
        tol = tolerance * max(1.0, float(np.max(np.abs(self.logits))))
        return {"max_abs_diff_vs_reference": diff, "tolerance_abs": tol, "ok": bool(diff <= tol)}


def _timed(fn, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        out.append((time.perf_counter_ns() - t0) / 1e3)
    return out


def run_rounds(cases, rounds, calls, warm_calls, warmup):
    """cases: dicts with callables "e2e" and "resident"; fills "e2e_rounds" and "resident_rounds"
    (one median in us per round)."""
    for c in cases:
        c["e2e_rounds"], c["resident_rounds"] = [], []
        for _ in range(warmup):
            c["e2e"]()
            c["resident"]()
    n = len(cases)
    for r in range(rounds):
        order = [(i + r // 2) % n for i in range(n)]
        if r % 2:
            order.reverse()
        for k in order:
            c = cases[k]
            for _ in range(warm_calls):
                c["e2e"]()
            c["e2e_rounds"].append(statistics.median(_timed(c["e2e"], calls)))
            c["resident_rounds"].append(statistics.median(_timed(c["resident"], calls)))


def rounds_json(v):
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "rounds": v}


class Unavailable(Exception):
    """An implementation that cannot run here (reported, not timed, not a failure)."""


def parse_args(doc, prog, impls, device_default, device_help):
    """The options every LeNet peer takes, with lenet_latency's defaults; args.impls is a list and
    args.ios the loaded exports."""
    ap = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--io", nargs="+", required=True, help="lenet_latency --export files (one per variant)")
    ap.add_argument("--impls", default=",".join(impls), help="comma-separated, of: " + ", ".join(impls))
    ap.add_argument("--device", default=device_default, help=device_help)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--warm-calls", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--tolerance", type=float, default=1e-5,
                    help="largest |logit - reference logit|, relative to the largest reference logit")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    if args.rounds < 1 or args.calls < 1 or args.warm_calls < 0 or args.warmup < 2:
        raise SystemExit(f"{prog}: need --rounds >= 1, --calls >= 1, --warm-calls >= 0, --warmup >= 2")
    args.impls = [s for s in args.impls.split(",") if s]
    unknown = [s for s in args.impls if s not in impls]
    if unknown or not args.impls:
        raise SystemExit(f"{prog}: unknown --impls {unknown} (known: {', '.join(impls)})")
    args.ios = [LeNetIO(p) for p in args.io]
    return args


def run_variant(io, args, row_base, make_impl, counter=None):
    """One variant's rows: each implementation (make_impl(name) -> (e2e, resident), raising
    Unavailable where it cannot run) checked on its first e2e output, then all timed together.
    counter(): a number that must not change while timing (a compiler's graph count); a change
    is noted in the rows."""
    rows, cases = [], []
    for name in args.impls:
        row = dict(row_base, variant=io.variant, mode=name)
        rows.append(row)
        try:
            e2e, resident = make_impl(name)
            got = np.asarray(e2e())  # compiles, captures, warms
            row["checks"] = io.check(got, args.tolerance)
            row["logits"] = got.reshape(-1).tolist()
            row["status"] = "ok" if row["checks"]["ok"] else "check failed"
            cases.append({"row": row, "e2e": e2e, "resident": resident})
        except Unavailable as e:
            row.update({"status": "unavailable", "note": str(e)})
        except Exception as e:  # noqa: BLE001 - reported per implementation, the run goes on
            row.update({"status": "error", "note": f"{type(e).__name__}: {e}"})
    before = counter() if counter else 0
    run_rounds(cases, args.rounds, args.calls, args.warm_calls, args.warmup)
    changed = (counter() - before) if counter else 0
    for c in cases:
        c["row"]["e2e_us"] = rounds_json(c["e2e_rounds"])
        c["row"]["resident_us"] = rounds_json(c["resident_rounds"])
        if changed:
            c["row"]["note"] = f"{changed} more compiled graph(s) during timing"
    for row in rows:
        print_row(io.variant, row["mode"], row)
    return rows


def start(prog, args, version, device, numerics):
    """The JSON record's head, printed as the run's first line."""
    out = {"program": prog, "framework": prog.split("_")[0], "version": version, "device": device,
           "numerics": numerics, "protocol": {
               "rounds": args.rounds, "calls": args.calls, "warm_calls": args.warm_calls, "warmup": args.warmup,
               "order": "implementations rotated by round/2, reversed on odd rounds",
               "statistic": "median of each round's calls; median and min-max over rounds"},
           "loadavg_start": loadavg(), "results": []}
    name = device.get("name") or device.get("device_kind") or device
    print(f"{prog} | {version} on {name} | load {out['loadavg_start']}", flush=True)
    print_header()
    return out


def finish(out, args, prog):
    """Writes the record; the exit status: 1 when an implementation failed or its check did."""
    out["loadavg_end"] = loadavg()
    write_json(args.json, out)
    bad = [r for r in out["results"] if r["status"] not in ("ok", "unavailable")]
    for r in bad:
        print(f"{prog}: {r['variant']} {r['mode']}: {r['status']} {r.get('note', '')}", file=sys.stderr)
    return 1 if bad else 0


def print_header():
    print(f"{'variant':<10} {'impl':<22} {'e2e_us':>10} {'(range)':<17} {'resident':>10} {'(range)':<17} check",
          flush=True)


def print_row(variant, mode, row):
    def fmt(s):
        return f"{s['median']:>10.1f} ({s['min']:.1f}-{s['max']:.1f})".ljust(29)
    if "e2e_us" in row:
        print(f"{variant:<10} {mode:<22} {fmt(row['e2e_us'])} {fmt(row['resident_us'])} {row['status']}", flush=True)
    else:
        print(f"{variant:<10} {mode:<22} {row['status']}: {row.get('note', '')}", flush=True)


def write_json(path, doc):
    if path:
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"
