#!/usr/bin/env python3
"""LeNet-5 in PyTorch at batch 1, the peer of bench/lenet_latency.cpp (Gu, Gozum & Lam's
measurement: the time to classify one image), on the same weights and input:

    lenet_latency --export io/                      # strata writes weights, input and logits
    python3 bench/peers/pytorch_lenet.py --io io/lenet_*.safetensors --json pytorch.json

The network is nn/lenet.h's, rebuilt from the file's shapes (conv1 -> ReLU -> max-pool 2 ->
conv2 -> ReLU -> max-pool 2 -> flatten -> fc1 -> ReLU -> fc2; eval mode, where the dropouts are
the identity), f32, NCHW, loaded with load_state_dict(strict=True). Before any timing each
implementation's logits must be within --tolerance of strata's reference backend (the run's exit
status is 1 otherwise, and the row says "check failed"). Numerics as strata's defaults: TF32 off
for cuDNN and matmul, cudnn.benchmark off, deterministic cuDNN algorithms.

Implementations (--impls; all by default, those that cannot run here are reported, not timed):
  eager                model(x) under torch.no_grad()
  cudagraph            (cuda) one forward captured with torch.cuda.graph and replayed; host-to-host
                       copies the image into the captured input first
  compile              torch.compile(model, dynamic=False): inductor, default mode
  compile_ro           torch.compile(mode="reduce-overhead"): inductor with CUDA graphs (cuda only)
  compile_freezing     compile with inductor's freezing=True: the weights folded in as constants,
                       inductor's strongest inference form
  compile_ro_freezing  reduce-overhead and freezing (cuda only)
Each compiled implementation compiles its own copy of the model (its first calls, untimed).

Times per call in microseconds, by time.perf_counter_ns, as lenet_latency's:
  e2e       model(x_host.to(device)).cpu(): the image in host (pageable) memory to the logits in
            host memory, which waits for the device
  resident  model(x_device), then torch.cuda.synchronize()
The rounds, alternating order and statistics are lenet_common.py's (those of lenet_latency).
--device cpu runs on the CPU (Debian's python3-torch 1.13 has no torch.compile: eager only).
"""
import copy
import sys

import lenet_common as lc
import torch
from cuda_events import capture
import torch.nn.functional as F
from torch import nn

IMPLS = ["eager", "cudagraph", "compile", "compile_ro", "compile_freezing", "compile_ro_freezing"]


class LeNet(nn.Module):
    def __init__(self, io):
        super().__init__()
        self.conv1 = nn.Conv2d(io.input.shape[1], io.c1, 5, padding=io.padding)
        self.conv2 = nn.Conv2d(io.c1, io.c2, 5, padding=io.padding)
        self.fc1 = nn.Linear(io.flat, io.hidden)
        self.fc2 = nn.Linear(io.hidden, io.classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


def strata_numerics():
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True


def compile_options(name):
    """torch.compile's keyword arguments for a compiled implementation. freezing is an inductor
    option, and torch.compile takes a mode or options, not both: reduce-overhead's options are
    spelled out then (inductor's list_mode_options)."""
    ro = name.startswith("compile_ro")
    if not name.endswith("_freezing"):
        return {"mode": "reduce-overhead"} if ro else {}
    opts = {"freezing": True}
    if ro:
        try:
            from torch._inductor import list_mode_options
            opts.update(list_mode_options("reduce-overhead"))
        except ImportError:
            opts["triton.cudagraphs"] = True
    return {"options": opts}


def make_impl(name, model, x_host, x_dev, device):
    """(e2e, resident) callables of one implementation; raises Unavailable where it cannot run."""
    cuda = device.type == "cuda"
    if name in ("cudagraph", "compile_ro", "compile_ro_freezing") and not cuda:
        raise lc.Unavailable("CUDA graphs need a GPU")
    if name.startswith("compile") and not hasattr(torch, "compile"):
        raise lc.Unavailable(f"torch {torch.__version__} has no torch.compile")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if name == "cudagraph":
        static_x = x_dev.clone()
        graph, static_y = capture(lambda: model(static_x))

        def e2e():
            static_x.copy_(x_host)
            graph.replay()
            return static_y.cpu()

        def resident():
            graph.replay()
            sync()
        return e2e, resident
    f = model
    if name.startswith("compile"):
        f = torch.compile(copy.deepcopy(model), dynamic=False, **compile_options(name))
        mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
        if name.startswith("compile_ro") and mark is not None:
            compiled = f

            def f(x):  # each call a new iteration of the CUDA-graph tree: no earlier output is kept
                mark()
                return compiled(x)

    def e2e():
        return f(x_host.to(device)).cpu()

    def resident():
        f(x_dev)
        sync()
    return e2e, resident


def compiled_graphs():
    try:
        from torch._dynamo.utils import counters
        return counters["stats"]["unique_graphs"]
    except Exception:  # noqa: BLE001 - no dynamo (torch 1.x): nothing to count
        return 0


def run_variant(io, args, device):
    if hasattr(torch, "_dynamo"):
        torch._dynamo.reset()  # a variant's compiled code is not kept for the next
    model = LeNet(io)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in io.weights.items()}, strict=True)
    model = model.eval().to(device)
    x_host = torch.from_numpy(io.input).contiguous()
    x_dev = x_host.to(device)
    row = {"framework": "pytorch", "backend": device.type, "device": "gpu" if device.type == "cuda" else "cpu"}
    return lc.run_variant(io, args, row, lambda name: make_impl(name, model, x_host, x_dev, device),
                          counter=compiled_graphs)


def main():
    args = lc.parse_args(__doc__, "pytorch_lenet", IMPLS, "cuda", "cuda (default) or cpu")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("pytorch_lenet: --device cuda but torch.cuda.is_available() is False")
    strata_numerics()
    info = {"name": "cpu", "threads": torch.get_num_threads()}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        info = {"name": p.name, "cuda_runtime": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}
    out = lc.start("pytorch_lenet", args, f"torch {torch.__version__}", info,
                   "TF32 off (cudnn, matmul), cudnn.benchmark off, cudnn.deterministic on")
    with torch.no_grad():
        for io in args.ios:
            out["results"].extend(run_variant(io, args, device))
            lc.write_json(args.json, out)
    return lc.finish(out, args, "pytorch_lenet")


if __name__ == "__main__":
    sys.exit(main())
