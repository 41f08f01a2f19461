#!/usr/bin/env bash
# End-to-end smoke test of the study on the CPU: strata's driver on the reference
# backend at a tiny point (sweep and op costs), then tools/study/make_page.py on its
# output, so the driver's records and the page generator stay in step; plus the
# peers' --help, which needs no torch. Usage: smoke.sh <study_resnet50> [python3]
set -euo pipefail
bin=$1
py=${2:-python3}
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
study="$tmp/docs/results/cpu_smoke/study"
mkdir -p "$study"
"$bin" sweep --backend reference --points 2x8 --impls virtual,direct,cudagraph,direct_unfused --kinds eval --min-repeats 1 \
  --min-seconds 0 --warmup 1 --h2d-repeats 1 --json "$study/strata_sweep.json"
"$bin" op-costs --backend reference --point 2x8 --kinds eval --warmup 1 --json "$study/strata_op_costs.json"
"$py" "$root/tools/study/make_page.py" --results "$tmp/docs/results" --out "$tmp/docs/RESULTS.md" --no-plots
grep -q "| strata_cudagraph | 0 | 0 | 0 | 1 | 0 | – |" "$tmp/docs/RESULTS.md"
grep -q "backend calls" "$tmp/docs/RESULTS.md"
grep -q "^| eval | 2 × 8 | direct | " "$tmp/docs/RESULTS.md"  # the fused/unfused row
grep -q "^strata_direct_unfused,strata,eval,2,8,ok," "$study/points.csv"
grep -q "^strata_virtual,strata,eval,2,8,ok," "$study/points.csv"
"$py" "$root/bench/peers/study_torch.py" --help >/dev/null
"$py" "$root/bench/peers/study_torch.py" sweep --help >/dev/null
"$py" "$root/tools/study/count_loc.py" >/dev/null
echo "study smoke: ok"
