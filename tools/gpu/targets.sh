#!/usr/bin/env bash
# The four targets, measured side by side in one device call (repository root
# on the GPU machine, resnet50_gpu packed into .gpu/ by tools/gpu/pack.sh):
#   infer_b1_224              strata's best non-graph mode vs PyTorch eager and TorchScript
#   train_b128_32             img/s vs PyTorch eager
#   train_b128_224            f32 training vs PyTorch eager
#   train_b256_224_nhwc_bf16  img/s and peak memory vs PyTorch eager (autocast)
# Both numerics policies: strata's default (TF32 off, deterministic cuDNN; PyTorch set
# the same) and PyTorch's defaults (TF32 convolutions, any algorithm; strata with
# --tf32 --nondeterministic). TorchScript and CUDA-graph replay come from
# bench/peers/study_torch.py. Writes $OUT (or /tmp/strata-targets): strata*.json,
# pytorch.json, torch_*.json, targets.log, and prints the target table last
# (tools/gpu/targets_table.py). Knobs: ITERS (30), WARMUP (5), NSYS=1 (kernel
# summaries of strata and PyTorch at batch 1, when nsys is installed).
set -uo pipefail
cd "$(dirname "$0")/../.."
pkg=${PKG:-.gpu}
out=${OUT:-/tmp/strata-targets}
iters=${ITERS:-30}
warmup=${WARMUP:-5}
configs=${CONFIGS:-infer_b1_224,train_b128_32,train_b128_224,train_b256_224_nhwc_bf16}
f32_configs=${F32_CONFIGS:-infer_b1_224,train_b128_32,train_b128_224}
mkdir -p "$out"
log="$out/targets.log"
: >"$log"
export PYTHONUNBUFFERED=1
# shellcheck source=tools/gpu/env.sh
source tools/gpu/env.sh
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$log"; }
say "device"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv 2>&1 | tee -a "$log"

run_strata() {  # name, args...
  local name=$1
  shift
  timeout "${STRATA_TIMEOUT:-200}" "$pkg/bin/resnet50_gpu" --iters "$iters" --warmup "$warmup" --max-seconds 6 \
    --json "$out/strata_$name.json" --variant "$name" "$@" 2>&1 | tee -a "$log"
}
say "strata, strata's policy"
run_strata default --mode all --config "$configs"
say "strata, PyTorch's policy (TF32, any algorithm)"
run_strata tf32 --mode all --config "$f32_configs" --tf32 --nondeterministic
if [ "${FIND:-1}" = 1 ]; then
  say "strata, PyTorch's policy, engines timed once per shape"
  run_strata tf32_find --mode all --config "$f32_configs" --tf32 --nondeterministic --cudnn-find
fi

say "PyTorch eager, both policies"
timeout "${TORCH_TIMEOUT:-200}" python3 bench/peers/pytorch_resnet50.py --mode all --config "$configs" \
  --default-configs "$f32_configs" --iters "$iters" --warmup "$warmup" --max-seconds 6 \
  --json "$out/pytorch.json" 2>&1 | tee -a "$log"

for policy in eager eager_default; do
  say "TorchScript and CUDA-graph replay, policy $policy"
  timeout "${TORCH_TIMEOUT:-200}" python3 bench/peers/study_torch.py sweep --impls torchscript,cudagraph \
    --kinds eval,train --points "${POINTS:-1x224,128x32}" --policy "$policy" --min-repeats 20 --max-repeats 60 \
    --json "$out/torch_$policy.json" 2>&1 | tail -20 | tee -a "$log"
done

if [ "${NSYS:-0}" = 1 ] && command -v nsys >/dev/null; then
  say "kernel summaries at batch 1 (nsys)"
  nsys profile -o "$out/strata_b1" --force-overwrite true -t cuda "$pkg/bin/resnet50_gpu" --mode static \
    --config infer_b1_224 --iters 20 --warmup 3 --tf32 --nondeterministic >/dev/null 2>&1
  nsys stats -q -r cuda_gpu_kern_sum -f csv -o "$out/strata_b1" "$out/strata_b1.nsys-rep" >/dev/null 2>&1
  rm -f "$out"/*.nsys-rep "$out"/*.sqlite
fi

say "targets"
python3 tools/gpu/targets_table.py "$out" 2>&1 | tee -a "$log"
