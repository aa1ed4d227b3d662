// ina-bench's command line: the options, their defaults, ranges and help, declared once in a table
// (options.cc) from which both the parser and --help are made.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
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
  int k = 256;
  int window = 256;
  bool int32 = false;
  bool gloo = true;
  std::string switch_addr;  // empty: start our own
  std::string engine = "fast";
  std::string dataplane = "sw";
  int job = 0;  // 0 on the command line: derived from our pid by ParseArgs
  int kill_rank = -1;
  int kill_after_ms = 50;
  int progress_timeout_ms = 5000;
  // CommConfig::progress_threads: lanes (progress threads, one socket each) per worker.
  int progress_threads = 1;
  int rto_min_us = 0;      // 0: CommConfig's default
  int rto_initial_us = 0;  // 0: CommConfig's default
  int timeout_s = 600;
  bool quiet = false;
  // Multi-host mode.
  std::vector<std::string> worker_netns;   // one network namespace per rank
  std::vector<std::string> worker_switch;  // HOST:PORT of the switch as seen from each rank
  std::vector<std::string> worker_addr;    // each rank's own address (Gloo binds it)
  // Internal: a worker exec'd by the parent.
  bool role_worker = false;
  int rank = -1;
  std::string shm_path;
  std::string store_dir;
  std::string gloo_host = "127.0.0.1";
  // Worker transport: "udp", "dpdk" (templates with {rank}, see SubstRank) or "memif" (DPDK over
  // net_memif: ina-bench gives the switch one memif port per rank and each rank its EAL, see
  // MemifEal in launch.h).
  std::string transport = "udp";
  std::string dpdk_eal;
  std::string dpdk_local;
  int dpdk_backoff_us = 200;
  std::string memif_dir;  // internal (memif): the parent's folder of memif sockets
};

// Parses argv[1..]. Sets *help and returns the defaults when --help or -h is given.
// Errors: InvalidArgument with the message to print (unknown option, missing or out-of-range
// value, options that contradict each other).
Result<Options> ParseArgs(int argc, char** argv, bool* help);

// The option list, from the same table the parser uses.
void PrintUsage(std::FILE* out);

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
