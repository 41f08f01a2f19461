#!/usr/bin/env bash
# The data loader against ResNet-50 training on the GPU machine, in one device call: is strata's real
# pipeline (JPEG decode, RandomResizedCrop, flip, normalise, pinned batches) fast enough to feed the
# GPU? From the repository root there, with strata_train and loader_ceiling packed into .gpu/:
#   TARGETS="strata_train loader_ceiling" CARRY_LIBS="turbojpeg jpeg pugixml stb" tools/gpu/pack.sh   # here
#   OUT=$OUT tools/gpu/loader.sh                                # there (carry .gpu)
# Steps:
#   1. loader_ceiling writes a synthetic ImageNet-shaped folder (IMAGES training and VAL_IMAGES
#      validation JPEGs of 500x375 / 375x500, quality 90, 4:2:0, in CLASSES class folders) and sweeps the
#      Loader over 1, 2, 4, ... worker threads up to the cores: img/s with nothing consuming the batches;
#   2. strata_train trains ResNet-50 on that folder for EPOCHS epochs (--dispatch graph --precision bf16
#      --channels-last, as bench/resnet50_gpu's 7,000 img/s; batch BATCH, WORKERS loader threads):
#      img/s including loading, and the time the training loop waited for data
#      (LoaderStats::wait_seconds), per epoch (the first one includes graph capture).
# The folder lives in FOLDER (default: a fresh folder under /tmp, removed at the end), not in $OUT:
# 2 GB of JPEGs need not come back. Writes $OUT (or /tmp/strata-loader): loader_ceiling.json,
# loader_ceiling.log, train.jsonl, train.log, summary.txt.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
pkg=${PKG:-.gpu}
out=${OUT:-/tmp/strata-loader}
images=${IMAGES:-20480}  # 80 full batches of 256: no partial last batch to capture again
val_images=${VAL_IMAGES:-1024}
classes=${CLASSES:-100}
epochs=${EPOCHS:-2}
batch=${BATCH:-256}
workers=${WORKERS:-$(nproc)}
mkdir -p "$out"
# shellcheck source=tools/gpu/env.sh
source tools/gpu/env.sh
if [ -n "${FOLDER:-}" ]; then
  folder=$FOLDER
else
  folder=$(mktemp -d /tmp/strata-imagefolder.XXXXXX)
  trap 'rm -rf "$folder"' EXIT
fi
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$out/summary.txt"; }
for b in loader_ceiling strata_train; do
  missing=$(ldd "$pkg/bin/$b" 2>&1 | grep "not found")
  [ -z "$missing" ] || { say "$b: libraries not found (pack them with CARRY_LIBS): $missing"; exit 1; }
done
say "device: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $(nproc) cores"
say "loader ceiling: $images + $val_images JPEGs in $classes classes at $folder"
"$pkg/bin/loader_ceiling" --write-folder "$folder" --images "$images" --val-images "$val_images" \
  --classes "$classes" --json "$out/loader_ceiling.json" 2>&1 | tee "$out/loader_ceiling.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { say "loader_ceiling failed ($rc)"; exit "$rc"; }
say "strata_train: resnet50, $epochs epochs of $images images, batch $batch, $workers loader workers"
timeout "${TRAIN_TIMEOUT:-480}" "$pkg/bin/strata_train" --model resnet50 --dataset imagefolder --data-dir "$folder" \
  --backend cuda --dispatch graph --precision bf16 --channels-last --batch-size "$batch" --epochs "$epochs" \
  --workers "$workers" \
  --no-progress --metrics "$out/train.jsonl" >"$out/train.log" 2>&1
rc=$?
tail -n 4 "$out/train.log"
python3 - "$out/train.jsonl" <<'PY' | tee -a "$out/summary.txt"
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()] if os.path.exists(sys.argv[1]) else []
for r in rows:
    train = r.get("train_seconds") or 0
    wait = r.get("data_wait_seconds") or 0
    print(f"epoch {r['epoch']}: {r['images_per_second']:.0f} img/s including loading, train {train:.1f} s, "
          f"waiting for data {wait:.2f} s ({100 * wait / train if train else 0:.1f} %), eval {r['eval_seconds']:.1f} s")
PY
exit "$rc"
