#!/usr/bin/env python3
"""Regenerates docs/RESULTS.md, each card's points.csv and parity.csv, and its plots
from the abstraction-cost study's result files (docs/study.md):

    python3 tools/study/make_page.py                 # docs/results/*/study/ -> docs/RESULTS.md
    python3 tools/study/make_page.py --no-plots      # without gnuplot

Every number on the page is read or computed from the files; nothing is typed in.
Standard library only (plus the gnuplot program for the PNGs).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from study_data import _get, GENERATED, GPT_COMPILED, GPT_GENERATE, IMPL_ORDER, PEERS, SEED_IMPLS, STRATA_BEST, \
    STRATA_MODES, find_cards, gpt_decoding, gpt_layer_rows, gpt_peer_rows, gpt_split_rows, gpt_training, \
    gpt_way_rows, read_commented_csv, seed_points  # noqa: E402
import plots  # noqa: E402
from grid import SEED, SWEEP_BATCH, SWEEP_RESOLUTION  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
HOST_BOUND = 0.8  # host enqueue time >= this fraction of device time: the device waits on the host
PAR = 0.05        # within 5 % counts as par


def num(v, unit=""):
    if v is None:
        return "–"
    a = abs(v)
    s = f"{v:.0f}" if a >= 100 else f"{v:.1f}" if a >= 10 else f"{v:.2f}" if a >= 1 else f"{v:.3g}"
    return s + unit


def ratio(a, b):
    return None if a is None or b in (None, 0) else a / b


def rtxt(v):
    return "–" if v is None else f"{v:.2f}×"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def cell(card, impl, kind, b, r, key="ms_per_sample"):
    row = card.row(impl, kind, b, r)
    if row is None:
        return "not run"
    if row["status"] != "ok":
        return row["status"]
    return num(row[key])


def paired_text(r, fmt=lambda v: f"{v:.0f}", scale=1.0):
    """A paired row (paired_runs.py): its median, the range of its processes' medians where there were
    several, and the union of their 95 % intervals, each divided by scale."""
    meds = r.get("process_median_ns") or []
    spread = f" ({fmt(min(meds) / scale)}–{fmt(max(meds) / scale)})" if len(meds) > 1 else ""
    return f"{fmt(r['median_ns'] / scale)}{spread} [{fmt(r['lo_ns'] / scale)}, {fmt(r['hi_ns'] / scale)}]"


def unresolved(rs):
    """True where every row's interval reaches 0: the measurement cannot tell the layer from noise."""
    return all(r["lo_ns"] <= 0 <= r["hi_ns"] for r in rs)


def noise_text(rs, fmt=lambda v: f"{v:.0f}", scale=1.0):
    return f"within noise (±{fmt(max(max(-r['lo_ns'], r['hi_ns']) for r in rs) / scale)})"


def host_bound(row):
    return row["host_ms"] is not None and row["device_ms"] and row["host_ms"] >= HOST_BOUND * row["device_ms"]


def why(s, p):
    """strata's best mode against a peer at one point: the ratio and the measured reason."""
    q = s["device_ms"] / p["device_ms"]
    if abs(q - 1) <= PAR:
        text = "par"
    else:
        slow, fast, who = (s, p, "strata") if q > 1 else (p, s, "peer")
        if host_bound(slow) and not host_bound(fast):
            text = f"{who} host-bound (enqueue {num(slow['host_ms'])} of {num(slow['device_ms'])} ms)"
        elif host_bound(slow) and host_bound(fast):
            text = f"both host-bound (host {num(s['host_ms'])} vs {num(p['host_ms'])} ms)"
        else:
            text = f"device time (kernels: {num(s['device_ms'])} vs {num(p['device_ms'])} ms)"
    m = ratio(s["peak_mib"], p["peak_mib"])
    if m is not None and (m > 1.5 or m < 1 / 1.5):
        text += f"; memory {rtxt(m)}"
    return q, text


# --- sections -----------------------------------------------------------------------------------
def sec_environment(card):
    lines = []
    for part, env in sorted(card.envs.items()):
        gpu = env.get("gpu", {})
        build = ", ".join(x for x in (env.get("build") or []) if x)
        lines.append(f"- part `{part}`: {gpu.get('name', '?')}, driver {gpu.get('driver_version', '?')}, "
                     f"max SM clock {gpu.get('clocks.max.sm', '?')}, power limit {gpu.get('power.limit', '?')}; "
                     f"torch {env.get('torch', '?')}, torchvision {env.get('torchvision', '?')}; "
                     f"build: {build or '?'}")
    for name, doc in sorted(card.docs.items()):
        if name.endswith("_sweep"):
            p = doc.get("protocol", {})
            v = doc.get("versions", {})
            lines.append(f"- `{name}.json` ({doc.get('framework')}"
                         f"{', torch ' + v['torch'] if v.get('torch') else ''}): warm-up {p.get('warmup')}, "
                         f"at least {p.get('min_repeats')} timed steps and {p.get('min_seconds')} s, at most "
                         f"{p.get('max_repeats')}; {doc.get('elapsed_s', 0):.0f} s; settings "
                         f"`{json.dumps(doc.get('settings', {}), sort_keys=True)}`")
    return "\n".join(lines) + "\n" if lines else "No environment files.\n"


