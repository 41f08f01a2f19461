"""Reading the study's result files (docs/results/<card>/study/*.json, written by
tools/gpu/study.sh's parts) into flat rows, and the seed's data files. Standard
library only. Used by tools/study/make_page.py and tests/study/."""
import csv
import glob
import json
import os

from paired_runs import aggregate, median, paired

# Column order of every table and plot: the peers from the highest abstraction down,
# then strata's modes.
IMPL_ORDER = ["pytorch_eager", "torchscript", "torch_compile", "pytorch_cudagraph", "libtorch", "jax_jit",
              "strata_virtual", "strata_static", "strata_direct", "strata_cudagraph",
              "generated", "generated_cudagraph",
              "strata_virtual_unfused", "strata_static_unfused", "strata_direct_unfused", "strata_cudagraph_unfused"]
STRATA_MODES = ["strata_virtual", "strata_static", "strata_direct"]
# strata's modes a best time is taken over: the three above and graph mode (its CUDA-graph replay),
# all with strata's default fusions; "<impl>_unfused" rows run the same mode with them off.
STRATA_BEST = STRATA_MODES + ["strata_cudagraph"]
# strata's model written out by strata_codegen as a program with no strata in it (tools/study/
# generated_sweep.py), run as plain calls and as a CUDA graph captured at load.
GENERATED = ["generated", "generated_cudagraph"]
PEERS = ["pytorch_eager", "torchscript", "torch_compile", "pytorch_cudagraph", "libtorch", "jax_jit"]
SEED_IMPLS = ["pytorch", "torchscript", "libtorch", "cudnn"]

# GPT-2 decoding (tools/gpu/study.sh gpt): strata's ways as bench/gpt2_forward.cpp names them, and
# the steps between two ways that each take one layer of abstraction away (docs/study.md).
GPT_VIRTUAL = "virtual, growing cache"
GPT_STATIC_GROWING = "static, growing cache"
GPT_STATIC = "static, static cache"
GPT_DIRECT = "direct (static cache, planned steps)"
GPT_GRAPH = "graph (static cache, captured step)"
GPT_GRAPH_DIRECT = "graph (static cache, captured direct step)"
GPT_LAYERS = [  # (way a, way b, what a - b is)
    (GPT_VIRTUAL, GPT_STATIC_GROWING, "virtual call"),
    (GPT_STATIC_GROWING, GPT_STATIC,
     "growing cache: keys and values appended (copied) per token, not written in place"),
    (GPT_STATIC, GPT_DIRECT, "front end: checks, shape rule, output allocation (no tape: decoding records none)"),
    (GPT_DIRECT, GPT_GRAPH_DIRECT, "launching: a host call per kernel, not one graph launch per token"),
    (GPT_STATIC, GPT_GRAPH, "front end and launching together"),
]
# The peers' forms strata's rates are divided by (bench/peers/pytorch_gpt2.py's names).
GPT_GENERATE = "transformers generate, eager"
GPT_COMPILED = "static-cache loop, torch.compile reduce-overhead"
GPT_PRECISION_ORDER = ["bf16", "fp32"]  # bf16 first: the study's decoding precision

# The flat row of one sweep record (points.csv's columns).
POINT_COLUMNS = [
    "impl", "framework", "kind", "batch", "resolution", "status", "note", "repeats",
    "ms_per_sample", "device_ms", "device_p10", "device_p90", "device_p99", "device_max", "host_ms", "wall_ms",
    "img_per_s", "peak_mib", "reserved_mib", "h2d_mb", "h2d_pageable_ms", "h2d_pinned_ms",
    "gpu_util_pct", "util_samples", "power_w", "energy_mj_per_sample", "nvml_mem_used_mib", "first_step_s", "setup_s",
]


def _get(d, *path):
    for k in path:
        if not isinstance(d, dict) or d.get(k) is None:
            return None
        d = d[k]
    return d


def _mib(v):
    return None if v is None else v / 2 ** 20


