// The RoCE port: ina messages as RoCEv2 UD SENDs (docs/rdma.md), the fabric side of the verbs
// transport (host/src/transport/verbs), on UDP port 4791 over kernel sockets or over DPDK.
//
// Each RoCEv2 packet is IPv4 / UDP (dport 4791) / BTH / DETH / ina message / pad / ICRC. The port
// hands its user the ina message (what every other port hands out: the UDP payload of the ina
// protocol) and takes ina messages to send, so ina-switchd's classify-and-dispatch loop and its
// engines run unchanged over it.
//
// Peers: a RoCE peer is a (GID, QP number). An IPv4 RoCEv2 GID is the IPv4-mapped IPv6 address
// ::ffff:a.b.c.d, so a peer is an AF_INET6 Endpoint holding that address, port 4791 and its QP
// number in sin6_scope_id (RoceEndpoint): two QPs behind one address are two peers (Endpoint
// equality is family, address, port and scope), and a reply goes to the QP it names.
//
// Receive (RoceRx): a datagram is accepted when it is IPv4 without options, UDP to the port's
// address and 4791, its ICRC right, BTH opcode UD SEND_ONLY (transport version 0), P_Key 0xFFFF
// (or 0x7FFF), destination QP = the port's QP number, DETH Q_Key = the port's, and its PSN not
// behind the last one seen from that source QP (RocePsnTable; a PSN ahead is a gap: packets lost
// on the way, counted, accepted; one behind, or a repeat, is a duplicate or replay: dropped). Each
// reason is a PortStats counter (rx_roce_*); nothing is logged per packet.
// Send (RoceTx): BTH SEND_ONLY to the peer's QP with the next PSN of that destination QP (one
// sequence per destination, from 0), DETH with the port's Q_Key and QP number, and the ICRC of
// the datagram the kernel will emit: the port's address to the peer's, 4791 -> 4791, IP ID 0
// (an unconnected socket with IP_PMTUDISC_DO, which the kernel sends with ID 0). TxBurst returns
// the prefix the kernel took (a full send buffer: fewer; the packets not sent give their PSNs
// back, so the caller's retry sends them with the same ones).
//
// Sockets (OpenRocePort): the IP header is covered by the ICRC and a UDP socket does not show it
// (the IP ID), so packets are received on a raw IPv4/UDP socket (CAP_NET_RAW) with a classic BPF
// filter that passes only UDP to the port's address and port 4791; a UDP socket bound to
// address:4791 sends the replies (and keeps ICMP port-unreachable away; its own receive queue is
// filtered to nothing). The address must be a concrete IPv4 address: it is in every ICRC.
// DPDK (WrapRoce over a DPDK port with ipv4_datagrams): frames in and out of an ethdev, the IPv4
// header written by the port the way the kernel writes it (DF, IP ID 0, TTL 64; RoceTx builds it);
// peers need a neighbour entry for the port's MAC (no ARP), replies go to the sender's MAC.
//
// Threading: one thread at a time (a Port). Memory: buffers allocated at open; RxBurst points
// Packet::data into the port's own receive buffers (valid until the next RxBurst).
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ina/net/port.h"
#include "ina/proto/roce.h"

namespace ina::net {

// The port's RoCE identity.
struct RoceIdentity {
  uint32_t ip_be = 0;          // its IPv4 address, network order
  uint32_t qpn = 0x000100;     // its QP number (24 bits; the verbs transport's remote_qpn)
  uint32_t qkey = 0x494E4100;  // Q_Key of both sides ("INA\0")
};

// A RoCE peer as an Endpoint: AF_INET6, ::ffff:ip, port 4791, sin6_scope_id = qpn.
Endpoint RoceEndpoint(uint32_t ip_be, uint32_t qpn);
// True for an Endpoint made by RoceEndpoint; then *ip_be and *qpn are set.
bool ParseRoceEndpoint(const Endpoint& e, uint32_t* ip_be, uint32_t* qpn);

// PSN state per QP (source QPs on receive, destination QPs on send): an open-addressed table of
// fixed capacity, keyed by (IPv4 address, QP number). No allocation after construction.
class RocePsnTable {
 public:
  // capacity: a power of two.
  explicit RocePsnTable(size_t capacity = 4096);
  // The entry of (ip, qpn), created (value 0, fresh) when absent; nullptr when the table is full.
  struct Entry {
    uint32_t ip_be;
    uint32_t qpn;  // 0xFFFFFFFF: empty
    uint32_t psn;  // receive: the next PSN expected; send: the next PSN to send
    bool fresh;    // receive: no packet seen yet
  };
  Entry* Find(uint32_t ip_be, uint32_t qpn);
  size_t size() const { return used_; }

 private:
  std::vector<Entry> slots_;
  size_t used_ = 0;
};

// Why a received datagram was dropped (or kOk).
enum class RoceDrop : uint8_t {
  kOk = 0,
  kNotOurs,    // not IPv4/UDP to our address and 4791 (the BPF filter lets none through)
  kShort,      // shorter than its headers, IP options, lengths inconsistent, pad too long
  kBadIcrc,    // ICRC wrong
  kBadOpcode,  // not UD SEND_ONLY, or transport version != 0
  kWrongQpn,   // destination QP is not ours
  kBadKey,     // Q_Key or P_Key not ours
  kBadPsn,     // PSN behind the last one from that QP (a duplicate or replay)
};

// Checks one whole IPv4 datagram (as a raw socket receives it) for `me`. On kOk, *message is the
// ina message inside it, *src_ip_be and *src_qpn the sender; *psn_gap the number of PSNs skipped
// since the last packet of that QP (lost on the way). A full PSN table skips the PSN check.
RoceDrop RoceRx(std::span<const uint8_t> datagram, const RoceIdentity& me, RocePsnTable* psns,
                std::span<const uint8_t>* message, uint32_t* src_ip_be, uint32_t* src_qpn,
                uint32_t* psn_gap);

// Builds the UDP payload (BTH .. ICRC) of a UD SEND of `message` from `me` to (dst_ip_be,
// dst_qpn) with PSN psn into out; returns its length, 0 when out is too small.
size_t RoceTx(std::span<const uint8_t> message, const RoceIdentity& me, uint32_t dst_ip_be,
              uint32_t dst_qpn, uint32_t psn, std::span<uint8_t> out);

// The RoCE port over `datagrams`, a port that moves whole IPv4 datagrams (a DPDK port with
// ipv4_datagrams, dpdk.h; the raw-socket pair of OpenRocePort) at me.ip_be: RoceRx on what it
// receives, RoceTx on what is sent (to the AF_INET peer ip:4791, with the RoCE peer's MAC). The
// datagram port's counters show through (rx_packets: accepted ina messages); kind() is "roce"
// ("roce(dpdk)" over DPDK), name() the ethdev's over DPDK.
std::unique_ptr<Port> WrapRoce(std::unique_ptr<Port> datagrams, const RoceIdentity& me);

struct RocePortConfig {
  std::string bind_ip;  // the port's IPv4 address (not 0.0.0.0: it is in every ICRC)
  uint32_t qpn = 0x000100;
  uint32_t qkey = 0x494E4100;
  int socket_buffer_bytes = 8 << 20;  // SO_RCVBUF(FORCE) of the raw socket, SO_SNDBUF
};

// Errors: InvalidArgument (bind_ip not a concrete IPv4 address, qpn 0/1 or wider than 24 bits),
// the OS error of socket/bind (a raw socket needs CAP_NET_RAW: PermissionDenied says so).
Result<std::unique_ptr<Port>> OpenRocePort(const RocePortConfig& config);

}  // namespace ina::net
