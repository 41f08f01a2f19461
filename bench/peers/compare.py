#!/usr/bin/env python3
"""Merges resnet50_gpu's JSON (strata, one entry per configuration and dispatch mode)
with pytorch_resnet50.py's (PyTorch eager) and prints the ratio tables in Markdown:

    python3 bench/peers/compare.py strata.json pytorch.json [--variants v.json] [--interop a.json ...] \
        [--markdown table.md]

Ratios are strata / PyTorch "eager" (PyTorch run with strata's settings: TF32 off,
deterministic cuDNN, no cudnn.benchmark): below 1 strata is faster or smaller.
--variants takes a JSON list of further resnet50_gpu documents (other settings:
--tf32, --nondeterministic, ...), compared with strata's default run and with both
PyTorch modes (eager_default is PyTorch's own TF32 default).
Device time is the median of the CUDA-event times of the timed steps; host time the
median time to enqueue one step; peak memory the allocators' peak bytes. Plain
Python standard library.
"""
import argparse
import json
import sys

STRATA_MODES = ["virtual", "static", "direct"]


def load(path):
    with open(path) as f:
        return json.load(f)


def index(doc):
    out = {}
    for r in doc.get("results", []):
        out[(r["config"], r["mode"])] = r
    return out


def configs_in_order(*docs):
    seen = []
    for d in docs:
        for r in d.get("results", []):
            if r["config"] not in seen:
                seen.append(r["config"])
    return seen


def metric(r, key):
    if not r or r.get("status") != "ok":
        return None
    v = r.get(key)
    if isinstance(v, dict):
        v = v.get("median")
    return v


def status_text(r):
    if r is None:
        return "not run"
    s = r.get("status")
    if s == "not_supported":
        return "not supported yet"
    if s == "error":
        return "error"
    return s


def cell(r, key, base, scale=1.0, fmt="{:.2f}"):
    v = metric(r, key)
    if v is None:
        return "n/a" if r and r.get("status") == "ok" else status_text(r)
    text = fmt.format(v * scale)
    b = metric(base, key)
    if b:
        text += f" ({v / b:.2f}×)"
    return text