def flatten(rec):
    ok = rec.get("status") == "ok"
    row = {k: None for k in POINT_COLUMNS}
    for k in ("impl", "framework", "kind", "batch", "resolution", "status", "note", "repeats", "ms_per_sample",
              "img_per_s", "energy_mj_per_sample", "first_step_s", "setup_s"):
        row[k] = rec.get(k)
    if ok:
        row.update({
            "device_ms": _get(rec, "device_ms", "median"), "device_p10": _get(rec, "device_ms", "p10"),
            "device_p90": _get(rec, "device_ms", "p90"), "device_p99": _get(rec, "device_ms", "p99"),
            "device_max": _get(rec, "device_ms", "max"), "host_ms": _get(rec, "host_ms", "median"),
            "wall_ms": _get(rec, "wall_ms", "median"), "peak_mib": _mib(rec.get("peak_bytes")),
            "reserved_mib": _mib(rec.get("reserved_bytes")),
            "h2d_mb": None if _get(rec, "h2d", "bytes") is None else _get(rec, "h2d", "bytes") / 1e6,
            "h2d_pageable_ms": _get(rec, "h2d", "pageable_ms"), "h2d_pinned_ms": _get(rec, "h2d", "pinned_ms"),
            "gpu_util_pct": _get(rec, "nvml", "gpu_util_pct"), "util_samples": _get(rec, "nvml", "util_samples"),
            "power_w": _get(rec, "nvml", "power_w"), "nvml_mem_used_mib": _mib(_get(rec, "nvml", "mem_used_bytes")),
        })
    return row


