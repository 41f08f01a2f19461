# Sourced by the two-GPU check scripts: exits 77 (ctest's skip) with fewer than 2 GPUs, and sets
# `out`, the folder for the runs' records (DIST_CHECK_DIR, or a new temporary one), and PYTHONPATH
# so that their comparisons import run_checks.py.
gpus=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)
if [ "${gpus:-0}" -lt 2 ]; then echo "skipped: needs 2 GPUs, found ${gpus:-0}"; exit 77; fi
out=${DIST_CHECK_DIR:-$(mktemp -d)}
mkdir -p "$out"
export PYTHONPATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)${PYTHONPATH:+:$PYTHONPATH}"
