#!/usr/bin/env python3
"""ResNet-50 prediction (3x224x224; batch 1 and f32 unless told) in PyTorch's forms, and where its
time goes.

    python3 bench/peers/resnet50_infer_forms.py --iters 300 --json torch_b1.json --kernels torch_b1_kernels.txt
    python3 bench/peers/resnet50_infer_forms.py --batch 256 --bf16 --forms compile_freezing --json b256.json

torchvision.models.resnet50(weights=None), eval, torch.no_grad(), PyTorch's defaults for f32
(cuDNN convolutions may use TF32, matmul not; cudnn.benchmark off). --bf16 makes the whole model
and its input bf16 and channels-last (model.to(torch.bfloat16, memory_format=torch.channels_last)):
at large batches this is PyTorch's fastest inference, ahead of autocast. The forms:
  eager                 the module as it is
  cudagraph             eager captured into a CUDA graph and replayed
  compile_ro            torch.compile(mode="reduce-overhead")
  compile_freezing      torch.compile with inductor's freezing=True, default mode (no CUDA graphs:
                        at large batches they gain nothing)
  compile_ro_freezing   reduce-overhead's options with inductor's freezing=True: batch norm folded
                        into the convolutions' weights, the weights constants, and inductor free to
                        change the convolutions' layout (its layout optimisation)
  compile_ro_freezing_config  the same through the global torch._inductor.config.freezing = True and
                        mode="reduce-overhead" (set for the rest of the process: list it last)
Each form: `--warmup` untimed calls (compilation included), then `--iters` calls on a resident
input, each timed with CUDA events (device ms) and a host clock to the synchronisation (wall ms);
medians and the 10th/90th percentiles in the JSON. --kernels writes the kernels of 20 calls of
the last form under torch.profiler: per kernel name, calls and microseconds per prediction, and
the memory layout inductor gave the convolutions' inputs (channels-last or not).
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torchvision
from cuda_events import capture


def quantiles(v):
    s = sorted(v)
    at = lambda q: s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]  # noqa: E731
    return {"median": statistics.median(s), "p10": at(0.1), "p90": at(0.9), "min": s[0]}


def make_form(name, model, x):
    if name == "eager":
        return lambda: model(x)
    if name == "cudagraph":
        graph, y = capture(lambda: model(x))

        def replay():
            graph.replay()
            return y
        return replay
    options = None
    if name == "compile_ro_freezing_config":
        import torch._inductor.config as inductor_config
        inductor_config.freezing = True
        compiled = torch.compile(model, dynamic=False, mode="reduce-overhead")
    elif name == "compile_ro_freezing":
        from torch._inductor import list_mode_options
        options = dict(list_mode_options("reduce-overhead"))
        options["freezing"] = True
        compiled = torch.compile(model, dynamic=False, options=options)
    elif name == "compile_freezing":
        compiled = torch.compile(model, dynamic=False, options={"freezing": True})
    elif name == "compile_ro":
        compiled = torch.compile(model, dynamic=False, mode="reduce-overhead")
    else:
        raise SystemExit(f"resnet50_infer_forms: unknown form {name}")
    mark = torch.compiler.cudagraph_mark_step_begin

    def call():
        mark()
        return compiled(x)
    return call


def time_form(f, warmup, iters):
    for _ in range(warmup):
        f()
    torch.cuda.synchronize()
    dev, wall = [], []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(iters):
        t0 = time.perf_counter()
        start.record()
        f()
        end.record()
        end.synchronize()
        wall.append((time.perf_counter() - t0) * 1e3)
        dev.append(start.elapsed_time(end))
    return dev, wall


def kernel_table(f, calls=20):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            f()
        torch.cuda.synchronize()
    rows = {}
    for e in prof.events():
        if e.device_type.name != "CUDA":
            continue
        r = rows.setdefault(e.name, [0, 0.0])
        r[0] += 1
        r[1] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
    out = sorted(((us / calls, n / calls, name) for name, (n, us) in rows.items()), reverse=True)
    total = sum(us for us, _, _ in out)
    lines = [f"{us:9.1f} us {n:6.1f}/call  {name[:150]}" for us, n, name in out]
    lines.append(f"{total:9.1f} us per prediction, {sum(n for _, n, _ in out):.0f} kernels")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--forms", default="eager,cudagraph,compile_ro,compile_ro_freezing")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--bf16", action="store_true", help="the model and input in bf16, channels-last")
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--json", required=True)
    ap.add_argument("--kernels", help="the last form's kernels, per prediction, to this file")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("resnet50_infer_forms: needs a GPU")
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    torch.manual_seed(0)
    results = []
    f = None
    with torch.no_grad():
        for name in args.forms.split(","):
            model = torchvision.models.resnet50(weights=None).cuda().eval()
            x = torch.empty(args.batch, 3, 224, 224, device="cuda").uniform_(-1.7, 1.7)
            if args.bf16:
                model = model.to(torch.bfloat16, memory_format=torch.channels_last)
                x = x.to(torch.bfloat16, memory_format=torch.channels_last)
            t0 = time.perf_counter()
            f = make_form(name, model, x)
            f()
            torch.cuda.synchronize()
            first_s = time.perf_counter() - t0
            dev, wall = time_form(f, args.warmup, args.iters)
            r = {"form": name, "batch": args.batch, "dtype": "bf16" if args.bf16 else "f32",
                 "img_per_s": args.batch * 1e3 / statistics.median(dev), "device_ms": quantiles(dev), "wall_ms": quantiles(wall), "first_call_s": first_s,
                 "check": float(f().float().sum()), "torch": torch.__version__,
                 "gpu": torch.cuda.get_device_name()}
            results.append(r)
            print(json.dumps(r), flush=True)
            with open(args.json, "w") as out:
                json.dump(results, out, indent=1)
        if args.kernels and f is not None:
            with open(args.kernels, "w") as out:
                out.write(f"# {args.forms.split(',')[-1]}, torch {torch.__version__}, "
                          f"{torch.cuda.get_device_name()}\n{kernel_table(f)}\n")


if __name__ == "__main__":
    main()
