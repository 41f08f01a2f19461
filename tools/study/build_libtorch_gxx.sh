#!/usr/bin/env bash
# Fallback build of the LibTorch peer when CMake cannot configure against the torch
# package (no cmake, or its Torch config failing on the GPU machine): one g++ call
# with the include and library paths torch.utils.cpp_extension reports, the ABI flag
# torch was built with, and STUDY_WITH_CUDA when torch has CUDA. Usage:
#   tools/study/build_libtorch_gxx.sh OUTDIR      (from the repository root)
set -euo pipefail
outdir=${1:-build-libtorch}
mkdir -p "$outdir"
eval "$(python3 - <<'PY'
import torch
from torch.utils import cpp_extension as ce
cuda = bool(torch.version.cuda)
def paths(fn):
    try:  # torch >= 2.5 names the device; older ones take cuda=
        return fn(device_type="cuda" if cuda else "cpu")
    except TypeError:
        return fn(cuda=cuda)
print(f'inc="{" ".join("-I" + p for p in paths(ce.include_paths))} -I/usr/local/cuda/include"')
print(f'libdirs="{" ".join(paths(ce.library_paths))}"')
print(f"abi={int(torch.compiled_with_cxx11_abi())}")
print(f"cuda={int(cuda)}")
PY
)"
libs=(-lc10 -ltorch -ltorch_cpu)
version=$(sed -n 's/^project(strata VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)  # for --version
defs=(-D_GLIBCXX_USE_CXX11_ABI="$abi" -DSTRATA_VERSION="\"$version\"")
if [ "$cuda" = 1 ]; then
  libs+=(-ltorch_cuda -lc10_cuda -lcudart)
  defs+=(-DSTUDY_WITH_CUDA)
fi
ldirs=()
for d in $libdirs /usr/local/cuda/lib64; do ldirs+=(-L"$d" -Wl,-rpath,"$d"); done
# shellcheck disable=SC2086
g++ -std=c++17 -O2 "${defs[@]}" $inc bench/study/libtorch/study_libtorch.cpp bench/study/nvml.cpp \
  -o "$outdir/study_libtorch" "${ldirs[@]}" -Wl,--no-as-needed "${libs[@]}" -Wl,--as-needed -ldl -lpthread
echo "built $outdir/study_libtorch (abi $abi, cuda $cuda)"
