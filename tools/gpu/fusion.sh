#!/usr/bin/env bash
# Fusion before/after on the GPU machine, one device call: resnet50_gpu of one packed build
# (tools/gpu/pack.sh) in several variants taking turns per round; one step of static mode
# with every op waited for (--trace-sync: device time per op) in some of them; then
# PyTorch eager and torch.compile on the same configurations.
#   VARIANTS  default "fused unfused"; each one of: fused (the defaults: fused training,
#             folded inference), unfused (--no-fuse: the separate ops), folded (--fold),
#             unfolded (--no-fold: fused evaluation), folded_find (--fold --cudnn-find),
#             no_s2d (--no-s2d-stem: the stem's 7x7 stride-2 convolution as it is),
#             nondet (--nondeterministic: cuDNN's non-deterministic engines allowed, PyTorch's default), before (the defaults on the packed build in $BEFORE_PKG: a build before a change)
#   TRACE_VARIANTS  the variants traced (default "fused unfused"; "" none)
#   CONFIGS  resnet50_gpu configurations (default: train_b256_224_nhwc_bf16)
#   MODES    resnet50_gpu modes (default: graph; "all" for every mode)
#   ROUNDS   rounds (default 2)
#   ITERS, WARMUP, MAX_SECONDS  per measurement (defaults 20, 3, 6)
#   TORCH_MODES  pytorch_resnet50.py modes, comma-separated (default eager,compile; "" none;
#                max-autotune compiles for minutes)
#   COMPILE_CONFIGS  configurations for compile and max-autotune (default CONFIGS; each is compiled)
# Writes $OUT/fusion.log, $OUT/strata_<variant>_<config>_<round>.json,
# $OUT/trace_<variant>_<config>.json and $OUT/pytorch_<mode>.json.
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
variants=${VARIANTS:-fused unfused}
trace_variants=${TRACE_VARIANTS-fused unfused}
# bench <variant> <resnet50_gpu arguments>: the variant's build and flags.
bench() {
  local variant=$1 p=$pkg
  shift
  local flag=()
  case "$variant" in
    fused) ;;
    unfused) flag=(--no-fuse) ;;
    folded) flag=(--fold) ;;
    unfolded) flag=(--no-fold) ;;
    folded_find) flag=(--fold --cudnn-find) ;;
    no_s2d) flag=(--no-s2d-stem) ;;
    nondet) flag=(--nondeterministic) ;;
    before) p=${BEFORE_PKG:?before needs BEFORE_PKG, a packed build} ;;
    *) echo "fusion.sh: unknown variant '$variant'" | tee -a "$log"; return 1 ;;
  esac
  LD_LIBRARY_PATH="${cudnn_lib}:$PWD/$p/lib:/usr/local/cuda/lib64" timeout "${STRATA_TIMEOUT:-180}" \
    "$p/bin/resnet50_gpu" "$@" "${flag[@]}" --variant "$variant" 2>&1 | tee -a "$log"
}
for round in $(seq 1 "$rounds"); do
  for config in ${configs//,/ }; do
    for variant in $variants; do
      echo "== round $round | $config | $variant" | tee -a "$log"
      bench "$variant" --mode "$modes" --config "$config" --iters "$iters" --warmup "$warmup" --max-seconds "$max_s" \
        --json "$out/strata_${variant}_${config}_${round}.json"
    done
  done
done
for config in ${configs//,/ }; do
  for variant in $trace_variants; do
    echo "== trace-sync | $config | $variant" | tee -a "$log"
    bench "$variant" --mode static --config "$config" --iters 20 --warmup 2 --max-seconds 2 --trace-sync \
      --json "$out/trace_${variant}_${config}.json" >/dev/null
  done
done
for m in ${torch_modes//,/ }; do
  echo "== PyTorch $m" | tee -a "$log"
  c=$configs
  [ "$m" = compile ] || [ "$m" = max-autotune ] && c=${COMPILE_CONFIGS:-$configs}
  timeout "${TORCH_TIMEOUT:-300}" python3 bench/peers/pytorch_resnet50.py --config "$c" --mode "$m" \
    --iters "$iters" --warmup "$warmup" --max-seconds "$max_s" --json "$out/pytorch_$m.json" 2>&1 | tee -a "$log"
done
