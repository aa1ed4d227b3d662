// One core's side of the handoff between the cores of a DPDK switch (handoff.h's rings; private
// to ina::switchd_loop): received packets of jobs another core owns go to that core, sends through
// another core's port go to the port's core, and what other cores passed to this one is drained
// into this core's data path and ports.
//
// Threading: this core's thread; the rings carry packets to the others. A full ring drops the
// packet (counted as handoff_drops; ina's loss recovery resends).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "datapath.h"
#include "handoff.h"

namespace ina::dp::switchd {

class CoreHandoff {
 public:
  // `handoff`, `ports` (this core's) and `counters` outlive this object.
  CoreHandoff(CorePlace place, Handoff& handoff, const PortList& ports, CoreCounters& counters);

  // The core that owns the job of a packet (job % cores, as the kernel steers UDP: a packet too
  // short for the field goes to core 0, whose engine counts it as malformed).
  unsigned JobOwner(const uint8_t* data, size_t len) const;
  // True when another core passed packets to this one.
  bool Pending() const { return handoff_.Pending(place_.index); }
  // A received packet of a job core `owner` (not this one) owns.
  void PassRx(unsigned owner, std::span<const uint8_t> packet, const net::Endpoint& from);
  // A packet to send: to the core whose port its Via names, when that is another core (else
  // nothing: the caller sends it).
  void PassTx(std::span<const uint8_t> packet, const net::Endpoint& to, uint32_t flags);
  // Handles what other cores passed to this one: received packets of this core's jobs (through
  // `data`), then packets to send through this core's ports. Returns the most taken from one ring.
  size_t Drain(DataPath& data);

 private:
  CorePlace place_;
  Handoff& handoff_;
  const PortList& ports_;
  CoreCounters& counters_;
  std::vector<net::TxPacket> desc_;  // TxQueue::kCap
};

}  // namespace ina::dp::switchd
