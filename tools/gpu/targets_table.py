#!/usr/bin/env python3
"""The table of the targets from one tools/gpu/targets.sh run.

    python3 tools/gpu/targets_table.py OUT_DIR [--markdown FILE]

Reads OUT_DIR/strata_<variant>.json (bench/resnet50_gpu), OUT_DIR/pytorch.json
(bench/peers/pytorch_resnet50.py) and OUT_DIR/torch_<policy>.json
(bench/peers/study_torch.py sweep). Times are median device ms per step (CUDA events
around the step); strata's entry is its best eager dispatch mode, and its graph mode
has columns of its own: against PyTorch eager (img/s) and PyTorch's CUDA-graph replay.
Two policies: "strata" (TF32 off, deterministic cuDNN on both sides) and "PyTorch
defaults" (TF32 convolutions, any algorithm: strata --tf32 --nondeterministic, best
of its variants; PyTorch eager_default). bf16 rows run under the first policy only.
"""
import argparse
import glob
import json
import os
import re
import sys

TARGETS = {
    "infer_b1_224": "time <= 0.4x eager and < TorchScript",
    "train_b128_32": "img/s >= 2x eager",
    "train_b128_224": "img/s >= 1x eager",
    "train_b256_224_nhwc_bf16": "img/s >= 1x eager, peak <= eager",
}


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"targets: {path} not read: {e}", file=sys.stderr)
        return None


def point_of(config):
    m = re.fullmatch(r"(infer|train)_b(\d+)_(\d+).*", config)
    return ("eval" if m.group(1) == "infer" else "train", int(m.group(2)), int(m.group(3)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--markdown", default="")
    a = ap.parse_args()

    strata = {}  # (variant, config) -> best result of an eager mode
    graph = {}  # (variant, config) -> graph mode's result
    for p in sorted(glob.glob(os.path.join(a.out, "strata_*.json"))):
        doc = load(p)
        if not doc:
            continue
        variant = doc.get("variant") or os.path.basename(p)[7:-5]
        for r in doc.get("results", []):
            if r.get("status") != "ok":
                continue
            key = (variant, r["config"])
            if r.get("mode") == "graph":
                graph[key] = r
                continue
            if key not in strata or r["device_ms"]["median"] < strata[key]["device_ms"]["median"]:
                strata[key] = r
    torch = {}  # (mode, config) -> result
    doc = load(os.path.join(a.out, "pytorch.json")) or {}
    for r in doc.get("results", []):
        if r.get("status") == "ok":
            torch[(r["mode"], r["config"])] = r
    peers = {}  # (policy, impl, kind, batch, res) -> device ms
    for policy in ("eager", "eager_default"):
        doc = load(os.path.join(a.out, f"torch_{policy}.json")) or {}
        for r in doc.get("records", []):
            if r.get("status", "ok") == "ok" and "device_ms" in r:
                peers[(policy, r["impl"], r["kind"], r["batch"], r["resolution"])] = r["device_ms"]["median"]

    rows = []
    policies = [("strata (TF32 off, deterministic)", "eager", ["default"]),
                ("PyTorch defaults (TF32 conv, any algorithm)", "eager_default", ["tf32", "tf32_find"])]
    for label, tmode, variants in policies:
        for config, target in TARGETS.items():
            t = torch.get((tmode, config))
            cands = [strata[(v, config)] for v in variants if (v, config) in strata]
            if not t or not cands:
                continue
            s = min(cands, key=lambda r: r["device_ms"]["median"])
            sm, tm = s["device_ms"]["median"], t["device_ms"]["median"]
            kind, b, res = point_of(config)
            ts = peers.get((tmode, "torchscript", kind, b, res))
            cg = peers.get((tmode, "pytorch_cudagraph", kind, b, res))
            ratio = sm / tm
            mem = s["peak_bytes"] / t["peak_bytes"] if t.get("peak_bytes") else None
            if config == "infer_b1_224":
                met = ratio <= 0.4 and (ts is None or sm < ts)
            elif config == "train_b128_32":
                met = tm / sm >= 2.0
            elif config == "train_b128_224":
                met = tm / sm >= 1.0
            else:
                met = tm / sm >= 1.0 and mem is not None and mem <= 1.0
            variant = s.get("variant") or ""
            gs = [graph[(v, config)] for v in variants if (v, config) in graph]
            g = min(gs, key=lambda r: r["device_ms"]["median"])["device_ms"]["median"] if gs else None
            rows.append([label, config, f"{tm:.2f}", f"{ts:.2f}" if ts else "-", f"{cg:.2f}" if cg else "-",
                         f"{sm:.2f} {s['mode']}{' ' + variant if variant not in ('', 'default') else ''}",
                         f"{ratio:.2f}x", f"{tm / sm:.2f}x", f"{mem:.2f}x" if mem else "-", target,
                         "met" if met else "not met", f"{g:.2f}" if g else "-", f"{tm / g:.2f}x" if g else "-",
                         f"{g / cg:.2f}x" if g and cg else "-"])
    head = ["policy", "config", "PyTorch eager ms", "TorchScript ms", "CUDA-graph replay ms", "strata best ms",
            "time x eager", "img/s x eager", "peak x eager", "target", "", "strata graph ms",
            "graph img/s x eager", "graph time x replay"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    text = "\n".join(lines)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text + "\n")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
