#!/usr/bin/env bash
# Installs Debian's LibTorch (libtorch-dev 1.13, CPU; about 26 MB of headers plus
# libtorch1.13 and its dependencies), which bench/libtorch/ compares strata with.
# Optional and kept out of tools/setup-deps.sh: without it CMake skips
# libtorch_cpu_bench and everything else builds as before.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
if ! dpkg-query -W -f='${Status}' libtorch-dev 2>/dev/null | grep -q "install ok installed"; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends libtorch-dev
fi
echo "LibTorch CMake package: $(dirname "$(dpkg -L libtorch-dev | grep -m1 'TorchConfig.cmake$')")"
