// The kernel UDP port: one non-blocking UDP socket, bursts through recvmmsg / sendmmsg, UDP
// GSO/GRO where the kernel has them (Linux >= 5.0).
//
// Connected (peer_ip set): connect() makes the kernel drop datagrams from anyone else and turns
// ICMP port-unreachable into ECONNREFUSED on a later call, reported as Unavailable (the peer may
// not be up yet: retry). Unconnected (a server): every datagram comes with its sender in
// Packet::from, TxPacket::to is required, and ICMP errors are counted (rx_icmp), not returned.
// Socket buffers: SO_RCVBUFFORCE/SO_SNDBUFFORCE when allowed (root), else SO_RCVBUF/SO_SNDBUF
// (capped by net.core.*mem_max).
//
// GSO (gso_gro, the kernel permitting): TxBurst sends each run of consecutive packets to one
// destination of one length (a shorter one may end the run; at most 64 packets, 65507 bytes) as
// one sendmsg with UDP_SEGMENT, gathered from the callers' buffers without a copy; the wire still
// carries one datagram per packet and the count returned is exact (a train goes whole or not at
// all). A kernel or route that refuses a train (EIO, EINVAL) turns GSO off for the port.
// GRO: the socket takes UDP_GRO; a received train is split into consecutive Packets that point
// into the port's buffer (valid until the next RxBurst); segments beyond the caller's burst are
// handed out first on the next RxBurst (which then receives nothing new, so they stay valid).
// Without GRO the kernel writes into the callers' buffers.
//
// Several cores on one address: reuse_port (SO_REUSEPORT) on every socket of the group, then
// SteerByField16 on one of them chooses each datagram's socket by a field of its payload.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ina/net/port.h"

namespace ina::net {

struct UdpPortConfig {
  std::string bind_ip = "0.0.0.0";  // IPv4 / IPv6 literal or an IPv4 host name
  uint16_t bind_port = 0;           // 0: ephemeral
  std::string peer_ip;              // non-empty: connected to peer_ip:peer_port
  uint16_t peer_port = 0;
  int socket_buffer_bytes = 8 << 20;  // SO_RCVBUF / SO_SNDBUF request; <= 0: kernel default
  bool gso_gro = true;                // use GSO/GRO when the kernel has them (the program's Config
                                      // decides: CommConfig::udp_gso, ina-switchd --udp-gso)
  bool reuse_port = false;            // SO_REUSEPORT before bind
};

// Errors: InvalidArgument (bad address), the OS error of socket/bind/connect (ErrnoStatus).
Result<std::unique_ptr<Port>> OpenUdpPort(const UdpPortConfig& config);

// Attaches a classic BPF program to the SO_REUSEPORT group of `port` (a port from OpenUdpPort
// with reuse_port): a datagram goes to the group's socket number (big-endian 16-bit field at
// payload byte `offset`) mod n, sockets numbered in the order they were bound; a datagram too
// short for the field goes to socket 0. REQUIRES: n sockets in the group. Errors:
// InvalidArgument (not a UDP port, n == 0), the OS error of setsockopt.
Status SteerByField16(Port& port, uint32_t offset, uint32_t n);

// What to say when a kernel socket got a smaller receive buffer than asked: `got` is
// Port::rx_buffer_bytes() (the kernel's accounting, twice what was set), `requested` the bytes
// asked (UdpPortConfig::socket_buffer_bytes). Empty when got >= 2 x requested (or either is 0);
// else one sentence with both sizes, the cause (net.core.rmem_max caps SO_RCVBUF for a process
// without CAP_NET_ADMIN) and the sysctl that lifts it.
std::string SmallReceiveBuffer(size_t got, int requested);

// The port's bound local port number (host order), 0 for a port that is not a UDP port.
uint16_t UdpLocalPort(const Port& port);

}  // namespace ina::net
