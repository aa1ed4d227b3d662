#!/usr/bin/env bash
# What NCCL said about the ina plugin in one 2-rank run of scripts/gpu-check.sh, read from
# everything each rank printed: NCCL writes its INFO lines to stdout unless NCCL_DEBUG_FILE is
# set (2.28.9 did, into rank*.out), warnings and our own messages go to stderr (rank*.log), so
# both are read and a count is 0 only when neither stream has the line.
#
#   nccl_log_counts DIR TAG    (sourced: scripts/gpu-check.sh; or run: nccl-log.sh DIR TAG)
#
# Reads DIR/${TAG}rank{0,1}.out and .log (missing files count as empty) and prints one
# "key value" line each:
#   loaded        "NET/Plugin: Loaded collnet plugin ina" lines (NCCL loaded our CollNet)
#   joined        "NET/ina : CollNet job" lines (the plugin joined the fabric's job)
#   connected     "Connected CollNet" lines
#   collnet_ops   TUNING lines of an AllReduce on CollNetDirect / CollNetChain
#   other_ops     TUNING lines of an AllReduce on any other algorithm
#   gdr_setups    "CollNet ... via COLLNET/<net>/GDRDMA" lines (NCCL handed the plugin GPU memory)
#   offered       "NET/ina : ... buffers: host and CUDA" lines (the plugin offered GPU buffers)
nccl_log_counts() {
  local dir=$1 tag=$2 f files=()
  for f in "$dir/${tag}rank0.out" "$dir/${tag}rank0.log" "$dir/${tag}rank1.out" \
    "$dir/${tag}rank1.log"; do
    [[ -f $f ]] && files+=("$f")
  done
  _count() { if [[ ${#files[@]} -eq 0 ]]; then echo 0; else cat "${files[@]}" | grep -cE "$1" || true; fi; }
  echo "loaded $(_count 'Loaded collnet plugin ina\b')"
  echo "joined $(_count 'NET/ina : CollNet job')"
  echo "connected $(_count 'Connected CollNet')"
  echo "collnet_ops $(_count 'AllReduce: .* Algo (CollNet(Direct|Chain)|COLLNET_(DIRECT|CHAIN))')"
  local other=0
  if [[ ${#files[@]} -gt 0 ]]; then
    other=$(cat "${files[@]}" | grep -E 'AllReduce: .* Algo ' | grep -cviE 'Algo CollNet|Algo COLLNET_' || true)
  fi
  echo "other_ops $other"
  echo "gdr_setups $(_count 'CollNet .* via COLLNET/[^ ]*/GDRDMA')"
  echo "offered $(_count 'NET/ina : .*buffers: host and CUDA')"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  nccl_log_counts "${1:?usage: nccl-log.sh DIR TAG}" "${2-}"
fi
