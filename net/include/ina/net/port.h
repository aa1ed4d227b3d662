// ina::net: packet I/O in bursts, one interface for every backend (kernel UDP, DPDK ethdev, RoCEv2
// UD SENDs over sockets: roce.h). The worker transports (host/src/transport) and ina-switchd are
// both thin users of it.
//
// A Port moves UDP datagrams: what a user sends and receives is the UDP payload (one ina
// message); framing (Ethernet/IPv4/UDP, checksums, frame.h) is the port's business. Every call is
// a burst that returns a count, DPDK style: RxBurst takes up to n packets, TxBurst sends a prefix
// of its packets and says how many; nothing blocks but WaitRx / WaitTx, which are bounded.
//
// Peers are Endpoints (a sockaddr). A port from a Layer-2 backend (DPDK) also records the
// sender's MAC (SetMac/GetMac), so a reply can go back without ARP; a user with several ports
// records which one a packet came through (SetVia/GetVia). Both live outside the address: in an
// AF_INET endpoint's sin_zero, in the bytes after an AF_INET6 endpoint's sockaddr_in6 (a RoCE
// peer, roce.h). Equality of endpoints is the user's (address and port).
//
// Threading: a Port is used by one thread at a time. Memory: a port allocates at open; the burst
// calls do not allocate, lock or log. Errors on the data path become counters (PortStats) except
// those the caller must act on (a connected UDP peer that is not there: Unavailable).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "ina/base/status.h"

namespace ina::net {

inline constexpr size_t kBurst = 32;
inline constexpr size_t kMaxDatagramBytes = 65507;  // IPv4's largest UDP payload

struct Endpoint {
  sockaddr_storage addr{};
  socklen_t len = 0;  // 0: none (a connected port's peer)
};

// The bytes of an Endpoint's storage that hold its address and those extras: a user that keeps
// endpoints elsewhere copies this many, not len.
inline constexpr size_t kEndpointBytes = sizeof(sockaddr_in6) + 8;
static_assert(kEndpointBytes <= sizeof(sockaddr_storage));
// MAC of an endpoint from an L2 port (zero when none was recorded).
void SetMac(Endpoint* e, const uint8_t mac[6]);
void GetMac(const Endpoint& e, uint8_t mac[6]);
// Index of the port an endpoint was received through (0 when none was recorded).
void SetVia(Endpoint* e, uint16_t port_index);
uint16_t GetVia(const Endpoint& e);
// An IPv4 or IPv6 endpoint's port (host order; 0 for none or another family), and setting it.
uint16_t EndpointPort(const Endpoint& e);
void SetEndpointPort(Endpoint* e, uint16_t port);
// "10.0.0.1:47000", "[::1]:5000" or "none".
std::string EndpointToString(const Endpoint& e);
// Parses an IPv4 or IPv6 literal and a port. InvalidArgument when it is neither.
Result<Endpoint> MakeEndpoint(const std::string& ip, uint16_t port);
// Parses "IPv4:PORT" or "[IPv6]:PORT" (an IPv6 address only in brackets: "::1:9" is ambiguous),
// port 1 .. 65535. InvalidArgument naming what is wrong otherwise.
Result<Endpoint> ParseEndpoint(std::string_view host_port);

// One received packet. The caller sets data/cap (its buffer); RxBurst sets len, flags and, when
// `from` is not null, *from. A port may instead point data at memory of its own (a GRO train, an
// mbuf) that stays valid until the next RxBurst on that port: read data after the call, never
// assume it is still the caller's buffer, and set it again before the next call.
struct Packet {
  uint8_t* data = nullptr;
  uint32_t cap = 0;  // bytes available at data (the caller's buffer)
  uint32_t len = 0;  // bytes of the datagram at data (at most cap, or the port's own memory)
  uint32_t flags = 0;
  Endpoint* from = nullptr;
};
inline constexpr uint32_t kPacketTruncated = 1u << 0;  // longer than cap: len bytes kept

// One packet to send: the UDP payload and its destination (null: the port's connected peer).
// The port may read data until TxBurst returns, and (zero-copy ports, see dpdk.h) until the
// peer answered it: such a port says so in its contract.
struct TxPacket {
  const uint8_t* data = nullptr;
  uint32_t len = 0;
  const Endpoint* to = nullptr;
  uint32_t flags = 0;  // kTxPayloadChecked
};
// The payload carries an end-to-end check of its own (an ina message's CRC32C trailer, which
// covers more than a UDP checksum: from the sender's buffer to the receiver's): a port that
// computes UDP checksums in software (DPDK) sends 0 ("none", as IPv4 allows) instead. Set it only
// where a damaged UDP port or address is harmless too (a frame that goes astray is lost and
// resent); ina marks data and result packets, not control messages, whose source address the
// fabric records.
inline constexpr uint32_t kTxPayloadChecked = 1u << 0;

// Per-port counters; a port fills the ones it has. Packets are UDP datagrams (ina messages).
struct PortStats {
  uint64_t rx_packets = 0;    // datagrams handed to the user
  uint64_t rx_frames = 0;     // frames / kernel messages read (a GRO train is one)
  uint64_t rx_other = 0;      // frames that were not UDP to us (L2 ports), dropped
  uint64_t rx_bad_csum = 0;   // IPv4 header or UDP checksum wrong, dropped
  uint64_t rx_truncated = 0;  // longer than the buffer (handed on, flagged)
  uint64_t rx_icmp = 0;       // ICMP errors reported by the kernel on an unconnected socket
  uint64_t tx_packets = 0;    // datagrams the kernel / PMD accepted
  uint64_t tx_dropped = 0;    // dropped inside the port (no mbuf, ring full past the wait)
  uint64_t tx_trains = 0;     // GSO messages sent (several datagrams each)
  // Fault injection (FaultPort, fault.h).
  uint64_t inj_rx_drops = 0, inj_rx_dups = 0, inj_rx_reorders = 0, inj_rx_corrupts = 0;
  uint64_t inj_tx_drops = 0, inj_tx_dups = 0, inj_tx_reorders = 0, inj_tx_corrupts = 0;
  // The RoCE port (roce.h): datagrams dropped, by reason, and PSN gaps (accepted).
  uint64_t rx_roce_short = 0, rx_roce_bad_icrc = 0, rx_roce_bad_opcode = 0;
  uint64_t rx_roce_wrong_qpn = 0, rx_roce_bad_key = 0, rx_roce_bad_psn = 0;
  uint64_t rx_roce_psn_gaps = 0;  // PSNs skipped by the packets of a source QP (lost upstream)
  // The kernel's drops at this port's socket before the port read them (its receive buffer was
  // full): Port::rx_kernel_drops() when the stats were taken.
  uint64_t rx_kernel_drops = 0;
};

class Port {
 public:
  virtual ~Port() = default;

