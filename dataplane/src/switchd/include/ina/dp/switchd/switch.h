// The switch loop (library ina::switchd_loop): one UDP socket (or DPDK ports), one engine, one
// control plane, one thread. ina-switchd runs it with the fast or reference engine, ina-rtlsim with
// the verilated RTL core; the caller builds the engine and hands it over in Create, so the loop
// knows no engine but through dp::Engine.
//
// I/O: with --io udp a kernel socket (poll, recvmmsg, sendmmsg); with --io dpdk every DPDK port
// (dpdk_ports.h: Wait backs off instead of poll, Recv/Send in bursts, per-port counters). The rest
// of the loop is the same for both.
// Loop: poll (bounded timeout, never a busy spin) -> recvmmsg bursts of kBurst -> receive-side
// fault injection -> classify in arrival order: JOIN/LEAVE (version ok, header-only or not) go to
// the control plane; data packets go through the source check (a packet for an active job's
// (job, rank) from any other address: drop_foreign_src, the engine never sees it) and are handed
// to the engine in bursts; everything else (short, other version, other types) goes to the engine,
// which counts it under its drop cause. Results and control replies are expanded to peers, pass
// send-side fault injection and leave through sendmmsg in bursts; EAGAIN/ENOBUFS waits (bounded)
// for room, and what still cannot be sent is counted in tx_errors, never lost silently.
// The control plane is ticked (job timeout) at least every kTickInterval.
//
// UDP GSO/GRO (--io udp; INA_UDP_GSO=0 in the environment turns both off): the socket takes GRO
// trains (UDP_GRO; one recvmmsg entry may hold up to 64 datagrams, split here into ina packets,
// leftovers kept for the next burst), and each flush groups its packets by destination peer (in
// order within a peer) and sends runs of equal-size packets to one peer as one UDP_SEGMENT message.
// Fault injection still acts per ina packet before any coalescing, and every counter counts ina
// packets, not kernel messages.
//
// Memory: every buffer is allocated in Create; the per-packet path does not allocate.
#pragma once

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ina/base/status.h"
#include "ina/dp/control.h"
#include "ina/dp/engine.h"
#include "ina/dp/switchd/config.h"
#include "ina/dp/switchd/dpdk_ports.h"
#include "ina/dp/switchd/fault.h"
#include "ina/proto/wire.h"

namespace ina::dp::switchd {

inline constexpr size_t kBurst = 32;

// The switch's own counters (besides the engine's proto counters and the control plane's).
enum class SwitchCounter : uint16_t {
  kRxDatagrams = 0,  // datagrams received from the socket
  kRxTruncated,      // datagrams longer than the receive buffer (handed on truncated)
  kDropForeignSrc,   // data for an active (job, rank) from another address
  kInjRxDrops,       // fault injection, receive side
  kInjRxDups,
  kInjRxReorders,
  kInjTxDrops,  // fault injection, send side
  kInjTxDups,
  kInjTxReorders,
  kTxPackets,  // packets the kernel accepted
  kTxErrors,   // packets that could not be sent (dropped after retries, or an error)
  kTxWaits,    // times sendmmsg hit EAGAIN/ENOBUFS and the loop waited for room
  kJobsFreed,  // jobs freed by LEAVE or timeout
  kCount,
};
inline constexpr size_t kNumSwitchCounters = static_cast<size_t>(SwitchCounter::kCount);
inline constexpr std::array<std::string_view, kNumSwitchCounters> kSwitchCounterNames = {
    "rx_datagrams",    "rx_truncated", "drop_foreign_src", "inj_rx_drops",    "inj_rx_dups",
    "inj_rx_reorders", "inj_tx_drops", "inj_tx_dups",      "inj_tx_reorders", "tx_packets",
    "tx_errors",       "tx_waits",     "jobs_freed"};

class Switch : private Emitter, private ReplySink {
 public:
  // Takes the engine (built by the caller for this config; its pool_slots() bound the slots the
  // control plane hands out), builds the control plane, allocates every buffer and opens the
  // socket (--bind, --port) or the DPDK ports (--io dpdk). config is as ParseArgs returns it;
  // config.engine is only the name the summary prints.
  // Errors: InvalidArgument (engine null, bad --bind), the control plane's, ErrnoStatus (socket,
  // bind), DpdkPorts::Open's.
  static Result<std::unique_ptr<Switch>> Create(const Config& config,
                                                std::unique_ptr<Engine> engine);
  ~Switch() override;

