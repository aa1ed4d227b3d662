// The Ethernet / IPv4 / UDP frame codec and the Internet checksum (RFC 1071), written once for
// every L2 port (DPDK today, a raw socket or an FPGA testbench tomorrow).
//
// Frames are untagged Ethernet II, IPv4 without options (IHL 5), DF set, TTL 64, UDP. Addresses
// are kept in network byte order (as in sockaddr_in); header fields are read and written through
// explicit big-endian accessors, never packed structs. Both directions do the UDP checksum: Build
// writes it (0 is sent as 0xFFFF, RFC 768), Parse checks it unless it is 0 (IPv4: none sent) and
// always checks the IPv4 header checksum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace ina::net {

inline constexpr size_t kEthBytes = 14;
inline constexpr size_t kIpv4Bytes = 20;
inline constexpr size_t kUdpBytes = 8;
inline constexpr size_t kFrameHeaderBytes = kEthBytes + kIpv4Bytes + kUdpBytes;  // 42
inline constexpr size_t kMaxUdpPayload = 1500 - kIpv4Bytes - kUdpBytes;          // MTU 1500
inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint8_t kIpProtoUdp = 17;

// Who a frame is from and to. IPs and ports in network byte order.
struct FrameAddrs {
  uint8_t src_mac[6] = {};
  uint8_t dst_mac[6] = {};
  uint32_t src_ip = 0;
  uint32_t dst_ip = 0;
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
};

// Ones'-complement sum of data (as big-endian 16-bit words, an odd last byte padded with zero)
// added to `sum`, folded to 16 bits but not complemented. Chain calls over pieces of even length.
uint32_t ChecksumAdd(std::span<const uint8_t> data, uint32_t sum = 0);
// ~fold(sum): the value to store in a checksum field.
uint16_t ChecksumFinish(uint32_t sum);
// The IPv4 header checksum of a 20-byte header whose checksum field is taken as zero.
uint16_t Ipv4HeaderChecksum(const uint8_t* ip);
// The UDP checksum over the IPv4 pseudo header, the UDP header (its checksum field taken as zero)
// and the payload; 0 is returned as 0xFFFF. udp points at the 8-byte header, payload follows
// wherever it is (it may live in another buffer: zero-copy TX).
uint16_t UdpChecksum(uint32_t src_ip, uint32_t dst_ip, const uint8_t* udp,
                     std::span<const uint8_t> payload);

// Writes the 42 header bytes of a frame carrying `payload` into out[0, 42), UDP checksum
// included (computed over payload, which Build does not copy) unless udp_checksum is false (then
// 0: none, as IPv4 allows, for payloads that carry a check of their own). REQUIRES:
// payload.size() <= kMaxDatagramBytes (port.h; a frame of more than kMaxUdpPayload is a jumbo one).
void BuildUdpHeaders(const FrameAddrs& a, std::span<const uint8_t> payload, uint8_t* out,
                     bool udp_checksum = true);

// Writes an Ethernet header (EtherType IPv4) and, after it, a copy of datagram (a whole IPv4
// datagram, header first, as a datagram port moves them: dpdk.h) with its IPv4 header checksum
// filled in; the rest is sent as given. REQUIRES: datagram.size() >= kIpv4Bytes; out holds
// kEthBytes + datagram.size() bytes.
void BuildIpv4Frame(const uint8_t dst_mac[6], const uint8_t src_mac[6],
                    std::span<const uint8_t> datagram, uint8_t* out);

enum class FrameError : uint8_t {
  kOk = 0,
  kShort,           // shorter than the headers it claims
  kNotIpv4,         // another EtherType (ARP, IPv6, VLAN...)
  kIpOptions,       // version != 4 or IHL != 5
  kFragment,        // MF set or a fragment offset
  kNotUdp,          // another IP protocol
  kBadIpChecksum,   // IPv4 header checksum wrong
  kBadLength,       // IPv4 total length / UDP length inconsistent with each other or the frame
  kBadUdpChecksum,  // UDP checksum (non-zero) wrong
};
std::string_view FrameErrorName(FrameError e);

struct ParsedFrame {
  FrameAddrs addrs;
  size_t payload_offset = 0;  // kFrameHeaderBytes
  size_t payload_len = 0;     // from the UDP length (Ethernet padding excluded)
};

// Parses frame (the whole frame from the Ethernet header, contiguous). Checks every field above;
// with verify_udp false (the NIC did it) the UDP checksum is not recomputed.
FrameError ParseUdpFrame(std::span<const uint8_t> frame, ParsedFrame* out, bool verify_udp = true);

}  // namespace ina::net
