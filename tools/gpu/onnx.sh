#!/usr/bin/env bash
# ResNet-50 through ONNX on the GPU machine, from the repository root, with the programs
# packed into .gpu/ by tools/gpu/pack.sh together with Debian's ONNX and protobuf libraries
# (the GPU machine has neither):
#   TARGETS="export_resnet50 strata_export strata_onnx_run" \
#     CARRY_LIBS="onnx_proto protobuf nettle turbojpeg jpeg pugixml stb" tools/gpu/pack.sh    # here
#   tools/gpu/onnx.sh                                                              # there (carry .gpu)
# (a) strata -> onnxruntime: strata's ResNet-50 (random batch-norm statistics) and its f32
#     logits on the GPU (export_resnet50 export), exported by strata_export with batch norm
#     kept and folded; onnxruntime (CPU provider, and CUDA with TF32 off when installed) runs
#     both files on the same input; also strata_onnx_run imports strata's own file on the GPU
#     in every dispatch mode (expected bitwise equal to the native model).
# (b) PyTorch -> strata: torchvision's ResNet-50 through torch.onnx.export and PyTorch's
#     logits on the GPU; strata_onnx_run imports the file and runs it on the GPU in every
#     dispatch mode.
# (c) PyTorch -> strata through the dynamo exporter (torch.onnx.export(dynamo=True), PyTorch
#     2.9+'s default): opset 18+, weights in "<model>.onnx.data" beside the model, batch norm
#     folded, ReduceMean + Reshape, a fixed batch; strata_onnx_run imports it on the GPU in
#     every dispatch mode.
# Every comparison passes at a relative L2 error <= 1e-4 with all argmax equal
# (bench/peers/onnx_resnet50.py). Writes onnx.json (every comparison) and onnx.log to $OUT
# (or /tmp/strata-gpu); exit status 0 when all pass.
set -uo pipefail
cd "$(dirname "$0")/../.."
pkg=${PKG:-.gpu}
out=${OUT:-/tmp/strata-gpu}
tmp=$(mktemp -d)
mkdir -p "$out"
log="$out/onnx.log"
: >"$log"
export PYTHONUNBUFFERED=1

# shellcheck source=tools/gpu/env.sh
source tools/gpu/env.sh
{
  echo "== device ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4
  python3 -c "import torch, torchvision, onnx, onnxruntime as o; print('torch', torch.__version__, '| torchvision', \
torchvision.__version__, '| onnx', onnx.__version__, '| onnxruntime', o.__version__, o.get_available_providers())" 2>&1
  for b in export_resnet50 strata_export strata_onnx_run; do
    missing=$(ldd "$pkg/bin/$b" 2>&1 | grep "not found")
    [ -z "$missing" ] || echo "$b: libraries not found (pack them with CARRY_LIBS): $missing"
  done
} 2>&1 | tee -a "$log"

# shellcheck source=tools/gpu/step.sh
source tools/gpu/step.sh
peer=bench/peers/onnx_resnet50.py
status=0

# (a) strata -> ONNX -> onnxruntime
step "strata ResNet-50 and its logits on the GPU" \
  "$pkg/bin/export_resnet50" export --weights "$tmp/r50.safetensors" --io "$tmp/r50_io.safetensors" || status=1
for fold in kept folded; do
  flag=()
  [ "$fold" = folded ] && flag=(--fold-bn)
  step "strata_export ($fold batch norm)" "$pkg/bin/strata_export" --model resnet50 --checkpoint "$tmp/r50.safetensors" \
    --out "$tmp/strata_r50_$fold.onnx" "${flag[@]}" || status=1
  step "onnxruntime on strata's export ($fold)" python3 "$peer" ort --onnx "$tmp/strata_r50_$fold.onnx" \
    --io "$tmp/r50_io.safetensors" --json "$tmp/a_ort_$fold.json" || status=1
done
step "strata_onnx_run on strata's export (cuda, every mode)" "$pkg/bin/strata_onnx_run" --onnx "$tmp/strata_r50_kept.onnx" \
  --input "$tmp/r50_io.safetensors" --output "$tmp/strata_r50_out.safetensors" --backend cuda --dispatch all || status=1
step "strata import of strata's export vs strata's model" python3 "$peer" compare --io "$tmp/r50_io.safetensors" \
  --got "$tmp/strata_r50_out.safetensors" --what "strata export -> strata import (cuda)" \
  --json "$tmp/a_strata_import.json" || status=1

# (b) torchvision -> torch.onnx.export -> strata
step "torch.onnx.export of torchvision's ResNet-50, PyTorch's logits" python3 "$peer" torch-export \
  --onnx "$tmp/tv_r50.onnx" --io "$tmp/tv_io.safetensors" --json "$tmp/b_torch_export.json" || status=1
step "strata_onnx_run on PyTorch's export (cuda, every mode)" "$pkg/bin/strata_onnx_run" --onnx "$tmp/tv_r50.onnx" \
  --input "$tmp/tv_io.safetensors" --output "$tmp/tv_strata_out.safetensors" --backend cuda --dispatch all || status=1
step "strata vs PyTorch" python3 "$peer" compare --io "$tmp/tv_io.safetensors" --got "$tmp/tv_strata_out.safetensors" \
  --what "torch.onnx.export -> strata (cuda)" --json "$tmp/b_strata_vs_torch.json" || status=1

# (c) torchvision -> torch.onnx.export(dynamo=True) -> strata (a folder of its own: model + external data)
mkdir -p "$tmp/dynamo"
step "torch.onnx.export(dynamo=True) of torchvision's ResNet-50, PyTorch's logits" python3 "$peer" torch-export \
  --dynamo --onnx "$tmp/dynamo/tv_r50.onnx" --io "$tmp/dyn_io.safetensors" --json "$tmp/c_torch_export.json" || status=1
ls -l "$tmp/dynamo" 2>&1 | tee -a "$log"
step "strata_onnx_run on PyTorch's dynamo export (cuda, every mode)" "$pkg/bin/strata_onnx_run" \
  --onnx "$tmp/dynamo/tv_r50.onnx" --input "$tmp/dyn_io.safetensors" --output "$tmp/dyn_strata_out.safetensors" \
  --backend cuda --dispatch all || status=1
step "strata vs PyTorch (dynamo export)" python3 "$peer" compare --io "$tmp/dyn_io.safetensors" \
  --got "$tmp/dyn_strata_out.safetensors" --what "torch.onnx.export(dynamo=True) -> strata (cuda)" \
  --json "$tmp/c_strata_vs_torch.json" || status=1

python3 tools/gpu/onnx_summary.py "$out/onnx.json" "$tmp"/[abc]_*.json | tee -a "$log"
echo "onnx: status $status" | tee -a "$log"
rm -rf "$tmp"
exit $status
