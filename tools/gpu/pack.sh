#!/usr/bin/env bash
# Builds strata for the H100 (sm_90) on this (GPU-less) machine and packs the build's
# bin/ and lib/ into .gpu/ (git-ignored) for a device run's `carry`. Run from anywhere.
#   BUILD_DIR  build folder (default build-gpu)
#   TARGETS    ninja targets (default: the cuda backend's tests)
#   CARRY_LIBS libraries of this machine that the packed programs load and the GPU machine
#              lacks, by name without lib/.so (e.g. "onnx_proto protobuf nettle" for strata::onnx's
#              programs): copied into .gpu/lib from where the packed programs resolve them
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build-gpu}
targets=${TARGETS:-test_cuda_backend}
# No MPI: the GPU machines have none (their jobs start under torchrun's variables or --nproc).
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DSTRATA_WITH_CUDA=ON -DSTRATA_WITH_ONEDNN=OFF -DSTRATA_WITH_OPENBLAS=OFF -DSTRATA_WITH_EIGEN=OFF \
  -DSTRATA_WITH_MPI=OFF >/dev/null
# shellcheck disable=SC2086
ninja -C "$build" $targets
rm -rf .gpu
mkdir -p .gpu
cp -a "$build/bin" .gpu/
# Libraries under their SONAME only (libstrata_core.so.0.1), as real files: a carried tree may drop links.
mkdir -p .gpu/lib
for f in "$build"/lib/*.so*; do
  case "$f" in
    *.so.[0-9]*.[0-9]*.[0-9]*) continue ;;
    *.so) [ -L "$f" ] && continue ;;
  esac
  cp -L "$f" .gpu/lib/
done
for lib in ${CARRY_LIBS:-}; do
  # awk reads to the end: leaving early would kill the ldd loop with SIGPIPE, a failure under pipefail.
  path=$(for b in .gpu/bin/*; do ldd "$b" 2>/dev/null; done | awk -v l="lib$lib.so" '!found && index($1, l) == 1 && $3 ~ /^\// {print $3; found = 1}')
  [ -n "$path" ] || { echo "pack: no packed program loads lib$lib.so" >&2; exit 1; }
  cp -L "$path" .gpu/lib/
done
bytes=$(du -sb .gpu | cut -f1)
limit=$((64 * 1024 * 1024))
echo "pack: .gpu holds $((bytes / 1024)) KiB (limit $((limit / 1024)) KiB for the whole carried tree)"
if [ "$bytes" -ge "$limit" ]; then
  echo "pack: .gpu is too large to carry" >&2
  exit 1
fi
