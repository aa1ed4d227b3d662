// The switch (library ina::switchd_loop): classify-and-dispatch over ina::net ports, on one core
// or several. ina-switchd runs it with the fast or reference engine, ina-rtlsim with the verilated
// RTL core; the caller builds the engine(s) and hands them over in Create, so the loop knows no
// engine but through dp::Engine.
//
// I/O is ina::net's (net/include/ina/net/port.h): with --io udp one kernel UDP port per core
// (GSO/GRO unless Config::udp_gso is off), with --io dpdk one DPDK port per ethdev the EAL probed
// (a peer's MAC and port travel in its Peer, see net/port.h), with --io roce one RoCE port (UD
// SENDs on --bind:4791; a peer is a worker's GID and QP number, see net/roce.h). Fault injection
// (--drop-rate ...) is net's FaultPort around each port, so it acts per ina packet on either path.
//
// One core's loop: wait (bounded: 100 ms, 1 ms while a port holds reordered packets; never a busy
// spin) -> RxBurst bursts of kBurst, up to 64 before looking at the clock -> classify in arrival
// order: JOIN/LEAVE go to the control plane (data before them in the burst is handed to the
// engine first); data goes through the source check (a packet for an active job's (job, rank)
// from any other address: drop_foreign_src, the engine never sees it); everything else (short,
// other version, other types) goes to the engine, which counts it under its drop cause -> the
// engine's ProcessBurst -> results and control replies are expanded to peers and queued -> the
// queue is sent in TxBurst calls (grouped by destination when the port coalesces, by port with
// several ports); a full queue waits (bounded, kTxMaxWaits x kTxWaitMs), then what is left is
// counted in tx_errors, never lost silently. The control plane is ticked (job timeout) every
// kTickInterval.
//
// Several cores (--cores N, --io udp): N threads, each owning a UDP port (SO_REUSEPORT on one
// address), its own engine (slots / N of the pool, max_jobs each) and its own control plane. The
// kernel steers every datagram by its job id (classic BPF on the reuseport group: job mod N), so
// a job's JOINs, data and LEAVEs all reach one core and the cores share nothing on the data path:
// no locks, no atomics but the counters each core publishes for the stats every tick.
//
// Stats: Snapshot() (any thread; values as of the last tick while running, exact after Run) has
// every counter summed over cores and per core; printing it is reporter.h's job.
// Memory: every buffer is allocated in Create; the per-packet path does not allocate.
#pragma once

#include <array>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ina/base/status.h"
#include "ina/dp/control.h"
#include "ina/dp/engine.h"
#include "ina/dp/ref_engine.h"  // EngineLimits
#include "ina/dp/switchd/config.h"
#include "ina/net/port.h"

