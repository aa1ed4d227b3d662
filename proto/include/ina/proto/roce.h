// The RoCEv2 codec: BTH/DETH of a UD SEND_ONLY packet carrying one ina message, and the ICRC.
//
// ina's RoCE mapping (docs/rdma.md): one ina message (header + payload) = the payload of one UD
// SEND_ONLY packet, IPv4 / UDP (dport 4791) / BTH / DETH / message / pad / ICRC. The field layouts
// are generated from proto/ina.toml into ina/proto/roce_wire.h; this header adds the ICRC and the
// packet-level parse and build a UDP-socket switch needs. Header-only, no allocation, no throw.
//
// ICRC (IBA 1.4 annex A17): zlib's crc32 over 8 bytes of 0xFF (the masked LRH of InfiniBand),
// then the IPv4 header, UDP header, BTH, DETH and payload with the variant fields set to
// all-ones (IP TOS, TTL, header checksum; UDP checksum; BTH byte 4), stored little-endian in the
// last 4 bytes. The IP ID, lengths, addresses and ports are covered.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "ina/proto/roce_wire.h"

namespace ina::proto::roce {

inline constexpr size_t kIpv4Bytes = 20;  // no options
inline constexpr size_t kUdpBytes = 8;
inline constexpr size_t kUdOverheadBytes =
    kBthBytes + kDethBytes + kIcrcBytes;  // UDP payload - message

namespace detail {
inline constexpr std::array<uint32_t, 256> kCrcTable = [] {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}();
}  // namespace detail

// zlib's crc32 (reflected, polynomial 0xEDB88320): Crc32Update(0xFFFFFFFF, ...) then ~.
inline constexpr uint32_t Crc32Update(uint32_t crc, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) crc = detail::kCrcTable[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

// The ICRC of an IPv4 RoCEv2 packet. `ip_packet` is the whole IPv4 datagram (20-byte header, no
// options) including the 4 trailing ICRC bytes, which are not covered. Precondition:
// ip_packet.size() >= kIpv4Bytes + kUdpBytes + kBthBytes + kIcrcBytes.
inline uint32_t ComputeIcrc(std::span<const uint8_t> ip_packet) {
  constexpr size_t kMasked = kIpv4Bytes + kUdpBytes + kBthBytes;
  uint8_t head[8 + kMasked];
  std::memset(head, 0xFF, 8);
  std::memcpy(head + 8, ip_packet.data(), kMasked);
  uint8_t* ip = head + 8;
  ip[1] = 0xFF;                           // TOS (DSCP/ECN)
  ip[8] = 0xFF;                           // TTL
  ip[10] = ip[11] = 0xFF;                 // IP header checksum
  ip[26] = ip[27] = 0xFF;                 // UDP checksum
  ip[kIpv4Bytes + kUdpBytes + 4] = 0xFF;  // BTH resv8a (F/B ECN)
  uint32_t c = Crc32Update(0xFFFFFFFFu, head, sizeof head);
  c = Crc32Update(c, ip_packet.data() + kMasked, ip_packet.size() - kMasked - kIcrcBytes);
  return ~c;
}

inline uint32_t LoadIcrc(const uint8_t* p) {  // little-endian on the wire
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}
inline void StoreIcrc(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// True when the packet's stored ICRC matches; false for a packet too short to hold one.
inline bool IcrcOk(std::span<const uint8_t> ip_packet) {
  if (ip_packet.size() < kIpv4Bytes + kUdpBytes + kBthBytes + kIcrcBytes) return false;
  return ComputeIcrc(ip_packet) == LoadIcrc(ip_packet.data() + ip_packet.size() - kIcrcBytes);
}

// The fields of a UD SEND_ONLY packet that the mapping uses.
struct UdSend {
  uint8_t opcode = kOpUdSendOnly;
  uint16_t pkey = kDefaultPkey;
  uint32_t dest_qp = 0;  // 24 bits
  uint32_t psn = 0;      // 24 bits
  uint32_t qkey = 0;
  uint32_t src_qp = 0;               // 24 bits
  std::span<const uint8_t> message;  // the ina message (parse: a view into the packet)
};

enum class ParseError : uint8_t { kOk, kShort, kOpcode, kTver, kPad };

// Parses a UDP payload (BTH .. ICRC) as a UD SEND_ONLY packet; the ICRC is not checked here (it
// needs the IP header: IcrcOk). kShort: fewer than kUdOverheadBytes; kOpcode: not SEND_ONLY;
// kTver: transport version != 0; kPad: pad count longer than the payload.
inline ParseError ParseUdSend(std::span<const uint8_t> udp_payload, UdSend* out) {
  if (udp_payload.size() < kUdOverheadBytes) return ParseError::kShort;
  const uint8_t* bth = udp_payload.data();
  const uint8_t* deth = bth + kBthBytes;
  if (GetBthOpcode(bth) != kOpUdSendOnly) return ParseError::kOpcode;
  if (GetBthTver(bth) != 0) return ParseError::kTver;
  const size_t pad = GetBthPadCount(bth);
  const size_t body = udp_payload.size() - kUdOverheadBytes;
  if (pad > body) return ParseError::kPad;
  out->opcode = GetBthOpcode(bth);
  out->pkey = GetBthPkey(bth);
  out->dest_qp = GetBthDestQp(bth);
  out->psn = GetBthPsn(bth);
  out->qkey = GetDethQkey(deth);
  out->src_qp = GetDethSrcQp(deth);
  out->message = udp_payload.subspan(kBthBytes + kDethBytes, body - pad);
  return ParseError::kOk;
}

// Writes BTH, DETH, the message, pad to 4 bytes and a zero ICRC into `out` (a UDP payload) and
// returns its length, or 0 when `out` is too small. The ICRC is filled in by the caller once the
// IP header is known (ComputeIcrc over the datagram), or by the NIC.
inline size_t BuildUdSend(const UdSend& s, std::span<uint8_t> out) {
  const size_t pad = (4 - s.message.size() % 4) % 4;
  const size_t len = kUdOverheadBytes + s.message.size() + pad;
  if (out.size() < len) return 0;
  uint8_t* bth = out.data();
  std::memset(bth, 0, kBthBytes + kDethBytes);
  SetBthOpcode(bth, s.opcode);
  SetBthPadCount(bth, static_cast<uint8_t>(pad));
  SetBthPkey(bth, s.pkey);
  SetBthDestQp(bth, s.dest_qp & 0xFFFFFF);
  SetBthPsn(bth, s.psn & 0xFFFFFF);
  SetDethQkey(bth + kBthBytes, s.qkey);
  SetDethSrcQp(bth + kBthBytes, s.src_qp & 0xFFFFFF);
  if (!s.message.empty())
    std::memcpy(bth + kBthBytes + kDethBytes, s.message.data(), s.message.size());
  std::memset(bth + kBthBytes + kDethBytes + s.message.size(), 0, pad + kIcrcBytes);
  return len;
}

// The IPv4 + UDP headers the Linux kernel emits for a datagram sent on a UDP socket (used to
// compute the ICRC of a reply before sendto): addresses in network order, DF set. The IP ID is
// what the kernel will use: 0 for an unconnected socket with IP_PMTUDISC_DO (docs/rdma.md).
inline void BuildIpv4Udp(uint32_t src_ip_be, uint32_t dst_ip_be, uint16_t src_port,
                         uint16_t dst_port, uint16_t ip_id, size_t udp_payload_len,
                         uint8_t* out /* kIpv4Bytes + kUdpBytes */) {
  const size_t udp_len = kUdpBytes + udp_payload_len;
  const size_t tot = kIpv4Bytes + udp_len;
  uint8_t* ip = out;
  std::memset(ip, 0, kIpv4Bytes + kUdpBytes);
  ip[0] = 0x45;
  ip[2] = static_cast<uint8_t>(tot >> 8);
  ip[3] = static_cast<uint8_t>(tot);
  ip[4] = static_cast<uint8_t>(ip_id >> 8);
  ip[5] = static_cast<uint8_t>(ip_id);
  ip[6] = 0x40;  // DF
  ip[8] = 64;
  ip[9] = 17;
  std::memcpy(ip + 12, &src_ip_be, 4);
  std::memcpy(ip + 16, &dst_ip_be, 4);
  uint8_t* udp = ip + kIpv4Bytes;
  udp[0] = static_cast<uint8_t>(src_port >> 8);
  udp[1] = static_cast<uint8_t>(src_port);
  udp[2] = static_cast<uint8_t>(dst_port >> 8);
  udp[3] = static_cast<uint8_t>(dst_port);
  udp[4] = static_cast<uint8_t>(udp_len >> 8);
  udp[5] = static_cast<uint8_t>(udp_len);
}

}  // namespace ina::proto::roce
