"""What the ResNet-50 peers (pytorch_resnet50.py, jax_resnet50.py) share, so that their JSON has
the same fields and names as resnet50_gpu's: the configuration names, the command line, the
statistics and the run over configurations and modes. Standard library only."""
import argparse
import json
import math
import re

MIN_ITERS = 20
CLASSES = 1000


def parse_config(name, prog):
    m = re.fullmatch(r"(infer|train)_b(\d+)_(\d+)((?:_nhwc|_bf16)*)", name)
    if not m:
        raise SystemExit(f"{prog}: configuration '{name}' is not <infer|train>_b<batch>_<resolution>[_nhwc][_bf16]")
    return {
        "name": name,
        "train": m.group(1) == "train",
        "batch": int(m.group(2)),
        "resolution": int(m.group(3)),
        "nhwc": "_nhwc" in m.group(4),
        "bf16": "_bf16" in m.group(4),
    }


def quantile(v, q):
    s = sorted(v)
    pos = q * (len(s) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summary(v):
    return {"median": quantile(v, 0.5), "p10": quantile(v, 0.1), "p90": quantile(v, 0.9), "min": min(v)}


def record(cfg, mode, layout):
    """A measurement's record before it runs: what it is."""
    return {"config": cfg["name"], "mode": mode, "kind": "training" if cfg["train"] else "inference",
            "batch": cfg["batch"], "resolution": cfg["resolution"],
            "dtype": "bf16-mixed" if cfg["bf16"] else "f32", "layout": layout}


def timed(r, cfg, warmup, dev, host, wall, check, **extra):
    """Fills a record with its timed steps (ms each) and the check value of the last one."""
    r.update({
        "status": "ok", "iters": len(dev), "warmup": warmup,
        "device_ms": summary(dev), "host_ms": summary(host), "wall_ms": summary(wall),
        "img_per_s": cfg["batch"] * 1000.0 / quantile(dev, 0.5),
        "check": check,
        "check_what": "loss of the last timed step" if cfg["train"] else "sum of the last logits",
    })
    r.update(extra)
    return r


def parse_args(doc, prog, modes, default_configs, default_default_configs, default_mode_help, device_default):
    """The command line both peers take; args.configs (parsed) and args.default_names (a set) added."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="all", help="comma-separated configurations, or 'all'")
    ap.add_argument("--mode", default="all", choices=modes + ["all"])
    ap.add_argument("--default-configs", default=default_default_configs, help=default_mode_help)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--max-seconds", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--device", default=device_default)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    if args.iters < MIN_ITERS:
        raise SystemExit(f"{prog}: --iters must be at least {MIN_ITERS}")
    names = []
    for n in args.config.split(","):
        names.extend(default_configs if n == "all" else [n])
    args.configs = [parse_config(n, prog) for n in names]
    args.default_names = set(args.default_configs.split(",")) if args.default_configs else set()
    return args


def run(args, out, measure, modes, default_mode):
    """measure(cfg, mode) for every configuration and mode ("all": the first two of `modes`;
    `default_mode` only for the f32 configurations of --default-configs), each record appended to
    out["results"] and written at once, one line printed. Returns the failed measurements."""
    def write():
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
                f.write("\n")

    print(f"{'config':<26} {'mode':<14} {'status':<9} {'device_ms':>11} {'host_ms':>11} {'wall_ms':>11} "
          f"{'img/s':>10} {'peak_MiB':>10} check")
    failed = 0
    for cfg in args.configs:
        for mode in (modes[:2] if args.mode == "all" else [args.mode]):
            if mode == default_mode and (cfg["name"] not in args.default_names or cfg["bf16"]):
                continue
            r = measure(cfg, mode)
            out["results"].append(r)
            write()
            if r["status"] == "ok":
                peak = f"{r['peak_bytes'] / 2**20:>10.1f}" if r.get("peak_bytes") is not None else f"{'-':>10}"
                print(f"{cfg['name']:<26} {mode:<14} {'ok':<9} {r['device_ms']['median']:>11.3f} "
                      f"{r['host_ms']['median']:>11.3f} {r['wall_ms']['median']:>11.3f} {r['img_per_s']:>10.1f} "
                      f"{peak} {r['check']:.9g}", flush=True)
            else:
                failed += 1
                print(f"{cfg['name']:<26} {mode:<14} {r['status']:<9} {r.get('note', '')}", flush=True)
    write()
    return failed
