#!/usr/bin/env bash
# Checks that need a GPU, for a GPU machine: one prepared run (build for the GPU present, the hw
# checks, one JSON line), meant to take under 5 minutes. On a machine without a GPU it fails at
# once and loudly (exit 3; the JSON line says "gpu": false, "skipped": true, "passed": false), so
# a GPU machine that lost its GPU is not mistaken for a pass; the hw ctest reads "skipped".
#
#   scripts/gpu-check.sh [--count N] [--iters I] [--no-build] [--build-dir DIR] [--out DIR]
#
# check_nccl_collnet: NCCL all-reduce (float32 and int32 sums, --count elements, --iters times)
#   through libnccl-net-ina.so with 2 ranks on this machine's GPUs (both on GPU 0 when there is
#   only one). NCCL_HOSTID differs per rank, so NCCL sees two nodes and CollNet applies
#   (NCCL_COLLNET_ENABLE=1, NCCL_NET_PLUGIN=ina, NCCL_NET=ina, INA_SWITCH to an ina-switchd this
#   script starts on loopback). From NCCL_DEBUG=INFO, in whatever each rank printed (stdout and
#   stderr: scripts/gpu/nccl-log.sh), it reads whether the ina CollNet plugin loaded, connected
#   and carried all-reduces (NCCL_TUNING "Algo CollNet..." lines).
#   ina-nccl-allreduce checks the results against the host-computed sums (exact by construction).
#   Run twice: with host buffers (INA_NCCL_CUDA=0: NCCL copies GPU<->host around CollNet; fields
#   nccl_*, collnet_*, nccl_plugin_ok) and with GPU buffers (the plugin advertises NCCL_PTR_CUDA;
#   NCCL_NET_GDR_LEVEL=SYS because the fabric device has no PCI path; fields nccl_gpubuf_*:
#   whether the plugin offered GPU buffers, whether NCCL set up CollNet with /GDRDMA, i.e. handed
#   the plugin GPU memory, and the results; nccl_gpubuf_ok is null, with NCCL's reason in
#   "not_run", where NCCL keeps host buffers on this machine).
# check_torch_cuda: the PyTorch backend on CUDA tensors (tests/plugins/torch/test_cuda.py,
#   test_cuda_allreduce_matches_cpu: 2 processes, float32/int32/bfloat16 CUDA tensors through the
#   fabric, bit-identical to the CPU path). Needs a torch with CUDA: Debian's python3-torch is
#   CPU-only, and then torch_cuda_ok is null with the reason (listed in "not_run").
# check_gpu_allreduce: 2 ina-gpu-allreduce ranks on GPU 0 through that ina-switchd, each checking
#   its device result bit for bit against the host call; run twice: both ranks quantizing on the
#   GPU (gpu_allreduce_*), and rank 1 on the copying path (--copy-float: float32 staged and
#   quantized on the CPU; gpu_allreduce_mixed_*), whose packets must equal the GPU path's.
# check_gpu_quant: see the function below.
# check_gpu_nicbuf: the CUDA domain's GPUDirect side, see the function below; also the whole send
#   path on the GPU with a stand-in NIC (gpudirect_pipeline_ok, gpudirect_send_path).
# --build-dir: where the binaries are (default build/; the hw ctest passes its own with
# --no-build). Ends with one JSON line; exit 0 when every check ran and passed (CollNet used and results
# right). Each check is one function that adds its fields to that line (later issues add more).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/gpu/nccl-log.sh
. scripts/gpu/nccl-log.sh

COUNT=1048576
ITERS=3
BUILD=1
BUILD_DIR=build
OUT=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --count) COUNT=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
FIELDS=()   # '"key": value' pieces of the final JSON line
FAILED=0
SW_PID=""
NOT_RUN=()  # checks that could not run here, with the reason
T_START=$(date +%s.%N)

json_add() { FIELDS+=("\"$1\": $2"); }
json_str() { printf '"%s"' "$(printf '%s' "$1" | tr -d '\000-\037' | sed 's/\\/\\\\/g; s/"/\\"/g')"; }
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'; }
emit_json() { local IFS=','; echo "{${FIELDS[*]}}" | sed 's/,"/, "/g'; }
fail() { echo "gpu-check: $*" >&2; FAILED=1; }
cleanup() {
  if [[ -n $SW_PID ]]; then kill "$SW_PID" 2>/dev/null || true; wait "$SW_PID" 2>/dev/null || true; fi
  if [[ $KEEP_OUT == 0 ]]; then rm -rf "$OUT"; fi
}

