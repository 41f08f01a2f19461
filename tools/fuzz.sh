#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang, -fsanitize=fuzzer,address,undefined) in
# build-fuzz/ and runs each for a given time, one after the other, one process each.
#
#   tools/fuzz.sh SECONDS [--merge] [TARGET...]     targets: idx cifar10 stl10 voc image safetensors onnx
#   tools/fuzz.sh 0 [TARGET...]                      build only
#
# Each target starts from fuzz/corpus/<target>/ (read only) and keeps what it finds in
# build-fuzz/fuzz-work/<target>/corpus/; crashes, leaks, timeouts and sanitizer reports
# land in build-fuzz/fuzz-work/<target>/artifacts/ and the libFuzzer log in .../log.txt.
# --merge adds the found inputs that reach new coverage to fuzz/corpus/<target>/
# (review and commit them; keep the corpus small). A crashing input belongs in the corpus
# as fuzz/corpus/<target>/regression_<what>, after the fix, so the ctest corpus replay
# (tests/reliability) keeps checking it.
#
# Environment: STRATA_FUZZ_JOBS (build parallelism, default 2), STRATA_FUZZ_RSS_MB
# (default 2048), STRATA_FUZZ_TIMEOUT (seconds per input, default 10), CXX (default
# clang++). Needs Debian's clang (apt-get install clang).
# Exit status: 0 when no target found anything, 1 otherwise, 2 on usage errors.
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(idx cifar10 stl10 voc image safetensors onnx)  # onnx: built with libonnx-dev
usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] || usage
seconds=$1
shift
[[ "$seconds" =~ ^[0-9]+$ ]] || usage
merge=0
targets=()
for a in "$@"; do
  case "$a" in
    --merge) merge=1 ;;
    -h|--help) usage ;;
    *)
      [[ " ${all_targets[*]} " == *" $a "* ]] || { echo "fuzz.sh: unknown target '$a' (${all_targets[*]})" >&2; exit 2; }
      targets+=("$a") ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")

build=build-fuzz
if [ ! -f "$build/build.ninja" ]; then
  CXX="${CXX:-clang++}" cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_FUZZ=ON \
    -DSTRATA_BUILD_TESTS=OFF -DSTRATA_BUILD_BENCH=OFF -DSTRATA_BUILD_EXAMPLES=OFF \
    -DSTRATA_WITH_CUDA=OFF -DSTRATA_WITH_ONEDNN=OFF -DSTRATA_WITH_OPENBLAS=OFF >/dev/null
fi
cmake --build "$build" -j "${STRATA_FUZZ_JOBS:-2}" --target $(printf 'fuzz_%s ' "${targets[@]}")
[ "$seconds" -gt 0 ] || exit 0  # libFuzzer reads -max_total_time=0 as "no limit"

# Leaks are findings too; UBSan reports abort so libFuzzer keeps the input.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

status=0
summary=()
for t in "${targets[@]}"; do
  work="$build/fuzz-work/$t"
  mkdir -p "$work/corpus" "$work/artifacts"
  dict=()
  [ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")
  echo "== fuzz_$t for ${seconds}s (log: $work/log.txt)"
  start=$(date +%s)
  rc=0
  "$build/bin/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb="${STRATA_FUZZ_RSS_MB:-2048}" \
    -timeout="${STRATA_FUZZ_TIMEOUT:-10}" -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
    "${dict[@]}" "$work/corpus" "fuzz/corpus/$t" >"$work/log.txt" 2>&1 || rc=$?
  took=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log.txt" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$work/log.txt" | tail -1 || true)
  found=$(find "$work/artifacts" -type f | wc -l)
  line="fuzz_$t: ${took}s, ${execs:-?} execs, ${cov:-cov: ?}, exit $rc, $found artifact(s)"
  summary+=("$line")
  echo "$line"
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
    status=1
    grep -m1 -A12 -E 'ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error|deadly signal' \
      "$work/log.txt" || tail -20 "$work/log.txt"
  fi
  if [ "$merge" -eq 1 ]; then
    # Edge coverage only (no hit-count buckets): a few new files per target, not hundreds.
    "$build/bin/fuzz_$t" -merge=1 -use_counters=0 "fuzz/corpus/$t" "$work/corpus" >"$work/merge.txt" 2>&1
    echo "   merged into fuzz/corpus/$t: $(grep -o '[0-9]* new files' "$work/merge.txt" || echo '?')"
  fi
done
echo "== summary"
printf '%s\n' "${summary[@]}"
exit $status
