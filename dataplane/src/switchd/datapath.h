// One switch core's data path (private to ina::switchd_loop; the Core in switch.cc runs the loop
// that calls it): the packets of one receive round classified in arrival order (the leaf's
// traffic, control messages, data, foreign sources) with data handed to the engine in bursts, and
// what they cause (results, replies) queued once and sent in batches.
//
// Threading: every object here belongs to one core's thread. No allocation after construction,
// no locks, no logging per packet: errors become the core's switch counters (CoreCounters).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ina/dp/control.h"
#include "ina/dp/engine.h"
#include "ina/dp/switchd/leaf.h"
#include "ina/dp/switchd/switch.h"
#include "ina/net/port.h"
#include "ina/proto/wire.h"

namespace ina::dp::switchd {

class CoreHandoff;
class CoreLeaf;

// A core's switch counters (SwitchCounter; the port-derived ones come from the ports).
struct CoreCounters {
  std::array<uint64_t, kNumSwitchCounters> v{};
  void Bump(SwitchCounter c, uint64_t n = 1) { v[static_cast<size_t>(c)] += n; }
};

// A core among the switch's cores: local port pi of core `index` is the switch's global port
// pi * cores + index (the Via a received packet's peer carries, net/port.h).
struct CorePlace {
  unsigned index = 0;
  unsigned cores = 1;
  uint16_t GlobalPort(size_t pi) const { return static_cast<uint16_t>(pi * cores + index); }
};

using PortList = std::vector<std::unique_ptr<net::Port>>;

// Packets of one receive round (kRxCap per port and RxBurst, kItemCap classified at once).
inline constexpr size_t kRxCap = 2 * kBurst;    // a burst and its duplicates (FaultPort)
inline constexpr size_t kItemCap = 4 * kBurst;  // packets of one RxBurst round

// Peer and Endpoint are both a sockaddr_storage and a length: copy the address and its L2 extras
// (port.h: a DPDK port's MAC, the port index; kEndpointBytes), not the whole storage per packet.
void CopyTo(Peer* p, const net::Endpoint& e);
void CopyTo(net::Endpoint* e, const Peer& p);

// Sends descs through `port`: a failed TxBurst counts its first packet as a tx error and goes on;
// a full queue is waited for (kTxWait) up to kTxMaxWaits times, then the rest counts as tx errors.
void SendBurst(net::Port& port, std::span<const net::TxPacket> descs, CoreCounters& counters);

// The send queue of a core: packets copied once into send buffers, each queued to one or more
// peers, and sent on Flush: to one port grouped by destination when it coalesces, else to each
// port the packets of its Via (received there), in queue order; what leaves through another
// core's port goes through the handoff.
class TxQueue {
 public:
  static constexpr size_t kCap = 4096;   // queued sends before a forced flush
  static constexpr size_t kGroups = 64;  // distinct peers grouped per flush (last: the rest)

  // `ports` (the core's) and `counters` outlive the queue.
  TxQueue(CorePlace place, const PortList& ports, CoreCounters& counters);
  // Several cores over DPDK ports (may stay null).
  void SetHandoff(CoreHandoff* handoff) { handoff_ = handoff; }

  // Copies `packet` once and queues it to every peer of `to` (flushing first when the queue
  // lacks room). flags: net::kTxPayloadChecked for results (their trailer covers them).
  // REQUIRES: to.size() <= kCap.
  void Add(std::span<const Peer> to, std::span<const uint8_t> packet, uint32_t flags);
  void Add(const Peer& to, std::span<const uint8_t> packet, uint32_t flags) {
    Add(std::span<const Peer>(&to, 1), packet, flags);
  }
  // Sends everything queued (see the class comment).
  void Flush();

 private:
  // A queued send: one of bufs_ (shared by every destination of one result) to one peer.
  struct Slot {
    uint32_t buf;
    uint32_t len;
    uint32_t flags;
    net::Endpoint to;
  };
  // Stable grouping of q_[0, n) by destination into order_ (order within a peer kept; the last
  // group takes every peer past kGroups - 1, where runs are split by the port).
  void GroupByPeer(size_t n);

