#!/usr/bin/env bash
# Builds and runs the tests under the sanitizers (CMakePresets.json), each in its own build dir:
#   asan: ASan + UBSan (build-asan/): the unit, prop and fuzz-replay tests and the loopback e2e
#         tests (the real ina-switchd / ina-bench processes, themselves built with ASan + UBSan).
#   tsan: ThreadSanitizer (build-tsan/): the communicator and switch tests (progress threads,
#         the op queue, ina-switchd's cores and reporter).
# Usage: scripts/sanitize.sh [asan|tsan]...   (default: both). Extra ctest args: CTEST_ARGS.
# Only the targets below are built (ccache as in scripts/build.sh); a test whose target is not in
# the list shows up in ctest as <target>_NOT_BUILT and is excluded here, so a new test runs under a
# sanitizer only once its target is added below.
#
# Not run under a sanitizer, and why:
#  - DPDK / memif (net_dpdk_port_test, e2e_dpdk_test, e2e_bench_memif_test, e2e_multicore_test):
#    DPDK's hugepage and shared-memory mappings and its own allocator defeat ASan's shadow; the
#    presets configure without DPDK (no pkg-config).
#  - Verilator models (label sim: rtl_*, sim_cosim_test, e2e_rtlsim_test): generated C++ of
#    the RTL, checked by lint and cosim in the plain build; not configured here.
#  - packaging_deb_test (label packaging): cpack needs every component built, which these dirs
#    do not build; script tests whose programs a dir does not build skip, saying so.
#  - qemu guests (label vm), GPU / RDMA hardware (label hw), the CUDA part (INA_GPU=OFF).
#  - host_install_test (installs and rebuilds consumers with the plain compiler), the torch tests
#    (a Python interpreter that is not instrumented), e2e_testbed_test (network namespaces),
#    nccl_plugin_abi_test (dlopens the plugin into an uninstrumented peer's loader path).
set -euo pipefail
cd "$(dirname "$0")/.."

export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ina-ccache}
# Paths relative to the checkout and no cwd in the hash: a cache filled in one checkout (or
# worktree) serves another at a different path.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
JOBS=${JOBS:-$(nproc)}

ASAN_TARGETS=(
  # unit
  base_parse_test base_tcp_frame_test proto_kat_test proto_roce_kat_test proto_crc32c_test
  proto_sec_test
  net_frame_test net_fault_test net_udp_port_test net_roce_port_test
  drv_job_table_test drv_pcie_bar_test drv_gpu_elem_test drv_gpu_map_test
  control_test dp_ref_rules_test dp_fast_kernels_test dp_fast_rules_test switchd_config_test
  switchd_handoff_test switchd_metrics_test switchd_leaf_test
  ina_bench_verify_test ina_bench_options_test ina_bench_coordinator_test
  host_udp_transport_test host_udp_gso_test host_transport_faults_test host_verbs_transport_test
  host_quant_test host_capi_config_test host_config_test host_rto_test host_slot_window_test
  host_counter_test host_membership_test
  # prop
  dp_fast_differential_test host_quant_prop_test
  # fuzz (corpus replays)
  dp_fuzz_replay_test proto_roce_fuzzer_replay_test host_result_fuzzer_replay_test host_join_fuzzer_replay_test
  dp_switch_fuzzer_replay_test net_roce_rx_fuzzer_replay_test switchd_leaf_fuzzer_replay_test
  # e2e on loopback
  switchd_e2e_test host_capi_test host_comm_test host_job_alloc_test host_join_switchd_test
  host_share_switchd_test host_core_lanes_switchd_test host_staged_test host_staged_quant_test host_gpudirect_test e2e_allreduce_test e2e_multihost_test
  tools_gloo_ring_test nccl_core_test host_exp_rewrite_switchd_test host_keyed_switchd_test
  # the programs the e2e tests start besides ina-switchd and ina-bench (keyed jobs' key install)
  ina-jobkey
)
ASAN_LABELS='unit|prop|fuzz|e2e'

TSAN_TARGETS=(
  host_comm_test host_capi_test host_job_alloc_test host_join_switchd_test nccl_core_test
  control_test switchd_e2e_test host_staged_test host_staged_quant_test host_gpudirect_test host_share_switchd_test switchd_handoff_test
  host_core_lanes_switchd_test
  switchd_metrics_test
)
TSAN_LABELS='unit|e2e'

# Tests that are never run here even when their target is built (see the list above).
EXCLUDE='_NOT_BUILT$'

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/lsan.supp}

run_one() {
  local preset=$1 dir=build-$1 labels targets
  if [ "$preset" = asan ]; then
    labels=$ASAN_LABELS
    targets=("${ASAN_TARGETS[@]}")
  else
    labels=$TSAN_LABELS
    targets=("${TSAN_TARGETS[@]}")
  fi
  local t0=$SECONDS
  mkdir -p "$dir"
  if ! cmake --preset "$preset" >"$dir/configure.log" 2>&1; then
    cat "$dir/configure.log"
    echo "sanitize.sh: $preset configure failed" >&2
    return 1
  fi
  # Only targets this configuration defines (a part that is skipped here has none).
  local have=() defined
  defined=$(cmake --build "$dir" --target help) || return 1
  for t in "${targets[@]}"; do
    if grep -q "^$t:" <<<"$defined"; then have+=("$t"); fi
  done
  echo "sanitize.sh: $preset: building ${#have[@]} targets in $dir"
  # (explicit checks: set -e does not apply inside a function called with ||)
  cmake --build "$dir" -j "$JOBS" --target "${have[@]}" || return 1
  local t1=$SECONDS
  echo "sanitize.sh: $preset: build $((t1 - t0)) s"
  local rc=0
  (cd "$dir" && ctest --output-on-failure -j "$JOBS" -L "$labels" -LE packaging -E "$EXCLUDE" ${CTEST_ARGS:-}) ||
    rc=$?
  echo "sanitize.sh: $preset: build $((t1 - t0)) s, tests $((SECONDS - t1)) s"
  return $rc
}

presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(asan tsan)
failed=()
for p in "${presets[@]}"; do
  case "$p" in
    asan | tsan) run_one "$p" || failed+=("$p") ;;
    *)
      echo "usage: scripts/sanitize.sh [asan|tsan]..." >&2
      exit 2
      ;;
  esac
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "sanitize.sh: failed under: ${failed[*]}" >&2
  exit 1
fi
