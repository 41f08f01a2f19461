#!/usr/bin/env bash
# Whether a rank's own kernels run slower in a data-parallel job, in one device call on a machine
# with two GPUs (docs/results/dist_2gpu.md, "Kernel by kernel"): Nsight Compute's per-kernel device
# times (one metric, one pass: no kernel replay, which NCCL's kernels would not survive) of
# ResNet-50 bf16 channels-last, batch 256, direct mode, one bucket (nothing exchanged during the
# backward), for GPU 1 alone, then for rank 1 of a 2-rank job on GPUs 0 and 1 (rank 0 not
# profiled), compared step by step by ncu_steps_compare.py.
#   TARGETS="dist_resnet" tools/gpu/pack.sh       # here
#   OUT=$OUT tools/gpu/dist_ncu.sh                # there (carry .gpu)
# Writes $OUT/alone.csv.gz, rank1.csv.gz, the programs' output and compare.txt.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
pkg=${PKG:-.gpu}
out=${OUT:-/tmp/strata-dist-ncu}
mkdir -p "$out"
# shellcheck source=tools/gpu/env.sh
source tools/gpu/env.sh
use_nccl
ncu=(ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --page raw --launch-count 3000)
args=(--model resnet50 --batch 256 --precision bf16 --channels-last --dispatch direct --steps 2 --warmup 2
      --bucket-mb 200 --timeout 400)
nvidia-smi -L
echo "== GPU 1 alone ($(date -u +%T))"
CUDA_VISIBLE_DEVICES=1 timeout 200 "${ncu[@]}" --log-file "$out/alone.csv" "$pkg/bin/dist_resnet" "${args[@]}" \
  >"$out/alone.txt" 2>&1
echo "alone: status $?, $(wc -l <"$out/alone.csv") lines"
echo "== rank 1 of 2 ($(date -u +%T))"
export WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 STRATA_DIST_ID_FILE="$out/nccl_id"
rm -f "$STRATA_DIST_ID_FILE"
RANK=0 LOCAL_RANK=0 timeout 220 "$pkg/bin/dist_resnet" "${args[@]}" >"$out/rank0.txt" 2>&1 &
rank0=$!
RANK=1 LOCAL_RANK=1 timeout 220 "${ncu[@]}" --log-file "$out/rank1.csv" "$pkg/bin/dist_resnet" "${args[@]}" \
  >"$out/rank1.txt" 2>&1
echo "rank 1: status $?, $(wc -l <"$out/rank1.csv") lines"
wait "$rank0"
echo "rank 0: status $?"
rm -f "$STRATA_DIST_ID_FILE"
gzip -f "$out/alone.csv" "$out/rank1.csv"
python3 tools/gpu/ncu_steps_compare.py "$out/alone.csv.gz" "$out/rank1.csv.gz" | tee "$out/compare.txt"