check_gpu() {
  local n=0
  if command -v nvidia-smi >/dev/null 2>&1; then
    n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  fi
  if [[ $n -lt 1 ]]; then
    local why="no GPU: nvidia-smi lists none"
    command -v nvidia-smi >/dev/null 2>&1 || why="no GPU: nvidia-smi not found (no NVIDIA driver)"
    echo "gpu-check: FAILED: $why; this script runs the checks that need a GPU, on a GPU machine" >&2
    json_add gpu false
    json_add skipped true
    json_add reason "$(json_str "$why")"
    json_add passed false
    emit_json
    exit 3
  fi
  json_add gpu true
  json_add gpus "$n"
}

build() {
  [[ $BUILD == 1 ]] || return 0
  export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ina-ccache}
  # INA_TORCH_PYTHON: the Python whose torch the backend is built against and tested with.
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
    ${INA_TORCH_PYTHON:+-DINA_TORCH_PYTHON="$INA_TORCH_PYTHON"} >/dev/null
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target ina-switchd nccl-net-ina ina-nccl-allreduce
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target ina-gpu-allreduce ||
    echo "gpu-check: ina-gpu-allreduce did not build (check_gpu_allreduce will fail)" >&2
  # The PyTorch backend exists only where CMake found torch (its own message says so).
  if grep -q '^ina_torch_ext:' <(cmake --build "$BUILD_DIR" --target help 2>/dev/null); then
    cmake --build "$BUILD_DIR" -j "$(nproc)" --target ina_torch_ext ||
      echo "gpu-check: ina_torch_ext did not build (check_torch_cuda will fail)" >&2
  fi
}

start_switch() {
  "$BUILD_DIR/bin/ina-switchd" --port 0 --bind 127.0.0.1 >"$OUT/switchd.log" 2>&1 &
  SW_PID=$!
  local _
  for _ in $(seq 100); do
    if grep -q 'ina-switchd listening on' "$OUT/switchd.log"; then break; fi
    sleep 0.1
  done
  SW_PORT=$(sed -n 's/^ina-switchd listening on .*:\([0-9]*\)$/\1/p' "$OUT/switchd.log")
  if [[ -z $SW_PORT ]]; then
    fail "ina-switchd did not start: $(tail -3 "$OUT/switchd.log")"
    return 1
  fi
}

