#!/usr/bin/env python3
"""ResNet-50 in PyTorch eager, timed as bench/resnet50_gpu.cpp times strata.

    python3 bench/peers/pytorch_resnet50.py --config all --iters 30 --warmup 5 --json pytorch.json

The model is torchvision.models.resnet50(weights=None) (1000 classes). Configurations
have the names of resnet50_gpu (<infer|train>_b<batch>_<resolution>[_nhwc][_bf16]):
inference is model.eval() under torch.no_grad(); a training step is
zero_grad(set_to_none=True) + forward + F.cross_entropy + backward + SGD (momentum
0.9, lr 0.01, PyTorch's default foreach implementation). _nhwc puts the model and
the input in torch.channels_last; _bf16 runs forward and loss under
torch.autocast("cuda", dtype=torch.bfloat16) (weights, gradients and the optimizer
stay f32; no GradScaler is needed for bf16).

Per configuration: a fresh model, random inputs (uniform in [-1.7, 1.7)) and random
labels, `warmup` untimed steps, then `iters` timed steps (at least 20; stops early,
but not under 20, after --max-seconds). Each timed step records
  device_ms  torch.cuda.Event pair around the step on the current stream
  host_ms    time.perf_counter() to enqueue the step, without synchronising
  wall_ms    time.perf_counter() of the step including end.synchronize()
Peak memory: torch.cuda.max_memory_allocated() after reset_peak_memory_stats(),
reset once the model, optimizer and inputs exist.

Modes:
  eager          strata's numerics and algorithm policy: TF32 off for cuDNN conv and
                 for matmul (torch.backends.cudnn.allow_tf32 = False,
                 torch.backends.cuda.matmul.allow_tf32 = False), cudnn.benchmark =
                 False (heuristics, as strata), cudnn.deterministic = True (strata
                 restricts cuDNN to deterministic algorithms). The ratio table uses it.
  eager_default  PyTorch's own defaults for comparison: cuDNN conv may use TF32
                 (allow_tf32 = True), matmul not, benchmark False, deterministic False.
  compile        torch.compile(model) (inductor, default mode, static shapes) at
                 PyTorch's defaults as eager_default; the warmup steps include the
                 compilation (at least 3 are run). Only when asked for (--mode compile).
  max-autotune   torch.compile(model, mode="max-autotune"): compile's, with inductor
                 timing candidate kernels and CUDA graphs (its compilation takes
                 minutes). Only when asked for (--mode max-autotune).
The mode "eager_default" runs only the f32 configurations given by --default-configs.
--device cpu runs on the CPU (host timing only) for smoke tests without a GPU.
"""
import sys
import time

import torch
import torch.nn.functional as F
import torchvision
from resnet50_common import CLASSES, MIN_ITERS, parse_args, quantile, record, run, timed  # noqa: F401 - study_torch

DEFAULT_CONFIGS = [
    "infer_b1_224",
    "infer_b256_224",
    "train_b128_32",
    "train_b128_224",
    "train_b128_224_nhwc",
    "train_b256_224_nhwc_bf16",
]
def set_precision(tf32_conv):
    """TF32 for cuDNN conv on/off, matmul TF32 off, through the documented allow_tf32
    flags only: PyTorch >= 2.9 raises on a mix of these and its newer fp32_precision
    settings, which mirror them."""
    torch.backends.cudnn.allow_tf32 = tf32_conv
    torch.backends.cuda.matmul.allow_tf32 = False


def precision_report():
    r = {
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "cudnn.deterministic": torch.backends.cudnn.deterministic,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }
    for name, get in (("cudnn.conv.fp32_precision", lambda: torch.backends.cudnn.conv.fp32_precision),
                      ("cuda.matmul.fp32_precision", lambda: torch.backends.cuda.matmul.fp32_precision)):
        try:
            r[name] = get()
        except Exception:  # noqa: BLE001 - older PyTorch, or its mixed-API check
            pass
    return r


def apply_mode(mode):
    torch.backends.cudnn.benchmark = False
    if mode == "eager":
        set_precision(tf32_conv=False)
        torch.backends.cudnn.deterministic = True
    else:  # eager_default, compile and max-autotune: PyTorch's defaults
        set_precision(tf32_conv=True)
        torch.backends.cudnn.deterministic = False


class Timer:
    def __init__(self, device):
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.start = torch.cuda.Event(enable_timing=True)
            self.end = torch.cuda.Event(enable_timing=True)

    def begin(self):
        self.t0 = time.perf_counter()
        if self.cuda:
            self.start.record()

    def enqueued(self):
        self.t1 = time.perf_counter()
        if self.cuda:
            self.end.record()

    def finish(self):
        if self.cuda:
            self.end.synchronize()
        t2 = time.perf_counter()
        wall = (t2 - self.t0) * 1e3
        dev = self.start.elapsed_time(self.end) if self.cuda else wall
        return dev, (self.t1 - self.t0) * 1e3, wall


