#!/usr/bin/env python3
"""ResNet-50 shipped through PyTorch's AOTInductor, the peer of strata's generated program in the
deployment table (tools/gpu/deploy.sh, docs/codegen.md "Deployment beside AOTInductor").

    python3 bench/peers/aoti_resnet50.py compile OUT.pt2 [--input X.npy --expected Y.npy] [--json F]
    python3 bench/peers/aoti_resnet50.py run OUT.pt2 X.npy OUT.npy [--repeat N] [--warmup W] [--json F]

compile: torchvision.models.resnet50(weights=None) (random weights, torch.manual_seed(--seed)),
eval, f32 on the GPU, TF32 off for cuDNN and matmul as strata's f32 (the allow_tf32 flags only, as
pytorch_resnet50.py: PyTorch >= 2.9 raises on a mix of these and its fp32_precision settings),
torch.export.export at batch 1, 3x224x224, then torch._inductor.aoti_compile_and_package at
inductor's defaults (no max-autotune) into OUT.pt2. Each stage is timed. With --input, eager
PyTorch's output for that input goes to --expected, so that the runs below can be checked against
the model they were compiled from. The package's members and the model's parameter and buffer
bytes are reported: by default AOTInductor embeds the weights in the model's .so inside the
package, so the package's code is its size less those bytes (reported as such, not measured apart).

run: a fresh process as a Python user deploys it: imports torch, torch._inductor.aoti_load_package,
reads X.npy (float32, C order: anything else is refused naming the file), copies it to the GPU,
runs, copies the output back and writes OUT.npy (the first result); then, with --repeat N, after
--warmup untimed runs, N timed runs of `model(x)` on the GPU-resident input:
  host_ms    time.perf_counter() around the call (the host's cost; the call does not synchronise)
  device_ms  torch.cuda.Event pair around it on the current stream (AOTI runs on that stream)
  wall_ms    the call and the end event's synchronize
and N runs of io_wall_ms: the input copied in from host memory, the call, the output copied out
(synchronous, as strata_codegen's model_run and strata_codegen --time time one run).
It prints one JSON line (also to --json): the stages' times from the script's first line, the
shared libraries mapped once the first result is written (bench/peers/deploy_libs.py), the
statistics (median, p10, p90, min) and the output's sum.
TF32 is set off in this process too: the extern convolutions and matmuls inside the compiled model
are ATen's, which read the flags when they run.
"""
import time

T_START = time.perf_counter()  # before the imports: they are part of a Python user's start-up

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import zipfile  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_libs  # noqa: E402
from resnet50_common import CLASSES, summary  # noqa: E402


def since_start():
    return time.perf_counter() - T_START


def set_precision(torch):
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = False  # heuristics, as strata (PyTorch's default)
    return {"cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
            "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn.benchmark": torch.backends.cudnn.benchmark,
            "cudnn.deterministic": torch.backends.cudnn.deterministic}


