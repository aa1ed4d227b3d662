// ina-switchd's configuration: every tunable, parsed from the command line and validated at once.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "ina/base/status.h"

namespace ina::dp::switchd {

struct Config {
  std::string bind = "127.0.0.1";   // IPv4 or IPv6 literal
  uint16_t port = 47000;            // UDP port; 0: ephemeral (the listening line says which)
  std::string engine;               // "fast" or "ref"; empty: DefaultEngineName()
  uint32_t slots = 16384;           // slot pool size, 1 .. kMaxSlots
  uint16_t max_jobs = 256;          // jobs pending or active at once, 1 .. kMaxJobs
  uint32_t job_timeout_ms = 30000;  // idle time after which a job is freed, >= 1
  uint32_t stats_interval_ms = 0;   // periodic stats line; 0: off
  double drop_rate = 0;             // fault injection, probabilities in [0, 1]
  double dup_rate = 0;
  double reorder_rate = 0;
  uint64_t seed = 1;                // fault injection RNG seed
  std::string io = "udp";           // packet I/O: "udp" (kernel socket) or "dpdk" (ethdev ports)
  std::string dpdk_eal;             // --dpdk: EAL arguments (implies --io dpdk); every port probed
                                    // (e.g. by --vdev) is a switch port
  uint32_t dpdk_backoff_us = 1000;  // idle back-off ceiling of the DPDK poll loop
  bool help = false;                // --help: print Usage() and exit 0
};

inline constexpr uint32_t kMaxSlots = 1u << 20;
inline constexpr uint16_t kMaxJobs = 4096;

// Parses argv[1..]. Flags take "--flag value" or "--flag=value". InvalidArgument names the flag
// and the accepted range.
Result<Config> ParseArgs(const std::vector<std::string>& args);
std::string Usage();
// Prints every field, one "  name = value" line each.
void PrintConfig(const Config& c, std::FILE* out);

}  // namespace ina::dp::switchd