class Card:
    """Everything measured on one card: docs/results/<card>/study/."""

    def __init__(self, folder):
        self.folder = folder
        self.slug = os.path.basename(os.path.dirname(os.path.abspath(folder)))
        self.docs, self.rows, self.parity = {}, [], []
        for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
            name = os.path.splitext(os.path.basename(path))[0]
            with open(path) as f:
                self.docs[name] = json.load(f)
        for name, doc in self.docs.items():
            if name.endswith("_sweep"):
                # The study's tables are ResNet-50's; another model's records (the generated sweep's
                # LeNet-5) stay in self.docs for the sections that list them apart.
                self.rows += [flatten(r) for r in doc.get("records", []) if r.get("model", "resnet50") == "resnet50"]
            elif name.endswith("_parity"):
                # A peer run on the host CPU (the parity part's rounding baseline) is
                # its own row: "pytorch_eager_cpu".
                on_cpu = (doc.get("settings") or {}).get("device") == "cpu"
                self.parity += [dict(r, impl=r["impl"] + "_cpu") if on_cpu else r for r in doc.get("records", [])]
        self.index = {(r["impl"], r["kind"], r["batch"], r["resolution"]): r for r in self.rows}
        self.envs = {k[4:]: v for k, v in self.docs.items() if k.startswith("env_")}

    def row(self, impl, kind, b, r):
        return self.index.get((impl, kind, b, r))

    def ok(self, impl, kind, b, r):
        row = self.row(impl, kind, b, r)
        return row if row and row["status"] == "ok" else None

    def impls(self):
        present = {r["impl"] for r in self.rows} | {r.get("impl") for r in self.parity}
        return [i for i in IMPL_ORDER if i in present] + sorted(i for i in present - set(IMPL_ORDER) if i)

    def points(self, kind=None):
        return sorted({(r["batch"], r["resolution"]) for r in self.rows if kind in (None, r["kind"])},
                      key=lambda p: (p[0] * p[1] * p[1], p))

    def best_strata(self, kind, b, r):
        """strata's fastest dispatch mode at a point (by median device time)."""
        rows = [self.ok(m, kind, b, r) for m in STRATA_BEST]
        rows = [x for x in rows if x]
        return min(rows, key=lambda x: x["device_ms"]) if rows else None

    def device_name(self):
        for doc in self.docs.values():
            name = _get(doc, "device", "name")
            if name and name != "cpu":
                return name
        for env in self.envs.values():
            if _get(env, "gpu", "name"):
                return env["gpu"]["name"]
        return self.slug

    def write_csv(self):
        with open(os.path.join(self.folder, "points.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=POINT_COLUMNS)
            w.writeheader()
            for r in sorted(self.rows, key=lambda r: (r["kind"], r["batch"], r["resolution"], r["impl"])):
                w.writerow({k: _fmt_csv(v) for k, v in r.items()})
        cols = ["impl", "framework", "batch", "resolution", "status", "steps", "first_loss", "train_loss_last",
                "test_acc", "test_loss", "seconds", "note"]
        with open(os.path.join(self.folder, "parity.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            for p in self.parity:
                losses = p.get("losses") or []
                w.writerow({k: _fmt_csv(v) for k, v in {
                    "impl": p.get("impl"), "framework": p.get("framework"), "batch": p.get("batch"),
                    "resolution": p.get("resolution"), "status": p.get("status"), "steps": p.get("steps"),
                    "first_loss": losses[0] if losses else None, "train_loss_last": p.get("train_loss_last"),
                    "test_acc": p.get("test_acc"), "test_loss": p.get("test_loss"), "seconds": p.get("seconds"),
                    "note": p.get("note")}.items()})


def _fmt_csv(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v).replace("\n", " ")


def find_cards(results_root):
    """The cards with a ResNet-50 sweep or GPT-2 decoding figures."""
    return [Card(os.path.dirname(p)) for p in
            sorted(glob.glob(os.path.join(results_root, "*", "study", "")))
            if any(glob.glob(os.path.join(p, pat)) for pat in ("*_sweep.json", "gpt_decode_*.json",
                                                               "gpt_peers_*.json", "gpt_train_*.jsonl"))]


# --- GPT-2 training -------------------------------------------------------------------------------
def gpt_training(card):
    """{(batch, tokens): [gpt2_train speed's rows, one per mode]} from the card's
    gpt_train_b<B>_t<T>.jsonl files (tools/gpu/study.sh gpt_train), the smaller batch first."""
    out = {}
    for path in sorted(glob.glob(os.path.join(card.folder, "gpt_train_*.jsonl"))):
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.startswith("{")]
        if rows:
            out[(rows[0]["batch"], rows[0]["seq"])] = rows
    return dict(sorted(out.items()))


# --- GPT-2 decoding -------------------------------------------------------------------------------
def gpt_decoding(card):
    """{(precision, layers): {"strata": [gpt2_forward --json files, one per process], "peers": [the
    peers' files (bench/peers/decode_record.py)]}}, bf16 first, then the smaller model first (GPT-2
    small's 12 layers, medium's 24: study.sh's GPT_SIZE)."""
    out = {}
    for name, doc in sorted(card.docs.items()):
        side = ("strata" if name.startswith("gpt_decode_") and "ways" in doc else
                "peers" if name.startswith("gpt_peers_") and "forms" in doc else None)
        if side:
            layers = (doc.get("model") if side == "strata" else doc.get("config") or {}).get("layers")
            out.setdefault((doc.get("precision"), layers), {"strata": [], "peers": []})[side].append(doc)

    def order(key):
        prec, layers = key
        return (GPT_PRECISION_ORDER.index(prec) if prec in GPT_PRECISION_ORDER else len(GPT_PRECISION_ORDER), str(prec),
                layers or 0)

    def references_first(doc):  # the file holding the ratios' references (PyTorch's) leads the peers
        return not any(f["form"] in (GPT_GENERATE, GPT_COMPILED) for f in doc["forms"])
    for r in out.values():
        r["peers"].sort(key=references_first)  # stable: file-name order otherwise
    return {p: out[p] for p in sorted(out, key=order)}


def _decode_rows(entries):
    """entries: (label, {"ms_per_token_by_round", "ms_per_token_median"}, same tokens) over the
    processes -> one row per label, in the order first seen: the median of the processes' medians
    (paired_runs' rule), the range of every round, the rounds, and whether every process gave the
    same tokens as its first way or form."""
    by, order = {}, []
    for label, e, same in entries:
        if label not in by:
            by[label] = []
            order.append(label)
        by[label].append((e, same))
    rows = []
    for label in order:
        es = by[label]
        ms = [m for e, _ in es for m in e["ms_per_token_by_round"]]
        rows.append({"label": label, "median_ms": median([e["ms_per_token_median"] for e, _ in es]),
                     "min_ms": min(ms), "max_ms": max(ms), "rounds": len(ms), "processes": len(es),
                     "same_tokens": all(s for _, s in es)})
    return rows


def gpt_way_rows(strata_docs):
    """One row per strata way (label: the way's name)."""
    return _decode_rows([(w["way"], w, d.get("same_tokens_every_way", False)) for d in strata_docs for w in d["ways"]])


def gpt_peer_rows(peer_docs):
    """One row per peer form (label: (framework, form))."""
    return _decode_rows([((d.get("framework"), f["form"]), f, f.get("same_tokens_as_first", False))
                         for d in peer_docs for f in d["forms"]])


def gpt_split_rows(strata_docs):
    """One row per mode of gpt2_forward's host/device split ("split": each mode's one-token step with
    the stream held while the host enqueues it): host and device ms per token, each the median of
    the processes' medians with the range of every round; [] where no file has the split."""
    by, order = {}, []
    for doc in strata_docs:
        split = doc.get("split") or {}
        for m in split.get("modes", []):
            if m["mode"] not in by:
                by[m["mode"]] = []
                order.append(m["mode"])
            by[m["mode"]].append((m, split.get("gate_timeouts", 0), split.get("steps_per_round")))
    rows = []
    for mode in order:
        ms = by[mode]
        row = {"mode": mode, "processes": len(ms), "gate_timeouts": sum(t for _, t, _ in ms),
               "steps_per_round": ms[0][2]}
        for side in ("host", "device"):
            key = f"{side}_ms_per_token_by_round"
            every = [v for m, _, _ in ms for v in m[key]]
            row[side] = {"median_ms": median([median(m[key]) for m, _, _ in ms]), "min_ms": min(every),
                         "max_ms": max(every), "rounds": len(every)}
        rows.append(row)
    return rows


def gpt_layer_rows(strata_docs):
    """What each layer costs per token: way a's ms per token minus way b's in the same round (they ran
    in the same stretch of time), in ns, the median and 95 % interval by paired_runs.paired per
    process, then paired_runs.aggregate over the processes. Each row also names its ways (a, b)."""
    runs = []
    for doc in strata_docs:
        ms = {w["way"]: w["ms_per_token_by_round"] for w in doc["ways"]}
        rows = []
        for a, b, layer in GPT_LAYERS:
            if a in ms and b in ms and ms[a] and len(ms[a]) == len(ms[b]):
                med, lo, hi = paired([1e6 * (x - y) for x, y in zip(ms[a], ms[b])])
                rows.append({"op": "gpt2 decode", "backend": doc.get("backend"), "layer": layer, "median_ns": med,
                             "lo_ns": lo, "hi_ns": hi, "rounds": len(ms[a])})
        runs.append(rows)
    ways = {layer: (a, b) for a, b, layer in GPT_LAYERS}
    return [dict(r, a=ways[r["layer"]][0], b=ways[r["layer"]][1]) for r in aggregate(runs)]


def read_commented_csv(path):
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def seed_points(path):
    """{(impl, kind, batch, resolution): {"ms_per_sample", "used_mem_mb", "gpu_util_pct"}}"""
    out = {}
    for r in read_commented_csv(path):
        out[(r["impl"], r["kind"], int(r["batch"]), int(r["resolution"]))] = {
            k: float(r[k]) if r[k] else None for k in ("ms_per_sample", "used_mem_mb", "gpu_util_pct")}
    return out
