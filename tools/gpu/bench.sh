#!/usr/bin/env bash
# The ResNet-50 GPU benchmark, strata beside PyTorch in one device call, from the
# repository root on the GPU machine, with resnet50_gpu and export_resnet50 packed
# into .gpu/ by tools/gpu/pack.sh:
#   TARGETS="resnet50_gpu export_resnet50" tools/gpu/pack.sh          # here
#   tools/gpu/bench.sh                                                 # there (carry .gpu)
# Sets up the environment as check.sh does (PyTorch's cuDNN first on LD_LIBRARY_PATH),
# then runs: resnet50_gpu in every dispatch mode; bench/peers/pytorch_resnet50.py on the
# same configurations; the checkpoint round trip strata <-> torchvision; and
# bench/peers/compare.py, whose tables come last. Writes to $OUT (or /tmp/strata-gpu):
#   strata.json pytorch.json strata_variants.json interop.json table.md bench.log
# strata_variants.json: resnet50_gpu with TF32 on (against PyTorch's own TF32 default)
# and, for channels-last training, with non-deterministic algorithms allowed.
# Knobs: ITERS (30), WARMUP (5), MAX_SECONDS per measurement (10), CONFIGS (all),
#        STRATA_TIMEOUT (240), TORCH_TIMEOUT (200) seconds.
set -uo pipefail
cd "$(dirname "$0")/../.."
pkg=${PKG:-.gpu}
out=${OUT:-/tmp/strata-gpu}
iters=${ITERS:-30}
warmup=${WARMUP:-5}
max_s=${MAX_SECONDS:-10}
configs=${CONFIGS:-all}
tmp=$(mktemp -d)
mkdir -p "$out"
log="$out/bench.log"
: >"$log"
export PYTHONUNBUFFERED=1

# shellcheck source=tools/gpu/env.sh
source tools/gpu/env.sh
{
  echo "== device ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu --format=csv 2>&1 | head -4
  echo "cuDNN loaded: $(python3 -c "import ctypes; print(ctypes.CDLL('libcudnn.so.9').cudnnGetVersion())" 2>&1) from ${cudnn_lib}"
} 2>&1 | tee -a "$log"

echo "== strata: resnet50_gpu --mode all" | tee -a "$log"
start=$(date +%s)
timeout "${STRATA_TIMEOUT:-240}" "$pkg/bin/resnet50_gpu" --mode all --config "$configs" --iters "$iters" \
  --warmup "$warmup" --max-seconds "$max_s" --trace --json "$out/strata.json" 2>&1 | tee -a "$log"
strata_rc=${PIPESTATUS[0]}
echo "resnet50_gpu: rc=$strata_rc ($(( $(date +%s) - start ))s)" | tee -a "$log"

echo "== strata with other settings" | tee -a "$log"
start=$(date +%s)
variant() {
  local name=$1
  shift
  timeout "${VARIANT_TIMEOUT:-100}" "$pkg/bin/resnet50_gpu" --variant "$name" --iters "$iters" --warmup "$warmup" \
    --max-seconds "$max_s" --json "$tmp/variant_$name.json" "$@" 2>&1 | tee -a "$log"
}
if [ "${VARIANTS:-1}" = 1 ]; then
  variant tf32 --tf32 --mode all --config infer_b256_224,train_b128_224
  variant tf32_nhwc --tf32 --mode direct --config train_b128_224_nhwc
  variant nondeterministic_nhwc --nondeterministic --mode direct --config train_b128_224_nhwc
fi
python3 - "$out/strata_variants.json" "$tmp"/variant_*.json <<'PY'
import json, sys
docs = []
for p in sys.argv[2:]:
    try:
        docs.append(json.load(open(p)))
    except Exception as e:
        print(f"variants: {p} not read: {e}")
json.dump(docs, open(sys.argv[1], "w"), indent=1)
PY
echo "variants: $(( $(date +%s) - start ))s" | tee -a "$log"

echo "== PyTorch eager: bench/peers/pytorch_resnet50.py" | tee -a "$log"
start=$(date +%s)
timeout "${TORCH_TIMEOUT:-200}" python3 bench/peers/pytorch_resnet50.py --config "$configs" --iters "$iters" \
  --warmup "$warmup" --max-seconds "$max_s" --default-configs infer_b256_224,train_b128_224,train_b128_224_nhwc \
  --json "$out/pytorch.json" 2>&1 | tee -a "$log"
torch_rc=${PIPESTATUS[0]}
echo "pytorch_resnet50: rc=$torch_rc ($(( $(date +%s) - start ))s)" | tee -a "$log"

echo "== checkpoints: strata <-> torchvision" | tee -a "$log"
start=$(date +%s)
{
  timeout 90 "$pkg/bin/export_resnet50" export --weights "$tmp/strata_w.safetensors" --io "$tmp/strata_io.safetensors" \
    --json "$tmp/1_strata_export.json"
  echo "export_resnet50 export: rc=$?"
  timeout 90 python3 bench/peers/interop_resnet50.py check-strata --weights "$tmp/strata_w.safetensors" \
    --io "$tmp/strata_io.safetensors" --json "$tmp/2_strata_to_torchvision.json"
  echo "interop check-strata: rc=$?"
  timeout 90 python3 bench/peers/interop_resnet50.py export --weights "$tmp/tv_w.safetensors" \
    --io "$tmp/tv_io.safetensors" --json "$tmp/3_torchvision_export.json"
  echo "interop export: rc=$?"
  timeout 120 "$pkg/bin/export_resnet50" check --weights "$tmp/tv_w.safetensors" --io "$tmp/tv_io.safetensors" \
    --json "$tmp/4_torchvision_to_strata.json"
  echo "export_resnet50 check: rc=$?"
} 2>&1 | tee -a "$log"
echo "checkpoints: $(( $(date +%s) - start ))s" | tee -a "$log"
python3 - "$out/interop.json" "$tmp"/[0-9]_*.json <<'PY'
import json, sys
docs = []
for p in sys.argv[2:]:
    try:
        docs.append(json.load(open(p)))
    except Exception as e:
        docs.append({"file": p, "status": "unreadable", "note": str(e)})
json.dump(docs, open(sys.argv[1], "w"), indent=1)
PY

echo "== comparison" | tee -a "$log"
interop=()
for f in "$tmp"/[0-9]_*.json; do [ -e "$f" ] && interop+=("$f"); done
if [ -s "$out/strata.json" ] && [ -s "$out/pytorch.json" ]; then
  python3 bench/peers/compare.py "$out/strata.json" "$out/pytorch.json" --variants "$out/strata_variants.json" \
    --interop "${interop[@]}" \
    --markdown "$out/table.md" 2>&1 | tee -a "$log"
else
  echo "no comparison: strata.json or pytorch.json missing" | tee -a "$log"
fi
rm -rf "$tmp"
echo "rc: resnet50_gpu=$strata_rc pytorch=$torch_rc"
[ "$strata_rc" -eq 0 ] && [ "$torch_rc" -eq 0 ]
