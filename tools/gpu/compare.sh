#!/usr/bin/env bash
# Before/after on the GPU machine: resnet50_gpu of several packed builds (tools/gpu/pack.sh
# output, each a folder with bin/ and lib/) in one device call, the builds taking turns for
# every configuration and round, so drift of the card's clocks falls on all of them alike.
# Then dispatch_overhead of each build, and PyTorch eager on the same configurations.
#   PKGS     packed builds, labelled by folder (default: .gpu)
#   CONFIGS  resnet50_gpu configurations (default: the four of the targets table)
#   MODES    dispatch modes (default: all)
#   ROUNDS   rounds over the builds (default 2)
#   ITERS, WARMUP, MAX_SECONDS  per measurement (defaults 20, 3, 4)
#   TORCH    1: PyTorch eager too (default 1)
# Writes $OUT/compare_<build>_<config>_<round>.json, $OUT/overhead_<build>.json and a log.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/strata-gpu}
pkgs=${PKGS:-.gpu}
configs=${CONFIGS:-infer_b1_224,train_b128_32,train_b128_224,train_b256_224_nhwc_bf16}
modes=${MODES:-all}
rounds=${ROUNDS:-2}
iters=${ITERS:-20}
warmup=${WARMUP:-3}
max_s=${MAX_SECONDS:-4}
mkdir -p "$out"
log="$out/compare.log"
: >"$log"

label() { echo "$1" | tr '/.' '__' | sed 's/^_*//'; }
pkg=${pkgs%% *}
# shellcheck source=tools/gpu/env.sh
source tools/gpu/env.sh  # sets cudnn_lib; each build's lib/ goes first in its own runs below
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1 | head -3 | tee -a "$log"

for round in $(seq 1 "$rounds"); do
  for config in ${configs//,/ }; do
    for p in $pkgs; do
      echo "== round $round | $config | $p" | tee -a "$log"
      LD_LIBRARY_PATH="${cudnn_lib}:$PWD/$p/lib:/usr/local/cuda/lib64" timeout "${STRATA_TIMEOUT:-120}" \
        "$p/bin/resnet50_gpu" --mode "$modes" --config "$config" --iters "$iters" --warmup "$warmup" \
        --max-seconds "$max_s" --json "$out/compare_$(label "$p")_${config}_${round}.json" 2>&1 | tee -a "$log"
    done
  done
done

for p in $pkgs; do
  [ -x "$p/bin/dispatch_overhead" ] || continue
  echo "== dispatch_overhead | $p" | tee -a "$log"
  LD_LIBRARY_PATH="${cudnn_lib}:$PWD/$p/lib:/usr/local/cuda/lib64" timeout "${OVERHEAD_TIMEOUT:-120}" \
    "$p/bin/dispatch_overhead" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_out="$out/overhead_$(label "$p").json" --benchmark_out_format=json 2>&1 | tail -40 | tee -a "$log"
done

if [ "${TORCH:-1}" = 1 ]; then
  echo "== PyTorch eager" | tee -a "$log"
  timeout "${TORCH_TIMEOUT:-200}" python3 bench/peers/pytorch_resnet50.py --config "$configs" --iters "$iters" \
    --warmup "$warmup" --max-seconds "$max_s" --json "$out/pytorch.json" 2>&1 | tee -a "$log"
fi