namespace ina::dp::switchd {

inline constexpr size_t kBurst = net::kBurst;

// The switch's own counters (besides the engine's proto counters and the control plane's).
enum class SwitchCounter : uint16_t {
  kRxDatagrams = 0,  // datagrams received from the ports (before fault injection)
  kRxTruncated,      // datagrams longer than the receive buffer (handed on truncated)
  kDropForeignSrc,   // data for an active (job, rank) from another address
  kInjRxDrops,       // fault injection, receive side
  kInjRxDups,
  kInjRxReorders,
  kInjTxDrops,  // fault injection, send side
  kInjTxDups,
  kInjTxReorders,
  kTxPackets,  // packets the kernel / PMD accepted
  kTxErrors,   // packets that could not be sent (dropped after retries, or an error)
  kTxWaits,    // times a send found the queue full and the loop waited for room
  kJobsFreed,  // jobs freed: aborting LEAVE, every rank's graceful LEAVE, or timeout
  // --io roce (net/roce.h): RoCE packets dropped before classification, by reason, and the PSNs
  // skipped by accepted ones (packets lost between a worker and the switch).
  kRoceShort,      // shorter than its headers, IP options, inconsistent lengths, pad too long
  kRoceBadIcrc,    // ICRC wrong
  kRoceBadOpcode,  // not UD SEND_ONLY (or transport version != 0)
  kRoceWrongQpn,   // destination QP not the switch's
  kRoceBadKey,     // Q_Key or P_Key not the switch's
  kRoceBadPsn,     // PSN behind the last one from that source QP (duplicate or replay)
  kRocePsnGaps,    // PSNs skipped (accepted; counted, not dropped)
  // --cores N with DPDK ports (handoff between cores, docs/switchd.md "Several cores").
  kHandoffRx,     // packets received here for a job of another core, passed to it
  kHandoffTx,     // packets sent through a port of another core, passed to it
  kHandoffDrops,  // handoffs dropped: the ring to that core was full (ina resends)
  // The kernel's drops before the switch read them: a UDP socket's receive buffer full (a
  // datagram, or a GSO train that arrived whole; net::PortStats::rx_kernel_drops; ina resends).
  kRxSocketDrops,
  kErrUnknownJob,  // error(unknown_job) sent: data of a job this switch does not hold
  kCount,
};
inline constexpr size_t kNumSwitchCounters = static_cast<size_t>(SwitchCounter::kCount);
inline constexpr std::array<std::string_view, kNumSwitchCounters> kSwitchCounterNames = {
    "rx_datagrams",    "rx_truncated",   "drop_foreign_src", "inj_rx_drops",    "inj_rx_dups",
    "inj_rx_reorders", "inj_tx_drops",   "inj_tx_dups",      "inj_tx_reorders", "tx_packets",
    "tx_errors",       "tx_waits",       "jobs_freed",       "roce_short",      "roce_bad_icrc",
    "roce_bad_opcode", "roce_wrong_qpn", "roce_bad_key",     "roce_bad_psn",    "roce_psn_gaps",
    "handoff_rx",      "handoff_tx",     "handoff_drops",    "rx_socket_drops", "err_unknown_job"};

using NamedCounters = std::vector<std::pair<std::string_view, uint64_t>>;

struct PortSnapshot {
  std::string name;  // "udp", "net_memif0"
  unsigned core = 0;
  net::PortStats stats;
};

// A job as one core's control plane saw it at the last tick (Config::metrics only).
struct JobSnapshot {
  unsigned core = 0;
  JobInfo info;
};

struct SwitchStats {
  double uptime_s = 0;
  std::string engine;  // Config::engine
  bool dpdk = false;   // --io dpdk (the JSON then has a port_counters line)
  size_t jobs_open = 0;
  NamedCounters counters;               // engine, control, switch; summed over cores
  std::vector<NamedCounters> per_core;  // the same, per core (one entry per core)
  std::vector<PortSnapshot> ports;
  std::vector<uint32_t> pool_slots;    // per core: the slots its engine has
  std::vector<uint32_t> slots_in_use;  // per core: granted to active jobs
  std::vector<JobSnapshot> jobs;       // pending, queued and active jobs (Config::metrics only)
};

// Builds one core's engine for limits (ina-switchd: engines.h).
using EngineFactory = std::function<Result<std::unique_ptr<Engine>>(const EngineLimits&)>;

class Handoff;  // packets between the cores of a DPDK switch (handoff.h, private)

class Switch {
 public:
  // One core: takes the engine (built by the caller for this config; its pool_slots() bound the
  // slots the control plane hands out). InvalidArgument when config.cores > 1 (use the factory).
  static Result<std::unique_ptr<Switch>> Create(const Config& config,
                                                std::unique_ptr<Engine> engine);
  // config.cores cores, each with an engine from make_engine(limits): pool_slots = slots / cores,
  // max_jobs = max_jobs. Allocates every buffer, opens the ports (--bind, --port; --io dpdk: the
  // EAL and every probed port, port i owned by core i % cores). Errors: InvalidArgument (no
  // engine, bad --bind, --cores with --io roce over sockets), the engine factory's, the control
  // plane's, the ports' (net/).
  static Result<std::unique_ptr<Switch>> Create(const Config& config,
                                                const EngineFactory& make_engine);
  ~Switch();

  // "ADDR:PORT" actually bound (the port resolved when --port 0); with dpdk the ports after it.
  std::string local_address() const;

  using StatsCallback = std::function<void(const SwitchStats&)>;
  // Runs every core until *stop becomes non-zero (set from a signal handler); core 0 on the
  // calling thread. Every stats_interval_ms (when > 0) calls on_stats with a Snapshot from the
  // calling thread (no callback: PrintStatsLine to stdout). Before returning, each core sends
  // what is still queued or held. Errors: the first core's port failure.
  Status Run(const volatile std::sig_atomic_t* stop, const StatsCallback& on_stats = nullptr);

  SwitchStats Snapshot() const;
  // PrintSummary(Snapshot(), out) (reporter.h), for callers that print nothing else.
  void PrintSummary(std::FILE* out) const;

  class Core;  // one core's loop (switch.cc)

 private:
  Switch() = default;
  Config config_;
  std::unique_ptr<Handoff> handoff_;  // --cores > 1 with DPDK ports; else null
  std::vector<std::unique_ptr<Core>> cores_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ina::dp::switchd
