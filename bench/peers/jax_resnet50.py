#!/usr/bin/env python3
"""ResNet-50 in plain JAX (jax.numpy and jax.lax, no Flax), timed as bench/peers/pytorch_resnet50.py
times PyTorch eager, so that its JSON sits in a column beside PyTorch's and strata's:

    python3 bench/peers/jax_resnet50.py --config all --iters 30 --warmup 5 --json jax.json

The network is torchvision's resnet50 (v1.5: the stride on the 3x3 convolution of each
bottleneck; 25,557,032 parameters, checked at start): 7x7/2 stem, batch norm, ReLU, 3x3/2 max-pool,
bottlenecks [3, 4, 6, 3] of widths 64-512 (expansion 4, a 1x1 projection with batch norm on the
first block of each stage), global average pool, a 1000-way dense layer. Random weights as
torchvision draws them (Kaiming normal, fan-out, for convolutions; batch norm scale 1, shift 0;
the dense layer uniform in +-1/sqrt(2048)), from jax.random with --seed; synthetic inputs (uniform
in [-1.7, 1.7)) and labels: nothing is learnt, nothing is loaded.

Layout: NHWC activations and HWIO kernels, the layout XLA's GPU convolutions (cuDNN) prefer;
XLA still assigns physical layouts itself, so a configuration's "_nhwc" suffix changes nothing
here and the JSON says "NHWC" for every row.

Configurations have the names of resnet50_gpu and pytorch_resnet50.py
(<infer|train>_b<batch>_<resolution>[_nhwc][_bf16]); the defaults are inference at batch 1 and 256
and a training step at batch 256, f32 and bf16:
  inference      eval mode (batch norm from the running statistics), one jitted forward
  training step  one jitted function: forward in training mode (batch statistics, running
                 statistics updated with momentum 0.1 and the unbiased variance, as PyTorch),
                 softmax cross-entropy (mean), gradients by jax.value_and_grad, SGD with momentum
                 0.9 (PyTorch's form: buf = 0.9 buf + g; p -= lr buf), lr 0.01, no weight decay;
                 parameters, batch-norm state and momentum buffers donated to the step
  _bf16          mixed precision as PyTorch's autocast: f32 parameters, convolutions and the dense
                 layer in bf16, batch-norm statistics and the loss in f32
Modes:
  jit            f32 convolutions and products at lax.Precision.HIGHEST: no TF32, the numerics of
                 strata's defaults and of pytorch_resnet50.py's "eager" (the ratio tables use it);
                 bf16 configurations at the default precision (their operands are bf16 already)
  jit_default    JAX's default precision (XLA may use TF32 for f32 on NVIDIA GPUs), as PyTorch's
                 "eager_default": only the f32 configurations of --default-configs
Per configuration: fresh parameters, `warmup` untimed steps (at least 3: the first compiles),
then `iters` timed steps (at least 20; stops early, but not under 20, after --max-seconds), each
  host_ms    time.perf_counter() to dispatch the step (JAX returns before the device is done)
  wall_ms    time.perf_counter() of the step including block_until_ready() on its results
  device_ms  the same as wall_ms: JAX exposes no CUDA events on its stream, so the device time is
             bounded by the wall time (the difference is the synchronisation, tens of microseconds;
             it matters only for steps of about a millisecond, e.g. inference at batch 1)
and the report gives median, p10, p90 and min of each; img/s = batch / median device time.
Peak memory: JAX cannot reset its peak counter, so "peak_bytes" is left null (compare.py prints
n/a) and "peak_bytes_process" gives the process's peak so far (device.memory_stats()).
--device cpu runs on the CPU for smoke tests (use a small configuration, e.g. infer_b2_32).
tools/gpu/jax_resnet50.sh runs it beside strata and PyTorch in one device call. Not done yet:
bench/peers/compare.py reads PyTorch's modes only and does not put this file's rows in a column.
"""
import functools
import math
import os
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
import resnet50_common as rc  # noqa: E402