# Two NCCL ranks, two "nodes", one all-reduce driver each. $1: "host" (INA_NCCL_CUDA=0, the
# original fields) or "gpubuf" (GPU buffers offered to NCCL; fields prefixed nccl_gpubuf_).
check_nccl_collnet() {
  local mode=${1:-host} bin=$BUILD_DIR/bin/ina-nccl-allreduce
  local p="" tag=""
  local mode_env=(INA_NCCL_CUDA=0)
  if [[ $mode == gpubuf ]]; then
    p=nccl_gpubuf_ tag=gpubuf_
    mode_env=(INA_NCCL_CUDA=1 NCCL_NET_GDR_LEVEL=SYS NCCL_NET_GDR_READ=1)
  fi
  if [[ ! -x $bin ]]; then
    fail "$bin not built (CUDA toolkit or NCCL not found by CMake)"
    json_add "${p:-nccl_}result_ok" false
    return 0
  fi
  local r pids=() t0 t1
  t0=$(date +%s.%N)
  rm -f "$OUT/nccl.id"
  for r in 0 1; do
    env LD_LIBRARY_PATH="$(realpath "$BUILD_DIR")/lib:$CUDA_HOME/lib64:$CUDA_HOME/lib:${LD_LIBRARY_PATH:-}" \
      NCCL_NET_PLUGIN=ina NCCL_NET=ina NCCL_COLLNET_ENABLE=1 \
      NCCL_HOSTID="ina-gpu-check-node$r" NCCL_SOCKET_IFNAME=lo \
      NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,TUNING,ENV \
      INA_SWITCH="127.0.0.1:$SW_PORT" "${mode_env[@]}" \
      timeout 120 "$bin" --rank "$r" --nranks 2 --id-file "$OUT/nccl.id" \
      --count "$COUNT" --iters "$ITERS" >"$OUT/${tag}rank$r.out" 2>"$OUT/${tag}rank$r.log" &
    pids+=($!)
  done
  local rc0=0 rc1=0
  wait "${pids[0]}" || rc0=$?
  wait "${pids[1]}" || rc1=$?
  t1=$(date +%s.%N)
  # Everything each rank printed: NCCL's INFO lines go to stdout (rank*.out), ours and NCCL's
  # warnings to stderr (rank*.log); scripts/gpu/nccl-log.sh reads both.
  local logs=("$OUT/${tag}rank0.out" "$OUT/${tag}rank0.log" "$OUT/${tag}rank1.out"
              "$OUT/${tag}rank1.log")
  local loaded joined connected collnet_ops other_ops gdr_setups offered key value
  while read -r key value; do
    printf -v "$key" '%s' "$value"
  done < <(nccl_log_counts "$OUT" "$tag")
  local float_ok=true int_ok=true
  for r in 0 1; do
    grep -q '"float_ok":true' "$OUT/${tag}rank$r.out" 2>/dev/null || float_ok=false
    grep -q '"int_ok":true' "$OUT/${tag}rank$r.out" 2>/dev/null || int_ok=false
  done
  local used=false ok=false
  [[ $connected -gt 0 && $collnet_ops -gt 0 ]] && used=true
  [[ $rc0 == 0 && $rc1 == 0 && $float_ok == true && $int_ok == true ]] && ok=true
  [[ $ok == true ]] || fail "NCCL all-reduce ($mode buffers) failed (exit $rc0/$rc1): $(tail -q -n 2 "${logs[@]}" | tr '\n' ' ')"
  [[ $used == true ]] || fail "CollNet ($mode buffers) was not used (plugin loaded $loaded, ina nodes joined $joined, connected $connected, collnet all-reduces $collnet_ops, other $other_ops)"
  # GPU buffers: the plugin must have offered them (a GPU is here, so its CUDA path is available
  # unless it was built without one: a failure). Whether NCCL then takes them is NCCL's call on
  # this machine (GPUDirect RDMA support of the GPU and driver): without a /GDRDMA line the
  # GPU-buffer result is null, with NCCL's own words in not_run, not a failure.
  local nccl_says="" gpubuf_ok=false
  if [[ $mode == gpubuf ]]; then
    nccl_says=$(cat "${logs[@]}" | grep -oE 'GPU Direct RDMA (Enabled|Disabled)[^"]*' | sort -u | head -3 | tr '\n' ';' || true)
    if [[ $offered -eq 0 ]]; then
      fail "the plugin did not offer GPU buffers on a GPU machine: $(grep -h 'NET/ina : .*buffers:' "${logs[@]}" | head -1)"
    elif [[ $gdr_setups -eq 0 ]]; then
      NOT_RUN+=("nccl_gpubuf: NCCL kept host buffers (no CollNet .../GDRDMA line): ${nccl_says:-no GPU Direct RDMA line}")
      gpubuf_ok=null
    elif [[ $ok == true && $used == true ]]; then
      gpubuf_ok=true
    fi
  fi
  local secs
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  if [[ $mode == host ]]; then
    json_add nccl_plugin_loaded "$([[ $loaded -gt 0 ]] && echo true || echo false)"
    json_add ina_nodes_joined "$joined"
    json_add collnet_connected "$([[ $connected -gt 0 ]] && echo true || echo false)"
    json_add collnet_used "$used"
    json_add collnet_allreduce_ops "$collnet_ops"
    json_add other_allreduce_ops "$other_ops"
    json_add nccl_float_ok "$float_ok"
    json_add nccl_int_ok "$int_ok"
    json_add nccl_result_ok "$ok"
    json_add nccl_plugin_ok "$([[ $ok == true && $used == true ]] && echo true || echo false)"
    json_add nccl_count "$COUNT"
    json_add nccl_iters "$ITERS"
    json_add nccl_seconds "$secs"
  else
    json_add "${p}offered" "$([[ $offered -gt 0 ]] && echo true || echo false)"
    json_add "${p}nccl_says" "$(json_str "$nccl_says")"
    json_add "${p}collnet_used" "$used"
    json_add "${p}gdrdma_setups" "$gdr_setups"
    json_add "${p}collnet_allreduce_ops" "$collnet_ops"
    json_add "${p}result_ok" "$ok"
    json_add "${p}ok" "$gpubuf_ok"
    json_add "${p}seconds" "$secs"
  fi
}