  // "ADDR:PORT" actually bound (the port resolved when --port 0).
  std::string local_address() const;

  // Runs until *stop becomes non-zero (set from a signal handler). Errors: a socket failure.
  Status Run(const volatile std::sig_atomic_t* stop);

  // One line: uptime, rx, tx, results, jobs, drops.
  void PrintStatsLine(std::FILE* out) const;
  // A human summary (non-zero counters), then the JSON line with every counter by name.
  void PrintSummary(std::FILE* out) const;
  // {"switch_counters": {...}}; with --io dpdk a {"port_counters": [...]} line before it.
  void PrintJson(std::FILE* out) const;

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kRxBufBytes = 2048;     // > proto::kMaxPacketBytes
  static constexpr size_t kItemCap = 4 * kBurst;  // burst + dups + released held packets
  static constexpr size_t kTxCap = 4096;          // queued sends before a forced flush
  static constexpr auto kTickInterval = std::chrono::milliseconds(10);
  static constexpr int kMaxPollMs = 100;
  static constexpr int kTxWaitMs = 20;   // per EAGAIN wait
  static constexpr int kTxMaxWaits = 5;  // then the rest of the batch is dropped
  static constexpr size_t kMaxSegs = 64;           // segments per GSO message
  static constexpr size_t kMaxGsoBytes = 65507;    // payload bytes per GSO message
  static constexpr size_t kGroBufBytes = 65536;    // one received GRO train
  static constexpr size_t kTxGroups = 64;          // distinct peers grouped per flush (last: rest)

  struct Item {  // one packet to classify: a view of an rx or hold buffer
    const uint8_t* data;
    uint32_t len;
    const Peer* from;
  };
  struct HeldRx {
    std::array<uint8_t, kRxBufBytes> buf;
    uint32_t len;
    Peer from;
  };
  struct TxSlot {
    std::array<uint8_t, proto::kMaxPacketBytes> buf;
    uint32_t len;
    Peer to;
  };

  Switch(const Config& config, std::unique_ptr<Engine> engine);
  Status Init();

  // Receives and handles up to one burst; returns how many datagrams arrived.
  Result<size_t> RxBurst(Clock::time_point now);
  void HandleItems(size_t n, Clock::time_point now);
  void FlushData();
  // Releases held (reordered) rx packets with nothing newer to pass them.
  void ReleaseHeldRx(Clock::time_point now);

  // Emitter / ReplySink: queue a packet to peers.
  void OnResult(uint16_t job_id, uint16_t dest_rank, std::span<const uint8_t> packet) override;
  void Send(const Peer& to, std::span<const uint8_t> packet) override;
  void EnqueueTx(const Peer& to, std::span<const uint8_t> packet);
  void PushTx(const Peer& to, std::span<const uint8_t> packet);
  // Sends every queued packet (then the ones held for reordering from the previous flush).
  void FlushTx();
  void SendRange(std::vector<TxSlot>& q, size_t n);
  // SendRange with GSO: q[0, n) grouped by peer, equal-size runs sent as UDP_SEGMENT trains.
  void SendRangeGso(std::vector<TxSlot>& q, size_t n);
  // Hands out up to kBurst packets of the received GRO trains into rx_ptrs_/rx_lens_/... .
  size_t DrainGro();

