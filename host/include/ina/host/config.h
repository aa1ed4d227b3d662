// CommConfig: every tunable of a Communicator, validated, with INA_* environment overrides.
//
// Environment (FromEnv): INA_SWITCH=host:port, INA_JOB, INA_RANK, INA_WORLD, INA_K, INA_WINDOW,
// INA_JOIN_TIMEOUT_MS, INA_SLOT_WAIT_MS, INA_PROGRESS_TIMEOUT_MS, INA_RTO_MIN_US,
// INA_RTO_INITIAL_US, INA_RTO_MAX_US, INA_PROGRESS_THREADS, INA_TRANSPORT (udp | dpdk | verbs),
// INA_SOCKET_BUFFER_BYTES, INA_UDP_GSO (0 | 1), INA_QUANT (auto | scalar | avx2 | avx512),
// INA_STAGING_BYTES, INA_SWITCH_CORES, INA_JOB_SEC (crc | mac | mac_encrypt), INA_JOB_KEY (a file
// of hex digits that only its owner may access, or fd:N; never the secret itself), with
// dpdk the INA_DPDK_* variables of transport.h (ApplyDpdkEnv), with verbs the INA_VERBS_* ones
// (ApplyVerbsEnv). docs/host.md has the table. The library reads no environment variable anywhere
// else: a program that builds its CommConfig itself gets exactly what it set.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ina/base/status.h"
#include "ina/host/transport.h"