def measure(cfg, mode, args, device):
    r = record(cfg, mode, "NHWC" if cfg["nhwc"] else "NCHW")
    cuda = device.type == "cuda"
    try:
        apply_mode(mode)
        r["precision"] = precision_report()
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        t_build = time.perf_counter()
        torch.manual_seed(args.seed)
        fmt = torch.channels_last if cfg["nhwc"] else torch.contiguous_format
        model = torchvision.models.resnet50(weights=None, num_classes=CLASSES).to(device, memory_format=fmt)
        b, res = cfg["batch"], cfg["resolution"]
        gen = torch.Generator(device=device).manual_seed(args.seed)
        x = torch.empty(b, 3, res, res, device=device).uniform_(-1.7, 1.7, generator=gen)
        x = x.contiguous(memory_format=fmt)
        labels = torch.randint(0, CLASSES, (b,), device=device, generator=gen)
        opt = None
        if cfg["train"]:
            model.train()
            opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
        else:
            model.eval()
        if mode == "compile":
            model = torch.compile(model, dynamic=False)
        elif mode == "max-autotune":
            model = torch.compile(model, mode="max-autotune", dynamic=False)

        def autocast():
            return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=cfg["bf16"])
        if cuda:
            torch.cuda.synchronize()
        r["setup_s"] = time.perf_counter() - t_build
        if cuda:
            torch.cuda.reset_peak_memory_stats()

        def step():
            if cfg["train"]:
                opt.zero_grad(set_to_none=True)
                with autocast():
                    out = model(x)
                    loss = F.cross_entropy(out, labels)
                loss.backward()
                opt.step()
                return loss.detach()
            with torch.no_grad(), autocast():
                return model(x)

        for _ in range(max(args.warmup, 3) if mode in ("compile", "max-autotune") else args.warmup):
            step()
        if cuda:
            torch.cuda.synchronize()
        timer = Timer(device)
        dev, host, wall = [], [], []
        check = float("nan")
        t_start = time.perf_counter()
        for i in range(args.iters):
            last = i + 1 == args.iters or (i + 1 >= MIN_ITERS and time.perf_counter() - t_start > args.max_seconds)
            timer.begin()
            out = step()
            timer.enqueued()
            d, h, w = timer.finish()
            dev.append(d)
            host.append(h)
            wall.append(w)
            if last:
                check = float(out.float().sum().item()) if not cfg["train"] else float(out.item())
                break
            del out
        timed(r, cfg, max(args.warmup, 3) if mode in ("compile", "max-autotune") else args.warmup, dev, host, wall,
              check, peak_bytes=torch.cuda.max_memory_allocated() if cuda else None,
              reserved_bytes=torch.cuda.max_memory_reserved() if cuda else None)
    except Exception as e:  # noqa: BLE001 - reported per measurement, the run goes on
        r.update({"status": "error", "note": f"{type(e).__name__}: {e}"})
    return r


def main():
    args = parse_args(__doc__, "pytorch_resnet50", ["eager", "eager_default", "compile", "max-autotune"],
                      DEFAULT_CONFIGS, "infer_b256_224,train_b128_224",
                      "configurations also run in eager_default (PyTorch's TF32 default)", "cuda")
    device = torch.device(args.device)

    info = {"name": "cpu"}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        info = {"name": p.name, "sm_count": p.multi_processor_count, "memory_bytes": p.total_memory,
                "compute_capability": f"{p.major}.{p.minor}", "cuda_runtime": torch.version.cuda,
                "cudnn": torch.backends.cudnn.version()}
    out = {
        "framework": "pytorch", "torch": torch.__version__, "torchvision": torchvision.__version__,
        "device": info, "defaults_at_start": precision_report(),
        "iters": args.iters, "warmup": args.warmup, "min_iters": MIN_ITERS, "max_seconds": args.max_seconds,
        "results": [],
    }
    print(f"pytorch_resnet50 on {info['name']} | torch {torch.__version__} torchvision {torchvision.__version__} "
          f"cuDNN {info.get('cudnn')} | defaults at start: {out['defaults_at_start']}")
    run(args, out, lambda cfg, mode: measure(cfg, mode, args, device), ["eager", "eager_default"], "eager_default")
    apply_mode("eager")
    return 0


if __name__ == "__main__":
    sys.exit(main())
