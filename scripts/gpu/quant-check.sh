#!/usr/bin/env bash
# GPU quantization check: builds drivers/gpu for the GPU present, runs its tests (the `hw` kernel
# tests against the CPU kernels, plus the unit tests of the shared arithmetic and the API), runs
# ina-gpu-quant-bench, and prints one JSON line on stdout:
#   {"check":"gpu_quant","ok":true|false,"tests":{"<binary>":{"tests":N,"failures":F,
#    "skipped":S,"seconds":T},...},"bench":{...the bench's JSON line...} or {"skipped":"why"}}
# Progress goes to stderr. Exit status 0 when every test passed (or skipped for want of a
# device) and the bench ran or skipped for want of a device; 1 otherwise.
# The same tests run under ctest as `ctest --test-dir build -L hw -R GpuQuantTest` (hw) and
# `-R 'GpuElem|GpuMap|GpuApi'` (unit); this script runs the binaries directly for their JSON
# reports (and one process per binary rather than per test).
#
# Environment: INA_BUILD_DIR (default <repo>/build), INA_CUDA_ARCHS (CMAKE_CUDA_ARCHITECTURES;
# default: CMake's "80;90" plus the compute capability nvidia-smi reports, if any),
# INA_BENCH_ARGS (extra ina-gpu-quant-bench arguments, e.g. "--elems 67108864").
# Sourcing this file defines the functions without running main (for scripts/gpu-check.sh).
set -euo pipefail

QC_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
QC_BUILD="${INA_BUILD_DIR:-$QC_ROOT/build}"
# With them the memory domain's tests (the CUDA domain's no-device unit test and its hw test: a
# device all-reduce through the in-process fabric, bit for bit against the host path).
# And the GPUDirect side: the payload CRC arithmetic (unit) and kernel (hw), the CUDA domain's
# NIC buffers (hw: skips where the device exports no dma-buf). And the domain's kernels while
# another kernel waits for them (lazy loading: the NCCL GPU-buffer hang; docs/nccl.md).
QC_TESTS=(drv_gpu_elem_test drv_gpu_map_test drv_gpu_api_test drv_gpu_quant_hw_test
  drv_gpu_domain_test drv_gpu_domain_hw_test drv_gpu_crc_elem_test drv_gpu_crc_hw_test
  drv_gpu_nic_ranges_test drv_gpu_nicbuf_hw_test drv_gpu_gpudirect_hw_test
  drv_gpu_lazy_load_hw_test)

qc_log() { echo "quant-check: $*" >&2; }

# The device's compute capability as CMake spells it ("90"), or nothing without nvidia-smi.
qc_detect_arch() {
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .'
}

qc_archs() {
  if [ -n "${INA_CUDA_ARCHS:-}" ]; then
    echo "$INA_CUDA_ARCHS"
    return
  fi
  local archs="80;90" cc
  cc="$(qc_detect_arch)"
  case ";$archs;" in
    *";$cc;"*) ;;
    *) [ -n "$cc" ] && archs="$archs;$cc" ;;
  esac
  echo "$archs"
}

qc_configure() {
  local archs
  archs="$(qc_archs)"
  qc_log "configuring $QC_BUILD (CUDA architectures $archs)"
  cmake -S "$QC_ROOT" -B "$QC_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CUDA_ARCHITECTURES=$archs" >&2
}

qc_build() {
  qc_log "building ${QC_TESTS[*]} ina-gpu-quant-bench"
  if ! grep -q '^CMAKE_CUDA_COMPILER:' "$QC_BUILD/CMakeCache.txt" 2>/dev/null ||
    grep -q '^CMAKE_CUDA_COMPILER:.*NOTFOUND' "$QC_BUILD/CMakeCache.txt"; then
    qc_log "no CUDA compiler in this build: only the host-compiled unit tests build"
    QC_TESTS=(drv_gpu_elem_test drv_gpu_map_test drv_gpu_crc_elem_test drv_gpu_nic_ranges_test)
    cmake --build "$QC_BUILD" -j"$(nproc)" --target "${QC_TESTS[@]}" >&2
    return
  fi
  cmake --build "$QC_BUILD" -j"$(nproc)" --target "${QC_TESTS[@]}" ina-gpu-quant-bench >&2
}