def table(title, header, rows):
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("strata")
    ap.add_argument("pytorch")
    ap.add_argument("--variants", default="", help="a JSON list of resnet50_gpu documents with other settings")
    ap.add_argument("--interop", nargs="*", default=[], help="interop JSON files to summarise")
    ap.add_argument("--markdown", default="", help="also write the tables here")
    args = ap.parse_args()
    s_doc, p_doc = load(args.strata), load(args.pytorch)
    s, p = index(s_doc), index(p_doc)
    configs = configs_in_order(s_doc, p_doc)
    has_default = any(m == "eager_default" for (_, m) in p)
    out = []

    dev = s_doc.get("device", {})
    out.append(f"Device: {dev.get('name', '?')} (strata: CUDA runtime {dev.get('cuda_runtime', '?')}; "
               f"PyTorch {p_doc.get('torch', '?')}, torchvision {p_doc.get('torchvision', '?')}, "
               f"cuDNN {p_doc.get('device', {}).get('cudnn', '?')}). "
               f"strata settings: {json.dumps(s_doc.get('settings', {}))}. "
               f"PyTorch defaults at start: {json.dumps(p_doc.get('defaults_at_start', {}))}.\n")

    head = ["config", "PyTorch eager ms"] + (["PyTorch default (TF32 conv) ms"] if has_default else [])
    head += [f"strata {m} ms (× PyTorch)" for m in STRATA_MODES]
    rows = []
    for c in configs:
        base = p.get((c, "eager"))
        row = [c, cell(base, "device_ms", None)]
        if has_default:
            row.append(cell(p.get((c, "eager_default")), "device_ms", base) if (c, "eager_default") in p else "-")
        row += [cell(s.get((c, m)), "device_ms", base) for m in STRATA_MODES]
        rows.append(row)
    out.append(table("Device time per step (median ms, CUDA events; ratio strata / PyTorch eager)", head, rows))

    head = ["config", "PyTorch eager img/s"] + [f"strata {m} img/s" for m in STRATA_MODES]
    rows = []
    for c in configs:
        base = p.get((c, "eager"))
        rows.append([c, cell(base, "img_per_s", None, fmt="{:.0f}")] +
                    [cell(s.get((c, m)), "img_per_s", base, fmt="{:.0f}") for m in STRATA_MODES])
    out.append(table("Throughput (images/s from the median device time; ratio strata / PyTorch)", head, rows))

    head = ["config", "PyTorch eager host ms"] + [f"strata {m} host ms" for m in STRATA_MODES] + \
           ["PyTorch wall ms"] + [f"strata {m} wall ms" for m in STRATA_MODES]
    rows = []
    for c in configs:
        base = p.get((c, "eager"))
        rows.append([c, cell(base, "host_ms", None, fmt="{:.3f}")] +
                    [cell(s.get((c, m)), "host_ms", base, fmt="{:.3f}") for m in STRATA_MODES] +
                    [cell(base, "wall_ms", None)] +
                    [cell(s.get((c, m)), "wall_ms", base) for m in STRATA_MODES])
    out.append(table("Host time to enqueue one step, and wall time with synchronisation (median ms; "
                     "ratio strata / PyTorch)", head, rows))

    head = ["config", "PyTorch eager peak MiB"] + [f"strata {m} peak MiB" for m in STRATA_MODES]
    rows = []
    for c in configs:
        base = p.get((c, "eager"))
        rows.append([c, cell(base, "peak_bytes", None, 1 / 2**20, "{:.0f}")] +
                    [cell(s.get((c, m)), "peak_bytes", base, 1 / 2**20, "{:.0f}") for m in STRATA_MODES])
    out.append(table("Peak device memory (allocator peak over the measured steps, MiB; ratio strata / PyTorch)",
                     head, rows))

    if args.variants:
        try:
            variants = load(args.variants)
        except (OSError, ValueError) as e:
            variants = []
            out.append(f"(variants not read: {e})\n")
        head = ["variant", "settings", "config", "mode", "strata ms", "× strata default", "× PyTorch eager",
                "× PyTorch default (TF32 conv)", "NHWC fallbacks/step"]
        rows = []
        for v in variants:
            st = v.get("settings", {})
            settings = ", ".join(f"{k}={st[k]}" for k in ("allow_tf32", "deterministic", "cudnn_find") if k in st)
            for r in v.get("results", []):
                c, m = r["config"], r["mode"]
                mine = metric(r, "device_ms")

                def ratio(other):
                    b = metric(other, "device_ms")
                    return f"{mine / b:.2f}×" if mine and b else "-"
                fb = r.get("layout_fallbacks_per_step")
                rows.append([v.get("variant", "?"), settings, c, m,
                             f"{mine:.2f}" if mine else status_text(r), ratio(s.get((c, m))),
                             ratio(p.get((c, "eager"))), ratio(p.get((c, "eager_default"))),
                             f"{fb:.1f}" if fb is not None else "-"])
        out.append(table("strata with other settings (median device ms; ratios of device time)", head, rows))

    notes = []
    for c in configs:
        fbs = {m: s[(c, m)].get("layout_fallbacks_per_step") for m in STRATA_MODES if (c, m) in s}
        if any(fbs.values()):
            notes.append(f"- {c}: cuDNN refused NHWC and strata ran NCHW through copies "
                         f"{max(v or 0 for v in fbs.values()):.1f} times per step (cuda layout_fallbacks)")
        for m in STRATA_MODES:
            t = (s.get((c, m)) or {}).get("trace")
            if t:
                top = ", ".join(f"{e['op']} {e['count']}×{e['mean_us']:.1f} µs" for e in t["by_op"][:4])
                notes.append(f"- {c} [strata {m}] op trace of one step: {t['ops']} backend calls, "
                             f"{t['backend_host_us'] / 1e3:.2f} ms of host time inside the backend out of "
                             f"{t['step_enqueue_us'] / 1e3:.2f} ms to enqueue the step; largest: {top}")
        checks = [metric(s.get((c, m)), "check") for m in STRATA_MODES]
        checks = [x for x in checks if x is not None]
        if len(checks) > 1:
            same = all(x == checks[0] for x in checks)
            notes.append(f"- {c}: strata's check value ({s.get((c, STRATA_MODES[0]), {}).get('check_what', '')}) "
                         f"{'identical in' if same else 'DIFFERS between'} the modes: {checks}")
        for key, doc in (("strata", s), ("PyTorch", p)):
            for (cc, m), r in doc.items():
                if cc == c and r.get("status") in ("error", "not_supported"):
                    notes.append(f"- {c} [{key} {m}]: {status_text(r)}: {r.get('note', '')}")
    if notes:
        out.append("### Notes\n\n" + "\n".join(notes) + "\n")

    if args.interop:
        lines = ["### Checkpoint interop (strata <-> torchvision ResNet-50)", ""]
        for path in args.interop:
            try:
                d = load(path)
            except (OSError, ValueError) as e:
                lines.append(f"- {path}: not read ({e})")
                continue
            if "modes" in d:
                for m in d["modes"]:
                    lines.append(f"- {d.get('step')} [{m.get('mode')}]: {m.get('status')}"
                                 + (f", logits rel L2 {m['rel_l2']:.3g}, max abs {m['max_abs']:.3g} "
                                    f"(|ref| max {m['ref_max_abs']:.3g}), argmax {m['argmax_agree']}/{m['rows']}"
                                    if "rel_l2" in m else f": {m.get('note', '')}"))
            else:
                extra = ""
                if "rel_l2" in d:
                    extra = (f", load_state_dict(strict=True) {d.get('load_state_dict_strict')}, logits rel L2 "
                             f"{d['rel_l2']:.3g}, max abs {d['max_abs']:.3g} (|ref| max {d['ref_max_abs']:.3g}), "
                             f"argmax {d['argmax_agree']}/{d['rows']} ({d.get('reader')})")
                elif d.get("note"):
                    extra = f": {d['note']}"
                lines.append(f"- {d.get('step')}: {d.get('status')}{extra}")
        out.append("\n".join(lines) + "\n")

    text = "\n".join(out)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
