#!/usr/bin/env python3
"""The LeNet table (Gu, Gozum & Lam's "time to classify one image") from the JSON files that
tools/lenet-table.sh collects, one file per process:

    lenet_table.py OUT/*.json [--markdown table.md] [--note "machine: ..."]...

Reads bench/lenet_latency's, bench/peers/pytorch_lenet.py's and jax_lenet.py's records, and
libtorch_cpu_bench's (workloads lenet_infer_b1_28 and lenet_keras_infer_b1_28). Per variant, one
row per framework, backend and mode: the median over processes of each process's median (itself
the median over rounds of each round's median call), the range of the processes' medians, and the
range of all rounds' medians; then the ratio to the fastest strata row of that variant, host to
host (never the null backend's, which computes nothing), and the ratio to the framework's baseline
mode (BASELINE) measured in the same process, the steadier number where the machine's speed drifts
between processes. LibTorch's rows are libtorch_cpu_bench's
own statistic (the median of its samples, their p10-p90) and it has one time: on the CPU the
input lives in host memory. A second table gives strata / LibTorch measured in the same
libtorch_cpu_bench processes. Standard library only.
"""
import argparse
import json
import statistics
import sys

LIBTORCH_WORKLOADS = {"lenet_infer_b1_28": "tensorflow", "lenet_keras_infer_b1_28": "keras"}
MODE_ORDER = ["virtual", "static", "direct", "graph"]
# Each framework's mode that its other modes are divided by, within one process.
BASELINE = {"strata": "direct", "pytorch": "eager", "jax": "jit"}


def fmt_us(v):
    if v is None:
        return "-"
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def load(paths):
    """(rows, sources, same_process): rows keyed (variant, framework, backend, mode) -> per-process
    records; sources: one line per file; same_process: (variant, backend, mode) -> strata/LibTorch
    ratios, one per libtorch_cpu_bench process."""
    rows, sources, same = {}, [], {}
    for p in paths:
        try:
            with open(p) as f:
                d = json.load(f)
        except (OSError, ValueError) as e:
            sources.append(f"`{p}`: not read ({e})")
            continue
        if "workloads" in d:  # libtorch_cpu_bench
            env = d.get("environment", {})
            sources.append(f"`{p}`: libtorch_cpu_bench, {env.get('libtorch', '?')}, OMP_NUM_THREADS="
                           f"{env.get('OMP_NUM_THREADS', '?')}, load {env.get('loadavg_start', '?')}")
            for w in d["workloads"]:
                variant = LIBTORCH_WORKLOADS.get(w["workload"])
                if variant is None:
                    continue
                failed = {(c["impl"], c["backend"], c["mode"]) for c in w.get("output_checks", []) if not c["ok"]}
                torch_s = next((r["median_s"] for r in w["rows"] if r["impl"] == "libtorch"), None)
                for r in w["rows"]:
                    if r["impl"] == "libtorch":
                        key = (variant, "libtorch", "cpu", r["mode"])
                        rows.setdefault(key, []).append({
                            "e2e": r["median_s"] * 1e6, "resident": None,
                            "lo": r["p10_s"] * 1e6, "hi": r["p90_s"] * 1e6, "spread": "p10–p90",
                            "status": "check failed" if (r["impl"], r["backend"], r["mode"]) in failed else "ok",
                            "check": "same output as strata (libtorch_cpu_bench)", "device": "cpu"})
                    elif torch_s:
                        same.setdefault((variant, r["backend"], r["mode"]), []).append(r["median_s"] / torch_s)
            continue
        prog = d.get("program", "?")
        if prog == "lenet_latency":
            env = d.get("environment", {})
            sources.append(f"`{p}`: lenet_latency {d.get('version', '')}, {env.get('backends', '')}, OMP_NUM_THREADS="
                           f"{env.get('OMP_NUM_THREADS', '?')}, load {env.get('loadavg_start', '?')} -> "
                           f"{env.get('loadavg_end', '?')}, failed checks {d.get('failed_checks', '?')}")
        else:
            sources.append(f"`{p}`: {prog}, {d.get('version', '')} on {d.get('device', {})}, load "
                           f"{d.get('loadavg_start', '?')} -> {d.get('loadavg_end', '?')}")
        baseline = {}  # (variant, backend) -> the e2e median of this process's baseline mode
        for r in d.get("results", []):
            if r.get("mode") == BASELINE.get(r["framework"]) and "e2e_us" in r:
                baseline[(r["variant"], r["backend"])] = r["e2e_us"]["median"]
        for r in d.get("results", []):
            key = (r["variant"], r["framework"], r["backend"], r["mode"])
            rec = {"status": r.get("status", "?"), "note": r.get("note", ""), "device": r.get("device", "?")}
            if "e2e_us" in r:
                rec.update({"e2e": r["e2e_us"]["median"], "resident": r["resident_us"]["median"],
                            "lo": min(r["e2e_us"]["rounds"]), "hi": max(r["e2e_us"]["rounds"]),
                            "res_lo": min(r["resident_us"]["rounds"]), "res_hi": max(r["resident_us"]["rounds"])})
                base = baseline.get((r["variant"], r["backend"]))
                if base:
                    rec["vs_baseline"] = r["e2e_us"]["median"] / base
            c = r.get("checks") or {}
            if "max_abs_diff_vs_reference" in c:
                rec["check"] = f"Δref {c['max_abs_diff_vs_reference']:.1e}"
                if "bitwise_equal" in c:
                    rec["check"] += (f", bitwise = {c['bitwise_equal_to']}" if c["bitwise_equal"]
                                     else f", NOT bitwise = {c['bitwise_equal_to']}")
            rows.setdefault(key, []).append(rec)
    return rows, sources, same