# check_torch_cuda: see the header. Skips (torch_cuda_ok null, the reason in not_run) where
# torch has no CUDA or the backend is not built; fails where the test ran and failed.
check_torch_cuda() {
  local py=${INA_TORCH_PYTHON:-/usr/bin/python3} t0 rc=0 why=""
  t0=$(date +%s.%N)
  if [[ ! -d $BUILD_DIR/python/ina_torch ]]; then
    why="the PyTorch backend is not built (CMake found no torch/pybind11)"
  elif ! "$py" -c 'import torch' 2>/dev/null; then
    why="$py cannot import torch"
  elif [[ $("$py" -c 'import torch; print(torch.cuda.is_available())' 2>/dev/null) != True ]]; then
    why="torch.cuda.is_available() is false ($("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null); Debian's python3-torch is CPU-only)"
  fi
  if [[ -n $why ]]; then
    NOT_RUN+=("torch_cuda: $why")
    json_add torch_cuda_ok null
    json_add torch_cuda_reason "$(json_str "$why")"
    return 0
  fi
  (cd tests/plugins/torch &&
    env PYTHONPATH="$(realpath "../../../$BUILD_DIR")/python:$PWD" \
      INA_SWITCHD_BIN="$(realpath "../../../$BUILD_DIR")/bin/ina-switchd" OMP_NUM_THREADS=1 \
      timeout 240 "$py" -m unittest -v test_cuda.CudaTest.test_cuda_allreduce_matches_cpu) \
    >"$OUT/torch_cuda.log" 2>&1 || rc=$?
  local ok=false calls
  [[ $rc == 0 ]] && grep -q '^OK$' "$OUT/torch_cuda.log" && ok=true
  grep -q 'skipped' "$OUT/torch_cuda.log" && ok=false
  calls=$(sed -n 's/.*rank 0: fabric active True, \([0-9]*\) fabric calls.*/\1/p' "$OUT/torch_cuda.log" | head -1)
  [[ $ok == true ]] || fail "PyTorch CUDA tensors through the backend failed (rc $rc): $(tail -n 5 "$OUT/torch_cuda.log" | tr '\n' ' ')"
  json_add torch_cuda_ok "$ok"
  json_add torch_cuda_fabric_calls "${calls:-null}"
  json_add torch_cuda_seconds "$(elapsed "$t0")"
}

# check_gpu_quant: the GPU quantization kernels against the CPU kernels (hw tests) and their
#   bandwidth beside the device's own device-to-device copy (scripts/gpu/quant-check.sh).
check_gpu_quant() {
  local line rc=0
  line=$(INA_BUILD_DIR=$BUILD_DIR scripts/gpu/quant-check.sh) || rc=$?
  json_add gpu_quant "${line:-null}"
  [[ $rc -eq 0 ]] || fail "GPU quantization check failed (rc $rc)"
}

# check_gpu_nicbuf: whether the CUDA domain's AllocNicBuffer exports device memory as a dma-buf
#   here (gpu_nicbuf_dmabuf true, the fd's /proc link in gpu_nicbuf_reason; false with the Status
#   the communicator would print after "GPUDirect RDMA off:"; not a failure: the fallback is the
#   host-staging path), and the payload CRC kernel's rate at K = 256 over 256 MiB
#   (gpu_block_crc_line). The tests themselves ran in check_gpu_quant (scripts/gpu/quant-check.sh).
check_gpu_nicbuf() {
  local bin=$BUILD_DIR/bin/drv_gpu_nicbuf_hw_test crc=$BUILD_DIR/bin/drv_gpu_crc_hw_test rc=0 line
  if [[ ! -x $bin || ! -x $crc ]]; then
    json_add gpu_nicbuf_dmabuf null
    json_add gpu_nicbuf_reason "$(json_str "$bin or $crc not built")"
    return 0
  fi
  timeout 60 "$bin" --gtest_filter='GpuNicBufferHwTest.AllocExports*' >"$OUT/nicbuf.log" 2>&1 || rc=$?
  if line=$(grep -m1 '^dma-buf fd' "$OUT/nicbuf.log"); then
    json_add gpu_nicbuf_dmabuf true
  else
    json_add gpu_nicbuf_dmabuf false
    line=$(grep -m1 'GPUDirect RDMA off' "$OUT/nicbuf.log" || tail -n 2 "$OUT/nicbuf.log" | tr '\n' ' ')
  fi
  json_add gpu_nicbuf_reason "$(json_str "$line")"
  [[ $rc == 0 ]] || fail "NIC buffer test failed (rc $rc): $(tail -n 3 "$OUT/nicbuf.log" | tr '\n' ' ')"
  rc=0
  timeout 60 "$crc" --gtest_filter='GpuCrcTest.Rate' >"$OUT/crc_rate.log" 2>&1 || rc=$?
  line=$(grep -m1 '^gpu BlockCrcs' "$OUT/crc_rate.log" || true)
  json_add gpu_block_crc_line "$(json_str "${line:-none}")"
  [[ $rc == 0 ]] || fail "CRC kernel rate run failed (rc $rc)"
  # The whole send path on this GPU: 2 ranks quantize into the NIC buffer, payload CRCs on the
  # device, packets gathered from device memory by a stand-in NIC (drv_gpu_gpudirect_hw_test,
  # which quant-check also ran): gpudirect_pipeline_ok, and the path rank 0 took.
  local gd=$BUILD_DIR/bin/drv_gpu_gpudirect_hw_test
  if [[ ! -x $gd ]]; then
    json_add gpudirect_pipeline_ok null
    return 0
  fi
  rc=0
  timeout 120 "$gd" >"$OUT/gpudirect.log" 2>&1 || rc=$?
  line=$(grep -m1 '^rank 0: send path' "$OUT/gpudirect.log" || true)
  json_add gpudirect_pipeline_ok "$([[ $rc == 0 ]] && echo true || echo false)"
  json_add gpudirect_send_path "$(json_str "${line:-none}")"
  [[ $rc == 0 ]] || fail "GPUDirect pipeline test failed (rc $rc): $(tail -n 3 "$OUT/gpudirect.log" | tr '\n' ' ')"
}

