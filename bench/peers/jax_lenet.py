#!/usr/bin/env python3
"""LeNet-5 in JAX at batch 1, the peer of bench/lenet_latency.cpp and pytorch_lenet.py (Gu, Gozum &
Lam's measurement: the time to classify one image), on the same weights and input:

    lenet_latency --export io/
    python3 bench/peers/jax_lenet.py --io io/lenet_*.safetensors --json jax.json

Plain jax.numpy and jax.lax (no Flax), APIs stable from JAX 0.4 to 0.7. The network is
nn/lenet.h's, rebuilt from the file's shapes: lax.conv_general_dilated with PyTorch's layouts
(NCHW input, OIHW weights, so the exported weights are used as they are; XLA assigns the
physical layouts its GPU kernels prefer by itself), bias, ReLU, 2x2 max-pool by
lax.reduce_window, flatten, x @ W.T + b. f32, every convolution and product at
lax.Precision.HIGHEST (no TF32, as strata's and PyTorch's runs), and the logits must be
within --tolerance of strata's reference backend before any timing (exit status 1 otherwise).

Implementations (--impls):
  jit       jax.jit(forward)(params, x): one XLA computation, the weights passed as arguments
  eager     forward(params, x) without jit: JAX dispatches op by op
Times per call in microseconds, by time.perf_counter_ns, as lenet_latency's:
  e2e       np.asarray(f(params, jax.device_put(x_host, device))): the image in host memory to
            the logits in host memory (np.asarray waits for the result)
  resident  f(params, x_device).block_until_ready()
The rounds, alternating order and statistics are lenet_common.py's. XLA_PYTHON_CLIENT_PREALLOCATE
is set to false unless the environment sets it (JAX would otherwise take most of the GPU's memory).
"""
import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import lenet_common as lc  # noqa: E402
import numpy as np  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

IMPLS = ["jit", "eager"]


def forward(params, x, padding):
    hi = lax.Precision.HIGHEST

    def conv(h, name):
        y = lax.conv_general_dilated(h, params[name + ".weight"], window_strides=(1, 1),
                                     padding=[(padding, padding), (padding, padding)],
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"), precision=hi)
        return y + params[name + ".bias"][None, :, None, None]

    def pool(h):
        return lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def dense(h, name):
        return jnp.dot(h, params[name + ".weight"].T, precision=hi) + params[name + ".bias"]

    h = pool(jax.nn.relu(conv(x, "conv1")))
    h = pool(jax.nn.relu(conv(h, "conv2")))
    h = jax.nn.relu(dense(h.reshape(h.shape[0], -1), "fc1"))
    return dense(h, "fc2")


def make_impl(name, io, device):
    """(e2e, resident) callables of one implementation."""
    params = {k: jax.device_put(v, device) for k, v in io.weights.items()}
    x_dev = jax.device_put(io.input, device)

    def plain(p, x):
        return forward(p, x, io.padding)
    f = jax.jit(plain) if name == "jit" else plain

    def e2e():
        return np.asarray(f(params, jax.device_put(io.input, device)))

    def resident():
        f(params, x_dev).block_until_ready()
    return e2e, resident


def main():
    args = lc.parse_args(__doc__, "jax_lenet", IMPLS, "gpu", "gpu (default) or cpu: the JAX platform to run on")
    try:
        device = jax.devices(args.device)[0]
    except RuntimeError as e:  # no such platform: JAX without its CUDA plugin, or no GPU
        raise SystemExit(f"jax_lenet: JAX has no '{args.device}' device here ({e}); "
                         f"it has: {[str(d) for d in jax.devices()]}")
    info = {"platform": device.platform, "device_kind": getattr(device, "device_kind", "?"),
            "default_backend": jax.default_backend()}
    out = lc.start("jax_lenet", args, f"jax {jax.__version__}", info,
                   "f32, lax.Precision.HIGHEST for convolutions and products")
    row = {"framework": "jax", "backend": device.platform, "device": "cpu" if device.platform == "cpu" else "gpu"}
    for io in args.ios:
        out["results"].extend(lc.run_variant(io, args, row, lambda name: make_impl(name, io, device)))
        lc.write_json(args.json, out)
    return lc.finish(out, args, "jax_lenet")


if __name__ == "__main__":
    sys.exit(main())
