#!/usr/bin/env bash
# Synthesizes the RTL core with yosys (Debian's 0.23 works). Flows:
#   generic  synth up to the fine stage, then techmap/abc with the memories kept as $mem blocks (the
#            slot memory is reported as a memory instead of being mapped to flip-flops);
#   lut6     the same mapped to generic 6-input LUTs (abc -lut 6; $lut cells, memories kept);
#   xilinx   synth_xilinx for 7-series (LUT6, FDRE, RAMB36/RAMB18, LUTRAM, CARRY4, DSP48E1);
#   xcup     synth_xilinx -family xcup -uram for UltraScale+ (adds URAM288 for large memories).
# xilinx and xcup keep the blocks' hierarchy (ina_agg, ina_roce_rx, ina_ingress, ina_egress,
# ina_crc32c, ina_regs, ina_fifo; ina_slot_mem and ina_lane_adder are flattened into ina_agg) so that each block gets its
# own figures, then flatten for the whole core. Both report, per block and for the whole core, the
# cell counts (stat) and a timing proxy: the longest combinational path in cells, from yosys `ltp`
# on the netlist with its flip-flops and RAMs deleted (so every path runs register or RAM output
# -> register or RAM input, one pipeline stage), with the LUTs, carry cells, wide muxes and DSPs
# on it counted. LUTRAM (FIFO storage) is deleted too: a path leaving a FIFO's output starts after
# its LUTRAM read (one more LUT level, two with the F7/F8 muxes of a 64-deep FIFO).
# Usage: scripts/synth.sh [--max-k K] [build-dir (has gen/ina_proto_pkg.sv)] [PoolSlots] [flows...]
#   --max-k K: ina_core's MaxK (largest K per packet: a power of two, 64..8192; default 256, the RTL
#   default). The slot memory is PoolSlots x 2 x K/16 beats of 512 bits, the payload FIFO K/4 beats
#   and the output FIFO K/8 (ina_core's defaults).
#   flows: any of generic, lut6, xilinx, xcup (default generic lut6 xilinx). Logs, stat files and
#   the ltp paths go to <build-dir>/synth/ (<flow>-<PoolSlots>.* at MaxK 256, else
#   <flow>-<PoolSlots>-k<K>.*).
# Figures and the commands that made them: docs/rtl/synthesis.md. Since the core holds the AES-GCM
# blocks of keyed jobs (2026-12-06) the xilinx flow at PoolSlots 1024 takes about an hour and 13.6
# GB (403 k LUTs for the whole core: docs/rtl/synthesis.md, "The whole core with them"); the tables
# there before that section are from before the blocks.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
maxk=256
if [[ ${1:-} == --max-k ]]; then
  [[ $# -ge 2 && $2 =~ ^[0-9]+$ ]] || { echo "synth.sh: --max-k needs a number" >&2; exit 2; }
  maxk=$2
  shift 2
fi
(( maxk >= 64 && maxk <= 8192 && (maxk & (maxk - 1)) == 0 )) ||
  { echo "synth.sh: --max-k must be a power of two in 64..8192 (got $maxk)" >&2; exit 2; }
build=${1:-$root/build}
slots=${2:-1024}
shift $(( $# > 2 ? 2 : $# ))
flows=("$@")
[[ ${#flows[@]} -gt 0 ]] || flows=(generic lut6 xilinx)
pkg=$build/gen/ina_proto_pkg.sv
[[ -f $pkg ]] || { echo "synth.sh: $pkg missing; build ina_proto_gen first" >&2; exit 1; }
command -v yosys >/dev/null || { echo "synth.sh: yosys not installed (scripts/setup.sh)" >&2; exit 1; }
out=$build/synth
mkdir -p "$out"
cp "$pkg" "$out/ina_proto_pkg.sv"
srcs="$out/ina_proto_pkg.sv $root/rtl/pkg/ina_rtl_pkg.sv $root/rtl/pkg/ina_gcm_pkg.sv $root/rtl/lib/ina_fifo.sv \
$root/rtl/core/ina_aes128.sv $root/rtl/core/ina_gcm_key.sv $root/rtl/core/ina_gcm_keys.sv \
$root/rtl/core/ina_gcm_hash.sv $root/rtl/core/ina_gcm_check.sv $root/rtl/core/ina_gcm_ctr.sv \
$root/rtl/core/ina_crc32c.sv $root/rtl/core/ina_roce_rx.sv $root/rtl/core/ina_egress.sv $root/rtl/core/ina_ingress.sv $root/rtl/core/ina_slot_mem.sv $root/rtl/core/ina_lane_adder.sv \
$root/rtl/core/ina_regs.sv $root/rtl/core/ina_agg.sv $root/rtl/top/ina_core.sv"
blocks="*ina_agg* *ina_roce_rx* *ina_ingress* *ina_egress* *ina_crc32c* *ina_regs* *ina_fifo*"
# The timing proxy: flip-flops, RAMs (block, ultra, LUT), clock buffers deleted; the cells left are
# renamed by type so the printed path shows what it crosses.
proxy="delete t:FD* t:RAMB* t:URAM* t:RAM32* t:RAM64* t:RAM128* t:RAM256* t:SRL* t:BUFG*; \
rename -enumerate -pattern lut_% t:LUT*; rename -enumerate -pattern carry_% t:CARRY*; \
rename -enumerate -pattern muxf_% t:MUXF*; rename -enumerate -pattern dsp_% t:DSP*"
# Per block, the instances of other blocks inside it (ina_egress' FIFO, ina_core's blocks) are cut
# as well: each block's path runs between its own registers, RAMs and ports.
cut_blocks="delete t:\$paramod* t:ina_*"

# Per module of a stat file: LUTs, flip-flops, block RAM, UltraRAM, LUTRAM, carry, mux, DSP cells.
summarize_stat() {
  awk '
    function flush() {
      if (mod != "") printf "%-28s LUT %6d  FF %6d  RAMB36 %4d  RAMB18 %4d  URAM %4d  LUTRAM %4d  CARRY %4d  MUXF %4d  DSP %3d\n",
                              mod, c["lut"], c["ff"], c["b36"], c["b18"], c["uram"], c["lutram"], c["carry"], c["muxf"], c["dsp"]
    }
    /^=== / {
      flush(); delete c; mod = ""
      if (match($2, /ina_[a-z0-9_]+/)) mod = substr($2, RSTART, RLENGTH) ($2 ~ /Check=1.0/ ? "(Check=0)" : "") ($2 ~ /Icrc=1.1/ ? "(Icrc)" : "")
    }
    mod != "" && NF == 2 && $2 ~ /^[0-9]+$/ {
      t = $1; n = $2
      if (t ~ /^LUT[1-6]$/) c["lut"] += n
      else if (t ~ /^FD/) c["ff"] += n
      else if (t ~ /^RAMB36/) c["b36"] += n
      else if (t ~ /^RAMB18/) c["b18"] += n
      else if (t ~ /^URAM/) c["uram"] += n
      else if (t ~ /^RAM(32|64|128|256)/) c["lutram"] += n
      else if (t ~ /^CARRY/) c["carry"] += n
      else if (t ~ /^MUXF/) c["muxf"] += n
      else if (t ~ /^DSP/) c["dsp"] += n
    }
    END { flush() }' "$1"
}

# Sums an ltp log: per module, the path length and the LUT / carry / mux / DSP cells on it, and the
# wires the path starts and ends at.
summarize_ltp() {
  awk '
    function flush() {
      if (mod != "") printf "%-28s length %3d: LUT %2d, CARRY %2d, MUXF %d, DSP %d; %s -> %s\n",
                              mod, len, n["lut"], n["carry"], n["muxf"], n["dsp"], first, last
    }
    /Longest topological path in/ {
      flush(); mod = ""; len = $6; gsub(/[^0-9-]/, "", len)
      if (match($5, /ina_[a-z0-9_]+/)) mod = substr($5, RSTART, RLENGTH) ($5 ~ /Check=1.0/ ? "(Check=0)" : "") ($5 ~ /Icrc=1.1/ ? "(Icrc)" : "")
      delete n; first = ""; last = ""
    }
    /^ +[0-9]+: / {
      w = $2; if (first == "") first = w; last = w
      if (match($0, /via (lut|carry|muxf|dsp)_/)) { t = substr($0, RSTART + 4, RLENGTH - 5); n[t]++ }
    }
    END { flush() }' "$1"
}

for flow in "${flows[@]}"; do
  tag=$flow-$slots
  [[ $maxk == 256 ]] || tag=$tag-k$maxk
  post=""
  case $flow in
    generic)
      cmd="synth -top ina_core -flatten -run begin:fine; opt -fast -full; techmap; opt -fast; \
abc -fast; opt -fast" ;;
    lut6)
      cmd="synth -top ina_core -flatten -run begin:fine; opt -fast -full; techmap; opt -fast; \
abc -lut 6; opt -fast" ;;
    xilinx | xcup)
      fam=""
      [[ $flow == xcup ]] && fam="-family xcup -uram"
      cmd="hierarchy -top ina_core; setattr -mod -set keep_hierarchy 1 $blocks; \
synth_xilinx -top ina_core -flatten $fam; tee -q -o $out/$tag.blocks.stat stat; \
design -save mapped; $proxy; $cut_blocks; tee -q -o $out/$tag.blocks.ltp ltp $blocks; \
design -load mapped; setattr -mod -unset keep_hierarchy; flatten; opt_clean"
      post="; design -save flat; $proxy; tee -q -o $out/$tag.ltp ltp; design -load flat" ;;
    *) echo "synth.sh: unknown flow $flow (generic|lut6|xilinx|xcup)" >&2; exit 2 ;;
  esac
  rm -f "$out/$tag.ltp" "$out/$tag.blocks.ltp"
  start=$(date +%s)
  yosys -q -l "$out/$tag.log" -p "read_verilog -sv $srcs; chparam -set PoolSlots $slots -set MaxK $maxk ina_core; \
$cmd; tee -o $out/$tag.stat stat$post" >/dev/null
  echo "== $flow (PoolSlots=$slots, MaxK=$maxk, $(( $(date +%s) - start )) s) =="
  grep -E "Number of (wires|cells|wire bits)|LUT|\\\$lut|FD|RAM|DSP|CARRY|MUXF|\\\$_|\\\$mem" \
    "$out/$tag.stat" | awk 'NR <= 40'
  if [[ -f $out/$tag.ltp ]]; then
    echo "-- cells per block (each FIFO instance separately), then the whole core --"
    summarize_stat "$out/$tag.blocks.stat"
    summarize_stat "$out/$tag.stat"
    echo "-- longest combinational path (cells), per block, then the whole core --"
    summarize_ltp "$out/$tag.blocks.ltp"
    summarize_ltp "$out/$tag.ltp"
  fi
done
