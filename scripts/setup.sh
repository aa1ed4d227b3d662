#!/usr/bin/env bash
# Installs every Debian package ina needs that is missing. Idempotent; needs root (or sudo).
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build ccache python3 pkg-config clang-format
  clang-14 libclang-rt-14-dev   # libFuzzer targets (scripts/fuzz.sh, the `fuzz` preset)
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  libgloo-dev            # ring all-reduce baseline in ina-bench
  iproute2               # network namespaces for e2e tests
  verilator yosys        # RTL simulation and synthesis figures
  libssl-dev             # libcrypto's AES-GCM: authenticated jobs (ina::sec, docs/security.md)
  zlib1g-dev             # FST waveforms of the verilated core (Verilator's fstapi needs zlib)
  dpdk-dev libdpdk-dev   # kernel-bypass transport and switch ports (memif, af_packet, af_xdp)
  openmpi-bin libopenmpi-dev   # testbed: the MPI baseline
  gnuplot-nox            # every benchmark script's PNG (scripts/plot/plot.py; skipped without it)
  libsimgrid-dev         # ina-scale-sim: flow-level model of 4 to 1024+ workers (docs/scale.md)
  python3-torch libtorch-dev pybind11-dev python3-pybind11 python3-sklearn  # PyTorch backend
  python3-prometheus-client  # Prometheus' own text-format parser: the metrics tests read scrapes with it
  # RDMA: libibverbs for the verbs transport; qemu + busybox-static boot Debian's kernel (fetched
  # by scripts/vm/run-vm.sh with apt-get download, never installed) for the soft-RoCE guest tests
  # (label vm), where the rdma tools and perftest (ib_send_bw, the ceiling figure) run.
  libibverbs-dev rdma-core ibverbs-providers ibverbs-utils perftest qemu-system-x86 busybox-static
  # tshark runs the generated Wireshark dissector (build/gen/ina.lua) over captures in its test
  # (tests/proto/dissector_test.py); wireshark-common's setuid-dumpcap question takes its default
  # ("no") under DEBIAN_FRONTEND=noninteractive below.
  tshark
)
# CUDA (drivers/gpu) is not installed here. These machines carry NVIDIA's CUDA 13 toolkit in
# /usr/local/cuda (not a Debian package), which CMake finds. A machine without a CUDA compiler
# builds everything else: CMake prints "ina gpu: skipped: ..." and the GPU tests and bench are not
# built (the shared-arithmetic unit test still is). Debian's nvidia-cuda-toolkit is not an
# alternative: it is in the non-free component, several gigabytes (CI has a time budget), and
# bookworm's is CUDA 11.8, whose nvcc has no C++20 (drivers/gpu needs CUDA >= 12 and skips older
# ones). To build the GPU part elsewhere, install NVIDIA's toolkit >= 12 and put nvcc on PATH or
# in CUDACXX; see docs/gpu.md.

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
# DEBIAN_FRONTEND through env, so that sudo (which resets the environment) passes it on: no
# debconf prompts (wireshark-common's setuid question among them).
APT=(env DEBIAN_FRONTEND=noninteractive apt-get)
[ "$(id -u)" -eq 0 ] || APT=(sudo "${APT[@]}")
echo "setup: apt-get update"
"${APT[@]}" update -qq
# A fresh machine fetches about a GB here: apt's own lines (Get:, Unpacking, Setting up) are the
# progress; -q keeps them to one line each.
echo "setup: apt-get install of ${#missing[@]} packages and what they need (minutes on a fresh machine)"
"${APT[@]}" install -y -q --no-install-recommends "${missing[@]}"
echo "setup: done"