def cell(recs, what):
    """"median (range over processes; rounds' range)" of one column over a row's processes."""
    vals = [r[what] for r in recs if r.get(what) is not None]
    if not vals:
        return "-", None
    med = statistics.median(vals)
    lo_key, hi_key = ("lo", "hi") if what == "e2e" else ("res_lo", "res_hi")
    los = [r[lo_key] for r in recs if r.get(lo_key) is not None]
    his = [r[hi_key] for r in recs if r.get(hi_key) is not None]
    text = fmt_us(med)
    inner = []
    if len(vals) > 1:
        inner.append(f"{fmt_us(min(vals))}–{fmt_us(max(vals))}")
    if los and his:
        inner.append(f"{recs[0].get('spread', 'rounds')} {fmt_us(min(los))}–{fmt_us(max(his))}")
    if inner:
        text += " (" + "; ".join(inner) + ")"
    return text, med


def sort_key(key):
    variant, framework, backend, mode = key
    rank = {"strata": 0, "libtorch": 1, "pytorch": 2, "jax": 3}.get(framework, 4)
    m = MODE_ORDER.index(mode) if mode in MODE_ORDER else len(MODE_ORDER)
    return (variant, rank, (backend == "null", backend) if framework == "strata" else (False, ""), m, mode)


def table(rows, same):
    out, failed = [], 0
    for variant in sorted({k[0] for k in rows}, key=lambda v: (v != "tensorflow", v)):
        keys = sorted((k for k in rows if k[0] == variant), key=sort_key)
        medians = {}
        for k in keys:
            vals = [r["e2e"] for r in rows[k] if r.get("e2e") is not None and r["status"] == "ok"]
            if vals:
                medians[k] = statistics.median(vals)
        strata = [k for k in medians if k[1] == "strata" and k[2] != "null"]  # null computes nothing
        best = min(strata, key=lambda k: medians[k]) if strata else None
        best_name = f"strata {best[2]} {best[3]}" if best else "strata"
        out.append(f"\n### LeNet-5, {variant} variant, batch 1\n")
        out.append("µs per image: median over processes (range over processes; range of all rounds' medians). "
                   "host→host: the image in host memory to the logits in host memory; resident: input already "
                   "on the device, result waited for. ÷ baseline, same process: host→host time over that of "
                   "the framework's baseline mode on the same backend in the same process (strata: direct; "
                   "PyTorch: eager; JAX: jit), median over processes (range).\n")
        out.append(f"| framework | backend | mode | host→host µs | resident µs | ÷ {best_name} | ÷ baseline, same "
                   "process | processes | check |")
        out.append("|---|---|---|---|---|---:|---:|---:|---|")
        unavailable = []
        for k in keys:
            recs = rows[k]
            statuses = sorted({r["status"] for r in recs})
            if statuses == ["unavailable"]:
                unavailable.append(f"{k[1]} {k[3]} ({recs[0].get('note', '')})")
                continue
            if any(s not in ("ok", "unavailable") for s in statuses):
                failed += 1
            e2e, _ = cell(recs, "e2e")
            res, _ = cell(recs, "resident")
            null = k[1] == "strata" and k[2] == "null"
            ratio = f"{medians[k] / medians[best]:.2f}" if best and k in medians and not null else "-"
            checks = sorted({r.get("check", "") for r in recs if r.get("check")})
            if null:
                checks = ["computes nothing: strata's own cost"]
            status = ", ".join(statuses)
            note = "; ".join(sorted({r["note"] for r in recs if r.get("note")}))
            what = "; ".join(checks)  # each process's, when they differ
            if note:
                what += f" ({note})" if what else note
            if statuses != ["ok"]:
                what = status + (f": {what}" if what else "")
            same_p = [r["vs_baseline"] for r in recs if "vs_baseline" in r]
            within = "-"
            if same_p:
                within = f"{statistics.median(same_p):.2f}"
                if len(same_p) > 1:
                    within += f" ({min(same_p):.2f}–{max(same_p):.2f})"
            out.append(f"| {k[1]} | {k[2]} | {k[3]} | {e2e} | {res} | {ratio} | {within} | {len(recs)} | {what} |")
        if unavailable:
            out.append("\nNot run here: " + "; ".join(unavailable) + ".")
        pairs = sorted((b, m, v) for (var, b, m), v in same.items() if var == variant)
        if pairs:
            out.append(f"\nstrata ÷ LibTorch in the same libtorch_cpu_bench processes ({variant}; median over "
                       "processes of each process's ratio of medians, range):\n")
            out.append("| backend | mode | strata ÷ LibTorch |")
            out.append("|---|---|---:|")
            for b, m, v in pairs:
                rng = f" ({min(v):.2f}–{max(v):.2f})" if len(v) > 1 else ""
                out.append(f"| {b} | {m} | {statistics.median(v):.2f}{rng} |")
    return out, failed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--markdown", default="", help="write the table here too")
    ap.add_argument("--title", default="LeNet-5, one image")
    ap.add_argument("--note", action="append", default=[], help="a line under the title (machine, command)")
    args = ap.parse_args()
    rows, sources, same = load(args.files)
    if not rows:
        print("lenet_table: no LeNet rows in " + " ".join(args.files), file=sys.stderr)
        return 1
    lines = [f"## {args.title}\n"] + [f"- {n}" for n in args.note]
    body, failed = table(rows, same)
    lines += body
    lines += ["\nSources (one per process):\n"] + [f"- {s}" for s in sources]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
