#!/usr/bin/env python3
"""Writes the small fixed input of tests/study/test_make_page.py: the files one card's
study/ folder would hold (tools/gpu/study.sh's parts), in the drivers' schema
(docs/study.md), with simple made-up numbers chosen to exercise every branch of the
page: host-bound and device-bound points, an out-of-memory record, absent
implementations, parity runs (strata's modes bitwise equal), copies, NVML fields.

    python3 tests/study/make_fixture.py tests/study/fixture/fake_card/study

Its output is committed; rerun only when the schema changes (then update the
expected page with test_make_page.py --update).
"""
import json
import os
import sys

POINTS = [(8, 32), (32, 32), (8, 64), (32, 64)]
# impl: (framework, host ms per eval step, device ms per sample-megapixel factor, peak MiB base)
IMPLS = {
    "pytorch_eager": ("pytorch", 3.0, 1.00, 300),
    "torchscript": ("pytorch", 2.5, 0.95, 280),
    "torch_compile": ("pytorch", 1.5, 0.80, 260),
    "pytorch_cudagraph": ("pytorch", 0.05, 1.00, 320),
    "libtorch": ("libtorch", 2.0, 1.00, 300),
    "strata_virtual": ("strata", 4.0, 1.05, 350),
    "strata_static": ("strata", 3.9, 1.05, 350),
    "strata_direct": ("strata", 3.5, 1.05, 700),
}


def summary(m):
    return {"n": 10, "median": m, "p10": m * 0.98, "p90": m * 1.03, "p99": m * 1.10, "min": m * 0.97,
            "max": m * 1.20, "mean": m * 1.01}


def record(impl, kind, b, r):
    fw, host, factor, peak = IMPLS[impl]
    train = kind == "train"
    compute = factor * b * (r / 32) ** 2 * (0.30 if train else 0.10)  # ms on the device
    host *= 3 if train else 1
    dev = round(max(compute, host) + 0.05, 4)
    rec = {"impl": impl, "framework": fw, "kind": kind, "batch": b, "resolution": r, "dtype": "f32",
           "layout": "NCHW", "status": "ok"}
    if impl == "strata_direct" and train and (b, r) == (32, 64):
        rec.update({"status": "oom", "note": "cuda allocator: out of memory allocating 1 bytes"})
        return rec
    nbytes = b * 3 * r * r * 4
    rec.update({
        "repeats": 10, "warmup": 3, "device_ms": summary(dev), "host_ms": summary(round(host, 4)),
        "wall_ms": summary(dev + 0.02), "ms_per_sample": dev / b, "img_per_s": b * 1000 / dev,
        "peak_bytes": int((peak + b * r * r / 256 * (3 if train else 1)) * 2 ** 20), "reserved_bytes": 2 ** 31,
        "h2d": {"bytes": nbytes, "pageable_ms": nbytes / 6e6, "pinned_ms": nbytes / 24e6, "repeats": 5},
        "nvml": {"window_s": 0.6, "util_samples": 4, "power_samples": 4, "gpu_util_pct": min(99.0, 100 * compute / dev),
                 "power_w": 300.0, "energy_mj": 180.0 * 10, "mem_used_bytes": 3 * 2 ** 30},
        "energy_mj_per_sample": 180.0 / b, "check": 1.0, "setup_s": 0.5})
    if fw != "strata":
        rec["first_step_s"] = 30.0 if impl == "torch_compile" else 0.2
    return rec


def sweep(framework, impls, extra=None):
    doc = {"study": 1, "framework": framework, "part": "sweep", "device": {"name": "Fake GPU 80GB"},
           "protocol": {"warmup": 3, "min_repeats": 10, "max_repeats": 200, "min_seconds": 0.6}, "settings": {},
           "records": [], "elapsed_s": 100.0}
    doc.update(extra or {})
    for b, r in POINTS:
        for kind in ("eval", "train"):
            for impl in impls:
                if impl == "strata_cudagraph":
                    doc["records"].append({"impl": impl, "framework": "strata", "kind": kind, "batch": b,
                                           "resolution": r, "status": "absent",
                                           "note": "strata has no CUDA-graph capture and replay yet"})
                else:
                    doc["records"].append(record(impl, kind, b, r))
    return doc


def parity(framework, impls, shift):
    losses = [round(7.0 - 0.1 * i, 4) for i in range(12)]
    recs = []
    for impl in impls:
        if impl == "strata_cudagraph":
            recs.append({"impl": impl, "framework": "strata", "kind": "parity", "status": "absent",
                         "note": "strata has no CUDA-graph capture and replay yet"})
            continue
        ls = [v + shift for v in losses]
        recs.append({"impl": impl, "framework": framework, "kind": "parity", "batch": 64, "resolution": 32,
                     "status": "ok", "losses": ls, "steps": len(ls), "train_loss_last": ls[-1], "test_samples": 512,
                     "test_acc": 0.95 + shift, "test_loss": 0.2 + shift, "seconds": 3.0})
    return {"study": 1, "framework": framework, "part": "parity",
            "protocol": {"batch": 64, "epochs": 2, "lr": 0.02, "momentum": 0.9}, "records": recs}


