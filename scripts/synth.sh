#!/usr/bin/env bash
# Synthesizes the RTL core with yosys (Debian's 0.23 works): a generic flow (synth up to the fine
# stage, then techmap/abc with the memories kept as $mem blocks, so the 1 Mbit slot memory is
# reported as a memory instead of being mapped to a million flip-flops), the same flow mapped to
# generic 6-input LUTs (lut6: abc -lut 6; $lut cells, memories still kept as $mem blocks) and
# synth_xilinx (LUT6, FDRE, RAMB36/RAMB18, LUTRAM, CARRY4 counts).
# Usage: scripts/synth.sh [build-dir (holds gen/ina_proto_pkg.sv)] [PoolSlots] [flows...]
#   flows: any of generic, lut6, xilinx (default all three). Logs and stat files go to
#   <build-dir>/synth/.
# Figures and the commands that made them: docs/rtl/synthesis.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
slots=${2:-64}
shift $(( $# > 2 ? 2 : $# ))
flows=("$@")
[[ ${#flows[@]} -gt 0 ]] || flows=(generic lut6 xilinx)
pkg=$build/gen/ina_proto_pkg.sv
[[ -f $pkg ]] || { echo "synth.sh: $pkg missing; build ina_proto_gen first" >&2; exit 1; }
command -v yosys >/dev/null || { echo "synth.sh: yosys not installed (scripts/setup.sh)" >&2; exit 1; }
out=$build/synth
mkdir -p "$out"
cp "$pkg" "$out/ina_proto_pkg.sv"
srcs="$out/ina_proto_pkg.sv $root/rtl/pkg/ina_rtl_pkg.sv $root/rtl/lib/ina_fifo.sv \
$root/rtl/core/ina_crc32c.sv $root/rtl/core/ina_egress.sv $root/rtl/core/ina_ingress.sv $root/rtl/core/ina_slot_mem.sv $root/rtl/core/ina_lane_adder.sv \
$root/rtl/core/ina_regs.sv $root/rtl/core/ina_agg.sv $root/rtl/top/ina_core.sv"
for flow in "${flows[@]}"; do
  case $flow in
    generic)
      cmd="synth -top ina_core -flatten -run begin:fine; opt -fast -full; techmap; opt -fast; \
abc -fast; opt -fast" ;;
    lut6)
      cmd="synth -top ina_core -flatten -run begin:fine; opt -fast -full; techmap; opt -fast; \
abc -lut 6; opt -fast" ;;
    xilinx) cmd="synth_xilinx -top ina_core -flatten" ;;
    *) echo "synth.sh: unknown flow $flow (generic|lut6|xilinx)" >&2; exit 2 ;;
  esac
  start=$(date +%s)
  yosys -q -l "$out/$flow.log" -p "read_verilog -sv $srcs; chparam -set PoolSlots $slots ina_core; \
$cmd; tee -o $out/$flow.stat stat" >/dev/null
  echo "== $flow (PoolSlots=$slots, $(( $(date +%s) - start )) s) =="
  grep -E "Number of (wires|cells|wire bits)|LUT|\\\$lut|FD|RAM|DSP|CARRY|MUXF|\\\$_|\\\$mem" \
    "$out/$flow.stat" | head -40
done