DEFAULT_CONFIGS = ["infer_b1_224", "infer_b256_224", "train_b256_224", "train_b256_224_nhwc_bf16"]
PARAMETERS = 25_557_032  # torchvision.models.resnet50(): sum(p.numel() for p in model.parameters())
STAGES = [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]  # width, blocks, stride of the first
EPS = 1e-5
BN_MOMENTUM = 0.1


# --- parameters -------------------------------------------------------------------------------

def conv_init(key, kh, kw, cin, cout):
    std = math.sqrt(2.0 / (cout * kh * kw))  # kaiming_normal_(mode="fan_out", nonlinearity="relu")
    return std * jax.random.normal(key, (kh, kw, cin, cout), jnp.float32)


def bn_init(c):
    return {"scale": jnp.ones((c,), jnp.float32), "shift": jnp.zeros((c,), jnp.float32)}


def bn_state_init(c):
    return {"mean": jnp.zeros((c,), jnp.float32), "var": jnp.ones((c,), jnp.float32)}


def init(key):
    """(params, batch-norm state): nested dicts, the stages as lists of blocks."""
    keys = iter(jax.random.split(key, 64))
    params = {"stem": {"conv": conv_init(next(keys), 7, 7, 3, 64), "bn": bn_init(64)}, "stages": []}
    state = {"stem": bn_state_init(64), "stages": []}
    cin = 64
    for width, blocks, stride in STAGES:
        p_stage, s_stage = [], []
        for b in range(blocks):
            cout = 4 * width
            p = {"conv1": conv_init(next(keys), 1, 1, cin, width), "bn1": bn_init(width),
                 "conv2": conv_init(next(keys), 3, 3, width, width), "bn2": bn_init(width),
                 "conv3": conv_init(next(keys), 1, 1, width, cout), "bn3": bn_init(cout)}
            s = {"bn1": bn_state_init(width), "bn2": bn_state_init(width), "bn3": bn_state_init(cout)}
            if b == 0:  # torchvision's downsample: 1x1 convolution with the block's stride, batch norm
                p["proj"] = conv_init(next(keys), 1, 1, cin, cout)
                p["proj_bn"] = bn_init(cout)
                s["proj_bn"] = bn_state_init(cout)
            p_stage.append(p)
            s_stage.append(s)
            cin = cout
        params["stages"].append(p_stage)
        state["stages"].append(s_stage)
    bound = 1.0 / math.sqrt(cin)  # nn.Linear's default initialisation
    kw, kb = jax.random.split(next(keys))
    params["fc"] = {"w": jax.random.uniform(kw, (cin, rc.CLASSES), jnp.float32, -bound, bound),
                    "b": jax.random.uniform(kb, (rc.CLASSES,), jnp.float32, -bound, bound)}
    return params, state


def count(tree):
    return sum(int(x.size) for x in jax.tree_util.tree_leaves(tree))


# --- the network --------------------------------------------------------------------------------