# Runs one gtest binary with a JSON report; prints {"tests":N,"failures":F,"skipped":S,...}.
qc_run_test() {
  local name="$1" report rc=0
  report="$(mktemp --suffix=.json)"
  qc_log "running $name"
  timeout 240 "$QC_BUILD/bin/$name" "--gtest_output=json:$report" >&2 || rc=$?
  python3 - "$report" "$rc" <<'EOF'
import json, sys
path, rc = sys.argv[1], int(sys.argv[2])
try:
    r = json.load(open(path))
except (OSError, ValueError):
    print(json.dumps({"tests": 0, "failures": 1, "skipped": 0, "exit": rc,
                      "error": "no gtest report (crash or timeout)"}))
    sys.exit(0)
skipped = sum(1 for s in r.get("testsuites", []) for t in s.get("testsuite", [])
              if t.get("result") == "SKIPPED")
out = {"tests": r.get("tests", 0), "failures": r.get("failures", 0) + r.get("errors", 0),
       "skipped": skipped, "seconds": float(str(r.get("time", "0s")).rstrip("s") or 0)}
if rc != 0:
    out["exit"] = rc
    out["failures"] = max(out["failures"], 1)
print(json.dumps(out))
EOF
  rm -f "$report"
}

qc_run_tests() {
  local first=1 t
  printf '{'
  for t in "${QC_TESTS[@]}"; do
    [ $first -eq 1 ] || printf ','
    first=0
    printf '"%s":%s' "$t" "$(qc_run_test "$t")"
  done
  printf '}'
}

# The bench's JSON line, or {"skipped":...} / {"error":...}.
qc_run_bench() {
  local bin="$QC_BUILD/bin/ina-gpu-quant-bench" out err rc=0
  if [ ! -x "$bin" ]; then
    echo '{"skipped":"ina-gpu-quant-bench not built (no CUDA compiler)"}'
    return
  fi
  err="$(mktemp)"
  qc_log "running ina-gpu-quant-bench ${INA_BENCH_ARGS:-}"
  # shellcheck disable=SC2086  # INA_BENCH_ARGS is a word list on purpose
  out="$(timeout 240 "$bin" ${INA_BENCH_ARGS:-} 2>"$err")" || rc=$?
  cat "$err" >&2
  if [ "$rc" -eq 0 ] && [ -n "$out" ]; then
    echo "$out"
  elif [ "$rc" -eq 77 ]; then
    python3 -c 'import json,sys; print(json.dumps({"skipped": sys.argv[1].strip()}))' "$(cat "$err")"
  else
    python3 -c 'import json,sys; print(json.dumps({"error": sys.argv[1].strip(), "exit": int(sys.argv[2])}))' \
      "$(tail -3 "$err")" "$rc"
  fi
  rm -f "$err"
}

qc_main() {
  local tests bench
  if [ ! -f "$QC_BUILD/build.ninja" ] || [ -n "${INA_CUDA_ARCHS:-}" ] || [ -n "$(qc_detect_arch)" ]; then
    qc_configure
  fi
  qc_build
  tests="$(qc_run_tests)"
  bench="$(qc_run_bench)"
  python3 - "$tests" "$bench" <<'EOF'
import json, sys
tests, bench = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ok = all(t["failures"] == 0 for t in tests.values()) and "error" not in bench
print(json.dumps({"check": "gpu_quant", "ok": ok, "tests": tests, "bench": bench},
                 separators=(",", ":")))
sys.exit(0 if ok else 1)
EOF
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  qc_main "$@"
fi
