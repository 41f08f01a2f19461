#!/usr/bin/env bash
# ResNet-50 with JAX beside strata and PyTorch in one device call: the JAX column of the study
# (bench/peers/jax_resnet50.py, jax.jit), strata's resnet50_gpu (MODES, default "graph direct") and
# PyTorch (TORCH_MODES, default "eager compile") on the same configurations, strata run first and
# again last so that drift of the card shows. From the repository root on the GPU machine, with
# resnet50_gpu packed into .gpu/ (TARGETS="resnet50_gpu" tools/gpu/pack.sh here).
#   CONFIGS  (default infer_b1_224,infer_b256_224_nhwc_bf16,train_b256_224_nhwc_bf16)
#   ITERS (30), WARMUP (5), MAX_SECONDS (6), PEER_TIMEOUT seconds per peer (200)
# Writes $OUT (or /tmp/strata-gpu)/jax_resnet50/: strata_<1|2>_<mode>.json, jax.json and
# pytorch_<mode>.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/strata-gpu}/jax_resnet50
mkdir -p "$out"
configs=${CONFIGS:-infer_b1_224,infer_b256_224_nhwc_bf16,train_b256_224_nhwc_bf16}
common=(--config "$configs" --iters "${ITERS:-30}" --warmup "${WARMUP:-5}" --max-seconds "${MAX_SECONDS:-6}")
status=0
strata() {
  (
    source tools/gpu/env.sh >/dev/null 2>&1
    for m in ${MODES:-graph direct}; do
      timeout "${PEER_TIMEOUT:-200}" .gpu/bin/resnet50_gpu --mode "$m" "${common[@]}" --json "$out/strata_$1_$m.json"
    done
  ) || status=1
}
strata 1
timeout "${PEER_TIMEOUT:-200}" python3 bench/peers/jax_resnet50.py --mode jit "${common[@]}" --json "$out/jax.json" || status=1
for m in ${TORCH_MODES:-eager compile}; do
  timeout "${PEER_TIMEOUT:-200}" python3 bench/peers/pytorch_resnet50.py --mode "$m" "${common[@]}" --json "$out/pytorch_$m.json" || status=1
done
strata 2
exit $status
