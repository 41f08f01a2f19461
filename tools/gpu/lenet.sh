#!/usr/bin/env bash
# Gu, Gozum & Lam's LeNet table on the GPU: strata's cuda backend in all four dispatch modes
# (virtual, static, direct, CUDA graph) beside PyTorch (eager, CUDA-graph replay, torch.compile
# default and reduce-overhead, each also with inductor's freezing) and JAX (jax.jit, op by op), on
# the same weights and image, in one device call. From the repository root on the GPU machine,
# with lenet_latency packed into .gpu/ by tools/gpu/pack.sh:
#   TARGETS="lenet_latency" tools/gpu/pack.sh        # here
#   OUT=$OUT tools/gpu/lenet.sh                       # there (carry .gpu)
# Writes $OUT (or /tmp/strata-lenet-gpu): table.md, strata_p*.json, pytorch_p*.json, jax_p*.json,
# io/ (the exported weights), lenet.log. Knobs and steps: tools/lenet-table.sh.
set -uo pipefail
exec "$(dirname "$0")/../lenet-table.sh" gpu
