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
      zlib1g-dev libturbojpeg0-dev libpugixml-dev
      dataset-fashion-mnist
      gnuplot-nox)  # tools/study/make_page.py's plots
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
