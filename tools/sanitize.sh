#!/usr/bin/env bash
# The whole CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer
# (STRATA_SANITIZE=ON: -fsanitize=address,undefined -fno-omit-frame-pointer
# -fno-sanitize-recover=undefined), in build-asan/, CUDA off, then ctest without the
# gpu label. Any sanitizer report fails the test that triggered it.
#
#   tools/sanitize.sh [extra ctest arguments, e.g. -R test_reliability]
#
# Excluded: consumer_find_package (it installs strata and builds an outside project
# against it; that project is not built with the sanitizer runtime, so it cannot link
# the instrumented libraries, and it tests packaging, not memory safety).
# System libraries (oneDNN, OpenBLAS, libgomp, zlib, libjpeg-turbo, pugixml) are not
# instrumented; ASan still sees their heap use through malloc. The suppressions in
# tools/sanitize.supp are for their known reports only, each with its reason.
# Environment: STRATA_SANITIZE_JOBS (build and ctest parallelism, default 2),
# STRATA_SANITIZE_BUILD (build directory, default build-asan), CXX (default g++).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${STRATA_SANITIZE_BUILD:-build-asan}"
jobs="${STRATA_SANITIZE_JOBS:-2}"
supp="$PWD/tools/sanitize.supp"

start=$(date +%s)
if [ ! -f "$build/build.ninja" ]; then
  # -O1: ASan's recommendation (readable stacks, still fast enough for the training tests).
  CXX="${CXX:-g++}" cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DSTRATA_SANITIZE=ON -DSTRATA_WITH_CUDA=OFF \
    -DSTRATA_BUILD_BENCH=OFF >/dev/null
fi
cmake --build "$build" -j "$jobs"
built=$(date +%s)

# allocator_may_return_null: strata turns a failed allocation into strata::Error (the
# tests ask for petabytes on purpose); by default ASan aborts instead of returning null.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$supp:print_suppressions=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
rc=0
ctest --test-dir "$build" --output-on-failure -j "$jobs" -LE gpu -E '^consumer_find_package$' "$@" || rc=$?
done_at=$(date +%s)
echo "sanitize.sh: build $((built - start)) s, tests $((done_at - built)) s, exit $rc"
exit $rc