def sec_seed_table(card, seed):
    impls = [i for i in IMPL_ORDER if i in card.impls()]
    out = []
    for kind in ("eval", "train"):
        header = ["batch × res"] + [f"paper {s}" for s in SEED_IMPLS] + impls + \
                 ["paper PyTorch ÷ cuDNN", "ours PyTorch eager ÷ strata best"]
        rows = []
        for b, r in SEED:
            sv = [seed.get((s, kind, b, r), {}).get("ms_per_sample") for s in SEED_IMPLS]
            best = card.best_strata(kind, b, r)
            eager = card.ok("pytorch_eager", kind, b, r)
            rows.append([f"{b} × {r}"] + [num(v) for v in sv] + [cell(card, i, kind, b, r) for i in impls] +
                        [rtxt(ratio(sv[0], sv[3])),
                         rtxt(ratio(eager and eager["ms_per_sample"], best and best["ms_per_sample"]))])
        out.append(f"**{'Evaluation' if kind == 'eval' else 'Training'}**, ms per sample (paper: Tesla V100, "
                   f"PyTorch 1.7, copies included; ours: {card.device_name()}, copies excluded)\n\n" +
                   table(header, rows))
    return "\n".join(out)


def bench_ns(doc):
    """Google Benchmark JSON -> {run name: median real time in ns}."""
    scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}
    out = {}
    for b in doc.get("benchmarks", []):
        if b.get("aggregate_name", "median") != "median" or b.get("error_occurred"):
            continue
        out[b.get("run_name", b["name"])] = b["real_time"] * scale.get(b.get("time_unit", "ns"), 1)
    return out


