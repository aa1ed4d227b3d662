// The switch loop's configuration (ina::switchd_loop, used by ina-switchd and ina-rtlsim): every
// tunable, parsed from the command line (and the few documented INA_* environment overrides) and
// validated at once. One table in config.cc lists every flag: the parser, --help (Usage) and the
// start-up print (PrintConfig) are all made from it, and a test checks that docs/switchd.md names
// each one.
//
// The library knows no aggregation engine: each program passes the engines its own factory offers
// (EngineMenu) to ParseArgs and Usage, and the description of the one it built to PrintConfig.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ina/base/status.h"

namespace ina::dp::switchd {

struct Config {
  std::string bind = "127.0.0.1";   // IPv4 or IPv6 literal
  uint16_t port = 47000;            // UDP port; 0: ephemeral (the listening line says which)
  std::string engine;               // one of EngineMenu::names; ParseArgs fills in the default
  uint32_t slots = 16384;           // slot pool size, 1 .. kMaxSlots
  uint16_t max_jobs = 256;          // jobs pending or active at once, 1 .. kMaxJobs
  uint32_t job_timeout_ms = 30000;  // idle time after which a job is freed, >= 1
  // Sharing the pool (ControlConfig, docs/protocol.md "Sharing the slot pool"): the least window
  // a job is admitted with, and the calls a grant lasts before the ranks re-join (0: unlimited).
  uint32_t min_window = 8;
  uint32_t lease_calls = 64;
  uint32_t idle_release_ms = 2000;  // ControlConfig::idle_release (0: never; a leaf: never)
  uint32_t stats_interval_ms = 0;   // periodic stats line; 0: off
  double drop_rate = 0;             // fault injection, probabilities in [0, 1]
  double dup_rate = 0;
  double reorder_rate = 0;
  double corrupt_rate = 0;          // flip one byte of a packet (each direction) with this p
  uint64_t seed = 1;                // fault injection RNG seed
  std::string io = "udp";           // packet I/O: "udp" (kernel socket), "dpdk" (ethdev ports) or
                                    // "roce" (RoCEv2 UD SENDs on --bind:4791, net/roce.h: over
                                    // raw sockets, or over DPDK's ports with --dpdk)
  uint32_t roce_qpn = 0x000100;     // --io roce: the switch's QP number (workers' remote_qpn)
  uint32_t roce_qkey = 0x494E4100;  // --io roce: the Q_Key of every QP ("INA\0")
  std::string dpdk_eal;             // --dpdk: EAL arguments (implies --io dpdk unless --io roce);
                                    // every port probed (e.g. by --vdev) is a switch port
  uint32_t dpdk_backoff_us = 1000;  // idle back-off ceiling of the DPDK poll loop
  uint32_t dpdk_mtu = 1500;         // the DPDK ports' IP MTU (9000: jumbo frames, K=2048)
  // True when the ports are DPDK ethdevs (--io dpdk, or --io roce with --dpdk).
  bool uses_eal() const { return io == "dpdk" || (io == "roce" && !dpdk_eal.empty()); }
  uint32_t cores = 1;  // loop threads, 1 .. kMaxCores: each owns the jobs j % cores; with
                       // --io udp a socket the kernel steers them to, with DPDK ports every
                       // cores-th port (at most kMaxDpdkCores); RoCE over raw sockets: 1
  // --io udp with cores > 1: 1 gives core c a socket of its own at port + c instead of a share
  // of the reuseport group; workers with lanes on switch cores (CommConfig::switch_cores) send
  // lane c there, so every core aggregates a share of every job's slots (docs/switchd.md).
  // --io dpdk: every port gets `cores` queues; core c owns queue c of each, at port + c, and no
  // packet passes between cores (no handoff rings).
  uint32_t core_ports = 0;
  uint32_t socket_buffer_bytes = 8u << 20;  // --io udp: SO_RCVBUF/SO_SNDBUF request (bursts from
                                            // many workers); 0: the kernel's default
  bool udp_gso = true;  // --io udp: GSO trains out, GRO in; env INA_UDP_GSO (0|1) if no flag
  // ina-rtlsim only (EngineMenu::rtl): probabilities in [0, 1) of an idle input cycle and of a low
  // output ready in the verilated core (backpressure end to end; results the same, only slower);
  // env INA_RTLSIM_IDLE / INA_RTLSIM_STALL if no flag.
  double rtl_idle = 0;
  double rtl_stall = 0;
  // ina-rtlsim only: an FST waveform of the core (docs/rtl/debugging.md), cycles [from, from +
  // cycles) (cycles 0: to the end); empty: none.
  std::string rtl_trace;
  uint64_t rtl_trace_from = 0;
  uint64_t rtl_trace_cycles = 0;
  // ina-rtlsim only: replay a capture through the core and the reference engine instead of
  // serving (--replay IN.pcap --out OUT.pcap; sim/src/rtlsim/replay.h).
  std::string replay;
  std::string replay_out;
  // Every datagram received, written to this pcap file as Ethernet/IPv4/UDP frames (a capture
  // ina-rtlsim --replay reads); empty: none. Needs --cores 1 and IPv4 peers (others are skipped).
  std::string record;
  // Authenticated jobs (docs/security.md): the admin channel's secret, read at start from this
  // file (hex, 32 .. 128 digits; the file must be readable by its owner only, mode 0600 or
  // stricter); empty: no admin channel. require_job_keys: refuse every JOIN whose job has no key.
  std::string admin_key_file;
  bool require_job_keys = false;
  // Two-level aggregation (docs/hierarchy.md): this switch is leaf `leaf_index` of `leaves` under
  // the spine at `upstream` ("IPv4:PORT" or "[IPv6]:PORT"); empty: a flat switch (or a spine).
  // Needs --io udp, and --cores 1 or --core-ports 1 (a leaf on every core).
  std::string upstream;
  uint32_t leaf_index = 0;
  uint32_t leaves = 1;
  // A leaf on several cores (--core-ports 1): 1, core c goes to the spine's core c at the
  // upstream port + c (a spine of as many cores with --core-ports 1); 0, every core goes to the
  // upstream port as lane c of `cores` lanes of this leaf's rank (a spine of any cores: one port,
  // or ina-rtlsim).
  uint32_t upstream_core_ports = 1;
  // A leaf with --admin-key-file: the spine's admin secret (a file as admin_key_file's); keys
  // installed here are passed on to the spine (docs/hierarchy.md, "Keyed jobs"). Empty: not.
  std::string upstream_admin_key_file;
  // --metrics: Prometheus text format over HTTP at this "IPv4:PORT" or "[IPv6]:PORT" (GET
  // /metrics; ina-switchd's metrics.h); empty: off.
  std::string metrics;
  std::string config;  // --config FILE it read ("flag = value" lines); empty: none
  bool help = false;   // --help: print Usage() and exit 0
};

inline constexpr uint32_t kMaxSlots = 1u << 20;
inline constexpr uint16_t kMaxJobs = 4096;
inline constexpr uint32_t kMaxCores = 64;
// With DPDK ports the cores pass packets through rings, one per pair of cores and direction
// (handoff.h: 64 MiB in all up to 8 cores, 256 entries each beyond): 16 cores take 150 MiB.
inline constexpr uint32_t kMaxDpdkCores = 16;

// The engines a program can build, as its --engine flag and --help show them.
struct EngineMenu {
  std::string_view names;         // accepted by --engine, '|'-separated: "fast|ref"
  std::string_view default_name;  // what an absent --engine means; one of names
  // A pool fixed when the engine was built (ina-rtlsim's verilated core): --slots defaults to it
  // and any other value is refused. 0: any pool size.
  uint32_t fixed_slots = 0;
  bool rtl = false;  // the program takes the --rtl-* flags (ina-rtlsim)
};

// Reads an environment variable: a fake in tests; nullptr means std::getenv.
using GetEnv = const char* (*)(const char*);

// Parses argv[1..] over the defaults and the environment overrides (a flag wins over its
// variable). Flags take "--flag value" or "--flag=value". --engine must be one of engines.names;
// without it Config::engine = engines.default_name. InvalidArgument names the flag (or the
// variable), the value and what was wanted: "--slots='0': not an integer in [1, 1048576]".
Result<Config> ParseArgs(const std::vector<std::string>& args, const EngineMenu& engines,
                         GetEnv getenv = nullptr);
// The --help text (it names ina-switchd: ina-rtlsim prints a line of its own before it).
std::string Usage(const EngineMenu& engines);
// Prints every field the program takes, one "  name = value" line each; the engine line is
// "  engine = NAME [engine_description]".
void PrintConfig(const Config& c, std::string_view engine_description, std::FILE* out,
                 const EngineMenu& engines = {});
// Every flag a program with `engines` takes, as written in --help and docs/switchd.md
// ("--slots N"), in table order (for the docs test).
std::vector<std::string> FlagNames(const EngineMenu& engines);

}  // namespace ina::dp::switchd