  CorePlace place_;
  const PortList& ports_;
  CoreCounters& counters_;
  CoreHandoff* handoff_ = nullptr;
  std::vector<Slot> q_;  // kCap
  size_t n_ = 0;
  std::vector<std::array<uint8_t, proto::kMaxPacketBytes>> bufs_;  // kCap
  size_t bufs_used_ = 0;
  std::vector<net::TxPacket> desc_;  // kCap
  std::vector<uint32_t> order_;      // kCap: slot indices grouped by peer
  std::vector<uint32_t> link_;       // kCap: next slot of the same group
  std::array<uint32_t, kGroups> group_head_{};
  std::array<uint32_t, kGroups> group_tail_{};
  std::array<const net::Endpoint*, kGroups> group_peer_{};
};

// Classify and dispatch: Add the packets of a round (at most kItemCap), then Handle them. The
// engine's results, the control plane's replies and the leaf's packets go to the TxQueue.
class DataPath final : public Emitter, public ReplySink, public LeafSink {
 public:
  using Clock = std::chrono::steady_clock;

  // All outlive the data path.
  DataPath(Engine& engine, ControlPlane& control, TxQueue& tx, CoreCounters& counters);
  // --upstream: the core is a leaf (may stay null).
  void SetLeaf(CoreLeaf* leaf) { leaf_ = leaf; }

  // Queues one received packet (data stays valid until Handle returns). REQUIRES: pending() <
  // kItemCap.
  void Add(const uint8_t* data, uint32_t len, const net::Endpoint& from) {
    CopyTo(&peers_[n_], from);
    items_[n_] = {data, len, &peers_[n_]};
    ++n_;
  }
  size_t pending() const { return n_; }
  // Handles the queued packets, received at `now`, in arrival order, and flushes the TxQueue.
  void Handle(Clock::time_point now);

  // Where the control plane's replies go: straight out, or through the leaf (ranks mapped).
  ReplySink& Replies();

  // Emitter / ReplySink / LeafSink: queue a packet to peers. A result is copied once, whatever
  // the number of ranks (and lanes) it goes to.
  void OnResult(uint16_t job_id, uint16_t dest_rank, std::span<const uint8_t> packet) override;
  void Send(const Peer& to, std::span<const uint8_t> packet) override;
  void SendTo(const Peer& to, std::span<const uint8_t> packet, bool payload_checked) override;

 private:
  struct Item {
    const uint8_t* data;
    uint32_t len;
    const Peer* from;
  };
  void FlushData();
  // error(unknown_job) to the sender of data for a job this switch does not hold (it restarted,
  // or ended the job and its error was lost): the ranks fail at once, not at their progress
  // timeout. At most one per sender address every kUnknownJobGap (the last kAnsweredCap senders
  // remembered); nothing is allocated.
  void AnswerUnknownJob(std::span<const uint8_t> packet, const Peer& from);
  static constexpr auto kUnknownJobGap = std::chrono::milliseconds(100);
  static constexpr size_t kAnsweredCap = 16;
  struct Answered {
    Peer peer;
    Clock::time_point at;
  };

  Engine& engine_;
  ControlPlane& control_;
  TxQueue& tx_;
  CoreCounters& counters_;
  CoreLeaf* leaf_ = nullptr;
  Clock::time_point now_{};  // of the items being handled (leaf timers)
  std::vector<Peer> peers_;  // kItemCap
  std::vector<Item> items_;  // kItemCap
  size_t n_ = 0;
  std::vector<std::span<const uint8_t>> burst_;  // kItemCap
  size_t burst_n_ = 0;
  std::array<Answered, kAnsweredCap> answered_{};
  size_t answered_next_ = 0;  // the slot the next new sender takes (the oldest)
};

}  // namespace ina::dp::switchd
