#!/usr/bin/env bash
# strata vs LibTorch on the CPU: libtorch_cpu_bench at 1 and 2 threads,
# each with glibc's default malloc and with malloc told to keep freed memory.
#
#   bench/libtorch/run.sh [build-dir] [out-dir] [libtorch_cpu_bench options...]
#   bench/libtorch/summarize.py out-dir/*.json      # the tables of docs/results/cpu_libtorch.md
#
# Threads are set before each process starts (the libraries read them once):
# OMP_NUM_THREADS for the OpenMP pool oneDNN, LibTorch and strata's onednn loops share,
# OPENBLAS_NUM_THREADS for OpenBLAS's own pthreads. OMP_WAIT_POLICY=passive, because
# spinning OpenMP threads on a shared 2-core machine steal the other process's core
# (see docs/threads.md). OPENBLAS_CORETYPE is left as the environment has it.
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
keep=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296
for threads in 1 2; do
  for malloc in default keep; do
    echo "== threads=$threads malloc=$malloc (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    tunables=()
    [ "$malloc" = keep ] && tunables=(GLIBC_TUNABLES=$keep)
    env OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads OMP_WAIT_POLICY=passive "${tunables[@]}" \
      "$bin" --json "$out/t${threads}_${malloc}.json" "$@"
  done
done
"$(dirname "$0")/summarize.py" "$out"/t*_*.json
