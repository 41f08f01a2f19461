#!/usr/bin/env bash
# strata vs LibTorch on the CPU: libtorch_cpu_bench at 1 and 2 threads,
# each with glibc's default malloc and with malloc told to keep freed memory.
#
#   bench/libtorch/run.sh [build-dir] [out-dir] [libtorch_cpu_bench options...]
#   THREADS="1 2" MALLOCS="default keep" WAIT_POLICY=   the passes run (these are the defaults)
#   bench/libtorch/summarize.py out-dir/t[0-9]*_*.json   # the tables of docs/results/cpu_libtorch.md
#
# Threads are set before each process starts (the libraries read them once):
# OMP_NUM_THREADS for the OpenMP pool oneDNN, LibTorch and strata's onednn loops share,
# OPENBLAS_NUM_THREADS for OpenBLAS's own pthreads. OPENBLAS_CORETYPE is left as the
# environment has it.
#
# OMP_WAIT_POLICY: WAIT_POLICY=passive|active sets it; by default it is unset, libgomp's
# default, as a new user runs either library. Under passive every parallel region wakes a
# sleeping thread (39-90 us on a 2-vCPU VM against 0.7-8 us by default: cpu_peak), and
# LibTorch, with about three times strata's calls per ResNet-50 forward, paid more of it:
# its bf16 batch-1 forward took 42-43 ms under passive against 33-35 ms by default
# (docs/results/cpu_libtorch.md). passive is for a machine shared with other processes,
# where spinning threads steal their cores (docs/threads.md), not for this comparison.
#
# cpu_peak (the machine's FMA and bf16 peaks, read bandwidth, OpenMP region cost) runs
# before and after every pass: a pass whose peaks differ was shared with a neighbour.
#
# Why two allocator settings: LibTorch's eager ops and strata's virtual and static
# modes allocate every output anew through glibc's malloc, which returns large freed
# blocks to the kernel until its dynamic thresholds have grown, so an op page-faults
# its output in again (LibTorch's 3x3 conv took 46-127 ms instead of
# 11-17 ms in a fresh process on the 2-core VM). The GLIBC_TUNABLES below keep freed
# memory from the start (as jemalloc or tcmalloc would). strata's direct mode plans its
# buffers once and is not affected.
set -euo pipefail
build=${1:-build-cpu4}
out=${2:-$build/libtorch_bench}
shift $(( $# > 2 ? 2 : $# ))
bin=$build/bin/libtorch_cpu_bench
[ -x "$bin" ] || { echo "run.sh: $bin not built (needs libtorch-dev: tools/setup-libtorch.sh)" >&2; exit 1; }
mkdir -p "$out"
peak=$build/bin/cpu_peak
policy=()
[ -n "${WAIT_POLICY:-}" ] && policy=(OMP_WAIT_POLICY=$WAIT_POLICY)
keep=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296
for threads in ${THREADS:-1 2}; do
  for malloc in ${MALLOCS:-default keep}; do
    echo "== threads=$threads malloc=$malloc (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    tunables=()
    [ "$malloc" = keep ] && tunables=(GLIBC_TUNABLES=$keep)
    run=(env -u OMP_WAIT_POLICY OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads "${policy[@]}")
    [ -x "$peak" ] && "${run[@]}" "$peak" --json "$out/peak_t${threads}_${malloc}_before.json"
    "${run[@]}" "${tunables[@]}" "$bin" --json "$out/t${threads}_${malloc}.json" "$@"
    [ -x "$peak" ] && "${run[@]}" "$peak" --json "$out/peak_t${threads}_${malloc}_after.json"
  done
done
"$(dirname "$0")/summarize.py" "$out"/t[0-9]*_*.json