  // Receives up to pkts.size() datagrams without waiting; returns how many. Errors: Unavailable
  // (a connected UDP peer refused: ICMP), the OS / driver error otherwise.
  virtual Result<size_t> RxBurst(std::span<Packet> pkts) = 0;
  // Sends pkts in order; returns how many were accepted (a prefix: fewer when the queue is full,
  // then retry the rest after WaitTx). A packet that can never go (too long for a frame, no
  // route) is an error when it is the first, else the count stops before it. An empty span
  // sends what the port holds back (FaultPort).
  virtual Result<size_t> TxBurst(std::span<const TxPacket> pkts) = 0;
  // Waits up to timeout for something to receive: true when RxBurst may return packets (a
  // spurious true is allowed, a missed one is not). Zero timeout: poll. Polling ports back off
  // while idle (backoff.h). Errors: the OS error of poll.
  virtual Result<bool> WaitRx(std::chrono::microseconds timeout) = 0;
  // Waits up to timeout for room to send. true when there may be room.
  virtual Result<bool> WaitTx(std::chrono::microseconds timeout) = 0;
  // True while the port holds packets back that a later RxBurst / TxBurst({}) releases (fault
  // injection): call again within about a millisecond instead of sleeping long.
  virtual bool holding() const { return false; }
  // True when TxBurst sends runs of equal-size packets to one destination as one message (GSO):
  // a user gains by grouping its packets per destination.
  virtual bool coalesces() const { return false; }
  // The largest datagram (UDP payload, bytes) one frame of this port carries to its peer without
  // IP fragmentation: a connected UDP port's path MTU less the IP and UDP headers (the kernel's
  // IP_MTU; such a port also refuses to fragment: a longer datagram fails to send), an L2 port's
  // MTU less its headers. A user sizes its messages by it (ina: the default K). Default: the
  // largest UDP datagram.
  virtual size_t max_datagram_bytes() const { return kMaxDatagramBytes; }
  // The kernel's receive queue of this port's socket: about how many datagrams of
  // `datagram_bytes` it holds before the kernel drops what arrives (rx_kernel_drops), from
  // SO_RCVBUF as the kernel reports it and its cost per datagram (docs/host.md, "Socket
  // buffers"). 0: the port has no kernel socket queue (DPDK: its own rings) or cannot tell.
  virtual size_t rx_queue_datagrams(size_t datagram_bytes) const {
    (void)datagram_bytes;
    return 0;
  }
  // That socket's receive buffer in the kernel's accounting (SO_RCVBUF read back, which is twice
  // what was set); 0: no kernel socket.
  virtual size_t rx_buffer_bytes() const { return 0; }
  // What the kernel has dropped at that socket since it opened because its receive buffer was
  // full (SO_MEMINFO's count, read now: a syscall, callable from any thread). Its unit is what
  // arrived: a datagram, or a GSO train of up to 64 that arrived whole (GRO) and is dropped whole.
  // 0: no kernel socket.
  virtual uint64_t rx_kernel_drops() const { return 0; }

  virtual PortStats stats() const = 0;
  // The local address ("0.0.0.0:47000"; DPDK: "10.77.0.1:47000 net_memif0 02:..").
  virtual std::string Describe() const = 0;
  virtual std::string_view kind() const = 0;  // "udp", "dpdk", "fault(udp)"...
  // What counters are printed under: the ethdev name ("net_memif0"), else kind().
  virtual std::string name() const { return std::string(kind()); }
};

}  // namespace ina::net