  // Waits up to timeout_ms for something to receive: >0 ready, 0 timeout, <0 error (errno).
  int WaitRx(int timeout_ms);
  // Receives one burst into rx_bufs_/rx_lens_/rx_peers_ (and rx_trunc_). Returns the count.
  Result<size_t> ReceiveRaw();
  void Tick(Clock::time_point now);
  void Bump(SwitchCounter c, uint64_t n = 1) { counters_[static_cast<size_t>(c)] += n; }
  uint64_t Ctr(SwitchCounter c) const { return counters_[static_cast<size_t>(c)]; }
  // Every counter by name, in JSON order: engine, control, switch.
  std::vector<std::pair<std::string_view, uint64_t>> AllCounters() const;

  Config config_;
  int fd_ = -1;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ControlPlane> control_;
  FaultInjector rx_faults_;
  FaultInjector tx_faults_;
  Clock::time_point start_;
  Clock::time_point last_tick_{};
  Clock::time_point now_{};

  // Receive side.
  std::vector<std::array<uint8_t, kRxBufBytes>> rx_bufs_;  // kBurst
  std::vector<Peer> rx_peers_;                             // kBurst
  std::vector<uint32_t> rx_lens_;                          // kBurst
  std::vector<uint8_t> rx_trunc_;                          // kBurst
  std::vector<uint8_t*> rx_ptrs_;                          // kBurst (DPDK)
  std::vector<mmsghdr> rx_msgs_;
  std::vector<iovec> rx_iov_;
  std::vector<HeldRx> held_rx_[2];  // two banks of kBurst: filling / being released
  size_t held_rx_n_[2] = {0, 0};
  int held_fill_ = 0;
  std::vector<Item> items_;                           // kItemCap
  std::vector<std::span<const uint8_t>> data_burst_;  // kItemCap
  size_t data_n_ = 0;

  // Send side.
  std::vector<TxSlot> tx_q_;  // kTxCap
  size_t tx_n_ = 0;
  std::vector<TxSlot> tx_held_;  // reordered: sent after the next flush's packets
  size_t tx_held_n_ = 0;
  std::vector<TxSlot> tx_held_next_;
  size_t tx_held_next_n_ = 0;
  std::vector<mmsghdr> tx_msgs_;  // kBurst
  std::vector<iovec> tx_iov_;
  std::vector<OutPacket> tx_out_;  // kBurst (DPDK)

  // GSO/GRO (--io udp only).
  struct alignas(cmsghdr) CmsgBuf {
    uint8_t b[CMSG_SPACE(sizeof(int))];
  };
  bool gso_ = false;
  bool gro_ = false;
  std::vector<uint8_t> gro_buf_;     // kBurst * kGroBufBytes
  std::vector<Peer> gro_peers_;      // kBurst: the sender of each train
  std::vector<CmsgBuf> rx_cmsg_;     // kBurst
  struct GroPending {
    size_t off, len, seg;
    bool trunc;
  };
  std::vector<GroPending> gro_pend_;  // kBurst
  size_t gro_n_ = 0;
  size_t gro_next_ = 0;
  std::vector<uint32_t> tx_order_;   // kTxCap: slot indices grouped by peer
  std::vector<uint32_t> tx_link_;    // kTxCap: next slot of the same group
  std::vector<uint16_t> tx_group_;   // kTxCap
  std::array<uint32_t, kTxGroups> group_head_{};
  std::array<uint32_t, kTxGroups> group_tail_{};
  std::array<const Peer*, kTxGroups> group_peer_{};
  std::vector<iovec> gso_iov_;       // kBurst * kMaxSegs
  std::vector<CmsgBuf> tx_cmsg_;     // kBurst
  std::vector<size_t> tx_counts_;    // kBurst: packets in each message

  std::unique_ptr<DpdkPorts> dpdk_;  // --io dpdk; fd_ stays -1

  std::array<uint64_t, kNumSwitchCounters> counters_{};
};

}  // namespace ina::dp::switchd
