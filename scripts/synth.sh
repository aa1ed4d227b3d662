#!/usr/bin/env bash
# Synthesizes the RTL core with yosys: generic (synth) and Xilinx (synth_xilinx) cell counts.
# Usage: scripts/synth.sh [build-dir (holds gen/ina_proto_pkg.sv)] [PoolSlots]
# Prints the stat summaries; logs go to <build-dir>/synth/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
slots=${2:-64}
pkg=$build/gen/ina_proto_pkg.sv
[[ -f $pkg ]] || { echo "synth.sh: $pkg missing; build ina_proto_gen first" >&2; exit 1; }
out=$build/synth
mkdir -p "$out"
srcs="$pkg $root/rtl/pkg/ina_rtl_pkg.sv $root/rtl/lib/ina_fifo.sv $root/rtl/core/ina_ingress.sv \
$root/rtl/core/ina_slot_mem.sv $root/rtl/core/ina_lane_adder.sv $root/rtl/core/ina_regs.sv \
$root/rtl/core/ina_agg.sv $root/rtl/top/ina_core.sv"
for flow in generic xilinx; do
  if [[ $flow == generic ]]; then cmd="synth -top ina_core"; else cmd="synth_xilinx -top ina_core"; fi
  yosys -q -l "$out/$flow.log" -p "read_verilog -sv $srcs; chparam -set PoolSlots $slots ina_core; \
$cmd; tee -o $out/$flow.stat stat" >/dev/null
  echo "== $flow (PoolSlots=$slots) =="
  grep -E "Number of cells|LUT|FD|RAMB|DSP|CARRY|\\\$_" "$out/$flow.stat" | head -40
done