def sec_dispatch(card):
    doc = card.docs.get("dispatch_overhead")
    if not doc:
        return "Not measured (no dispatch_overhead.json).\n"
    ns = bench_ns(doc)
    backends = sorted({k.split("/")[1] for k in ns if k.count("/") == 2})
    ops = ["relu64", "add1", "conv3x3"]
    paths = ["backend_member", "direct_plan", "frontend_static", "frontend_virtual", "autograd_static",
             "autograd_virtual"]
    header = ["path (ns per call)"] + [f"{op} {be}" for be in backends for op in ops]
    rows = [[p] + [num(ns.get(f"{op}/{be}/{p}")) for be in backends for op in ops] for p in paths]
    rows.append(["plain loop"] + [num(ns.get(f"BM_plain_loop_{op}")) if op != "conv3x3" else "–"
                                  for be in backends for op in ops])
    out = [table(header, rows)]
    ind = [ns.get(k) for k in ("BM_indirection_virtual", "BM_indirection_template", "BM_indirection_direct_noinline")]
    out.append(f"Pure indirection, one trivial function: virtual {num(ind[0])} ns, template {num(ind[1])} ns, "
               f"direct non-inlined {num(ind[2])} ns.\n")
    be = "cuda" if "cuda" in backends else (backends[0] if backends else None)
    if be is None:
        return "\n".join(out)

    def mean_delta(a, b, ops_):
        d = [ns[f"{o}/{be}/{a}"] - ns[f"{o}/{be}/{b}"] for o in ops_ if f"{o}/{be}/{a}" in ns and f"{o}/{be}/{b}" in ns]
        return sum(d) / len(d) if d else None
    layers = {"virtual call (virtual − static)": mean_delta("frontend_virtual", "frontend_static", ops),
              "front end: checks, shape rule, output allocation (static − direct plan)":
                  mean_delta("frontend_static", "direct_plan", ["relu64", "conv3x3"]),
              "autograd tape (autograd − front end, static)": mean_delta("autograd_static", "frontend_static",
                                                                          ["relu64"])}
    cells = {name: num(d) for name, d in layers.items()}
    # Paired, interleaved differences (dispatch_overhead --paired) say what they resolve:
    # the median over the ops of each layer, and "within noise" where an interval spans 0.
    paired = [r for r in card.docs.get("dispatch_paired", {}).get("paired", []) if r["backend"] == be]
    how = "means over the ops above"
    if paired:
        n_proc = card.docs.get("dispatch_paired", {}).get("processes")
        how = ("medians of paired, interleaved differences with their 95 % intervals" if not n_proc else
               f"medians over {n_proc} processes of paired, interleaved differences, the range of the processes' "
               f"medians in parentheses and the union of their 95 % intervals in brackets")
        layers, cells = {}, {}
        names = {"virtual call": "virtual call (virtual − static)",
                 "front end": "front end: checks, shape rule, output allocation (static − direct plan)",
                 "autograd tape": "autograd tape (autograd − front end, static)",
                 "launch": "launch (direct − graph replay)"}
        for key, name in names.items():
            rs = [r for r in paired if r["layer"].startswith(key)]
            if not rs:
                continue
            if unresolved(rs):
                layers[name] = None
                cells[name] = noise_text(rs)
            else:
                layers[name] = sorted(r["median_ns"] for r in rs)[len(rs) // 2]
                cells[name] = "; ".join(f"{r['op']} {paired_text(r)}" for r in rs)
    costs = card.docs.get("strata_op_costs", {})
    n_ops = {r["kind"]: r["idle"]["ops"] for r in costs.get("records", []) if r.get("status") == "ok"}
    out.append(f"What each layer costs per call on the `{be}` backend ({how}) and per ResNet-50 "
               f"step ({', '.join(f'{n} backend calls per {k} step' for k, n in sorted(n_ops.items())) or 'ops per step not measured'}"
               f"), as a share of strata's median device time per step (virtual mode):\n")
    header = ["layer", "ns per call"] + [f"% of {k} step at {b} × {r}" for k in ("eval", "train") for b, r in
                                         (SEED[0], SEED[5], SEED[4])]
    rows = []
    for name, d in layers.items():
        row = [name, cells[name]]
        for k in ("eval", "train"):
            for b, r in (SEED[0], SEED[5], SEED[4]):
                s = card.ok("strata_virtual", k, b, r)
                if d is None or k not in n_ops or s is None or ("tape" in name and k == "eval"):
                    row.append("–")
                else:
                    row.append(num(100 * d * n_ops[k] / (s["device_ms"] * 1e6), " %"))
        rows.append(row)
    out.append(table(header, rows))
    rows = []
    for k in ("eval", "train"):
        for b, r in card.points(k):
            v, s_, d = (card.ok(m, k, b, r) for m in STRATA_MODES)
            if not (v and s_ and d):
                continue
            rows.append([f"{k} {b} × {r}", num(v["device_ms"]), num(ratio(v["device_ms"] - d["device_ms"],
                                                                             v["device_ms"]) * 100, " %"),
                         num(ratio(v["device_ms"] - s_["device_ms"], v["device_ms"]) * 100, " %"),
                         num(v["host_ms"]), num(s_["host_ms"]), num(d["host_ms"])])
    if rows:
        out.append("Measured: strata's three modes on the same points (device ms of virtual mode; how much "
                   "shorter static and direct steps are; host enqueue ms per mode):\n")
        out.append(table(["point", "virtual device ms", "direct saves", "static saves", "host virtual",
                          "host static", "host direct"], rows))
    return "\n".join(out)


def sec_op_trace(card):
    doc = card.docs.get("strata_op_costs")
    if not doc:
        return "Not measured (no strata_op_costs.json).\n"
    out = []
    for rec in doc.get("records", []):
        if rec.get("status") != "ok":
            out.append(f"{rec.get('kind')}: {rec.get('status')} {rec.get('note', '')}\n")
            continue
        idle, busy = rec["idle"], rec["busy"].get("virtual", {})
        busy_by = {o["op"]: o for o in busy.get("by_op", [])}
        out.append(f"**{rec['kind']}** at {doc['batch']} × {doc['resolution']}: {idle['ops']} backend calls. Device "
                   f"idle before each call: host {num(idle['host_us'] / 1e3)} ms, device {num(idle['device_us'] / 1e3)} "
                   f"ms in total. An ordinary step (virtual mode): enqueue {num(busy.get('step_host_ms'))} ms, of "
                   f"which {num(busy.get('backend_host_us', 0) / 1e3)} ms inside the backend; device "
                   f"{num(busy.get('step_device_ms'))} ms"
                   f"{'; gate timeouts ' + str(idle['gate_timeouts']) if idle.get('gate_timeouts') else ''}.\n")
        rows = []
        for o in sorted(idle["by_op"], key=lambda o: -o["host_us"]):
            b = busy_by.get(o["op"], {})
            rows.append([o["op"], int(o["count"]), num(o["host_us_mean"]), num(o["device_us_mean"]),
                         num(b.get("mean_us")), rtxt(ratio(o["host_us"], o["device_us"])),
                         "host" if o["host_us"] > o["device_us"] else "device"])
        out.append(table(["op", "calls", "host µs (idle)", "device µs", "host µs (busy)", "host ÷ device",
                          "bound by"], rows))
    return "\n".join(out)


def sec_peers(card):
    out = []
    summary = []
    peers = [p for p in PEERS if p in card.impls()]  # a column per peer that ran on this card
    for peer in peers:
        for kind in ("eval", "train"):
            qs = []
            for b, r in card.points(kind):
                s, p = card.best_strata(kind, b, r), card.ok(peer, kind, b, r)
                if s and p:
                    qs.append(why(s, p)[0])
            if qs:
                qs.sort()
                summary.append([peer, kind, len(qs), sum(q < 1 - PAR for q in qs), sum(abs(q - 1) <= PAR for q in qs),
                                sum(q > 1 + PAR for q in qs), rtxt(qs[len(qs) // 2]), rtxt(qs[0]), rtxt(qs[-1])])
    if not summary:
        return "No point where strata and a peer both ran.\n"
    out.append("Ratio = strata's fastest mode ÷ the peer, median device time per step (below 1: strata faster):\n")
    out.append(table(["peer", "kind", "points", "strata faster", "par (±5 %)", "strata slower", "median ratio",
                      "min", "max"], summary))
    for kind in ("eval", "train"):
        rows = []
        for b, r in card.points(kind):
            s = card.best_strata(kind, b, r)
            if not s:
                continue
            cells = []
            for peer in peers:
                p = card.ok(peer, kind, b, r)
                cells.append("–" if not p else "{} {}".format(*(lambda q, t: (rtxt(q), t))(*why(s, p))))
            rows.append([f"{b} × {r}", f"{s['impl'][7:]} {num(s['ms_per_sample'])}"] + cells)
        if rows:
            out.append(f"**{'Evaluation' if kind == 'eval' else 'Training'}**: strata's best mode (ms per sample) "
                       f"and its ratio to each peer, with the reason read from the measurements (host-bound: host "
                       f"enqueue ≥ {HOST_BOUND:.0%} of device time; memory: peak ratio beyond 1.5×):\n")
            out.append(table(["point", "strata best"] + peers, rows))
    return "\n".join(out)


def sec_fusion(card):
    """Each strata mode with its default fusions against the same mode without them
    (`<mode>_unfused` rows: batch norm, ReLU and residual add as separate ops, no
    folding); None when the sweep ran no unfused rows."""
    pairs = [(m, m + "_unfused") for m in STRATA_BEST if m + "_unfused" in card.impls()]
    if not pairs:
        return None
    rows = []
    for kind in ("eval", "train"):
        for b, r in card.points(kind):
            for fused, unfused in pairs:
                f, u = card.ok(fused, kind, b, r), card.ok(unfused, kind, b, r)
                if not (f and u):
                    continue
                rows.append([kind, f"{b} × {r}", fused[len("strata_"):], num(f["device_ms"]), num(u["device_ms"]),
                             rtxt(ratio(f["device_ms"], u["device_ms"])), num(f["peak_mib"]), num(u["peak_mib"])])
    if not rows:
        return "No point where both the fused and the unfused row of a mode ran.\n"
    return ("Median device time of a step (ms) and peak memory (MiB) of each strata mode with its default "
            "fusions (fused training, fused or folded evaluation) and without them (`<mode>_unfused`); "
            "fused ÷ unfused below 1 is what fusion saves.\n\n" +
            table(["kind", "batch × res", "mode", "fused ms", "unfused ms", "fused ÷ unfused", "fused peak MiB",
                   "unfused peak MiB"], rows))


def sec_copies(card, seed_text):
    # One implementation per framework: the modes of one framework copy alike.
    reps = [i for i in ("strata_virtual", "pytorch_eager", "libtorch") if i in card.impls()]
    rows = []
    for b, r in [p for p in card.points() if p[0] == SWEEP_BATCH]:
        for impl in reps:
            row = card.ok(impl, "eval", b, r)
            if not row or row["h2d_mb"] is None:
                continue
            rows.append([f"{b} × {r}", impl.split("_")[0], num(row["h2d_mb"]), num(row["h2d_pageable_ms"]),
                         num(row["h2d_pinned_ms"]), num(ratio(row["h2d_mb"], row["h2d_pageable_ms"])),
                         num(ratio(row["h2d_mb"], row["h2d_pinned_ms"])),
                         rtxt(ratio(row["h2d_pageable_ms"], row["h2d_pinned_ms"]))])
    out = [f"One input batch (f32) copied to the device on its own, before the steps (median of the copies; wall "
           f"time until the data is usable), at batch {SWEEP_BATCH}:\n",
           table(["point", "framework", "MB", "pageable ms", "pinned ms", "pageable GB/s", "pinned GB/s",
                  "pageable ÷ pinned"], rows) if rows else "No copy timings.\n"]
    if seed_text:
        v = {(t["quantity"], t["impl"]): float(t["value"]) for t in seed_text}
        text = (f"The paper (its text, batch 32 on its PASCAL images): PyTorch copied "
                f"{v.get(('h2d_bytes_per_batch', 'pytorch'))} MB in {v.get(('h2d_ms_per_batch', 'pytorch'))} ms, the "
                f"others {v.get(('h2d_bytes_per_batch', 'others'))} MB in {v.get(('h2d_ms_per_batch', 'others'))} ms "
                f"({rtxt(ratio(v.get(('h2d_bytes_per_batch', 'pytorch')), v.get(('h2d_bytes_per_batch', 'others'))))}"
                " the bytes); pinning halved the time again.")
        strata = {(x["batch"], x["resolution"]): x for x in card.rows
                  if x["impl"] == "strata_virtual" and x["status"] == "ok" and x["h2d_mb"]}
        qs = [ratio(e["h2d_mb"], strata[(e["batch"], e["resolution"])]["h2d_mb"]) for e in card.rows
              if e["impl"] == "pytorch_eager" and e["status"] == "ok" and e["h2d_mb"]
              and (e["batch"], e["resolution"]) in strata]
        if qs:
            text += f" Here PyTorch eager sends {rtxt(min(qs))}–{rtxt(max(qs))} strata's bytes per batch."
        out.append(text + "\n")
    return "\n".join(out)


def sec_generated(card):
    """strata's modes beside the same model written out as a program (tools/study/generated_sweep.py);
    None where the card has no generated rows."""
    if not any(i in card.impls() for i in GENERATED):
        return None
    raw = {(x["impl"], x["kind"], x["batch"], x["resolution"]): x
           for x in card.docs.get("generated_sweep", {}).get("records", [])}
    rows, costs, failed = [], [], []
    for kind in ("eval", "train"):
        for b, r in card.points(kind):
            for mode, gen in (("strata_direct", "generated"), ("strata_cudagraph", "generated_cudagraph")):
                m, g, rec = card.ok(mode, kind, b, r), card.row(gen, kind, b, r), raw.get((gen, kind, b, r), {})
                if g is None:
                    continue
                if g["status"] != "ok":
                    failed.append(f"{gen} {kind} {b} × {r}: {g['status']} ({(g.get('note') or '')[:120]})")
                    continue
                if g["device_ms"] is None:  # a training step: timed with its batch in and loss out only (below)
                    continue
                rows.append([kind, f"{b} × {r}", mode[len("strata_"):], num(m and m["device_ms"]),
                             num(g["device_ms"]), rtxt(ratio(g["device_ms"], m and m["device_ms"])),
                             num(m and m["host_ms"]), num(g["host_ms"]), num(m and m["peak_mib"]), num(g["peak_mib"]),
                             "yes" if rec.get("bitwise") else "no"])
                if m:
                    costs.append([kind, f"{b} × {r}", f"{mode[len('strata_'):]} − {gen}",
                                  num(1e3 * (m["device_ms"] - g["device_ms"])),
                                  num(1e3 * (m["host_ms"] - g["host_ms"])),
                                  num(100 * (m["device_ms"] - g["device_ms"]) / m["device_ms"], " %")])
    sizes = sorted({(x.get("model", "resnet50"), kind, b, r, x.get("calls"), x.get("code_lines"),
                     x.get("model_lines"), x.get("program_bytes"))
                    for (impl, kind, b, r), x in raw.items() if x.get("status") == "ok"})
    out = ["strata's ResNet-50 written out by `strata_codegen --backend cuda` (f32 NCHW, batch norm folded; a "
           "program that links the CUDA runtime, cuBLAS and cuDNN and no strata) beside the mode it was recorded "
           "from (direct) and the mode it mirrors when it captures its calls into a CUDA graph at load (graph). "
           "Device: CUDA events around one forward on a resident input; host: the time to enqueue it (medians). "
           "Memory: strata's allocator peak (weights included) / the program's arena and weights (cuDNN's and "
           "cuBLAS's workspaces not counted). Bitwise: the program's output is strata's, byte for byte.\n",
           table(["kind", "batch × res", "strata mode", "strata device ms", "generated device ms",
                  "generated ÷ strata", "strata host ms", "generated host ms", "strata peak MiB",
                  "generated MiB", "bitwise"], rows) if rows else "No generated row ran.\n"]
    if costs:
        out.append("What strata's runtime costs over its own calls written out: the mode's median minus the "
                   "program's (separate runs of the same process order, not paired: differences within a few µs "
                   "are noise), µs per step, and the share of the mode's device time:\n")
        out.append(table(["kind", "batch × res", "difference", "device µs", "host µs", "share of device"], costs))
    io = []
    for (impl, kind, b, r), x in sorted(raw.items(),
                                        key=lambda kv: (kv[0][1], kv[1].get("model", ""), kv[0][2], kv[0][3])):
        plain = _get(x, "io_ms", "median")
        if impl != "generated" or x.get("status") != "ok" or plain is None:
            continue
        graph = _get(raw.get(("generated_cudagraph", kind, b, r), {}), "io_ms", "median")
        s = x.get("strata_io_ms") or {}
        io.append([kind, x.get("model", "resnet50"), f"{b} × {r}", num(s.get("direct")), num(plain),
                   rtxt(ratio(plain, s.get("direct"))), num(s.get("graph")), num(graph),
                   rtxt(ratio(graph, s.get("graph")))])
    if io:
        out.append("Input in, output out (one prediction with the input copied to the device and the output back to "
                   "the host: `strata_codegen --time` for strata, `model_run REPEAT` for the program; one training "
                   "step, SGD with momentum, with the batch in and the loss out: `strata_codegen --train --time` and "
                   "`model_train --time`), ms, median; LeNet-5 (TensorFlow's variant, 28 × 28) here only:\n")
        out.append(table(["kind", "model", "batch × res", "strata direct", "generated", "generated ÷ direct", "strata graph",
                          "generated + graph", "generated + graph ÷ graph"], io))
    if sizes:
        out.append("The programs: " + "; ".join(
            f"{m} {'training step ' if k == 'train' else ''}{b} × {r}: {c} calls, {ln} lines ({ml} in `model.cpp`), "
            f"`{'model_train' if k == 'train' else 'model_run'}` {num(pb / 1e6 if pb else None, ' MB')}"
            for m, k, b, r, c, ln, ml, pb in sizes) + ".\n")
    if failed:
        out.append("Not measured: " + "; ".join(failed) + ".\n")
    return "\n".join(out)


def by_point_table(card, key, fmt, kinds=("eval", "train")):
    """Rows (kind, seed point), one column per implementation, cells fmt(row)."""
    impls = [i for i in card.impls() if any(card.ok(i, k, b, r) for k in kinds for b, r in SEED)]
    rows = []
    for kind in kinds:
        for b, r in SEED:
            cells = [card.ok(i, kind, b, r) for i in impls]
            if any(cells):
                rows.append([f"{kind} {b} × {r}"] + [fmt(c) if c else "–" for c in cells])
    return table([key] + impls, rows) if rows else "No measurements at the paper's points.\n"


def sec_tails(card):
    return "\n".join([
        "Step-time tails (device time, p99 ÷ median and max ÷ median of the timed steps):\n",
        by_point_table(card, "point", lambda x: f"{rtxt(ratio(x['device_p99'], x['device_ms']))} / "
                                                f"{rtxt(ratio(x['device_max'], x['device_ms']))}"),
        "Device memory, MiB: the framework's caching allocator's peak (weights included) / NVML's used memory "
        "of the whole device at the end of the timed steps (context and cached blocks included; the paper's "
        "measure):\n",
        by_point_table(card, "point", lambda x: f"{num(x['peak_mib'])} / {num(x['nvml_mem_used_mib'])}"),
        "GPU utilisation (NVML, mean of the driver's samples over the timed steps) and energy per sample (mJ, "
        "NVML's total-energy counter over the timed steps):\n",
        by_point_table(card, "point", lambda x: f"{num(x['gpu_util_pct'], ' %')} · {num(x['energy_mj_per_sample'])} mJ"),
    ])


def sec_parity(card):
    recs = {p["impl"]: p for p in card.parity}
    if not recs:
        return "Not measured (no *_parity.json).\n"
    ref = recs.get("pytorch_eager") if (recs.get("pytorch_eager") or {}).get("status") == "ok" else None
    rows = []
    for impl in [i for i in IMPL_ORDER if i in recs] + sorted(set(recs) - set(IMPL_ORDER)):
        p = recs[impl]
        if p.get("status") != "ok":
            rows.append([impl, p.get("status"), "–", "–", "–", "–", "–", "–", "–", (p.get("note") or "")[:80]])
            continue
        ls = p.get("losses") or []
        d10 = dall = d1 = None
        if ref and ref is not p:
            rl = ref.get("losses") or []
            n = min(len(ls), len(rl))
            if n > 1 and rl[1]:
                d1 = abs(ls[1] - rl[1]) / abs(rl[1])
            if n:
                d10 = max(abs(a - b) for a, b in zip(ls[:min(n, 10)], rl[:min(n, 10)]))
                dall = max(abs(a - b) for a, b in zip(ls[:n], rl[:n]))
        same = [m for m in STRATA_MODES if m != impl and (recs.get(m) or {}).get("losses") == ls and ls]
        rows.append([impl, p.get("steps"), num(ls[0] if ls else None), num(p.get("train_loss_last")),
                     num(100 * p["test_acc"], " %") if p.get("test_acc") is not None else "–", num(p.get("test_loss")),
                     num(d1), num(d10), num(dall), ("losses bitwise equal to " + ", ".join(same)) if same else
                     (p.get("note") or "")])
    protos = {n: d.get("protocol") for n, d in card.docs.items() if n.endswith("_parity") and d.get("protocol")}
    proto = next(iter(protos.values()), {})
    mixed = sorted(n for n, q in protos.items() if q != proto)
    warn = (f"**Protocols differ** between the parity files ({', '.join(sorted(protos))}): "
            f"{', '.join(mixed)} ran another batch, epoch count or learning rate; their Δ is not comparable.\n\n"
            if mixed else "")
    return warn + (f"Same initial weights (strata's, loaded everywhere), same {proto.get('batch')}-image batches in the same "
            f"order for {proto.get('epochs')} epochs, SGD lr {proto.get('lr')} momentum {proto.get('momentum')}; "
            "test accuracy on the held-out images in eval mode. Δ = largest |loss − PyTorch eager's loss| at the same "
            "step; \"rel. Δ after one update\" is that difference at the second step relative to the loss, the size of "
            "the rounding differences before training can amplify them."
            + (" pytorch_eager_cpu is PyTorch eager on the host CPU: the same model and data with other rounding, "
               "the yardstick for the Δ columns." if "pytorch_eager_cpu" in recs else "") + "\n\n"
            + table(["impl", "steps", "first loss", "last loss", "test acc", "test loss", "rel. Δ after one update",
                     "Δ first 10 steps", "Δ all steps", "note"], rows))


def sec_loc(card):
    doc = card.docs.get("loc")
    if not doc:
        return "Not counted (no loc.json).\n"
    how = doc.get("how", {})
    s = how.get("strata", {})
    rows = [[i, "–" if doc["loc"].get(i) is None else doc["loc"][i]] for i in IMPL_ORDER if i in doc["loc"]]
    tv = how.get("torchvision", {})
    return (table(["impl", "lines"], rows) +
            f"\nstrata: {', '.join(s.get('files', []))} (both block types, all depths): {s.get('shared_lines')} "
            f"lines shared by the three modes, {s.get('direct_only_lines')} for direct mode only (its explicit "
            f"backward), {s.get('tape_only_lines')} for the tape modes only. PyTorch: torchvision "
            f"{tv.get('torchvision', '?')} `{', '.join(tv.get('defs', []))}` (same coverage); TorchScript, "
            f"torch.compile and CUDA graphs add what `{how.get('peer_additions', {}).get('file')}` needs "
            f"({json.dumps(how.get('peer_additions', {}).get('lines', {}), sort_keys=True)}). LibTorch: "
            f"`{how.get('libtorch', {}).get('file')}` ({how.get('libtorch', {}).get('covers')}).\n")


def sec_status(card):
    rows = []
    for impl in card.impls():
        rs = [r for r in card.rows if r["impl"] == impl]
        c = {s: sum(r["status"] == s for r in rs) for s in ("ok", "oom", "error", "absent", "skipped")}
        note = next((r["note"] for r in rs if r["status"] in ("error", "absent") and r.get("note")), "")
        first = sorted(r["first_step_s"] for r in rs if r["status"] == "ok" and r.get("first_step_s") is not None)
        rows.append([impl] + [c[s] for s in ("ok", "oom", "error", "absent", "skipped")] +
                    [f"{num(first[len(first) // 2])} / {num(first[-1])}" if first else "–", note[:100]])
    return ("First step: the first warm-up step's wall time in s (median / max over the points), where scripting, "
            "compiling or capturing happens.\n\n" +
            table(["impl", "ok", "out of memory", "error", "absent", "skipped (deadline)", "first step s",
                   "first note"], rows))


def sec_gpt(card):
    """GPT-2 decoding at batch 1 (tools/gpu/study.sh gpt), one block per precision and model size; None
    where the card has no decoding files."""
    runs = gpt_decoding(card)
    if not runs:
        return None
    # GPT-2 small's blocks are labelled by their precision alone; another size says its layers.
    return "\n".join(gpt_block(prec if layers in (12, None) else f"{prec}, {layers} layers", r["strata"], r["peers"])
                     for (prec, layers), r in runs.items())


def sec_gpt_train(card):
    """GPT-2 small's training step in every dispatch mode (tools/gpu/study.sh gpt_train); None where
    the card has no such files."""
    runs = gpt_training(card)
    if not runs:
        return None
    out = ["GPT-2 small (124M) in bf16 over f32 master weights, AdamW, random tokens: `gpt2_train speed` with "
           "every dispatch mode in one process, the modes' order reversed every other round. ms per step: the "
           "median of the rounds (each round's mean step), with the rounds' range; tokens/s at the median; the "
           "caching allocator's peak; and the step's time as a multiple of graph mode's.\n"]
    for (b, t), rows in runs.items():
        graph = next((r["ms_per_step"] for r in rows if r["mode"] == "graph"), None)
        out += [f"**batch {b} × {t} tokens**\n",
                table(["mode", "ms per step", "range", "rounds × steps", "tokens/s", "peak MiB", "× graph's time"],
                      [[r["mode"], num(r["ms_per_step"]), f"{num(r['ms_range'][0])}–{num(r['ms_range'][1])}",
                        f"{r['rounds']} × {r['steps_per_round']}", f"{r['tokens_per_s']:,.0f}", num(r["peak_mib"]),
                        rtxt(ratio(r["ms_per_step"], graph))] for r in rows])]
    out.append("Host and device time per mode are split for decoding (above), not yet for a training step.\n")
    return "\n".join(out)


def gpt_setting(prec, strata_docs, peer_docs):
    """The sentence that says what was decoded, read from the files."""
    first = (strata_docs or peer_docs)[0]
    model = dict((peer_docs[0].get("config") if peer_docs else None) or {}, **(first.get("model") or {}))
    seed = (peer_docs[0].get("config") or {}).get("seed") if peer_docs else None
    weights = f"random weights (bench/peers/pytorch_gpt2.py export, seed {seed})" if seed is not None else \
        "weights not recorded"
    where = ", ".join(x for x in ([f"strata's `{strata_docs[0].get('backend')}` backend"] if strata_docs else []) +
                      sorted({d.get("device") for d in peer_docs if d.get("device")}) if x)
    text = (f"**{prec}**: GPT-2 ({model.get('layers')} layers, {model.get('heads')} heads, width "
            f"{model.get('embd')}, vocabulary {model.get('vocab')}; {weights}), batch 1, greedy, "
            f"{first.get('new_tokens')} new tokens after a {first.get('prompt_tokens')}-token prompt; {where}. "
            f"Time per token: one generation's wall time, the prompt's step included, over the new tokens.")
    if strata_docs:
        same = all(d.get("same_tokens_every_way") for d in strata_docs)
        text += (f" strata: {len(strata_docs)} process(es) of {strata_docs[0].get('rounds')} rounds, every way once a "
                 f"round, the order reversed every other round; "
                 f"{'every way gave the same tokens' if same else 'the ways gave DIFFERENT tokens'}.")
    return text + "\n"


def gpt_block(title, strata_docs, peer_docs):
    ways, peers = gpt_way_rows(strata_docs), gpt_peer_rows(peer_docs)
    refs = {form: r["median_ms"] for r in peers for form in (GPT_GENERATE, GPT_COMPILED) if r["label"][1] == form}
    rows = []
    for r in ways + peers:
        label = f"strata {r['label']}" if isinstance(r["label"], str) else f"{r['label'][0]}: {r['label'][1]}"
        rows.append([label, num(r["median_ms"]), f"{num(r['min_ms'])}–{num(r['max_ms'])}", r["rounds"],
                     num(1e3 / r["median_ms"]), rtxt(ratio(refs.get(GPT_GENERATE), r["median_ms"])),
                     rtxt(ratio(refs.get(GPT_COMPILED), r["median_ms"])), "yes" if r["same_tokens"] else "no"])
    out = [gpt_setting(title, strata_docs, peer_docs),
           "ms per token (median; over several processes the median of their medians), the range of every round, "
           "tokens/s at the median, and the rate as a multiple of PyTorch's `generate` and of its compiled "
           "static-cache loop (above 1: faster); \"same tokens\": as the first way (strata) or form (each peer) "
           "in every process.\n",
           table(["way", "ms per token", "range", "rounds", "tokens/s", "× generate's rate",
                  "× compiled loop's rate", "same tokens"], rows)]
    split = gpt_split_rows(strata_docs)
    if split:
        rows = [[r["mode"]] + [f"{num(r[side]['median_ms'])} ({num(r[side]['min_ms'])}–{num(r[side]['max_ms'])})"
                               for side in ("host", "device")] +
                ["host" if r["host"]["median_ms"] > r["device"]["median_ms"] else "device",
                 rtxt(ratio(r["host"]["median_ms"], r["device"]["median_ms"]))] for r in split]
        timeouts = sum(r["gate_timeouts"] for r in split)
        out += [f"Where a token's time goes, per mode: the one-token step over the static cache (the greedy token "
                f"fed back on the device), {split[0]['steps_per_round']} steps a round enqueued while the stream is "
                f"held, so the host's time to enqueue them and the device's time to run them back to back are "
                f"measured apart (`bench/stream_gate.h`); ms per token, the median (of the processes' medians) and "
                f"the range of every round. A mode whose host time exceeds its device time keeps the GPU waiting; "
                f"the decoding ways above also pay the per-token read of the token on the host."
                + (f" **{timeouts} round(s) waited for the held stream** (a step synchronised): their host time "
                   f"includes the gate's one-second wait." if timeouts else "") + "\n",
                table(["mode", "host ms per token", "device ms per token", "bound by", "host ÷ device"], rows)]
    layers = gpt_layer_rows(strata_docs)
    if layers:
        med = {r["label"]: r["median_ms"] for r in ways}
        rows = [[r["layer"], f"{r['a']} − {r['b']}"] +
                ([noise_text([r], num, 1e3), "–"] if unresolved([r]) else
                 [paired_text(r, num, 1e3), num(100 * r["median_ns"] / (1e6 * med[r["a"]]), " %")]) for r in layers]
        out += ["What each layer costs per token: way a's time minus way b's in the same round (the two ran in the "
                "same stretch of time), µs per token; the median with a distribution-free 95 % interval of the "
                "median in brackets (the ranks n/2 ∓ 1.96·√n/2, as `dispatch_overhead --paired`); over several "
                "processes the median of their medians, their range in parentheses and the union of their "
                "intervals; \"within noise\" where an interval reaches 0. Share: of way a's median time.\n",
                table(["layer", "ways (a − b)", "µs per token", "share of a"], rows)]
    return "\n".join(out)


def page(cards, seed, seed_text, plot_files, out_path):
    rel = os.path.relpath
    o = ["# Results: the cost of abstraction, measured\n",
         "Generated by `python3 tools/study/make_page.py` from `docs/results/<card>/study/` (written by "
         "`tools/gpu/study.sh`; how to run: [docs/study.md](study.md)). Do not edit by hand. ResNet-50 as "
         "torchvision, f32, TF32 off and deterministic cuDNN algorithms for every implementation, random inputs; "
         "steps timed by CUDA events on the stream (device), by the host clock to enqueue (host); copies timed on "
         "their own. The paper: Levental & Orlova, \"Comparing the costs of abstraction for DL frameworks\" (2020); its numbers "
         "are in `tools/study/data/` with their source.\n"]
    if not cards:
        o.append("No results yet: run the parts of `tools/gpu/study.sh` on the GPU machine.\n")
    for card in cards:
        d = os.path.dirname(out_path)
        o.append(f"## {card.device_name()} (`{rel(card.folder, d)}`)\n")
        o.append("Raw data: " + ", ".join(f"[`{n}.json`]({rel(os.path.join(card.folder, n + '.json'), d)})"
                                          for n in sorted(card.docs)) +
                 f"; flat tables [`points.csv`]({rel(os.path.join(card.folder, 'points.csv'), d)}), "
                 f"[`parity.csv`]({rel(os.path.join(card.folder, 'parity.csv'), d)}).\n")
        # A card with GPT-2 decoding figures alone has no ResNet-50 sections.
        resnet = ((("The paper's table beside ours", sec_seed_table(card, seed)),
                   ("What each dispatch layer costs", sec_dispatch(card)),
                   ("One step, op by op (device idle vs busy)", sec_op_trace(card)),
                   ("Where strata wins or loses against each peer, and why", sec_peers(card)),
                   ("Fusion: each mode with and without it", sec_fusion(card)),
                   ("Generated code: the model as a program with no framework in it", sec_generated(card)),
                   ("Host-to-device copies: pageable vs pinned", sec_copies(card, seed_text)),
                   ("Tails, memory, utilisation and energy at the paper's points", sec_tails(card)),
                   ("Accuracy parity on a short training run", sec_parity(card)),
                   ("Effort: lines of the ResNet definition", sec_loc(card)),
                   ("What ran, and what did not produce a number", sec_status(card))) if card.rows else ())
        for title, body in (("Environment", sec_environment(card)),) + resnet + \
                (("GPT-2, batch-1 decoding", sec_gpt(card)),
                 ("GPT-2 small, a training step in every mode", sec_gpt_train(card))):
            if body is not None:  # a section with nothing to show for this card's data
                o.append(f"### {title}\n\n{body}")
        pf = plot_files.get(card.slug)
        if pf:
            o.append("### Plots\n")
            for title, f in pf:
                o.append(f"![{title}]({rel(os.path.join(card.folder, 'plots', f), d)})\n")
        elif pf is not None:
            o.append("### Plots\n\nNot drawn (gnuplot not installed; `apt-get install gnuplot-nox`).\n")
    return "\n".join(o)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=os.path.join(ROOT, "docs", "results"))
    ap.add_argument("--seed", default=os.path.join(HERE, "data", "seed_001_points.csv"))
    ap.add_argument("--seed-text", default=os.path.join(HERE, "data", "seed_001_text.csv"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "RESULTS.md"))
    ap.add_argument("--no-plots", action="store_true")
    args = ap.parse_args()
    cards = find_cards(args.results)
    seed = seed_points(args.seed)
    seed_text = read_commented_csv(args.seed_text) if os.path.exists(args.seed_text) else []
    plot_files = {}
    for card in cards:
        card.write_csv()
        if not args.no_plots and card.rows:  # the plots are the ResNet-50 sweep's
            plot_files[card.slug] = plots.draw(card, os.path.join(card.folder, "plots"), seed, SWEEP_RESOLUTION,
                                               SWEEP_BATCH) if plots.have_gnuplot() else []
    with open(args.out, "w") as f:
        f.write(page(cards, seed, seed_text, plot_files, args.out))
    print(f"make_page: {len(cards)} card(s) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
