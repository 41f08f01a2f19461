#!/usr/bin/env bash
# Installs what strata builds against on Debian 12 (as root, or through sudo).
# CUDA is not installed here: the cuda backend is built when /usr/local/cuda exists.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
pkgs=(build-essential cmake ninja-build pkg-config ccache
      libgtest-dev libgmock-dev libbenchmark-dev
      libopenblas-dev
      libeigen3-dev  # the eigen backend
      libdnnl-dev ocl-icd-opencl-dev opencl-headers  # Debian's oneDNN CMake package requires OpenCL
      libcli11-dev nlohmann-json3-dev
      libonnx-dev libprotobuf-dev python3-onnx  # ONNX export/import (onnx/), onnx.checker in ctest
      nettle-dev  # SHA-1 of ONNX external data checksums (onnx/external_data.cpp)
      libopenmpi-dev openmpi-bin  # mpirun jobs get NCCL's unique id over MPI (dist/mpi_bootstrap.cpp); its tests run mpirun
      zlib1g-dev libturbojpeg0-dev libpugixml-dev
      libjpeg62-turbo-dev  # libjpeg-turbo's libjpeg API: decoding only a crop's rows and columns (data/jpeg_region.cpp)
      libpcre2-dev  # GPT-2's pre-tokenizing pattern: Unicode letters, numbers, white space (data/gpt2_tokenizer.cpp)
      libstb-dev  # stb_image: PNG and PGM/PPM input of strata_infer (data/image_file.cpp)
      dataset-fashion-mnist
      curl  # tools/get-data.sh downloads the other presets' datasets
      python3 gnuplot-nox)  # the study's page generator and its plots, the tests that run them
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
