// The C API: a thin boundary over ina::host::Communicator. Status codes map 1:1 to ina_status;
// messages go to a thread-local buffer read through ina_last_error(). The struct conversions bind
// every field of the C++ structs by name (structured bindings), so adding a field to CommConfig,
// DpdkConfig or CommStats without its C counterpart does not compile.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <span>
#include <string>

#include "capi_internal.h"
#include "ina/host/comm_metrics.h"
#include "ina/host/communicator.h"
#include "ina/ina.h"
#include "ina/proto/wire.h"
#include "ina/version.h"

struct ina_comm {
  std::unique_ptr<ina::host::Communicator> comm;
};

struct ina_request {
  ina::host::Request req;
};

namespace ina::host::capi {
namespace {

#define INA_SAME_CODE(c, k) \
  static_assert(static_cast<int>(ina::StatusCode::k) == c, "ina_status out of sync: " #c)
INA_SAME_CODE(INA_OK, kOk);
INA_SAME_CODE(INA_ERR_INVALID_ARGUMENT, kInvalidArgument);
INA_SAME_CODE(INA_ERR_NOT_FOUND, kNotFound);
INA_SAME_CODE(INA_ERR_ALREADY_EXISTS, kAlreadyExists);
INA_SAME_CODE(INA_ERR_RESOURCE_EXHAUSTED, kResourceExhausted);
INA_SAME_CODE(INA_ERR_FAILED_PRECONDITION, kFailedPrecondition);
INA_SAME_CODE(INA_ERR_UNAVAILABLE, kUnavailable);
INA_SAME_CODE(INA_ERR_DEADLINE_EXCEEDED, kDeadlineExceeded);
INA_SAME_CODE(INA_ERR_ABORTED, kAborted);
INA_SAME_CODE(INA_ERR_DATA_LOSS, kDataLoss);
INA_SAME_CODE(INA_ERR_INTERNAL, kInternal);
INA_SAME_CODE(INA_ERR_UNIMPLEMENTED, kUnimplemented);
#undef INA_SAME_CODE

// Every released layout, oldest first. A release that appends fields adds its own entry and keeps
// the old ones (ina.h states the rule).
constexpr Layout kConfigLayouts[] = {
    // 0.1: struct_size .. progress_threads (sizeof 1568 on LP64).
    {1568, offsetof(ina_config, progress_threads) + sizeof(int)},
    // 0.2: .. quant, udp_gso (sizeof 1584 on LP64).
    {1584, offsetof(ina_config, udp_gso) + sizeof(int)},
    // 0.3 (unreleased): .. the verbs_* fields, slot_wait_timeout_ms, staging_bytes, dpdk_mtu,
    // switch_cores, job_sec, job_key, job_key_len.
    {sizeof(ina_config), offsetof(ina_config, job_key_len) + sizeof(uint32_t)},
};
constexpr Layout kStatsLayouts[] = {
    // 0.1: struct_size .. ops_failed.
    {64, offsetof(ina_stats, ops_failed) + sizeof(uint64_t)},
    // after 0.1: + bad_crc (the CRC32C trailer).
    {72, offsetof(ina_stats, bad_crc) + sizeof(uint64_t)},
    // + packets_from_device (GPUDirect RDMA).
    {80, offsetof(ina_stats, packets_from_device) + sizeof(uint64_t)},
    // + results_forged (keyed jobs).
    {88, offsetof(ina_stats, results_forged) + sizeof(uint64_t)},
    // + socket_drops (the kernel's drops at a full socket receive buffer).
    {sizeof(ina_stats), offsetof(ina_stats, socket_drops) + sizeof(uint64_t)},
};
// The newest entry must be the current layout. On LP64 the sizes are pinned, so that changing a
// struct without adding a layout fails here.
static_assert(kConfigLayouts[std::size(kConfigLayouts) - 1].size == sizeof(ina_config));
static_assert(kStatsLayouts[std::size(kStatsLayouts) - 1].size == sizeof(ina_stats));
static_assert(sizeof(void*) != 8 || sizeof(ina_config) == 1784,
              "ina_config changed: append fields only, add a Layout to kConfigLayouts");
static_assert(sizeof(void*) != 8 || sizeof(ina_stats) == 96,
              "ina_stats changed: append fields only, add a Layout to kStatsLayouts");

Result<Layout> FindLayout(std::span<const Layout> layouts, size_t size, const char* what) {
  for (const Layout& l : layouts) {
    if (l.size == size) return l;
  }
  return InvalidArgument(std::string(what) + ": struct_size " + std::to_string(size) +
                         " is not a layout this libina (" INA_VERSION_STRING ") knows (its own: " +
                         std::to_string(layouts.back().size) +
                         "): was the program compiled against a newer ina.h, or struct_size not "
                         "set through the ina.h wrapper?");
}

template <size_t N>
Status ReadString(const char (&in)[N], const char* field, std::string* out) {
  const void* nul = std::memchr(in, '\0', N);
  if (nul == nullptr) {
    return InvalidArgument(std::string("ina_config.") + field + ": no NUL within its " +
                           std::to_string(N) + " bytes");
  }
  out->assign(in, static_cast<const char*>(nul) - in);
  return Status::Ok();
}

template <size_t N>
Status WriteString(const std::string& in, const char* field, char (&out)[N]) {
  if (in.size() >= N) {
    return InvalidArgument(std::string("ina_config.") + field + ": value of " +
                           std::to_string(in.size()) + " bytes does not fit in " +
                           std::to_string(N) + " (with its NUL)");
  }
  std::memcpy(out, in.data(), in.size());
  std::memset(out + in.size(), 0, N - in.size());
  return Status::Ok();
}

// Every field of a full-size (current layout) ina_config.
Status FullToC(const CommConfig& c, ina_config* out) {
  const auto& [switch_host, switch_port, job_id, rank, world_size, k, window, join_timeout_ms,
               slot_wait_timeout_ms, progress_timeout_ms, rto_min_us, rto_max_us, rto_initial_us,
               progress_threads, transport, socket_buffer_bytes, dpdk, verbs, quant, udp_gso,
               staging_bytes, switch_cores, sec, job_secret] = c;
  const auto& [eal_args, port, local_ip, local_port, local_mac, fabric_mac, backoff_max_us,
               zero_copy, dpdk_mtu] = dpdk;
  std::memset(out, 0, sizeof(*out));
  out->struct_size = sizeof(*out);
  INA_RETURN_IF_ERROR(WriteString(switch_host, "switch_host", out->switch_host));
  out->switch_port = switch_port;
  out->job_id = job_id;
  out->rank = rank;
  out->world_size = world_size;
  out->k = k;
  out->window = window;
  out->join_timeout_ms = join_timeout_ms;
  out->progress_timeout_ms = progress_timeout_ms;
  out->rto_min_us = rto_min_us;
  out->rto_max_us = rto_max_us;
  out->rto_initial_us = rto_initial_us;
  out->progress_threads = progress_threads;
  INA_RETURN_IF_ERROR(WriteString(transport, "transport", out->transport));
  out->socket_buffer_bytes = socket_buffer_bytes;
  INA_RETURN_IF_ERROR(WriteString(eal_args, "dpdk_eal_args", out->dpdk_eal_args));
  INA_RETURN_IF_ERROR(WriteString(port, "dpdk_port", out->dpdk_port));
  INA_RETURN_IF_ERROR(WriteString(local_ip, "dpdk_local_ip", out->dpdk_local_ip));
  out->dpdk_local_port = local_port;
  INA_RETURN_IF_ERROR(WriteString(local_mac, "dpdk_local_mac", out->dpdk_local_mac));
  INA_RETURN_IF_ERROR(WriteString(fabric_mac, "dpdk_fabric_mac", out->dpdk_fabric_mac));
  out->dpdk_backoff_max_us = backoff_max_us;
  out->dpdk_zero_copy = zero_copy ? 1 : 0;
  out->dpdk_mtu = static_cast<int>(dpdk_mtu);
  INA_RETURN_IF_ERROR(WriteString(quant, "quant", out->quant));
  out->udp_gso = udp_gso ? 1 : 0;
  const auto& [device, vport, gid_index, mtu, remote_qpn, qkey, send_depth, recv_depth] = verbs;
  INA_RETURN_IF_ERROR(WriteString(device, "verbs_device", out->verbs_device));
  out->verbs_port = vport;
  out->verbs_gid_index = gid_index;
  out->verbs_mtu = mtu;
  out->verbs_remote_qpn = remote_qpn;
  out->verbs_qkey = qkey;
  out->verbs_send_depth = send_depth;
  out->verbs_recv_depth = recv_depth;
  out->slot_wait_timeout_ms = slot_wait_timeout_ms;
  out->staging_bytes = staging_bytes;
  out->switch_cores = switch_cores;
  INA_RETURN_IF_ERROR(WriteString(sec, "job_sec", out->job_sec));
  if (job_secret.size() > sizeof(out->job_key)) {
    return InvalidArgument("ina_config.job_key: " + std::to_string(job_secret.size()) +
                           " bytes do not fit in " + std::to_string(sizeof(out->job_key)));
  }
  // No key: nothing to copy (an empty vector's data() may be null, which memcpy must not get).
  if (job_secret.size() > 0) {
    std::memcpy(out->job_key, job_secret.bytes().data(), job_secret.size());
  }
  out->job_key_len = static_cast<uint32_t>(job_secret.size());
  return Status::Ok();
}

Result<CommConfig> FullFromC(const ina_config& in) {
  CommConfig c;
  auto& [switch_host, switch_port, job_id, rank, world_size, k, window, join_timeout_ms,
         slot_wait_timeout_ms, progress_timeout_ms, rto_min_us, rto_max_us, rto_initial_us,
         progress_threads, transport, socket_buffer_bytes, dpdk, verbs, quant, udp_gso,
         staging_bytes, switch_cores, sec, job_secret] = c;
  auto& [eal_args, port, local_ip, local_port, local_mac, fabric_mac, backoff_max_us, zero_copy,
         dpdk_mtu] = dpdk;
  INA_RETURN_IF_ERROR(ReadString(in.switch_host, "switch_host", &switch_host));
  switch_port = in.switch_port;
  job_id = in.job_id;
  rank = in.rank;
  world_size = in.world_size;
  k = in.k;
  window = in.window;
  join_timeout_ms = in.join_timeout_ms;
  progress_timeout_ms = in.progress_timeout_ms;
  rto_min_us = in.rto_min_us;
  rto_max_us = in.rto_max_us;
  rto_initial_us = in.rto_initial_us;
  progress_threads = in.progress_threads;
  INA_RETURN_IF_ERROR(ReadString(in.transport, "transport", &transport));
  socket_buffer_bytes = in.socket_buffer_bytes;
  INA_RETURN_IF_ERROR(ReadString(in.dpdk_eal_args, "dpdk_eal_args", &eal_args));
  INA_RETURN_IF_ERROR(ReadString(in.dpdk_port, "dpdk_port", &port));
  INA_RETURN_IF_ERROR(ReadString(in.dpdk_local_ip, "dpdk_local_ip", &local_ip));
  local_port = in.dpdk_local_port;
  INA_RETURN_IF_ERROR(ReadString(in.dpdk_local_mac, "dpdk_local_mac", &local_mac));
  INA_RETURN_IF_ERROR(ReadString(in.dpdk_fabric_mac, "dpdk_fabric_mac", &fabric_mac));
  backoff_max_us = in.dpdk_backoff_max_us;
  if (in.dpdk_zero_copy != 0 && in.dpdk_zero_copy != 1) {
    return InvalidArgument("ina_config.dpdk_zero_copy: " + std::to_string(in.dpdk_zero_copy) +
                           " is not 0 or 1");
  }
  zero_copy = in.dpdk_zero_copy == 1;
  if (in.dpdk_mtu < 576 || in.dpdk_mtu > 9000) {
    return InvalidArgument("ina_config.dpdk_mtu: " + std::to_string(in.dpdk_mtu) +
                           " is not in 576 .. 9000");
  }
  dpdk_mtu = static_cast<unsigned>(in.dpdk_mtu);
  INA_RETURN_IF_ERROR(ReadString(in.quant, "quant", &quant));
  if (in.udp_gso != 0 && in.udp_gso != 1) {
    return InvalidArgument("ina_config.udp_gso: " + std::to_string(in.udp_gso) + " is not 0 or 1");
  }
  udp_gso = in.udp_gso == 1;
  auto& [device, vport, gid_index, mtu, remote_qpn, qkey, send_depth, recv_depth] = verbs;
  INA_RETURN_IF_ERROR(ReadString(in.verbs_device, "verbs_device", &device));
  vport = in.verbs_port;
  gid_index = in.verbs_gid_index;
  mtu = in.verbs_mtu;
  remote_qpn = in.verbs_remote_qpn;
  qkey = in.verbs_qkey;
  send_depth = in.verbs_send_depth;
  recv_depth = in.verbs_recv_depth;
  slot_wait_timeout_ms = in.slot_wait_timeout_ms;
  staging_bytes = in.staging_bytes;
  switch_cores = in.switch_cores;
  INA_RETURN_IF_ERROR(ReadString(in.job_sec, "job_sec", &sec));
  if (in.job_key_len > sizeof(in.job_key)) {
    return InvalidArgument("ina_config.job_key_len: " + std::to_string(in.job_key_len) + " > " +
                           std::to_string(sizeof(in.job_key)));
  }
  job_secret = JobSecret(std::span<const uint8_t>(in.job_key, in.job_key_len));
  return c;
}

thread_local std::string g_last_error;

int Report(const Status& s) {
  if (s.ok()) return INA_OK;
  g_last_error = s.ToString();
  return static_cast<int>(s.code());
}

int BadArg(const char* what) { return Report(InvalidArgument(what)); }

template <typename T>
int Async(ina_comm* comm, T* data, size_t count, ina_request** req, bool average = false) {
  if (comm == nullptr || req == nullptr) return BadArg("ina_iallreduce: null comm or req");
  if (data == nullptr && count != 0) return BadArg("ina_iallreduce: null data");
  AllReduceOptions options;
  options.average = average;
  auto r = comm->comm->AllReduceAsync(std::span<T>(data, count), options);
  if (!r.ok()) return Report(r.status());
  *req = new ina_request{std::move(r).value()};
  return INA_OK;
}

template <typename T>
int Blocking(ina_comm* comm, T* data, size_t count, bool average = false) {
  if (comm == nullptr) return BadArg("ina_allreduce: null comm");
  if (data == nullptr && count != 0) return BadArg("ina_allreduce: null data");
  AllReduceOptions options;
  options.average = average;
  return Report(comm->comm->AllReduce(std::span<T>(data, count), options));
}

}  // namespace

Result<CommConfig> ConfigFromC(const ina_config& in) { return ConfigFromC(in, kConfigLayouts); }

Status ConfigToC(const CommConfig& c, ina_config* out, size_t struct_size) {
  return ConfigToC(c, out, struct_size, kConfigLayouts);
}

Result<CommConfig> ConfigFromC(const ina_config& in, std::span<const Layout> layouts) {
  INA_ASSIGN_OR_RETURN(Layout l, FindLayout(layouts, in.struct_size, "ina_config"));
  // Defaults for the fields the caller's layout lacks, then the caller's bytes over them.
  ina_config full;
  INA_RETURN_IF_ERROR(FullToC(CommConfig{}, &full));
  std::memcpy(static_cast<void*>(&full), &in, l.used);
  Result<CommConfig> c = FullFromC(full);
  explicit_bzero(full.job_key, sizeof(full.job_key));
  return c;
}

Status ConfigToC(const CommConfig& c, ina_config* out, size_t struct_size,
                 std::span<const Layout> layouts) {
  INA_ASSIGN_OR_RETURN(Layout l, FindLayout(layouts, struct_size, "ina_config"));
  ina_config full;
  INA_RETURN_IF_ERROR(FullToC(c, &full));
  std::memcpy(static_cast<void*>(out), &full, l.used);
  explicit_bzero(full.job_key, sizeof(full.job_key));
  out->struct_size = struct_size;
  return Status::Ok();
}

Status StatsToC(const CommStats& s, ina_stats* out, size_t struct_size) {
  INA_ASSIGN_OR_RETURN(Layout l, FindLayout(kStatsLayouts, struct_size, "ina_stats"));
  const auto& [packets_sent, packets_received, retransmissions, results, stale_results_ignored,
               ops_completed, ops_failed, bad_crc, packets_from_device, results_forged,
               socket_drops] = s;
  ina_stats full;
  std::memset(&full, 0, sizeof(full));
  full.packets_sent = packets_sent;
  full.packets_received = packets_received;
  full.retransmissions = retransmissions;
  full.results = results;
  full.stale_results_ignored = stale_results_ignored;
  full.ops_completed = ops_completed;
  full.ops_failed = ops_failed;
  full.bad_crc = bad_crc;
  full.packets_from_device = packets_from_device;
  full.results_forged = results_forged;
  full.socket_drops = socket_drops;
  std::memcpy(static_cast<void*>(out), &full, l.used);
  out->struct_size = struct_size;
  return Status::Ok();
}

Communicator& CommunicatorOf(ina_comm* comm) { return *comm->comm; }

}  // namespace ina::host::capi

namespace capi = ina::host::capi;

extern "C" {

uint32_t ina_version(void) { return INA_VERSION; }
const char* ina_version_string(void) { return INA_VERSION_STRING; }

int ina_config_init_sized(ina_config* cfg, size_t struct_size) {
  if (cfg == nullptr) return capi::BadArg("ina_config_init: null cfg");
  auto layout = capi::FindLayout(capi::kConfigLayouts, struct_size, "ina_config");
  if (!layout.ok()) return capi::Report(layout.status());
  const ina::host::CommConfig defaults;
  if (int rc = capi::Report(capi::ConfigToC(defaults, cfg, struct_size)); rc != INA_OK) return rc;
  auto r = ina::host::CommConfig::FromEnv(defaults);
  if (!r.ok()) return capi::Report(r.status());
  return capi::Report(capi::ConfigToC(*r, cfg, struct_size));
}

int ina_config_set_job_key(ina_config* cfg, const void* key, size_t len) {
  if (cfg == nullptr || (key == nullptr && len != 0)) {
    return capi::BadArg("ina_config_set_job_key: null cfg or key");
  }
  if (len < ina::proto::kSecretMinBytes || len > ina::proto::kSecretMaxBytes ||
      len > sizeof(cfg->job_key)) {
    return capi::Report(ina::InvalidArgument("ina_config_set_job_key: a job secret of " +
                                             std::to_string(len) + " bytes; it has " +
                                             std::to_string(ina::proto::kSecretMinBytes) + " .. " +
                                             std::to_string(ina::proto::kSecretMaxBytes)));
  }
  std::memcpy(cfg->job_key, key, len);
  cfg->job_key_len = static_cast<uint32_t>(len);
  if (std::strcmp(cfg->job_sec, "crc") == 0)
    std::snprintf(cfg->job_sec, sizeof(cfg->job_sec), "mac");
  return INA_OK;
}

void ina_config_wipe_job_key(ina_config* cfg) {
  if (cfg == nullptr) return;
  explicit_bzero(cfg->job_key, sizeof(cfg->job_key));
  cfg->job_key_len = 0;
}

int ina_comm_create(const ina_config* cfg, ina_comm** out) {
  if (cfg == nullptr || out == nullptr) return capi::BadArg("ina_comm_create: null cfg or out");
  *out = nullptr;
  auto c = capi::ConfigFromC(*cfg);
  if (!c.ok()) return capi::Report(c.status().WithContext("ina_comm_create"));
  auto r = ina::host::Communicator::Create(*c);
  if (!r.ok()) return capi::Report(r.status());
  *out = new ina_comm{std::move(r).value()};
  return INA_OK;
}

void ina_comm_destroy(ina_comm* comm) { delete comm; }

uint16_t ina_comm_window(const ina_comm* comm) {
  return comm == nullptr ? 0 : comm->comm->window();
}

int ina_comm_stats_sized(const ina_comm* comm, ina_stats* out, size_t struct_size) {
  if (comm == nullptr || out == nullptr) return capi::BadArg("ina_comm_stats: null comm or out");
  return capi::Report(capi::StatsToC(comm->comm->stats(), out, struct_size));
}

int ina_comm_metrics(const ina_comm* comm, char* buf, size_t cap, size_t* len) {
  if (comm == nullptr) return capi::BadArg("ina_comm_metrics: null comm");
  if (buf == nullptr && cap != 0) return capi::BadArg("ina_comm_metrics: null buf with cap > 0");
  const ina::host::CommConfig& c = comm->comm->config();
  const std::string text = ina::host::FormatCommMetrics(comm->comm->stats(), c.job_id, c.rank);
  if (len != nullptr) *len = text.size();
  if (cap <= text.size()) {
    return capi::Report(ina::ResourceExhausted("ina_comm_metrics: the text needs " +
                                               std::to_string(text.size() + 1) + " bytes, cap is " +
                                               std::to_string(cap)));
  }
  std::memcpy(buf, text.c_str(), text.size() + 1);
  return INA_OK;
}

int ina_allreduce_f32(ina_comm* comm, float* data, size_t count) {
  return capi::Blocking(comm, data, count);
}
int ina_allreduce_i32(ina_comm* comm, int32_t* data, size_t count) {
  return capi::Blocking(comm, data, count);
}
int ina_iallreduce_f32(ina_comm* comm, float* data, size_t count, ina_request** req) {
  return capi::Async(comm, data, count, req);
}
int ina_iallreduce_i32(ina_comm* comm, int32_t* data, size_t count, ina_request** req) {
  return capi::Async(comm, data, count, req);
}

int ina_allreduce_avg_f32(ina_comm* comm, float* data, size_t count) {
  return capi::Blocking(comm, data, count, /*average=*/true);
}
int ina_allreduce_avg_i32(ina_comm* comm, int32_t* data, size_t count) {
  return capi::Blocking(comm, data, count, /*average=*/true);
}
int ina_iallreduce_avg_f32(ina_comm* comm, float* data, size_t count, ina_request** req) {
  return capi::Async(comm, data, count, req, /*average=*/true);
}
int ina_iallreduce_avg_i32(ina_comm* comm, int32_t* data, size_t count, ina_request** req) {
  return capi::Async(comm, data, count, req, /*average=*/true);
}

int ina_test(ina_request* req, int* done) {
  if (req == nullptr || done == nullptr) return capi::BadArg("ina_test: null req or done");
  *done = req->req.Test() ? 1 : 0;
  return INA_OK;
}

int ina_wait(ina_request* req) {
  if (req == nullptr) return capi::BadArg("ina_wait: null req");
  return capi::Report(req->req.Wait());
}

void ina_request_free(ina_request* req) { delete req; }

const char* ina_last_error(void) { return capi::g_last_error.c_str(); }

}  // extern "C"
