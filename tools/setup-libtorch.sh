#!/usr/bin/env bash
# Installs Debian's LibTorch (libtorch-dev 1.13, CPU; about 26 MB of headers plus
# libtorch1.13 and its dependencies), which bench/libtorch/ compares strata with, and
# the same PyTorch for Python (python3-torch, python3-torchvision), the CPU peers of
# the LeNet table (tools/lenet-table.sh cpu, PYTHON=/usr/bin/python3).
# Optional and kept out of tools/setup-deps.sh: without it CMake skips
# libtorch_cpu_bench and everything else builds as before.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
missing=()
for pkg in libtorch-dev python3-torch python3-torchvision; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "LibTorch CMake package: $(dirname "$(dpkg -L libtorch-dev | grep -m1 'TorchConfig.cmake$')")"