# check_gpu_allreduce: a device-memory all-reduce (the CUDA memory domain, docs/gpu.md) through
#   the ina-switchd this script started, 2 ranks as 2 processes on GPU 0, each checking its
#   result bit for bit against the host-memory call on the same values (ina-gpu-allreduce).
# $1: "gpu" (both ranks quantize on the GPU: gpu_allreduce_* fields) or "mixed" (rank 1 copies
# float32 to the CPU instead, --copy-float: the two paths' packets must be bit-identical on the
# wire; gpu_allreduce_mixed_* fields).
check_gpu_allreduce() {
  local mode=${1:-gpu} bin=$BUILD_DIR/bin/ina-gpu-allreduce r pids=() rcs=() ok=true
  local tag=gpu_allreduce job=211
  if [[ $mode == mixed ]]; then tag=gpu_allreduce_mixed; job=212; fi
  if [[ ! -x $bin ]]; then
    fail "$bin not built (CUDA toolkit not found by CMake)"
    json_add "${tag}_ok" false
    return 0
  fi
  for r in 0 1; do
    local extra=()
    if [[ $mode == mixed && $r == 1 ]]; then extra=(--copy-float); fi
    env INA_SWITCH="127.0.0.1:$SW_PORT" INA_JOB=$job INA_RANK="$r" INA_WORLD=2 \
      timeout 120 "$bin" --count "$COUNT" --iters "$ITERS" "${extra[@]}" \
      >"$OUT/$tag$r.out" 2>"$OUT/$tag$r.log" &
    pids+=($!)
  done
  for r in 0 1; do
    local rc=0
    wait "${pids[$r]}" || rc=$?
    rcs+=("$rc")
    grep -q '"ok":true' "$OUT/$tag$r.out" 2>/dev/null || ok=false
  done
  [[ ${rcs[0]} == 0 && ${rcs[1]} == 0 ]] || ok=false
  [[ $ok == true ]] || fail "device all-reduce ($mode) failed (exit ${rcs[0]}/${rcs[1]}): $(tail -q -n 2 "$OUT/${tag}0.log" "$OUT/${tag}1.log" | tr '\n' ' ')"
  json_add "${tag}_ok" "$ok"
  local line
  line=$(head -1 "$OUT/${tag}0.out" 2>/dev/null || true)
  json_add "${tag}_rank0" "${line:-null}"
}

main() {
  check_gpu
  KEEP_OUT=1
  if [[ -z $OUT ]]; then OUT=$(mktemp -d /tmp/ina-gpu-check-XXXXXX); KEEP_OUT=0; fi
  mkdir -p "$OUT"
  trap cleanup EXIT
  build
  check_gpu_quant
  check_gpu_nicbuf
  if start_switch; then
    check_gpu_allreduce gpu
    check_gpu_allreduce mixed
    check_nccl_collnet host
    check_nccl_collnet gpubuf
    check_torch_cuda
  fi
  local nr="[]"
  if [[ ${#NOT_RUN[@]} -gt 0 ]]; then
    nr="[$(for x in "${NOT_RUN[@]}"; do json_str "$x"; printf ','; done | sed 's/,$//')]"
  fi
  json_add not_run "$nr"
  json_add total_seconds "$(elapsed "$T_START")"
  json_add passed "$([[ $FAILED == 0 ]] && echo true || echo false)"
  emit_json
  return $FAILED
}

KEEP_OUT=1
main