def dispatch():
    bms = [("BM_indirection_virtual", 4.0), ("BM_indirection_template", 3.5), ("BM_indirection_direct_noinline", 3.5),
           ("BM_plain_loop_relu64", 5.0), ("BM_plain_loop_add1", 0.3)]
    for be, base in (("reference", 100.0), ("cuda", 2000.0)):
        for op in ("relu64", "add1", "conv3x3"):
            bms += [(f"{op}/{be}/backend_member", base), (f"{op}/{be}/frontend_static", base + 200),
                    (f"{op}/{be}/frontend_virtual", base + 210)]
            if op != "add1":
                bms.append((f"{op}/{be}/direct_plan", base + 1))
            if op == "relu64":
                bms += [(f"{op}/{be}/autograd_static", base + 320), (f"{op}/{be}/autograd_virtual", base + 330)]
    out = []
    for name, ns in bms:
        for agg, v in (("mean", ns * 1.01), ("median", ns), ("stddev", 1.0)):
            out.append({"name": f"{name}_{agg}", "run_name": name, "run_type": "aggregate", "aggregate_name": agg,
                        "real_time": v, "cpu_time": v, "time_unit": "ns"})
    return {"context": {"host_name": "fake"}, "benchmarks": out}


def dispatch_paired():
    def rec(op, layer, median, lo, hi):
        return {"op": op, "backend": "cuda", "layer": layer, "median_ns": median, "lo_ns": lo, "hi_ns": hi,
                "rounds": 41}
    return {"paired": [rec("relu64", "virtual call (virtual − static)", -12.0, -80.0, 60.0),
                       rec("conv3x3", "virtual call (virtual − static)", 20.0, -90.0, 110.0),
                       rec("relu64", "front end (static − direct plan)", 500.0, 410.0, 580.0),
                       rec("conv3x3", "front end (static − direct plan)", 700.0, 600.0, 800.0),
                       rec("relu64", "autograd tape (autograd − front end, static)", 350.0, 300.0, 420.0),
                       rec("relu64", "launch (direct plan − graph replay)", 4600.0, 4480.0, 4860.0)]}


def op_costs():
    def rec(kind, n, scale):
        by = [{"op": "conv2d_fwd", "count": 53 * scale, "host_us": 53 * scale * 30.0, "device_us": 53 * scale * 20.0,
               "host_us_mean": 30.0, "device_us_mean": 20.0},
              {"op": "relu_fwd", "count": 49 * scale, "host_us": 49 * scale * 5.0, "device_us": 49 * scale * 8.0,
               "host_us_mean": 5.0, "device_us_mean": 8.0}]
        busy = {"ops": n, "backend_host_us": 2500.0 * scale, "step_device_ms": 4.2 * scale,
                "step_host_ms": 4.0 * scale, "step_wall_ms": 4.3 * scale,
                "by_op": [{"op": "conv2d_fwd", "count": 53 * scale, "total_us": 53 * scale * 40.0, "mean_us": 40.0},
                          {"op": "relu_fwd", "count": 49 * scale, "total_us": 49 * scale * 6.0, "mean_us": 6.0}]}
        return {"kind": kind, "batch": 32, "resolution": 64, "status": "ok",
                "idle": {"ops": n, "host_us": sum(o["host_us"] for o in by), "device_us": sum(o["device_us"] for o in by),
                         "by_op": by, "gate_timeouts": 0},
                "busy": {"virtual": busy, "static": busy}}
    return {"study": 1, "framework": "strata", "part": "op_costs", "backend": "cuda", "batch": 32,
            "resolution": 64, "records": [rec("eval", 174, 1), rec("train", 565, 3)]}


def main(folder):
    os.makedirs(folder, exist_ok=True)
    strata = ["strata_virtual", "strata_static", "strata_direct", "strata_cudagraph"]
    files = {
        "strata_sweep": sweep("strata", strata, {"settings": {"backend": "cuda", "allow_tf32": False}}),
        "torch_sweep": sweep("pytorch", ["pytorch_eager", "pytorch_cudagraph", "torchscript"],
                             {"versions": {"torch": "2.11.0"}}),
        "compile_sweep": sweep("pytorch", ["torch_compile"], {"versions": {"torch": "2.11.0"}}),
        "libtorch_sweep": sweep("libtorch", ["libtorch"]),
        "strata_parity": parity("strata", strata, 0.0),
        "torch_parity": parity("pytorch", ["pytorch_eager", "torchscript"], 0.001),
        "dispatch_overhead": dispatch(),
        "dispatch_paired": dispatch_paired(),
        "strata_op_costs": op_costs(),
        "loc": {"loc": {"strata_virtual": 341, "strata_static": 341, "strata_direct": 363, "libtorch": 68,
                        "pytorch_eager": 196, "torchscript": 197, "torch_compile": 197, "pytorch_cudagraph": 222},
                "how": {"strata": {"files": ["nn/resnet.h"], "shared_lines": 326, "direct_only_lines": 37,
                                   "tape_only_lines": 15},
                        "torchvision": {"torchvision": "0.26.0", "defs": ["Bottleneck", "ResNet"]},
                        "peer_additions": {"file": "bench/peers/study_torch.py", "lines": {"compile": 1}},
                        "libtorch": {"file": "bench/study/libtorch/resnet50.h", "covers": "ResNet-50 only"}}},
        "env_strata": {"part": "strata", "gpu": {"name": "Fake GPU 80GB", "driver_version": "999.1",
                                                 "clocks.max.sm": "1980 MHz", "power.limit": "700.00 W"},
                       "torch": "2.11.0", "torchvision": "0.26.0", "build": ["commit abc", "uncommitted_files 0"],
                       "card": "fake_card"},
    }
    for name, doc in files.items():
        with open(os.path.join(folder, name + ".json"), "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "fixture", "fake_card", "study"))
