// The packet transport under the communicator: bursts of datagrams to and from the fabric.
//
// Implementations live in host/src/transport/<name>/ (udp and dpdk; verbs next) and are made by
// MakeTransport(config); each is a thin adapter over one connected ina::net port (net/: the
// burst port interface, the frame codec, EAL start-up, idle back-off and fault injection shared
// with ina-switchd). A packet is one ina message (header + payload), what the fabric sees as the
// UDP payload. The DPDK transport attaches the caller's buffers to mbufs as external buffers
// where the port allows it, so callers keep a TX buffer unchanged until the fabric answered it.
//
// Threading: a Transport is used by one thread at a time (the communicator's progress thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "ina/base/status.h"

namespace ina::host {

struct TxPacket {
  const uint8_t* data = nullptr;
  size_t len = 0;  // bytes
};

struct RxPacket {
  uint8_t* data = nullptr;  // caller's buffer
  size_t cap = 0;           // its size in bytes
  size_t len = 0;           // set by RecvBurst
};

class Transport {
 public:
  virtual ~Transport() = default;
  // Sends packets in order; returns how many were sent (fewer when the kernel/NIC queue is full;
  // the caller retries the rest later). Errors: Unavailable and friends from the OS.
  virtual Result<size_t> SendBurst(std::span<const TxPacket> packets) = 0;
  // Receives up to packets.size() packets, waiting at most `timeout` for the first (zero: poll).
  // Returns how many were received (0 on timeout). Packets not from the fabric are discarded.
  virtual Result<size_t> RecvBurst(std::span<RxPacket> packets,
                                   std::chrono::microseconds timeout) = 0;
  virtual std::string_view name() const = 0;
};

// The DPDK transport's settings (kind "dpdk"; see host/src/transport/dpdk/dpdk_transport.h).
// Environment (ApplyDpdkEnv): INA_DPDK_EAL, INA_DPDK_PORT, INA_DPDK_LOCAL=ip:port, INA_DPDK_MAC,
// INA_DPDK_FABRIC_MAC, INA_DPDK_BACKOFF_US, INA_DPDK_ZERO_COPY=0|1.
struct DpdkConfig {
  std::string eal_args;       // EAL command line, whitespace-separated, without argv[0]
  std::string port;           // ethdev name ("net_memif0"); empty: the first port
  std::string local_ip;       // this worker's IPv4 address on the fabric (required)
  uint16_t local_port = 0;    // this worker's UDP port (required, != 0)
  std::string local_mac;      // "aa:bb:cc:dd:ee:ff"; empty: the port's own
  std::string fabric_mac;     // the switch's MAC; empty: broadcast until learnt from its packets
  int backoff_max_us = 1000;  // idle RX back-off ceiling (pause, then sleeps doubling up to it)
  bool zero_copy = true;      // attach TX buffers as external mbufs when the port allows
};

// Applies the INA_DPDK_* variables that are set. InvalidArgument names a malformed variable.
Status ApplyDpdkEnv(DpdkConfig* config);

// Fault injection at this end of the transport (ina::net's FaultPort, net/include/ina/net/fault.h:
// seeded drop / duplicate / reorder / corrupt per packet, both directions). None by default; for
// tests of the layers above under loss.
struct TransportFaults {
  double drop = 0;  // probabilities in [0, 1]
  double dup = 0;
  double reorder = 0;
  double corrupt = 0;
  uint64_t seed = 1;
};

struct TransportConfig {
  std::string kind = "udp";  // udp or dpdk (when built; verbs later)
  std::string fabric_host = "127.0.0.1";
  uint16_t fabric_port = 47000;
  std::string bind_host = "0.0.0.0";  // local address; port is ephemeral
  int socket_buffer_bytes = 8 << 20;  // SO_RCVBUF / SO_SNDBUF request
  // kind "dpdk" only. When eal_args is empty, MakeTransport fills it from INA_DPDK_* first.
  DpdkConfig dpdk;
  TransportFaults faults;  // any kind; InvalidArgument for a rate outside [0, 1]
};

// InvalidArgument for an unknown kind or a bad address; Unimplemented for a backend that this
// build lacks (dpdk without libdpdk); the OS / driver error otherwise.
Result<std::unique_ptr<Transport>> MakeTransport(const TransportConfig& config);

}  // namespace ina::host
