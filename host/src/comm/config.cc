#include "ina/host/config.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include "ina/base/parse.h"
#include "ina/proto/sec.h"
#include "ina/proto/wire.h"

static_assert(ina::host::CommConfig::kMaxProgressThreads == ina::proto::kMaxLanes);

namespace ina::host {
namespace {

// INA_* integers (base/parse.h's EnvInt) up to the field type's largest value.
template <typename T>
Status EnvField(const char* var, long long lo, T* field) {
  return EnvInt(var, lo, static_cast<long long>(std::numeric_limits<T>::max()), field);
}

}  // namespace

JobSecret& JobSecret::operator=(const JobSecret& o) {
  if (this != &o) {
    Wipe();
    bytes_ = o.bytes_;
  }
  return *this;
}

void JobSecret::Wipe() {
  // An empty vector's data() may be null, which explicit_bzero must not get (even for 0 bytes).
  if (!bytes_.empty()) explicit_bzero(bytes_.data(), bytes_.size());
  bytes_.clear();
}

Result<JobSecret> LoadJobSecret(const std::string& spec, const std::string& what) {
  if (spec.empty()) return InvalidArgument(what + ": empty (a file name or fd:N)");
  Result<std::vector<uint8_t>> bytes = InvalidArgument(what);
  if (spec.rfind("fd:", 0) == 0) {
    INA_ASSIGN_OR_RETURN(const long long fd, ParseInt(what + " fd", spec.substr(3), 0, INT32_MAX));
    bytes = proto::LoadSecretFd(static_cast<int>(fd), what);
  } else {
    bytes = proto::LoadSecretFile(spec, what);
  }
  if (!bytes.ok()) return bytes.status();
  JobSecret secret(*bytes);
  if (!bytes->empty()) explicit_bzero(bytes->data(), bytes->size());
  return secret;
}

std::vector<std::string> DpdkLanePorts(const std::string& port, int lanes) {
  if (port.empty()) return std::vector<std::string>(static_cast<size_t>(std::max(lanes, 0)));
  std::vector<std::string> names;
  size_t at = 0;
  for (;;) {
    const size_t comma = port.find(',', at);
    names.push_back(port.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  for (const std::string& n : names) {
    if (n.empty()) return {};
  }
  if (names.size() != static_cast<size_t>(lanes)) return {};
  return names;
}

Status CommConfig::Validate() const {
  auto bad = [](const std::string& m) { return InvalidArgument("config: " + m); };
  if (switch_host.empty()) return bad("switch_host is empty");
  if (switch_port == 0) return bad("switch_port is 0");
  if (world_size < 1 || world_size > proto::kMaxWorkers) {
    return bad("world_size " + std::to_string(world_size) + " not in [1, " +
               std::to_string(proto::kMaxWorkers) + "]");
  }
  if (rank >= world_size) {
    return bad("rank " + std::to_string(rank) + " >= world_size " + std::to_string(world_size));
  }
  if (k != 0 && !proto::IsValidK(k)) {
    return bad("k " + std::to_string(k) + " is not " + std::string(proto::kKValuesText) +
               " (0: the largest the path MTU carries)");
  }
  if (window < 1 || window > kMaxWindow) {
    return bad("window " + std::to_string(window) + " not in [1, " + std::to_string(kMaxWindow) +
               "]");
  }
  if (join_timeout_ms <= 0) return bad("join_timeout_ms must be > 0");
  if (slot_wait_timeout_ms <= 0) return bad("slot_wait_timeout_ms must be > 0");
  if (progress_timeout_ms <= 0) return bad("progress_timeout_ms must be > 0");
  if (rto_min_us <= 0) return bad("rto_min_us must be > 0");
  if (rto_max_us < rto_min_us) return bad("rto_max_us < rto_min_us");
  if (rto_initial_us < rto_min_us || rto_initial_us > rto_max_us) {
    return bad("rto_initial_us not in [rto_min_us, rto_max_us]");
  }
  if (progress_threads < 1 || progress_threads > kMaxProgressThreads) {
    return bad("progress_threads " + std::to_string(progress_threads) + " not in [1, " +
               std::to_string(kMaxProgressThreads) + "]");
  }
  if (transport.empty()) return bad("transport is empty");
  if (progress_threads > 1 && transport != "udp" && transport != "dpdk") {
    return bad("progress_threads " + std::to_string(progress_threads) +
               " needs transport udp (one socket per lane) or dpdk (one port per lane), not " +
               transport);
  }
  if (progress_threads > 1 && transport == "dpdk") {
    // On switch cores the lanes are the queues of one port (dpdk.port: one name or empty).
    const std::vector<std::string> ports =
        DpdkLanePorts(dpdk.port, switch_cores > 1 ? 1 : progress_threads);
    if (ports.empty() && switch_cores > 1) {
      return bad("switch_cores " + std::to_string(switch_cores) +
                 " over dpdk takes one port, its queue l for lane l: dpdk.port empty or one " +
                 "name, not '" + dpdk.port + "'");
    }
    if (ports.empty()) {
      return bad("progress_threads " + std::to_string(progress_threads) +
                 " over dpdk needs a port per lane: dpdk.port empty (lane l takes the l-th " +
                 "unused port the EAL probed) or " + std::to_string(progress_threads) +
                 " comma-separated names, not '" + dpdk.port + "'");
    }
    if (dpdk.local_port + progress_threads - 1 > 65535) {
      return bad("dpdk.local_port " + std::to_string(dpdk.local_port) + " + lane " +
                 std::to_string(progress_threads - 1) +
                 " is past 65535 (lane l uses local_port + l)");
    }
  }
  if (switch_cores < 0 || switch_cores > kMaxProgressThreads) {
    return bad("switch_cores " + std::to_string(switch_cores) + " not in [0 (auto), " +
               std::to_string(kMaxProgressThreads) + "]");
  }
  if (switch_cores == kSwitchCoresAuto && transport != "udp") {
    return bad("switch_cores auto (0) asks the switch over udp, not " + transport +
               ": set the switch's core count");
  }
  if (switch_cores > 1) {
    if (progress_threads != switch_cores) {
      return bad("switch_cores " + std::to_string(switch_cores) + " needs progress_threads " +
                 std::to_string(switch_cores) + " (one lane per switch core), not " +
                 std::to_string(progress_threads));
    }
    if (transport != "udp" && transport != "dpdk") {
      return bad("switch_cores " + std::to_string(switch_cores) +
                 " needs transport udp (a socket per core's port) or dpdk (a queue per core), "
                 "not " +
                 transport);
    }
    if (switch_port + switch_cores - 1 > 65535) {
      return bad("switch_port " + std::to_string(switch_port) + " + core " +
                 std::to_string(switch_cores - 1) + " is past 65535 (core c listens on port + c)");
    }
  }
  if (socket_buffer_bytes < 0) return bad("socket_buffer_bytes < 0");
  if (transport == "verbs") {
    if (Status s = ValidateVerbsConfig(verbs); !s.ok()) return s.WithContext("config: verbs");
  }
  if (quant != "auto" && quant != "scalar" && quant != "avx2" && quant != "avx512") {
    return bad("quant '" + quant + "' is not auto, scalar, avx2 or avx512");
  }
  if (sec != "crc" && sec != "mac" && sec != "mac_encrypt") {
    return bad("sec '" + sec + "' is not crc, mac or mac_encrypt");
  }
  if (sec == "crc" && !job_secret.empty()) {
    return bad("a job secret is set but sec is crc: set sec mac or mac_encrypt (INA_JOB_SEC)");
  }
  if (sec != "crc" &&
      (job_secret.size() < proto::kSecretMinBytes || job_secret.size() > proto::kSecretMaxBytes)) {
    return bad("sec " + sec + " needs a job secret of " + std::to_string(proto::kSecretMinBytes) +
               " .. " + std::to_string(proto::kSecretMaxBytes) + " bytes (INA_JOB_KEY), not " +
               std::to_string(job_secret.size()));
  }
  if (staging_bytes > kMaxStagingBytes) {
    return bad("staging_bytes " + std::to_string(staging_bytes) + " > " +
               std::to_string(kMaxStagingBytes) + " (4 bytes times the largest call, 2^32 - 1)");
  }
  return Status::Ok();
}

std::string CommConfig::ToString() const {
  std::ostringstream o;
  o << "switch=" << switch_host << ":" << switch_port << " job=" << job_id << " rank=" << rank
    << " world=" << world_size << " k=" << (k == 0 ? std::string("auto") : std::to_string(k))
    << " window=" << window << " join_timeout_ms=" << join_timeout_ms
    << " slot_wait_timeout_ms=" << slot_wait_timeout_ms
    << " progress_timeout_ms=" << progress_timeout_ms << " rto_us=[" << rto_min_us << ","
    << rto_initial_us << "," << rto_max_us << "]"
    << " progress_threads=" << progress_threads << " transport=" << transport
    << " socket_buffer_bytes=" << socket_buffer_bytes << " udp_gso=" << udp_gso
    << " quant=" << quant << " staging_bytes=" << staging_bytes;
  if (switch_cores > 1) o << " switch_cores=" << switch_cores;
  if (switch_cores == kSwitchCoresAuto) o << " switch_cores=auto";
  if (sec != "crc" || !job_secret.empty()) {
    o << " sec=" << sec << " job_secret=" << (job_secret.empty() ? "unset" : "set");
  }
  if (transport == "dpdk") {
    o << " dpdk_eal='" << dpdk.eal_args << "' dpdk_port=" << dpdk.port
      << " dpdk_local=" << dpdk.local_ip << ":" << dpdk.local_port
      << " dpdk_backoff_us=" << dpdk.backoff_max_us << " dpdk_zero_copy=" << dpdk.zero_copy
      << " dpdk_mtu=" << dpdk.mtu;
  }
  if (transport == "verbs") {
    o << " verbs_device=" << (verbs.device.empty() ? "(first)" : verbs.device)
      << " verbs_port=" << verbs.port << " verbs_gid_index=" << verbs.gid_index
      << " verbs_mtu=" << verbs.mtu << " verbs_qpn=" << verbs.remote_qpn
      << " verbs_qkey=" << verbs.qkey << " verbs_send_depth=" << verbs.send_depth
      << " verbs_recv_depth=" << verbs.recv_depth;
  }
  return o.str();
}

Result<CommConfig> CommConfig::FromEnv(CommConfig c) {
  if (const char* v = std::getenv("INA_SWITCH")) {
    std::string s(v);
    size_t colon = s.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return InvalidArgument("INA_SWITCH='" + s + "': expected host:port");
    }
    INA_ASSIGN_OR_RETURN(long long port,
                         ParseInt("INA_SWITCH port", s.substr(colon + 1), 1, 65535));
    c.switch_host = s.substr(0, colon);
    c.switch_port = static_cast<uint16_t>(port);
  }
  INA_RETURN_IF_ERROR(EnvField("INA_JOB", 0, &c.job_id));
  INA_RETURN_IF_ERROR(EnvField("INA_RANK", 0, &c.rank));
  INA_RETURN_IF_ERROR(EnvField("INA_WORLD", 0, &c.world_size));
  INA_RETURN_IF_ERROR(EnvField("INA_K", 0, &c.k));
  INA_RETURN_IF_ERROR(EnvField("INA_WINDOW", 0, &c.window));
  INA_RETURN_IF_ERROR(EnvField("INA_JOIN_TIMEOUT_MS", 0, &c.join_timeout_ms));
  INA_RETURN_IF_ERROR(EnvField("INA_SLOT_WAIT_MS", 0, &c.slot_wait_timeout_ms));
  INA_RETURN_IF_ERROR(EnvField("INA_PROGRESS_TIMEOUT_MS", 0, &c.progress_timeout_ms));
  INA_RETURN_IF_ERROR(EnvField("INA_RTO_MIN_US", 0, &c.rto_min_us));
  INA_RETURN_IF_ERROR(EnvField("INA_RTO_INITIAL_US", 0, &c.rto_initial_us));
  INA_RETURN_IF_ERROR(EnvField("INA_RTO_MAX_US", 0, &c.rto_max_us));
  INA_RETURN_IF_ERROR(EnvField("INA_PROGRESS_THREADS", 0, &c.progress_threads));
  if (const char* v = std::getenv("INA_SWITCH_CORES"); v != nullptr && std::string(v) == "auto") {
    c.switch_cores = kSwitchCoresAuto;
  } else {
    INA_RETURN_IF_ERROR(EnvField("INA_SWITCH_CORES", 0, &c.switch_cores));
  }
  if (const char* v = std::getenv("INA_TRANSPORT")) {
    if (*v == '\0') return InvalidArgument("INA_TRANSPORT: empty value");
    c.transport = v;
  }
  INA_RETURN_IF_ERROR(EnvField("INA_SOCKET_BUFFER_BYTES", 0, &c.socket_buffer_bytes));
  if (const char* v = std::getenv("INA_UDP_GSO")) {
    INA_ASSIGN_OR_RETURN(c.udp_gso, ParseBool("INA_UDP_GSO", v));
  }
  if (const char* v = std::getenv("INA_QUANT")) {
    const std::string q(v);
    if (q != "auto" && q != "scalar" && q != "avx2" && q != "avx512") {
      return InvalidArgument("INA_QUANT='" + q + "': not auto, scalar, avx2 or avx512");
    }
    c.quant = q;
  }
  if (const char* v = std::getenv("INA_STAGING_BYTES")) {
    INA_ASSIGN_OR_RETURN(c.staging_bytes,
                         ParseUint("INA_STAGING_BYTES", v, 0, CommConfig::kMaxStagingBytes));
  }
  if (const char* v = std::getenv("INA_JOB_SEC")) {
    const std::string m(v);
    if (m != "crc" && m != "mac" && m != "mac_encrypt") {
      return InvalidArgument("INA_JOB_SEC='" + m + "': not crc, mac or mac_encrypt");
    }
    c.sec = m;
  }
  if (const char* v = std::getenv("INA_JOB_KEY")) {
    INA_ASSIGN_OR_RETURN(c.job_secret, LoadJobSecret(v));
    if (std::getenv("INA_JOB_SEC") == nullptr && c.sec == "crc") c.sec = "mac";
  }
  if (c.transport == "dpdk") INA_RETURN_IF_ERROR(ApplyDpdkEnv(&c.dpdk));
  if (c.transport == "verbs") INA_RETURN_IF_ERROR(ApplyVerbsEnv(&c.verbs));
  return c;
}

}  // namespace ina::host
