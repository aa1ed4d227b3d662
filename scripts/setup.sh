#!/usr/bin/env bash
# Installs every Debian package ina needs that is missing. Idempotent; needs root (or sudo).
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build ccache python3 pkg-config
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  libgloo-dev            # ring all-reduce baseline in ina-bench
  iproute2               # network namespaces for e2e tests
  verilator yosys        # RTL simulation and synthesis figures
  dpdk-dev libdpdk-dev   # kernel-bypass transport and switch ports (memif, af_packet, af_xdp)
  openmpi-bin libopenmpi-dev gnuplot-nox   # testbed: MPI baseline and plots
  python3-torch libtorch-dev pybind11-dev python3-pybind11 python3-sklearn  # PyTorch backend
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