def read_input(path):
    """The input as the generated program takes it: float32, C order; refused otherwise, by name."""
    try:
        x = np.load(path, allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - the file is named in the message
        raise SystemExit(f"aoti_resnet50: {path}: not a readable .npy file ({e})")
    if x.dtype != np.float32 or x.dtype.byteorder == ">":
        raise SystemExit(f"aoti_resnet50: {path}: dtype {x.dtype}, want little-endian float32")
    if not x.flags["C_CONTIGUOUS"]:
        raise SystemExit(f"aoti_resnet50: {path}: Fortran order, want C order")
    if x.ndim != 4 or x.shape[1] != 3:
        raise SystemExit(f"aoti_resnet50: {path}: shape {x.shape}, want (N, 3, H, W)")
    return x


def emit(r, json_path):
    line = json.dumps(r)
    if json_path:
        with open(json_path, "w") as f:
            f.write(line + "\n")
    print(line, flush=True)


def cmd_compile(args):
    import torch
    import torchvision
    r = {"what": "aoti_compile", "torch": torch.__version__, "torchvision": torchvision.__version__,
         "import_s": since_start()}
    r["precision"] = set_precision(torch)
    t = time.perf_counter()
    torch.manual_seed(args.seed)
    model = torchvision.models.resnet50(weights=None, num_classes=CLASSES).eval().cuda()
    if args.input:
        x = torch.from_numpy(read_input(args.input)).cuda()
    else:
        x = torch.randn(1, 3, 224, 224, device="cuda")
    r["input_shape"] = list(x.shape)
    if args.expected:
        with torch.no_grad():
            np.save(args.expected, model(x).float().cpu().numpy())
    torch.cuda.synchronize()
    r["build_s"] = time.perf_counter() - t
    # The weights as the exported program holds them: parameters and buffers (batch norm's
    # statistics and counters) and any tensor constants.
    t = time.perf_counter()
    with torch.no_grad():
        ep = torch.export.export(model, (x,))
    r["export_s"] = time.perf_counter() - t
    r["weights_bytes"] = sum(v.numel() * v.element_size() for v in ep.state_dict.values()) + sum(
        v.numel() * v.element_size() for v in ep.constants.values() if isinstance(v, torch.Tensor))
    from torch._inductor import config as inductor_config
    r["package_constants_in_so"] = bool(getattr(inductor_config.aot_inductor, "package_constants_in_so", True))
    t = time.perf_counter()
    with torch.no_grad():  # as PyTorch's AOTInductor tutorial exports and compiles
        path = torch._inductor.aoti_compile_and_package(ep, package_path=args.out)
    r["compile_s"] = time.perf_counter() - t
    r["total_s"] = since_start()
    r["package"] = path
    r["package_bytes"] = os.path.getsize(path)
    with zipfile.ZipFile(path) as z:
        r["members"] = [[i.filename, i.file_size, i.compress_size] for i in z.infolist()]
    # Weights stored beside the code in the package (package_constants_on_disk_format) or, by
    # default, inside the .so: either way the code is what is left.
    beside = sum(m[2] for m in r["members"] if "/weights/" in m[0] or "/constants/" in m[0])
    if beside:
        r["weights_in_package_bytes"] = beside
        r["code_bytes"] = r["package_bytes"] - beside
        r["code_bytes_how"] = "the package less its weights members"
    else:
        r["code_bytes"] = r["package_bytes"] - r["weights_bytes"]
        r["code_bytes_how"] = "the package less the model's parameter and buffer bytes (embedded in its .so)"
    emit(r, args.json)
    return 0


def cmd_run(args):
    if args.stack_after > 0:  # where a start that hangs is waiting, printed while it waits
        import faulthandler
        faulthandler.dump_traceback_later(args.stack_after, repeat=True)
    x_host = read_input(args.input)
    import torch
    r = {"what": "aoti_python", "torch": torch.__version__, "import_s": since_start()}
    r["precision"] = set_precision(torch)
    t = time.perf_counter()
    model = torch._inductor.aoti_load_package(args.package)
    r["load_s"] = time.perf_counter() - t
    with torch.inference_mode():
        t = time.perf_counter()
        xh = torch.from_numpy(x_host)
        out = model(xh.to("cuda"))
        out = out[0] if isinstance(out, (list, tuple)) else out
        y = out.cpu().numpy()
        r["first_run_ms"] = (time.perf_counter() - t) * 1e3
        np.save(args.output, y)
        r["to_first_result_s"] = since_start()  # from the script's first line; deploy.sh times the process
        r["output_shape"] = list(y.shape)
        r["output_sum"] = float(y.astype(np.float64).sum())
        r["output_finite"] = bool(np.isfinite(y).all())
        r["libs"] = deploy_libs.mapped("self", own=["aotinductor"])
        r["libs"].pop("files")  # the table needs the totals; deploy.sh lists the files of one run
        r["repeat"], r["warmup"] = args.repeat, args.warmup
        if args.repeat > 0:
            xd = xh.to("cuda")
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            for _ in range(args.warmup):
                model(xd)
            torch.cuda.synchronize()
            host, dev, wall = [], [], []
            for _ in range(args.repeat):
                start.record()
                t0 = time.perf_counter()
                model(xd)
                t1 = time.perf_counter()
                end.record()
                end.synchronize()
                t2 = time.perf_counter()
                host.append((t1 - t0) * 1e3)
                wall.append((t2 - t0) * 1e3)
                dev.append(start.elapsed_time(end))
            for _ in range(args.warmup):
                model(xh.to("cuda"))
            torch.cuda.synchronize()
            io = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                o = model(xh.to("cuda"))
                (o[0] if isinstance(o, (list, tuple)) else o).cpu()
                io.append((time.perf_counter() - t0) * 1e3)
            r.update({"host_ms": summary(host), "device_ms": summary(dev), "wall_ms": summary(wall),
                      "io_wall_ms": summary(io)})
    emit(r, args.json)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="export and compile to a .pt2 package, timed")
    c.add_argument("out", help="the .pt2 package to write")
    c.add_argument("--seed", type=int, default=1)
    c.add_argument("--input", default="", help="example input .npy (default: random, 1x3x224x224)")
    c.add_argument("--expected", default="", help="write eager PyTorch's output for --input here")
    c.add_argument("--json", default="")
    r = sub.add_parser("run", help="load the package in this fresh process, run, write the output")
    r.add_argument("package")
    r.add_argument("input")
    r.add_argument("output")
    r.add_argument("--repeat", type=int, default=0, help="timed runs after the first result (0: none)")
    r.add_argument("--warmup", type=int, default=20)
    r.add_argument("--stack-after", type=float, default=0,
                   help="print every thread's Python stack to stderr every this many seconds (0: never)")
    r.add_argument("--json", default="")
    args = ap.parse_args()
    if args.cmd == "compile" and args.expected and not args.input:
        ap.error("--expected needs --input")
    if args.cmd == "run" and (args.repeat < 0 or args.warmup < 0):
        ap.error("--repeat and --warmup must be >= 0")
    return cmd_compile(args) if args.cmd == "compile" else cmd_run(args)


if __name__ == "__main__":
    sys.exit(main())