class Net:
    """forward(params, state, x) -> (logits, new state) for one training/eval setting, precision and
    compute dtype, fixed when jitted."""

    def __init__(self, train, precision, compute_dtype):
        self.train, self.precision, self.dtype = train, precision, compute_dtype

    def conv(self, x, w, stride, pad):
        return lax.conv_general_dilated(x, w.astype(self.dtype), window_strides=(stride, stride),
                                        padding=[(pad, pad), (pad, pad)],
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"), precision=self.precision)

    def bn(self, x, p, s):
        """Batch norm over N, H, W in f32; returns (y in the compute dtype, new running statistics)."""
        xf = x.astype(jnp.float32)
        if self.train:
            mean = jnp.mean(xf, axis=(0, 1, 2))
            var = jnp.mean(jnp.square(xf - mean), axis=(0, 1, 2))  # biased: what normalises
            n = x.shape[0] * x.shape[1] * x.shape[2]
            s = {"mean": (1 - BN_MOMENTUM) * s["mean"] + BN_MOMENTUM * mean,
                 "var": (1 - BN_MOMENTUM) * s["var"] + BN_MOMENTUM * var * (n / max(n - 1, 1))}
        else:
            mean, var = s["mean"], s["var"]
        y = (xf - mean) * (lax.rsqrt(var + EPS) * p["scale"]) + p["shift"]
        return y.astype(self.dtype), s

    def max_pool(self, h):
        """3x3 max-pool, stride 2, padding 1. Training takes the maximum of the nine strided views
        of the padded input: differentiating lax.reduce_window failed in bf16 on JAX 0.11.2 on an H200
        ("Linearization failed to produce known values for all output primals")."""
        if not self.train:
            return lax.reduce_window(h, jnp.array(-jnp.inf, h.dtype), lax.max, (1, 3, 3, 1), (1, 2, 2, 1),
                                     ((0, 0), (1, 1), (1, 1), (0, 0)))
        ho, wo = (h.shape[1] + 1) // 2, (h.shape[2] + 1) // 2
        hp = jnp.pad(h, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-jnp.inf)
        out = None
        for i in range(3):
            for j in range(3):
                v = lax.slice(hp, (0, i, j, 0), (hp.shape[0], i + 2 * (ho - 1) + 1, j + 2 * (wo - 1) + 1, hp.shape[3]),
                              (1, 2, 2, 1))
                out = v if out is None else jnp.maximum(out, v)
        return out

    def block(self, x, p, s, stride):
        ns = {}
        h, ns["bn1"] = self.bn(self.conv(x, p["conv1"], 1, 0), p["bn1"], s["bn1"])
        h = jax.nn.relu(h)
        h, ns["bn2"] = self.bn(self.conv(h, p["conv2"], stride, 1), p["bn2"], s["bn2"])
        h = jax.nn.relu(h)
        h, ns["bn3"] = self.bn(self.conv(h, p["conv3"], 1, 0), p["bn3"], s["bn3"])
        if "proj" in p:
            x, ns["proj_bn"] = self.bn(self.conv(x, p["proj"], stride, 0), p["proj_bn"], s["proj_bn"])
        return jax.nn.relu(h + x), ns

    def __call__(self, params, state, x):
        new = {"stages": []}
        h = self.conv(x.astype(self.dtype), params["stem"]["conv"], 2, 3)
        h, new["stem"] = self.bn(h, params["stem"]["bn"], state["stem"])
        h = jax.nn.relu(h)
        h = self.max_pool(h)
        for (_, _, stride), p_stage, s_stage in zip(STAGES, params["stages"], state["stages"]):
            ns_stage = []
            for b, (p, s) in enumerate(zip(p_stage, s_stage)):
                h, ns = self.block(h, p, s, stride if b == 0 else 1)
                ns_stage.append(ns)
            new["stages"].append(ns_stage)
        h = jnp.mean(h.astype(jnp.float32), axis=(1, 2)).astype(self.dtype)
        logits = jnp.dot(h, params["fc"]["w"].astype(self.dtype), precision=self.precision)
        return logits.astype(jnp.float32) + params["fc"]["b"], new


def make_infer(net):
    return jax.jit(lambda params, state, x: net(params, state, x)[0])


def make_train(net, lr):
    def loss_fn(params, state, x, labels):
        logits, new_state = net(params, state, x)
        logp = jax.nn.log_softmax(logits)
        loss = -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))
        return loss, new_state

    @functools.partial(jax.jit, donate_argnums=(0, 1, 2))
    def step(params, state, momentum, x, labels):
        (loss, new_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, state, x, labels)
        momentum = jax.tree_util.tree_map(lambda m, g: 0.9 * m + g, momentum, grads)
        params = jax.tree_util.tree_map(lambda p, m: p - lr * m, params, momentum)
        return params, new_state, momentum, loss
    return step


# --- one measurement ------------------------------------------------------------------------------

