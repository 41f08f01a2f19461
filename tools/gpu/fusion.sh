#!/usr/bin/env bash
# Fusion before/after on the GPU machine, one device call: resnet50_gpu of one packed build
# (tools/gpu/pack.sh) with the fusions on (default) and off (--no-fuse), taking turns per
# round; one step of static mode with every op waited for (--trace-sync: device time per
# op) each way; then PyTorch eager and torch.compile on the same configurations.
#   CONFIGS  resnet50_gpu configurations (default: train_b256_224_nhwc_bf16)
#   MODES    resnet50_gpu modes (default: graph; "all" for every mode)
#   ROUNDS   rounds (default 2)
#   ITERS, WARMUP, MAX_SECONDS  per measurement (defaults 20, 3, 6)
#   TORCH_MODES  pytorch_resnet50.py modes, comma-separated (default eager,compile; "" none)
#   COMPILE_CONFIGS  configurations for torch.compile (default CONFIGS; it compiles each one)
# Writes $OUT/fusion.log, $OUT/strata_<fused|unfused>_<config>_<round>.json,
# $OUT/trace_<fused|unfused>_<config>.json and $OUT/pytorch_<mode>.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/strata-gpu}
configs=${CONFIGS:-train_b256_224_nhwc_bf16}
modes=${MODES:-graph}
rounds=${ROUNDS:-2}
iters=${ITERS:-20}
warmup=${WARMUP:-3}
max_s=${MAX_SECONDS:-6}
torch_modes=${TORCH_MODES-eager,compile}
mkdir -p "$out"
log="$out/fusion.log"
: >"$log"
pkg=${pkg:-.gpu}
# shellcheck source=tools/gpu/env.sh
source tools/gpu/env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1 | head -3 | tee -a "$log"
bench() {
  LD_LIBRARY_PATH="${cudnn_lib}:$PWD/$pkg/lib:/usr/local/cuda/lib64" timeout "${STRATA_TIMEOUT:-180}" \
    "$pkg/bin/resnet50_gpu" "$@" 2>&1 | tee -a "$log"
}
for round in $(seq 1 "$rounds"); do
  for config in ${configs//,/ }; do
    for variant in fused unfused; do
      flag=()
      [ "$variant" = unfused ] && flag=(--no-fuse)
      echo "== round $round | $config | $variant" | tee -a "$log"
      bench --mode "$modes" --config "$config" --iters "$iters" --warmup "$warmup" --max-seconds "$max_s" \
        "${flag[@]}" --variant "$variant" --json "$out/strata_${variant}_${config}_${round}.json"
    done
  done
done
for config in ${configs//,/ }; do
  for variant in fused unfused; do
    flag=()
    [ "$variant" = unfused ] && flag=(--no-fuse)
    echo "== trace-sync | $config | $variant" | tee -a "$log"
    bench --mode static --config "$config" --iters 20 --warmup 2 --max-seconds 2 --trace-sync "${flag[@]}" \
      --variant "$variant" --json "$out/trace_${variant}_${config}.json" >/dev/null
  done
done
for m in ${torch_modes//,/ }; do
  echo "== PyTorch $m" | tee -a "$log"
  c=$configs
  [ "$m" = compile ] && c=${COMPILE_CONFIGS:-$configs}
  timeout "${TORCH_TIMEOUT:-300}" python3 bench/peers/pytorch_resnet50.py --config "$c" --mode "$m" \
    --iters "$iters" --warmup "$warmup" --max-seconds "$max_s" --json "$out/pytorch_$m.json" 2>&1 | tee -a "$log"
done
