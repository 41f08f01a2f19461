#!/usr/bin/env bash
# Fashion-MNIST training runs on the GPU machine (the GPU target), from the
# repository root, with strata_train packed into .gpu/ by tools/gpu/pack.sh plus the
# IDX files in .gpu/fmnist/ and libturbojpeg/libjpeg/libpugixml/libz/libstb in .gpu/lib/:
#   TARGETS=strata_train tools/gpu/pack.sh && mkdir -p .gpu/fmnist &&
#     cp /usr/share/datasets/fashion-mnist/*.gz .gpu/fmnist/ && cp -L <those libs> .gpu/lib/
# Each argument is one run, "<name>:<strata_train options>"; the runs share the GPU
# and run side by side (small images leave most of an H100/H200 idle). Logs and
# per-epoch metrics go to $OUT/<name>.log and $OUT/<name>.jsonl.
#   tools/gpu/train_fmnist.sh "r50:--model resnet50 --epochs 20 --augment" "r18:--model resnet18 ..."
set -uo pipefail
cd "$(dirname "$0")/../.."
pkg=${PKG:-.gpu}
out=${OUT:-/tmp/strata-gpu}
mkdir -p "$out"
cudnn_lib=$(python3 -c "import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null)
export LD_LIBRARY_PATH="${cudnn_lib}:$PWD/$pkg/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
pids=()
for run in "$@"; do
  name=${run%%:*}
  opts=${run#*:}
  # shellcheck disable=SC2086
  timeout "${TRAIN_TIMEOUT:-540}" "$pkg/bin/strata_train" --backend cuda --data-dir "$pkg/fmnist" --no-progress \
    --metrics "$out/$name.jsonl" $opts >"$out/$name.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
for run in "$@"; do
  name=${run%%:*}
  echo "== $name: ${run#*:}"
  python3 - "$out/$name.jsonl" <<'PY'
import json, sys
import os
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()] if os.path.exists(sys.argv[1]) else []
for r in rows:
    print(f"epoch {r.get('epoch')}: test acc {100 * r.get('test_accuracy', 0):.2f} %  train loss {r.get('train_loss', 0):.4f}"
          f"  {r.get('images_per_second', 0):.0f} img/s  {r.get('epoch_seconds', 0):.1f} s")
if rows:
    best = max(rows, key=lambda r: r.get("test_accuracy", 0))
    print(f"best {100 * best['test_accuracy']:.2f} % at epoch {best['epoch']}")
PY
  tail -2 "$out/$name.log"
done
exit $rc