def measure(cfg, mode, args, device):
    r = rc.record(cfg, mode, "NHWC")
    highest = mode == "jit" and not cfg["bf16"]  # bf16 operands have no TF32 question
    r["precision"] = "lax.Precision.HIGHEST" if highest else "JAX default" + ("" if cfg["bf16"] else " (TF32 allowed)")
    try:
        t_build = time.perf_counter()
        key = jax.random.PRNGKey(args.seed)
        k_params, k_x, k_y = jax.random.split(key, 3)
        params, state = jax.device_put(init(k_params), device)
        n = count(params)
        if n != PARAMETERS:
            raise RuntimeError(f"the network has {n} parameters, torchvision's resnet50 {PARAMETERS}")
        b, res = cfg["batch"], cfg["resolution"]
        x = jax.device_put(jax.random.uniform(k_x, (b, res, res, 3), jnp.float32, -1.7, 1.7), device)
        labels = jax.device_put(jax.random.randint(k_y, (b,), 0, rc.CLASSES), device)
        net = Net(cfg["train"], lax.Precision.HIGHEST if highest else None,
                  jnp.bfloat16 if cfg["bf16"] else jnp.float32)
        if cfg["train"]:
            step_fn = make_train(net, args.lr)
            momentum = jax.tree_util.tree_map(jnp.zeros_like, params)
            carry = [params, state, momentum]

            def step():
                carry[0], carry[1], carry[2], loss = step_fn(carry[0], carry[1], carry[2], x, labels)
                return loss
        else:
            infer = make_infer(net)

            def step():
                return infer(params, state, x)
        jax.block_until_ready(jax.tree_util.tree_leaves((params, state, x)))
        r["setup_s"] = time.perf_counter() - t_build
        warmup = max(args.warmup, 3)
        t_compile = time.perf_counter()
        jax.block_until_ready(step())
        r["first_step_s"] = time.perf_counter() - t_compile  # compilation and one step
        for _ in range(warmup - 1):
            jax.block_until_ready(step())
        dev, host, wall = [], [], []
        check = float("nan")
        t_start = time.perf_counter()
        for i in range(args.iters):
            late = time.perf_counter() - t_start > args.max_seconds
            last = i + 1 == args.iters or (i + 1 >= rc.MIN_ITERS and late)
            t0 = time.perf_counter()
            out = step()
            t1 = time.perf_counter()
            jax.block_until_ready(out)
            t2 = time.perf_counter()
            host.append((t1 - t0) * 1e3)
            wall.append((t2 - t0) * 1e3)
            dev.append((t2 - t0) * 1e3)
            if last:
                check = float(out) if cfg["train"] else float(jnp.sum(out.astype(jnp.float32)))
                break
        stats = getattr(device, "memory_stats", lambda: None)() or {}
        rc.timed(r, cfg, warmup, dev, host, wall, check,
                 device_ms_is="wall time with block_until_ready (no CUDA events in JAX)",
                 peak_bytes=None, reserved_bytes=None, peak_bytes_process=stats.get("peak_bytes_in_use"))
    except Exception as e:  # noqa: BLE001 - reported per measurement, the run goes on
        r.update({"status": "error", "note": f"{type(e).__name__}: {e}"})
    return r


def main():
    args = rc.parse_args(__doc__, "jax_resnet50", ["jit", "jit_default"], DEFAULT_CONFIGS,
                         "infer_b256_224,train_b256_224",
                         "f32 configurations also run in jit_default (JAX's default precision)", "gpu")
    try:
        device = jax.devices(args.device)[0]
    except RuntimeError as e:
        raise SystemExit(f"jax_resnet50: JAX has no '{args.device}' device here ({e}); "
                         f"it has: {[str(d) for d in jax.devices()]}")
    info = {"name": getattr(device, "device_kind", "?"), "platform": device.platform,
            "default_backend": jax.default_backend()}
    out = {"framework": "jax", "jax": jax.__version__, "device": info, "parameters": PARAMETERS,
           "data": "random weights (torchvision's initialisation, jax.random), synthetic inputs and labels",
           "iters": args.iters, "warmup": args.warmup, "min_iters": rc.MIN_ITERS, "max_seconds": args.max_seconds,
           "results": []}
    print(f"jax_resnet50 on {info['name']} ({device.platform}) | jax {jax.__version__}")
    failed = rc.run(args, out, lambda cfg, mode: measure(cfg, mode, args, device), ["jit", "jit_default"],
                    "jit_default")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
