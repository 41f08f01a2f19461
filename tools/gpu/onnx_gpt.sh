#!/usr/bin/env bash
# A GPT through ONNX on the GPU machine (it has onnxruntime and PyTorch), from the repository
# root, with the programs packed into .gpu/ by tools/gpu/pack.sh together with Debian's ONNX
# and protobuf libraries (the GPU machine has neither):
#   TARGETS="strata_export strata_onnx_run" \
#     CARRY_LIBS="onnx_proto protobuf nettle turbojpeg jpeg pugixml stb" tools/gpu/pack.sh    # here
#   tools/gpu/onnx_gpt.sh                                                               # there (carry .gpu)
# For a tiny GPT and one of GPT-2 small's shape (124M parameters), random weights (GPT-2's
# initialisation, seeded):
#  1. strata_export writes the ONNX file and a random batch of ids with strata's f32 logits
#     for it, computed on $BACKEND (default cuda; "reference" runs without a GPU);
#  2. onnxruntime runs the file on those ids (CPU provider, and CUDA with TF32 off when
#     installed) and bench/peers/onnx_gpt.py prints the max abs and relative L2 difference;
#  3. the same graph evaluated op by op in float64 with numpy (an oracle of its own);
#  4. strata_onnx_run imports the file on $BACKEND in every dispatch mode (on the backend the
#     logits came from: expected bitwise equal).
# Passes at a relative L2 difference <= 1e-4 with every row's argmax equal. Writes
# onnx_gpt.json (every comparison) and onnx_gpt.log to $OUT (or /tmp/strata-gpu); exit
# status 0 when all pass.
set -uo pipefail
cd "$(dirname "$0")/../.."
pkg=${PKG:-.gpu}
out=${OUT:-/tmp/strata-gpu}
backend=${BACKEND:-cuda}
tmp=$(mktemp -d)
mkdir -p "$out"
log="$out/onnx_gpt.log"
: >"$log"
export PYTHONUNBUFFERED=1

# shellcheck source=tools/gpu/env.sh
source tools/gpu/env.sh
{
  echo "== device ($(date -u +%Y-%m-%dT%H:%M:%SZ)), strata on $backend"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4
  python3 -c "import numpy, onnx, onnxruntime as o; print('numpy', numpy.__version__, '| onnx', onnx.__version__, \
'| onnxruntime', o.__version__, o.get_available_providers())" 2>&1
  for b in strata_export strata_onnx_run; do
    missing=$(ldd "$pkg/bin/$b" 2>&1 | grep "not found")
    [ -z "$missing" ] || echo "$b: libraries not found (pack them with CARRY_LIBS): $missing"
  done
} 2>&1 | tee -a "$log"

step_timeout=600
# shellcheck source=tools/gpu/step.sh
source tools/gpu/step.sh
peer=bench/peers/onnx_gpt.py
status=0

# name, then strata_export's shape flags
check() {
  local name=$1
  shift
  local f="$tmp/$name"
  step "strata_export $name, its ids and logits ($backend)" "$pkg/bin/strata_export" --model gpt "$@" \
    --backend "$backend" --out "$f.onnx" --io "$f.io.safetensors" --io-batch 2 --io-seq 32 || { status=1; return; }
  ls -l "$f.onnx" | tee -a "$log"
  step "onnxruntime on $name" python3 "$peer" ort --onnx "$f.onnx" --io "$f.io.safetensors" \
    --what "strata $name" --json "$tmp/${name}_ort.json" || status=1
  step "numpy float64 on $name" python3 "$peer" numpy --onnx "$f.onnx" --io "$f.io.safetensors" \
    --what "strata $name" --json "$tmp/${name}_numpy.json" || status=1
  step "strata_onnx_run on $name ($backend, every mode)" "$pkg/bin/strata_onnx_run" --onnx "$f.onnx" \
    --input "$f.io.safetensors" --output "$f.out.safetensors" --backend "$backend" --dispatch all || status=1
  step "strata import of $name vs strata's model" python3 "$peer" compare --io "$f.io.safetensors" \
    --got "$f.out.safetensors" --what "strata $name export -> strata import ($backend)" \
    --json "$tmp/${name}_import.json" || status=1
}
check gpt_tiny --vocab 512 --block-size 64 --layers 2 --heads 4 --embd 64
check gpt2_small --vocab 50257 --block-size 1024 --layers 12 --heads 12 --embd 768

python3 tools/gpu/onnx_summary.py "$out/onnx_gpt.json" "$tmp"/*.json | tee -a "$log"
echo "onnx_gpt: status $status" | tee -a "$log"
rm -rf "$tmp"
exit $status
