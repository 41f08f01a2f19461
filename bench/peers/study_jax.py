#!/usr/bin/env python3
"""The JAX peer of the abstraction-cost study (docs/study.md): ResNet-50 (bench/peers/jax_resnet50.py's
plain jax.numpy/lax network, torchvision's architecture and initialisation, f32 NHWC) at each
(batch, resolution) point, for evaluation and a training step, as `jax.jit`, into the record
bench/peers/study_torch.py and study_resnet50 write (impl "jax_jit", framework "jax").

    study_jax.py sweep --kinds eval,train --points 8x64,32x32 --json jax_sweep.json

Policy as the study's: f32 convolutions and products at lax.Precision.HIGHEST (no TF32), as
strata's and the PyTorch peers' TF32-off policy. Per point and kind: fresh parameters, one batch's
host-to-device copy (`jax.device_put` of a NumPy array, pageable; JAX has no pinned staging of its
own, so pinned_ms is left null) timed on its own, warm-up steps (the first one's time, mostly XLA's
compilation, is first_step_s; a new shape compiles again), then at least --min-repeats timed steps,
more until --min-seconds have passed. JAX exposes no CUDA events on its stream: device_ms is the
wall time of a step up to `block_until_ready` (host_ms the time to dispatch it), which bounds the
device time from above by the synchronisation (tens of microseconds). Peak memory: JAX cannot reset
its peak counter, so peak_bytes stays null. Points run cheapest first; nothing new starts after
--deadline seconds; a point at least as large as one that ran out of memory is not tried.
--device cpu runs on the CPU for smoke tests. No parity run yet (the study's parity task trains
strata's and PyTorch's models from the same initial weights file; this peer does not load it).
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from study_torch import SEED_POINTS, is_oom, parse_points, stats, sweep_records, write_json  # noqa: E402

START = time.perf_counter()
IMPL = "jax_jit"


class Runner:
    """Everything that needs JAX; built after the arguments are checked."""

    def __init__(self, args):
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        try:
            import jax
        except ImportError as e:
            raise SystemExit(f"study_jax: JAX is not installed here ({e})")
        import jax.numpy as jnp
        import numpy as np
        from jax import lax
        import jax_resnet50 as jr
        self.jax, self.jnp, self.np, self.lax, self.jr = jax, jnp, np, lax, jr
        self.args = args
        try:
            self.device = jax.devices("gpu" if args.device == "cuda" else args.device)[0]
        except RuntimeError as e:
            raise SystemExit(f"study_jax: JAX has no '{args.device}' device here ({e})")
        self.device_info = {"name": getattr(self.device, "device_kind", str(self.device)),
                            "platform": self.device.platform}
        self.versions = {"jax": jax.__version__, "python": sys.version.split()[0]}

    def time_h2d(self, b, r):
        np, jax = self.np, self.jax
        host = np.random.default_rng(self.args.seed).uniform(-1.7, 1.7, (b, r, r, 3)).astype(np.float32)
        ms = []
        for _ in range(self.args.h2d_repeats):
            t0 = time.perf_counter()
            y = jax.device_put(host, self.device)
            y.block_until_ready()
            ms.append((time.perf_counter() - t0) * 1e3)
            del y
        return {"bytes": host.nbytes, "pageable_ms": sorted(ms)[len(ms) // 2], "pinned_ms": None,
                "repeats": self.args.h2d_repeats}

    def measure(self, impl, train, b, r):  # noqa: ARG002 - one impl, jax_jit
        jax, jnp, lax, jr, a = self.jax, self.jnp, self.lax, self.jr, self.args
        rec = {"impl": IMPL, "framework": "jax", "kind": "train" if train else "eval", "batch": b, "resolution": r,
               "dtype": "f32", "layout": "NHWC"}
        try:
            t_build = time.perf_counter()
            k_params, k_x, k_y = jax.random.split(jax.random.PRNGKey(a.seed), 3)
            params, state = jax.device_put(jr.init(k_params), self.device)
            x = jax.device_put(jax.random.uniform(k_x, (b, r, r, 3), jnp.float32, -1.7, 1.7), self.device)
            labels = jax.device_put(jax.random.randint(k_y, (b,), 0, jr.rc.CLASSES), self.device)
            rec["h2d"] = self.time_h2d(b, r)
            net = jr.Net(train, lax.Precision.HIGHEST, jnp.float32)
            if train:
                step_fn = jr.make_train(net, a.lr)
                carry = [params, state, jax.tree_util.tree_map(jnp.zeros_like, params)]

                def step():
                    carry[0], carry[1], carry[2], loss = step_fn(carry[0], carry[1], carry[2], x, labels)
                    return loss
            else:
                infer = jr.make_infer(net)

                def step():
                    return infer(params, state, x)
            jax.block_until_ready(jax.tree_util.tree_leaves((params, state, x)))
            rec["setup_s"] = time.perf_counter() - t_build
            t_first = time.perf_counter()
            jax.block_until_ready(step())
            rec["first_step_s"] = time.perf_counter() - t_first
            self.timed(step, b, a.warmup - 1, rec)
            rec["status"] = "ok"
        except Exception as e:  # noqa: BLE001 - reported per measurement, the sweep goes on
            rec["status"] = "oom" if is_oom(e) or "RESOURCE_EXHAUSTED" in str(e) else "error"
            rec["note"] = f"{type(e).__name__}: {e}".strip()[:2000]
        return rec

    def timed(self, step, b, warmup, rec):
        jax, a = self.jax, self.args
        for _ in range(max(0, warmup)):
            jax.block_until_ready(step())
        dev, host = [], []
        t_start = time.perf_counter()
        while True:
            n, elapsed = len(dev) + 1, time.perf_counter() - t_start
            last = n >= a.max_repeats or (n >= a.min_repeats and elapsed >= a.min_seconds)
            t0 = time.perf_counter()
            out = step()
            t1 = time.perf_counter()
            jax.block_until_ready(out)
            t2 = time.perf_counter()
            host.append((t1 - t0) * 1e3)
            dev.append((t2 - t0) * 1e3)
            if last:
                break
        ds = stats(dev)
        stats_mem = getattr(self.device, "memory_stats", lambda: None)() or {}
        rec.update({"repeats": len(dev), "warmup": a.warmup, "device_ms": ds, "host_ms": stats(host),
                    "wall_ms": ds, "device_ms_is": "wall time up to block_until_ready (no CUDA events in JAX)",
                    "ms_per_sample": ds["median"] / b, "img_per_s": b * 1000.0 / ds["median"],
                    "check": float(self.jnp.sum(out.astype(self.jnp.float32))),
                    "nvml": {"window_s": time.perf_counter() - t_start}, "energy_mj_per_sample": None,
                    "peak_bytes": None, "peak_bytes_process": stats_mem.get("peak_bytes_in_use")})


def print_record(r):
    head = f"{r['impl']:<10} {r['kind']:<5} {r['batch']:>5} x {r['resolution']:<5} {r['status']:<7}"
    if r["status"] != "ok":
        print(f"{head} {r.get('note', '')[:160]}", flush=True)
        return
    print(f"{head} {r['ms_per_sample']:9.3f} ms/sample  wall {r['device_ms']['median']:9.3f}  host "
          f"{r['host_ms']['median']:9.3f} ms  n={r['repeats']:3d}  first {r['first_step_s']:.2f} s", flush=True)


def cmd_sweep(args):
    kinds = [k for k in args.kinds.split(",") if k]
    if not kinds or any(k not in ("eval", "train") for k in kinds):
        raise SystemExit(f"study_jax: --kinds '{args.kinds}' is not a list of eval, train")
    points = sorted(parse_points(args.points, "study_jax"), key=lambda p: p[0] * p[1] * p[1])  # cheapest first
    run = Runner(args)
    doc = {"study": 1, "framework": "jax", "part": "sweep", "versions": run.versions, "device": run.device_info,
           "nvml": {"ok": False, "error": "not read by the JAX peer"},
           "settings": {"precision": "lax.Precision.HIGHEST", "device": args.device},
           "protocol": {"warmup": args.warmup, "min_repeats": args.min_repeats, "max_repeats": args.max_repeats,
                        "min_seconds": args.min_seconds, "h2d_repeats": args.h2d_repeats,
                        "deadline_s": args.deadline, "lr": args.lr, "seed": args.seed},
           "records": []}
    print(f"study_jax sweep on {run.device_info['name']} | jax {run.versions['jax']} | {len(points)} points x "
          f"{len(kinds)} kinds", flush=True)
    sweep_records(args, doc, points, kinds, [IMPL], run.measure,
                  lambda impl, kind, b, r: {"impl": impl, "framework": "jax", "kind": kind, "batch": b,
                                            "resolution": r},
                  print_record, START)
    doc["elapsed_s"] = time.perf_counter() - START
    write_json(args.json, doc)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sweep", help="time every point and kind")
    s.add_argument("--device", default="cuda", help="cuda (JAX's gpu) or cpu")
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--deadline", type=float, default=1e9, help="start nothing new after this many seconds")
    s.add_argument("--warmup", type=int, default=3, help="untimed steps (the first is first_step_s)")
    s.add_argument("--h2d-repeats", type=int, default=5)
    s.add_argument("--lr", type=float, default=0.01)
    s.add_argument("--kinds", default="eval,train")
    s.add_argument("--points", default=SEED_POINTS, help="<batch>x<resolution>,... (default: the seed's table)")
    s.add_argument("--min-repeats", type=int, default=10)
    s.add_argument("--max-repeats", type=int, default=200)
    s.add_argument("--min-seconds", type=float, default=0.6)
    s.add_argument("--json", default="")
    args = ap.parse_args()
    if args.warmup < 1 or args.min_repeats < 1 or args.max_repeats < args.min_repeats:
        raise SystemExit("study_jax: --warmup and --min-repeats must be at least 1, --max-repeats at least "
                         "--min-repeats")
    return cmd_sweep(args)


if __name__ == "__main__":
    sys.exit(main())
