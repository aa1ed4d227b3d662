// ina-bench's command line: the options, their defaults, ranges and help, declared once in a table
// (options.cc) from which the parser, --help and the run options a coordinator hands its workers
// (RunArgs) are all made.
//
// Each option is the parent's (the coordinator's), a worker's (--role worker), or both; the run
// options (sizes, seed, K, window, job, timeouts, transport, ...) are sent by the coordinator to
// every worker, and a worker whose own command line gives one must give the same value.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "ina/base/status.h"

namespace ina::bench {

inline constexpr int kMaxIters = 1000;
inline constexpr int kMaxWorkers = 64;

struct Options {
  int workers = 4;
  size_t elements = 1 << 20;
  int iters = 5;
  double drop_rate = 0, dup_rate = 0, reorder_rate = 0, corrupt_rate = 0;
  uint64_t seed = 1;
  int k = 0;  // elements per packet; 0 ("auto"): the largest the path carries, as libina picks
  int window = 256;
  bool int32 = false;
  bool gloo = true;
  // AllReduceOptions::average: the sum divided by the world size. Gloo's ring sums, then divides
  // (quant::DivideBy) inside its timing, as a trainer on Gloo does.
  bool average = false;
  std::string switch_addr;  // empty: start our own
  std::string engine = "fast";
  std::string dataplane = "sw";
  // Authenticated job (docs/security.md): crc, mac or mac_encrypt. Keyed, a switch started here
  // gets a fresh admin key and the job a fresh secret (ina-jobkey installs it); the workers read
  // the secret from INA_JOB_KEY.
  std::string sec = "crc";
  int job = 0;  // 0 on the command line: derived from our pid by ParseArgs
  int kill_rank = -1;
  int kill_after_ms = 50;
  int progress_timeout_ms = 5000;
  // CommConfig::progress_threads: lanes (progress threads, one socket each) per worker.
  int progress_threads = 1;
  // CommConfig::switch_cores: one job on N switch cores (lane l to core l at the switch's port +
  // l; the switch started here gets --cores N --core-ports 1). Sets progress_threads to N.
  int switch_cores = 1;
  int rto_min_us = 0;      // 0: CommConfig's default
  int rto_initial_us = 0;  // 0: CommConfig's default
  int timeout_s = 600;
  bool quiet = false;
  // Workers that do not share the parent's memory meet it over TCP (coordinator.h): in network
  // namespaces the parent starts (worker_netns) or started elsewhere by hand (listen).
  std::vector<std::string> worker_netns;   // one network namespace per rank
  std::vector<std::string> worker_switch;  // HOST:PORT of the switch as seen from each rank
  std::vector<std::string> worker_addr;    // each rank's own address (Gloo binds it)
  std::string listen;                      // HOST:PORT: coordinate workers started elsewhere
  int join_timeout_s = 60;  // parent: every worker connected by then; worker: to reach the parent
  // A worker (--role worker): its rank, the coordinator it reports to, Gloo's address.
  bool role_worker = false;
  int rank = -1;
  std::string coordinator;  // HOST:PORT
  std::string gloo_host = "127.0.0.1";
  std::vector<std::string> given;  // the flags the command line gave, in order
  // Worker transport: "udp", "dpdk" (templates with {rank}, see SubstRank) or "memif" (DPDK over
  // net_memif: ina-bench gives the switch one memif port per rank and each rank its EAL, see
  // MemifEal in launch.h) or "verbs" (UD SENDs to ina-switchd --io roce; each worker's device,
  // GID and QPN from its INA_VERBS_* environment, applied by the transport).
  std::string transport = "udp";
  std::string dpdk_eal;
  std::string dpdk_local;
  int dpdk_backoff_us = 200;
  int dpdk_mtu = 1500;         // memif / dpdk: the frames' IP MTU (9000: jumbo, K up to 2048)
  bool udp_gso = true;         // workers' CommConfig::udp_gso and the switch's --udp-gso
  std::string quant = "auto";  // workers' CommConfig::quant
  // Where the workers' tensors live: "host" (the plain call) or "host-async" (through a memory
  // domain over host memory, HostDomain: the staged, domain-quantizing path; over verbs its
  // payloads leave from the domain's NIC buffer, GPUDirect RDMA's send path, docs/gpu.md).
  std::string memory = "host";
  std::string memif_dir;  // internal (memif): the parent's folder of memif sockets
};

// Parses argv[1..]. Sets *help and returns the defaults when --help or -h is given.
// Errors: InvalidArgument with the message to print (unknown option, missing or out-of-range
// value, options that contradict each other).
Result<Options> ParseArgs(int argc, char** argv, bool* help);

// The option list, from the same table the parser uses.
void PrintUsage(std::FILE* out);

// (flag, value) pairs in the form ParseArgs reads back.
using Args = std::vector<std::pair<std::string, std::string>>;
// The run options of `o` (every one, "" for one unset) and the per-host defaults it has (the
// --dpdk-eal/--dpdk-local templates): what a coordinator hands its workers.
Args RunArgs(const Options& o);
// The run options `o`'s command line gave (a worker's, for the coordinator to check).
Args GivenRunArgs(const Options& o);
// A worker's options with the coordinator's `args` applied (a per-host default only where the
// worker's command line did not give its own), then checked as a whole. Errors: InvalidArgument.
Status ApplyRunArgs(Options* o, const Args& args);

// Every option's value, one "  --flag value" line each, from the same table (printed at start).
void PrintConfig(const Options& o, std::FILE* out);

// printf to stdout (flushed) unless --quiet: the human-readable lines around the JSON line.
void Say(const Options& o, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// `t` with every "{rank}" replaced by the rank's number.
std::string SubstRank(std::string t, int rank);

// "HOST:PORT" split at the last colon. REQUIRES: hp contains ':' (ParseArgs checks every address
// option); a port that is not a number becomes 0.
struct HostPort {
  std::string host;
  uint16_t port = 0;
};
HostPort SplitHostPort(const std::string& hp);

}  // namespace ina::bench
