#!/usr/bin/env python3
"""The PyTorch peers of the abstraction-cost study (docs/study.md): ResNet-50
(torchvision, f32) at each (batch, resolution) point, for evaluation and training, as
  eager        plain PyTorch
  cudagraph    the whole step captured once with torch.cuda.graph, then replayed
  torchscript  torch.jit.script of the same module
  compile      torch.compile (inductor, default mode, dynamic shapes: one compilation
               per kind serves every point, as a sweep within a device budget needs)
timed as bench/study/study_resnet50 times strata, into the same JSON record.

    study_torch.py sweep --impls eager,cudagraph,torchscript --kinds eval,train \\
        --points 8x64,32x32 --json pytorch_sweep.json [--parity-data DIR --parity-json F]
    study_torch.py parity --data DIR --impls eager,torchscript --json pytorch_parity.json
    study_torch.py convert --data DIR     # parity files as torch.save dicts, for LibTorch

Policy as strata's default and bench/peers/pytorch_resnet50.py's "eager" mode: TF32
off for cuDNN convolutions and matmul, cudnn.benchmark off, cudnn.deterministic on.
Per point and kind: a fresh model (one compiled model per kind for torch.compile, so
that it compiles once per kind and then only on new shapes), the host-to-device copy
of one batch from pageable and from pinned memory timed on its own, warm-up steps
(the first one's time is reported as first_step_s: scripting, compiling or capturing
shows there), then at least --min-repeats timed steps, more until --min-seconds have
passed. Points run cheapest first; nothing new starts after --deadline seconds.
--device cpu runs everything but the CUDA graphs on the CPU for smoke tests. This
help and the argument checks need no torch.
"""
import argparse
import gc
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

IMPLS = ["eager", "cudagraph", "torchscript", "compile"]
# The record's "impl" for each (the page's column names).
IMPL_NAMES = {"eager": "pytorch_eager", "cudagraph": "pytorch_cudagraph", "torchscript": "torchscript",
              "compile": "torch_compile"}
SEED_POINTS = "8x64,32x32,32x64,32x128,32x256,128x32,256x64,512x32"
CLASSES = 1000
START = time.perf_counter()


def parse_points(s, prog="study_torch"):
    out = []
    for item in s.split(","):
        b, _, r = item.strip().partition("x")
        if not (b.isdigit() and r.isdigit()) or int(b) < 1 or int(r) < 8:
            raise SystemExit(f"{prog}: point '{item}' is not <batch>x<resolution> (batch >= 1, resolution >= 8)")
        out.append((int(b), int(r)))
    return out


def split_checked(s, allowed, what):
    v = [x for x in s.split(",") if x]
    bad = [x for x in v if x not in allowed]
    if bad:
        raise SystemExit(f"study_torch: unknown {what} {bad}; choose from {allowed}")
    return v


def stats(v):
    from resnet50_common import quantile
    return {"n": len(v), "median": quantile(v, 0.5), "p10": quantile(v, 0.1), "p90": quantile(v, 0.9),
            "p99": quantile(v, 0.99), "min": min(v), "max": max(v), "mean": sum(v) / len(v)}


def write_json(path, doc):
    if not path:
        return
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def is_oom(e):
    return "out of memory" in str(e).lower() or type(e).__name__ == "OutOfMemoryError"


