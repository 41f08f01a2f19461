#!/usr/bin/env bash
# Runs the cuda backend's tests on the GPU machine, from the repository root, with the
# build packed by tools/gpu/pack.sh carried as .gpu/. Puts PyTorch's cuDNN first on
# LD_LIBRARY_PATH (the system one there is older than the headers we built with),
# runs the tests, then compute-sanitizer memcheck on the quicker ones when present,
# and prints a short table last. Logs go to $OUT (or /tmp/strata-gpu).
#   SANITIZE_FILTER  gtest filter for the memcheck pass
#   SANITIZE_TIMEOUT seconds for the memcheck pass (default 150)
set -uo pipefail
cd "$(dirname "$0")/../.."
pkg=${PKG:-.gpu}
out=${OUT:-/tmp/strata-gpu}
mkdir -p "$out"

# shellcheck source=tools/gpu/env.sh
source tools/gpu/env.sh
echo "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4
cudnn_version=$(python3 -c "import ctypes; print(ctypes.CDLL('libcudnn.so.9').cudnnGetVersion())" 2>&1)
echo "cuDNN loaded: ${cudnn_version} from ${cudnn_lib}"

status=0
echo "== tests"
start=$(date +%s)
"$pkg/bin/test_cuda_backend" --gtest_output="xml:$out/gtest.xml" >"$out/test.log" 2>&1
test_rc=$?
test_s=$(( $(date +%s) - start ))
grep -E "FAILED|Failure" "$out/test.log" | head -60
[ "$test_rc" -ne 0 ] && status=1

san_rc=skipped
san_summary="not run"
race_rc=skipped
race_summary="not run"
san=/usr/local/cuda/bin/compute-sanitizer
if [ -x "$san" ]; then
  # memcheck over everything but the big reference-bound shapes and the timings; the
  # out-of-memory test is left out too, as its refused cudaMalloc counts as an error.
  echo "== compute-sanitizer memcheck"
  filter=${SANITIZE_FILTER:--*ResNet50*:*OutOfMemory*:*PastCudnnsLimits*}
  start=$(date +%s)
  timeout "${SANITIZE_TIMEOUT:-150}" "$san" --tool memcheck --error-exitcode 9 --print-limit 20 \
    "$pkg/bin/test_cuda_backend" --gtest_filter="$filter" >"$out/memcheck.log" 2>&1
  san_rc=$?
  san_s=$(( $(date +%s) - start ))
  san_summary=$(grep -E "ERROR SUMMARY" "$out/memcheck.log" | tail -1 | sed 's/=* *//')
  grep -E "Invalid|out of bounds|Program hit|ERROR SUMMARY|FAILED" "$out/memcheck.log" | head -30
  [ "$san_rc" -ne 0 ] && status=1
  # racecheck on strata's own kernels (shared-memory reductions).
  echo "== compute-sanitizer racecheck"
  race_filter=${RACE_FILTER:-CudaElementwise.*:CudaPool.GlobalAvgPool:CudaNormPoolLinear.BatchNorm*:CudaNormPoolLinear.Linear:CudaRuntime.Copy*}
  start=$(date +%s)
  timeout "${RACE_TIMEOUT:-90}" "$san" --tool racecheck --error-exitcode 9 --print-limit 20 \
    "$pkg/bin/test_cuda_backend" --gtest_filter="$race_filter" >"$out/racecheck.log" 2>&1
  race_rc=$?
  race_s=$(( $(date +%s) - start ))
  race_summary=$(grep -E "RACECHECK SUMMARY|ERROR SUMMARY" "$out/racecheck.log" | tail -1 | sed 's/=* *//')
  grep -E "Race|hazard|ERROR SUMMARY|RACECHECK SUMMARY|FAILED" "$out/racecheck.log" | head -20
  [ "$race_rc" -ne 0 ] && status=1
fi

echo "== timings (informational)"
grep -A10 "^layer1 3x3" "$out/test.log"

echo "== summary"
python3 - "$out/gtest.xml" <<'PY'
import sys, xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except Exception as e:
    print("no gtest xml:", e); sys.exit(0)
print(f"{'suite':<22}{'tests':>6}{'pass':>6}{'fail':>6}{'skip':>6}{'seconds':>9}")
for s in root.findall("testsuite"):
    n = int(s.get("tests", 0)); f = int(s.get("failures", 0)) + int(s.get("errors", 0))
    sk = int(s.get("skipped", 0)) + int(s.get("disabled", 0))
    print(f"{s.get('name'):<22}{n:>6}{n - f - sk:>6}{f:>6}{sk:>6}{float(s.get('time', 0)):>9.2f}")
    for c in s.findall("testcase"):
        if c.find("failure") is not None:
            print(f"  FAILED {s.get('name')}.{c.get('name')}")
PY
echo "tests: rc=${test_rc} (${test_s}s); cuDNN ${cudnn_version}"
echo "memcheck: rc=${san_rc} ${san_summary} (${san_s:-0}s); racecheck: rc=${race_rc} ${race_summary} (${race_s:-0}s)"
exit $status
