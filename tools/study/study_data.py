"""Reading the study's result files (docs/results/<card>/study/*.json, written by
tools/gpu/study.sh's parts) into flat rows, and the seed's data files. Standard
library only. Used by tools/study/make_page.py and tests/study/."""
import csv
import glob
import json
import os

# Column order of every table and plot: the peers from the highest abstraction down,
# then strata's modes.
IMPL_ORDER = ["pytorch_eager", "torchscript", "torch_compile", "pytorch_cudagraph", "libtorch", "jax_jit",
              "strata_virtual", "strata_static", "strata_direct", "strata_cudagraph",
              "strata_virtual_unfused", "strata_static_unfused", "strata_direct_unfused", "strata_cudagraph_unfused"]
STRATA_MODES = ["strata_virtual", "strata_static", "strata_direct"]
# strata's modes a best time is taken over: the three above and graph mode (its CUDA-graph replay),
# all with strata's default fusions; "<impl>_unfused" rows run the same mode with them off.
STRATA_BEST = STRATA_MODES + ["strata_cudagraph"]
PEERS = ["pytorch_eager", "torchscript", "torch_compile", "pytorch_cudagraph", "libtorch", "jax_jit"]
SEED_IMPLS = ["pytorch", "torchscript", "libtorch", "cudnn"]

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
                self.rows += [flatten(r) for r in doc.get("records", [])]
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
    return [Card(os.path.dirname(p)) for p in
            sorted(glob.glob(os.path.join(results_root, "*", "study", "")))
            if glob.glob(os.path.join(p, "*_sweep.json"))]


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