class Runner:
    """Everything that needs torch; built after the arguments are checked."""

    def __init__(self, args):
        import torch
        import torch.nn.functional as F
        import torchvision
        from pytorch_resnet50 import Timer, apply_mode, precision_report
        from study_nvml import Nvml
        self.torch, self.F, self.tv, self.Timer = torch, F, torchvision, Timer
        self.args = args
        self.device = torch.device(args.device)
        self.cuda = self.device.type == "cuda"
        # "eager": strata's policy (TF32 off, heuristics, deterministic cuDNN);
        # "eager_default": PyTorch's own defaults (TF32 convolutions, any algorithm).
        apply_mode(args.policy)
        self.precision = precision_report()
        self.compiled = {}  # kind -> compiled model, reused across points
        if hasattr(torch, "_dynamo"):
            # Every new shape may recompile; past the limit dynamo silently runs eager.
            for name in ("recompile_limit", "cache_size_limit"):
                if hasattr(torch._dynamo.config, name):
                    setattr(torch._dynamo.config, name, 256)
        info = {"name": "cpu"}
        bus = ""
        if self.cuda:
            p = torch.cuda.get_device_properties(self.device)
            info = {"name": p.name, "sm_count": p.multi_processor_count, "memory_bytes": p.total_memory,
                    "compute_capability": f"{p.major}.{p.minor}", "cuda_runtime": torch.version.cuda,
                    "cudnn": torch.backends.cudnn.version()}
            if hasattr(p, "pci_bus_id"):
                bus = f"{getattr(p, 'pci_domain_id', 0):04x}:{p.pci_bus_id:02x}:{getattr(p, 'pci_device_id', 0):02x}.0"
                info["pci_bus_id"] = bus
        self.nvml = Nvml.open(bus) if self.cuda else None
        self.device_info = info
        self.versions = {"torch": torch.__version__, "torchvision": torchvision.__version__,
                         "python": sys.version.split()[0]}

    # --- models --------------------------------------------------------------------
    def new_model(self, train):
        torch = self.torch
        torch.manual_seed(self.args.seed)
        if hasattr(torch.device, "__enter__"):  # >= 2.0: initialise on the device, not on the host
            with self.device:
                m = self.tv.models.resnet50(weights=None, num_classes=CLASSES)
        else:
            m = self.tv.models.resnet50(weights=None, num_classes=CLASSES).to(self.device)
        m.train(train)
        return m

    def wrap(self, impl, model, train):
        """The callable that runs the model as `impl` (cudagraph is handled by its step)."""
        torch = self.torch
        if impl == "torchscript":
            # study-loc: begin torchscript
            return torch.jit.script(model)
            # study-loc: end torchscript
        if impl == "compile":
            if not hasattr(torch, "compile"):
                raise RuntimeError(f"absent: torch.compile needs PyTorch >= 2.0 (this is {torch.__version__})")
            kind = "train" if train else "eval"
            if kind not in self.compiled:
                # study-loc: begin compile
                self.compiled[kind] = torch.compile(model, dynamic=self.args.compile_dynamic)
                # study-loc: end compile
            return self.compiled[kind]
        return model

    # --- steps -----------------------------------------------------------------------
    def make_step(self, impl, model, run, x, labels, train, opt):
        """step() enqueues one step and returns its check tensor (loss, or logits)."""
        torch, F = self.torch, self.F
        if impl == "cudagraph":
            return self.capture(model, x, labels, train, opt)
        if train:
            def step():
                opt.zero_grad(set_to_none=True)
                loss = F.cross_entropy(run(x), labels)
                loss.backward()
                opt.step()
                return loss.detach()
        else:
            def step():
                with torch.no_grad():
                    return run(x)
        return step

    def capture(self, model, x, labels, train, opt):
        """Whole-step capture as in PyTorch's CUDA-graph notes: warm up on a side stream
        (creates the optimizer state and cuDNN plans), capture once, replay."""
        torch, F = self.torch, self.F
        if not self.cuda:
            raise RuntimeError("absent: CUDA graphs need a GPU")
        # study-loc: begin cudagraph
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                if train:
                    opt.zero_grad(set_to_none=True)
                    F.cross_entropy(model(x), labels).backward()
                    opt.step()
                else:
                    with torch.no_grad():
                        model(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        if train:
            opt.zero_grad(set_to_none=True)  # gradients come from the graph's own pool
            with torch.cuda.graph(graph):
                static_loss = F.cross_entropy(model(x), labels)
                static_loss.backward()
                opt.step()
            out = static_loss
        else:
            with torch.no_grad(), torch.cuda.graph(graph):
                out = model(x)

        def step():
            graph.replay()
            return out
        # study-loc: end cudagraph
        step.graph = graph  # kept alive with the step
        return step

    # --- copies ------------------------------------------------------------------------
    def time_h2d(self, b, r):
        """Wall time from the call until one batch is on the device, pageable and pinned."""
        torch = self.torch
        host = torch.empty(b, 3, r, r).uniform_(-1.7, 1.7)
        pinned = host.pin_memory() if self.cuda else host

        def med(src, non_blocking):
            ms = []
            for _ in range(self.args.h2d_repeats):
                if self.cuda:
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                y = src.to(self.device, non_blocking=non_blocking)
                if self.cuda:
                    torch.cuda.synchronize()
                ms.append((time.perf_counter() - t0) * 1e3)
                del y
            return sorted(ms)[len(ms) // 2]
        return {"bytes": host.nbytes if hasattr(host, "nbytes") else host.numel() * host.element_size(),
                "pageable_ms": med(host, False), "pinned_ms": med(pinned, True), "repeats": self.args.h2d_repeats}

    # --- one measurement -------------------------------------------------------------------
    def measure(self, impl, train, b, r):
        torch, a = self.torch, self.args
        rec = {"impl": IMPL_NAMES[impl], "framework": "pytorch", "kind": "train" if train else "eval", "batch": b, "resolution": r, "dtype": "f32", "layout": "NCHW"}
        try:
            if self.cuda:
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
            t_build = time.perf_counter()
            if impl == "compile" and ("train" if train else "eval") in self.compiled:
                run = self.compiled["train" if train else "eval"]
                model = run._orig_mod
            else:
                model = self.new_model(train)
                run = self.wrap(impl, model, train)
            gen = torch.Generator(device=self.device).manual_seed(a.seed)
            x = torch.empty(b, 3, r, r, device=self.device).uniform_(-1.7, 1.7, generator=gen)
            labels = torch.randint(0, CLASSES, (b,), device=self.device, generator=gen)
            rec["h2d"] = self.time_h2d(b, r)
            # run's parameters: a scripted module's own (the same tensors for the others)
            opt = torch.optim.SGD(run.parameters(), lr=a.lr, momentum=0.9) if train else None
            if self.cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            rec["setup_s"] = time.perf_counter() - t_build
            t_first = time.perf_counter()
            step = self.make_step(impl, model, run, x, labels, train, opt)
            out = step()
            if self.cuda:
                torch.cuda.synchronize()
            rec["first_step_s"] = time.perf_counter() - t_first
            self.timed(step, b, a.warmup - 1, rec)
            if self.cuda:
                rec["peak_bytes"] = torch.cuda.max_memory_allocated()
                rec["reserved_bytes"] = torch.cuda.max_memory_reserved()
            rec["status"] = "ok"
            del out
        except Exception as e:  # noqa: BLE001 - reported per measurement, the sweep goes on
            msg = f"{type(e).__name__}: {e}".strip()
            rec["status"] = "oom" if is_oom(e) else ("absent" if "absent:" in msg else "error")
            rec["note"] = msg.split("absent: ", 1)[-1][:2000] if rec["status"] == "absent" else msg[:2000]
        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()
        return rec

    def timed(self, step, b, warmup, rec):
        torch, a = self.torch, self.args
        for _ in range(max(0, warmup)):
            step()
        if self.cuda:
            torch.cuda.synchronize()
        timer = self.Timer(self.device)
        times = []  # (device, host, wall) ms per timed step
        w = self.nvml.begin() if self.nvml else None
        t_start = time.perf_counter()
        while True:
            # The step about to run is the last when, after it, the policy says stop.
            n, elapsed = len(times) + 1, time.perf_counter() - t_start
            last = n >= a.max_repeats or (n >= a.min_repeats and elapsed >= a.min_seconds)
            timer.begin()
            out = step()
            timer.enqueued()
            times.append(timer.finish())
            if last:
                break
        nv = self.nvml.end(w) if self.nvml else {"window_s": time.perf_counter() - t_start}
        check = float(out.detach().float().sum().item())
        dev, host, wall = (list(c) for c in zip(*times))
        ds = stats(dev)
        rec.update({"repeats": len(dev), "warmup": a.warmup, "device_ms": ds, "host_ms": stats(host),
                    "wall_ms": stats(wall), "ms_per_sample": ds["median"] / b, "img_per_s": b * 1000.0 / ds["median"],
                    "check": check, "nvml": nv,
                    "energy_mj_per_sample": nv["energy_mj"] / (len(dev) * b) if nv.get("energy_mj") is not None
                    else None})

    def header(self, part):
        return {"study": 1, "framework": "pytorch", "part": part, "versions": self.versions,
                "device": self.device_info, "nvml": self.nvml.info() if self.nvml else {"ok": False, "error": "cpu"},
                "settings": {"precision": self.precision, "device": self.args.device,
                             "compile": {"mode": "default", "dynamic": self.args.compile_dynamic}},
                "records": []}

    # --- parity ------------------------------------------------------------------------------
    def parity(self, impls, data_dir, json_path):
        torch, F, a = self.torch, self.F, self.args
        from interop_resnet50 import load_file
        data = load_file(os.path.join(data_dir, "parity_data.safetensors"))
        init = load_file(os.path.join(data_dir, "parity_init.safetensors"))
        doc = self.header("parity")
        doc["protocol"] = {"batch": a.batch, "epochs": a.epochs, "lr": a.parity_lr, "momentum": 0.9}
        trx, try_ = data["train_x"].to(self.device), data["train_y"].to(self.device)
        tex, tey = data["test_x"].to(self.device), data["test_y"].to(self.device)
        bsz, steps = a.batch, data["train_x"].shape[0] // a.batch
        for impl in impls:
            rec = {"impl": IMPL_NAMES[impl], "framework": "pytorch", "kind": "parity", "batch": bsz, "resolution": int(trx.shape[2])}
            if time.perf_counter() - START > a.deadline:
                rec.update({"status": "skipped", "note": "deadline: the part's time budget was spent"})
            else:
                try:
                    t0 = time.perf_counter()
                    if impl == "compile" and "train" in self.compiled:
                        run = self.compiled["train"]
                        model = run._orig_mod
                    else:
                        model = self.new_model(True)
                        run = None
                    # In place, so a compiled model keeps its graphs.
                    model.load_state_dict(init, strict=True)
                    model.train()
                    run = run or self.wrap(impl, model, True)
                    opt = torch.optim.SGD(run.parameters(), lr=a.parity_lr, momentum=0.9)
                    xb = trx[:bsz].clone()
                    yb = try_[:bsz].clone()
                    step = self.make_step(impl, model, run, xb, yb, True, opt)
                    if impl == "cudagraph":
                        # Capturing ran three real steps: put the weights, BatchNorm state
                        # and momentum back (zero momentum = no momentum yet, for SGD).
                        with torch.no_grad():
                            for k, v in run.state_dict().items():
                                v.copy_(init[k].to(v.device))
                            for st in opt.state.values():
                                if "momentum_buffer" in st and st["momentum_buffer"] is not None:
                                    st["momentum_buffer"].zero_()
                    losses = []
                    for _ in range(a.epochs):
                        for s in range(steps):
                            xb.copy_(trx[s * bsz:(s + 1) * bsz])
                            yb.copy_(try_[s * bsz:(s + 1) * bsz])
                            losses.append(float(step().item()))
                    # Test logits in eager mode for compile and cudagraph (same weights): an
                    # eval-mode compile would be one more compilation for no information.
                    tester = run if impl == "torchscript" else model
                    tester.eval()
                    correct, loss_sum, used = 0, 0.0, (tex.shape[0] // bsz) * bsz
                    with torch.no_grad():
                        for s in range(0, used, bsz):
                            logits = tester(tex[s:s + bsz]).float()
                            loss_sum += float(F.cross_entropy(logits, tey[s:s + bsz], reduction="sum"))
                            correct += int((logits.argmax(1) == tey[s:s + bsz]).sum())
                    rec.update({"status": "ok", "losses": losses, "steps": len(losses),
                                "train_loss_last": losses[-1] if losses else None, "test_samples": used,
                                "test_acc": correct / used if used else None,
                                "test_loss": loss_sum / used if used else None,
                                "seconds": time.perf_counter() - t0})
                    if impl in ("cudagraph", "compile"):
                        rec["note"] = "test logits from the same weights in eager mode"
                except Exception as e:  # noqa: BLE001
                    msg = f"{type(e).__name__}: {e}"
                    rec.update({"status": "oom" if is_oom(e) else ("absent" if "absent:" in msg else "error"),
                                "note": msg[:2000]})
                gc.collect()
            doc["records"].append(rec)
            write_json(json_path, doc)
            if rec["status"] == "ok":
                print(f"parity {rec['impl']:<18} {rec['steps']:3d} steps  loss {rec['losses'][0]:.4f} -> "
                      f"{rec['train_loss_last']:.4f}  test acc {rec['test_acc']:.4f}  test loss {rec['test_loss']:.4f}"
                      f"  ({rec['seconds']:.1f} s)", flush=True)
            else:
                print(f"parity {rec['impl']:<18} {rec['status']} {rec.get('note', '')[:200]}", flush=True)


def sweep_records(args, doc, points, kinds, impls, measure, base, show, start):
    """The sweep both study peers run (this file's and study_jax.py's): each point, kind and impl
    measured by measure(impl, train, batch, resolution) unless the deadline (seconds after `start`)
    has passed or a point no larger ran out of memory; every record, its identity from
    base(impl, kind, batch, resolution) where measure gave none, appended to doc["records"],
    written to args.json and shown."""
    oom_at = {}
    for b, r in points:
        for kind in kinds:
            for impl in impls:
                key = (impl, kind)
                big = [q for q in oom_at.get(key, []) if b >= q[0] and r >= q[1]]
                if time.perf_counter() - start > args.deadline:
                    rec = {"status": "skipped", "note": "deadline: the part's time budget was spent"}
                elif big:
                    rec = {"status": "oom", "note": f"not run: at least as large as {big[0][0]}x{big[0][1]}, "
                                                    "which ran out of memory"}
                else:
                    rec = measure(impl, kind == "train", b, r)
                    if rec["status"] == "oom":
                        oom_at.setdefault(key, []).append((b, r))
                if "impl" not in rec:
                    rec = {**base(impl, kind, b, r), **rec}
                doc["records"].append(rec)
                write_json(args.json, doc)
                show(rec)


def print_record(r):
    head = f"{r['impl']:<18} {r['kind']:<5} {r['batch']:>5} x {r['resolution']:<5} {r['status']:<7}"
    if r["status"] != "ok":
        print(f"{head} {r.get('note', '')[:160]}", flush=True)
        return
    nv = r.get("nvml") or {}
    util = nv.get("gpu_util_pct")
    e = r.get("energy_mj_per_sample")
    print(f"{head} {r['ms_per_sample']:9.3f} ms/sample  dev {r['device_ms']['median']:9.3f}  host "
          f"{r['host_ms']['median']:9.3f}  p99 {r['device_ms']['p99']:9.3f} ms  n={r['repeats']:3d}  first "
          f"{r['first_step_s']:.2f} s  util {'-' if util is None else f'{util:.0f}'}  mJ/sample "
          f"{'-' if e is None else f'{e:.1f}'}", flush=True)


def cmd_sweep(args):
    impls = split_checked(args.impls, IMPLS, "impl")
    kinds = split_checked(args.kinds, ["eval", "train"], "kind")
    points = sorted(parse_points(args.points), key=lambda p: p[0] * p[1] * p[1])  # cheapest first
    run = Runner(args)
    doc = run.header("sweep")
    doc["protocol"] = {"warmup": args.warmup, "min_repeats": args.min_repeats, "max_repeats": args.max_repeats,
                       "min_seconds": args.min_seconds, "h2d_repeats": args.h2d_repeats, "deadline_s": args.deadline,
                       "lr": args.lr, "seed": args.seed}
    print(f"study_torch sweep on {run.device_info['name']} | torch {run.versions['torch']} | {len(points)} points x "
          f"{len(kinds)} kinds x {len(impls)} impls", flush=True)
    sweep_records(args, doc, points, kinds, impls, run.measure,
                  lambda impl, kind, b, r: {"impl": IMPL_NAMES[impl], "framework": "pytorch", "kind": kind,
                                            "batch": b, "resolution": r},
                  print_record, START)
    doc["elapsed_s"] = time.perf_counter() - START
    write_json(args.json, doc)
    if args.parity_data:
        run.parity(split_checked(args.parity_impls, IMPLS, "impl"), args.parity_data, args.parity_json)
    return 0


def cmd_parity(args):
    Runner(args).parity(split_checked(args.impls, IMPLS, "impl"), args.data, args.json)
    return 0


def cmd_convert(args):
    """The parity files as torch.save dicts (parity_data.pt, parity_init.pt), which
    LibTorch reads with torch::pickle_load."""
    import torch
    from interop_resnet50 import load_file
    for name in ("parity_data", "parity_init"):
        sd = load_file(os.path.join(args.data, name + ".safetensors"))
        torch.save({k: v.contiguous() for k, v in sd.items()}, os.path.join(args.data, name + ".pt"))
    print(f"convert: {args.data}/parity_data.pt, parity_init.pt")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p):
        p.add_argument("--device", default="cuda")
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--deadline", type=float, default=1e9, help="start nothing new after this many seconds")
        p.add_argument("--warmup", type=int, default=3, help="untimed steps (the first is first_step_s)")
        p.add_argument("--h2d-repeats", type=int, default=5)
        p.add_argument("--lr", type=float, default=0.01)
        p.add_argument("--policy", default="eager", choices=["eager", "eager_default"],
                       help="cuDNN numerics: strata's (eager) or PyTorch's defaults (TF32 conv)")
        p.add_argument("--batch", type=int, default=64, help="parity batch size")
        p.add_argument("--epochs", type=int, default=2, help="parity passes over the training images")
        p.add_argument("--parity-lr", type=float, default=0.005)
        p.add_argument("--compile-static", dest="compile_dynamic", action="store_const", const=None, default=True,
                       help="torch.compile's own default (dynamic=None: static shapes first, recompiled "
                            "dynamic after a shape changes) instead of dynamic=True")

    s = sub.add_parser("sweep", help="time every point, kind and implementation")
    common(s)
    s.add_argument("--impls", default="eager,cudagraph,torchscript")
    s.add_argument("--kinds", default="eval,train")
    s.add_argument("--points", default=SEED_POINTS, help="<batch>x<resolution>,... (default: the seed's table)")
    s.add_argument("--min-repeats", type=int, default=10)
    s.add_argument("--max-repeats", type=int, default=200)
    s.add_argument("--min-seconds", type=float, default=0.6)
    s.add_argument("--json", default="")
    s.add_argument("--parity-data", default="", help="after the sweep, the parity run on this folder")
    s.add_argument("--parity-impls", default="", help="default: --impls")
    s.add_argument("--parity-json", default="")
    p = sub.add_parser("parity", help="train on the parity task (study_resnet50 parity-data) and evaluate")
    common(p)
    p.add_argument("--data", required=True)
    p.add_argument("--impls", default="eager,cudagraph,torchscript")
    p.add_argument("--json", default="")
    c = sub.add_parser("convert", help="parity files as torch.save dicts for the LibTorch peer")
    c.add_argument("--data", required=True)
    args = ap.parse_args()
    if args.cmd == "sweep":
        if args.min_repeats < 1 or args.max_repeats < args.min_repeats or args.warmup < 1:
            raise SystemExit("study_torch: need 1 <= min-repeats <= max-repeats and warmup >= 1")
        parse_points(args.points)
        split_checked(args.impls, IMPLS, "impl")
        args.parity_impls = args.parity_impls or args.impls
        return cmd_sweep(args)
    if args.cmd == "parity":
        split_checked(args.impls, IMPLS, "impl")
        return cmd_parity(args)
    return cmd_convert(args)


if __name__ == "__main__":
    sys.exit(main())
