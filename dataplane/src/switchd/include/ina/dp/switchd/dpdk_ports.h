// The switch loop's DPDK packet I/O (ina-switchd, ina-rtlsim): every ethdev port the EAL probed is
// a switch port.
//
// Each port has one RX and one TX queue. A frame is an ina datagram when it is IPv4/UDP to the
// switch's address and UDP port (any destination MAC: workers broadcast until they learn ours);
// anything else is counted per port (rx_other) and dropped. A datagram's sender becomes a Peer:
// an AF_INET sockaddr with the worker's IPv4 address and UDP port, its MAC in sin_zero[0..5] and
// the port id in sin_zero[6..7], so replies and results go back through the port and MAC the
// worker's packets came from; Peer equality (control.h) still compares IPv4 address and port.
// Results replicated to several workers are written once per destination (headers differ); the
// payload is copied into each mbuf, as the UDP path copies into each datagram.
// TX: mbufs are queued per port and sent in bursts; a full ring is retried for a bounded time
// (kTxMaxWaitUs), then the rest is dropped and counted (tx_dropped). IPv4 header checksum in
// software, UDP checksum 0.
// Idle: Wait polls with rte_pause, then sleeps 1, 2, 4 ... us up to backoff_max_us between polls.
// Threading: one thread (the switch loop). Built only with libdpdk (kDpdkBuilt otherwise false).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ina/base/status.h"
#include "ina/dp/control.h"

namespace ina::dp::switchd {

extern const bool kDpdkBuilt;

struct DpdkPortsConfig {
  std::string eal_args;       // whitespace-separated, without argv[0]
  std::string ip;             // the switch's IPv4 address
  uint16_t udp_port = 47000;  // its UDP port
  uint32_t backoff_max_us = 1000;
};

struct DpdkPortStats {
  std::string name;
  uint64_t rx_frames = 0;   // frames received
  uint64_t rx_other = 0;    // frames that were not ina datagrams for us (dropped)
  uint64_t tx_frames = 0;   // frames the PMD accepted
  uint64_t tx_dropped = 0;  // frames dropped: ring full past the wait, or no mbuf
};

struct OutPacket {
  const uint8_t* data;
  uint32_t len;
  const Peer* to;
};

class DpdkPorts {
 public:
  // Starts the EAL and every port. Errors: Unavailable (EAL), FailedPrecondition (no port),
  // Internal (a port or pool call), InvalidArgument (bad ip), Unimplemented (not built).
  static Result<std::unique_ptr<DpdkPorts>> Open(const DpdkPortsConfig& config);
  virtual ~DpdkPorts() = default;

  // True when a frame is ready on some port; waits (polling, backing off) at most timeout_ms.
  virtual bool Wait(int timeout_ms) = 0;
  // Receives up to max datagrams: payload copied into bufs[i] (at most cap bytes; lens[i] is
  // the datagram's full length, so lens[i] > cap means truncated), sender in from[i].
  virtual size_t Recv(uint8_t* const* bufs, size_t cap, uint32_t* lens, Peer* from, size_t max) = 0;
  // Sends n packets; returns how many the PMDs accepted (the rest are counted in tx_dropped).
  virtual size_t Send(const OutPacket* packets, size_t n) = 0;
  virtual std::vector<DpdkPortStats> stats() const = 0;
  // "port 0 net_memif0 02:00:00:00:00:01, ..."
  virtual std::string Describe() const = 0;
};

}  // namespace ina::dp::switchd