namespace ina::host {

// A job secret (docs/security.md): 0 or proto::kSecretMinBytes .. kSecretMaxBytes bytes, wiped
// (explicit_bzero) when replaced or destroyed, copies included. Nothing prints it: CommConfig::
// ToString says only whether one is set.
class JobSecret {
 public:
  JobSecret() = default;
  explicit JobSecret(std::span<const uint8_t> bytes) : bytes_(bytes.begin(), bytes.end()) {}
  JobSecret(const JobSecret& o) : bytes_(o.bytes_) {}
  JobSecret& operator=(const JobSecret& o);
  ~JobSecret() { Wipe(); }
  void Wipe();
  bool empty() const { return bytes_.empty(); }
  size_t size() const { return bytes_.size(); }
  std::span<const uint8_t> bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// INA_JOB_KEY's value: "fd:N" (an open descriptor, read to its end) or a file name; either holds
// the secret as hex digits and, a file, may be accessed by its owner only. InvalidArgument for a
// malformed value or secret (wrong length, not hex), FailedPrecondition for a file group or others
// may read, the errno's status when it cannot be read. `what` names the source in errors.
Result<JobSecret> LoadJobSecret(const std::string& spec, const std::string& what = "INA_JOB_KEY");

struct CommConfig {
  std::string switch_host = "127.0.0.1";  // the fabric (name or IPv4 address)
  uint16_t switch_port = 47000;           // its UDP port
  uint16_t job_id = 1;
  uint16_t rank = 0;        // 0 .. world_size-1
  uint16_t world_size = 1;  // 1 .. proto::kMaxWorkers
  // Elements per packet: one of proto::kKValues (64 .. 2048), the same on every rank; 0 (the
  // default): the largest whose message the path carries unfragmented (Transport::
  // max_message_bytes: 256 on a 1500-byte MTU, 2048 on a 9000-byte one or loopback, 512 on
  // RoCE's 4096). Communicator::config() reports the K in use.
  uint16_t k = 0;
  uint16_t window = 256;  // slots asked for in JOIN (the fabric may grant fewer): 1 .. kMaxWindow
  int join_timeout_ms = 10000;  // every rank must have joined by then
  // Once every rank joined, how long to wait for slots while the fabric queues the job behind
  // others (join_wait; also at each re-join at a lease's end): DeadlineExceeded after that.
  int slot_wait_timeout_ms = 60000;
  int progress_timeout_ms = 5000;  // no accepted result this long while an op is pending: fail
  int rto_min_us = 500;            // retransmission timeout clamp and first value
  int rto_max_us = 200000;
  int rto_initial_us = 5000;
  // Lanes: progress threads, each with its own transport (socket), joined as one lane of this
  // rank and carrying the window's slots s with s mod progress_threads == its lane
  // (docs/host.md, "Lanes"). 1 .. kMaxProgressThreads; every rank of a job must use the same
  // number (the fabric answers bad_params otherwise); more than 1 needs transport "udp" or
  // "dpdk" (lane l on its own ethdev: dpdk.port empty, or one name per lane, comma-separated, see
  // DpdkLanePorts; UDP port dpdk.local_port + l).
  int progress_threads = 1;
  std::string transport = "udp";
  int socket_buffer_bytes = 8 << 20;  // SO_RCVBUF / SO_SNDBUF request
  DpdkConfig dpdk;                    // transport "dpdk" only
  // transport "verbs" only (RoCEv2 UD SENDs to ina-switchd --io roce at switch_host:4791;
  // switch_port is not used): device, port, GID index, MTU, the fabric's QPN and Q_Key, queue
  // depths (transport.h, docs/rdma.md). Validated by ValidateVerbsConfig.
  VerbsConfig verbs;
  // Quantization kernels: "auto" (the fastest this CPU runs, quant::ActiveKernels) or one of
  // "scalar", "avx2", "avx512" (Communicator::Create fails if this CPU or build lacks it).
  std::string quant = "auto";
  bool udp_gso = true;  // transport "udp": send trains with UDP GSO and receive with GRO
  // Device-memory calls (Communicator::AllReduce(data, domain, ...)): the staging a domain's first
  // staged call (or Communicator::ReserveStaging) allocates serves tensors of up to this many
  // bytes (float32 quantized in the domain included), so calls up to it never allocate again;
  // 0: sized by the first call. At most 4 * (2^32 - 1) (the largest call).
  uint64_t staging_bytes = 0;
  // Switch cores the lanes map onto (docs/host.md, "Lanes on switch cores"): with C > 1, lane l
  // (progress_threads must be C) talks to the switch's core l at switch_port + l (ina-switchd
  // --cores C --core-ports), which aggregates the slots s with s mod C == l of the job on its own:
  // one job on every switch core, no state shared between them. Transport udp, or dpdk: lane l
  // on queue l of one port (dpdk.port one name or empty), which the switch's core l owns. 1:
  // every lane to switch_port (lanes of one job on one switch core). kSwitchCoresAuto (0;
  // INA_SWITCH_CORES=auto; transport udp): Create asks the switch first (proto: hello, answered
  // with its cores' count) and runs that many lanes, one per core (progress_threads becomes C), or
  // progress_threads lanes on its one port.
  int switch_cores = 1;
  static constexpr int kSwitchCoresAuto = 0;
  // Authenticated jobs (docs/security.md): "crc" (no security, the protocol's CRC32C trailer: the
  // default), "mac" (every data packet and result carries an AES-GMAC tag under the job's traffic
  // keys) or "mac_encrypt" (AES-GCM: the payloads are encrypted on the wire too). A keyed mode
  // needs job_secret, and the fabric must hold the same secret for job_id (ina-jobkey, set_key).
  std::string sec = "crc";
  JobSecret job_secret;  // proto::kSecretMinBytes .. kSecretMaxBytes bytes with a keyed sec

  static constexpr uint16_t kMaxWindow = 4096;
  static constexpr int kMaxProgressThreads = 16;  // proto::kMaxLanes
  static constexpr uint64_t kMaxStagingBytes = uint64_t{4} * 0xffffffffu;

  // InvalidArgument naming the first bad field.
  Status Validate() const;
  // One line, every field: "switch=127.0.0.1:47000 job=1 rank=0 world=1 ...".
  std::string ToString() const;
  // `base` with the INA_* variables that are set applied on top. Does not validate. A malformed
  // value (not a number, out of the field's type range, no port) is an InvalidArgument naming
  // the variable.
  static Result<CommConfig> FromEnv(CommConfig base);
};

// The ethdev name of each of `lanes` DPDK lanes from DpdkConfig::port: empty gives `lanes` empty
// names (lane l opens the first port not in use, so lanes take the probed ports in order); else
// exactly `lanes` non-empty comma-separated names. Empty result: `port` does not fit `lanes`.
std::vector<std::string> DpdkLanePorts(const std::string& port, int lanes);

}  // namespace ina::host
