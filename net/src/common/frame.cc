// The frame codec (see ina/net/frame.h).
#include "ina/net/frame.h"

#include <bit>
#include <cstring>

#include "common/checksum.h"

namespace ina::net {
namespace {

inline uint16_t Get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
inline void Put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
// Network-order 32-bit value as it lies in memory (sockaddr_in style).
inline uint32_t GetRaw32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void PutRaw32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
inline uint16_t GetRaw16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline void PutRaw16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

inline uint32_t Fold(uint64_t s) {
  while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
  return static_cast<uint32_t>(s);
}

// Sum of a raw network-order 32-bit value as two big-endian 16-bit words.
inline uint32_t SumRaw32(uint32_t raw) {
  uint8_t b[4];
  std::memcpy(b, &raw, 4);
  return Get16(b) + Get16(b + 2);
}

}  // namespace

uint32_t ChecksumAdd(std::span<const uint8_t> data, uint32_t sum) {
  // Native-order sum (checksum.h), folded, then swapped to big-endian once (RFC 1071, 2.B).
  static const auto kSum = internal::ChecksumVariants().best().sum;
  uint32_t native = Fold(kSum(data.data(), data.size()));
  if constexpr (std::endian::native == std::endian::little) {
    native = static_cast<uint32_t>(((native & 0xFF) << 8) | (native >> 8));
  }
  return Fold(static_cast<uint64_t>(native) + sum);
}

uint16_t ChecksumFinish(uint32_t sum) { return static_cast<uint16_t>(~Fold(sum) & 0xFFFF); }

// Ten big-endian words summed directly: the generic path (the checksum kernel over pieces of 10 and
// 8 bytes) was a few percent of a DPDK worker's time per packet.
uint16_t Ipv4HeaderChecksum(const uint8_t* ip) {
  uint32_t s = 0;
  for (size_t i = 0; i < kIpv4Bytes; i += 2) {
    if (i != 10) s += Get16(ip + i);  // the checksum field counts as zero
  }
  return ChecksumFinish(s);
}

uint16_t UdpChecksum(uint32_t src_ip, uint32_t dst_ip, const uint8_t* udp,
                     std::span<const uint8_t> payload) {
  const uint16_t udp_len = static_cast<uint16_t>(kUdpBytes + payload.size());
  uint32_t s = SumRaw32(src_ip) + SumRaw32(dst_ip) + kIpProtoUdp + udp_len;
  s = ChecksumAdd({udp, 6}, s);  // ports and length; the checksum field counts as zero
  s = ChecksumAdd(payload, s);
  const uint16_t c = ChecksumFinish(s);
  return c == 0 ? 0xFFFF : c;
}

void BuildUdpHeaders(const FrameAddrs& a, std::span<const uint8_t> payload, uint8_t* out,
                     bool udp_checksum) {
  std::memcpy(out, a.dst_mac, 6);
  std::memcpy(out + 6, a.src_mac, 6);
  Put16(out + 12, kEtherTypeIpv4);
  uint8_t* ip = out + kEthBytes;
  ip[0] = 0x45;  // version 4, IHL 5
  ip[1] = 0;
  Put16(ip + 2, static_cast<uint16_t>(kIpv4Bytes + kUdpBytes + payload.size()));
  Put16(ip + 4, 0);       // id
  Put16(ip + 6, 0x4000);  // DF
  ip[8] = 64;
  ip[9] = kIpProtoUdp;
  Put16(ip + 10, 0);
  PutRaw32(ip + 12, a.src_ip);
  PutRaw32(ip + 16, a.dst_ip);
  Put16(ip + 10, Ipv4HeaderChecksum(ip));
  uint8_t* udp = ip + kIpv4Bytes;
  PutRaw16(udp, a.src_port);
  PutRaw16(udp + 2, a.dst_port);
  Put16(udp + 4, static_cast<uint16_t>(kUdpBytes + payload.size()));
  Put16(udp + 6, udp_checksum ? UdpChecksum(a.src_ip, a.dst_ip, udp, payload) : 0);
}

void BuildIpv4Frame(const uint8_t dst_mac[6], const uint8_t src_mac[6],
                    std::span<const uint8_t> datagram, uint8_t* out) {
  std::memcpy(out, dst_mac, 6);
  std::memcpy(out + 6, src_mac, 6);
  Put16(out + 12, kEtherTypeIpv4);
  uint8_t* ip = out + kEthBytes;
  std::memcpy(ip, datagram.data(), datagram.size());
  Put16(ip + 10, Ipv4HeaderChecksum(ip));
}

std::string_view FrameErrorName(FrameError e) {
  switch (e) {
    case FrameError::kOk:
      return "ok";
    case FrameError::kShort:
      return "short";
    case FrameError::kNotIpv4:
      return "not_ipv4";
    case FrameError::kIpOptions:
      return "ip_options";
    case FrameError::kFragment:
      return "fragment";
    case FrameError::kNotUdp:
      return "not_udp";
    case FrameError::kBadIpChecksum:
      return "bad_ip_checksum";
    case FrameError::kBadLength:
      return "bad_length";
    case FrameError::kBadUdpChecksum:
      return "bad_udp_checksum";
  }
  return "?";
}

FrameError ParseUdpFrame(std::span<const uint8_t> f, ParsedFrame* out, bool verify_udp) {
  if (f.size() < kFrameHeaderBytes) return FrameError::kShort;
  const uint8_t* p = f.data();
  if (Get16(p + 12) != kEtherTypeIpv4) return FrameError::kNotIpv4;
  const uint8_t* ip = p + kEthBytes;
  if (ip[0] != 0x45) return FrameError::kIpOptions;
  if ((Get16(ip + 6) & 0x3FFF) != 0) return FrameError::kFragment;
  if (ip[9] != kIpProtoUdp) return FrameError::kNotUdp;
  if (Get16(ip + 10) != Ipv4HeaderChecksum(ip)) return FrameError::kBadIpChecksum;
  const size_t ip_len = Get16(ip + 2);
  const uint8_t* udp = ip + kIpv4Bytes;
  const size_t udp_len = Get16(udp + 4);
  if (ip_len < kIpv4Bytes + kUdpBytes || kEthBytes + ip_len > f.size() || udp_len < kUdpBytes ||
      udp_len != ip_len - kIpv4Bytes) {
    return FrameError::kBadLength;
  }
  const std::span<const uint8_t> payload(udp + kUdpBytes, udp_len - kUdpBytes);
  const uint16_t csum = Get16(udp + 6);
  const uint32_t src_ip = GetRaw32(ip + 12), dst_ip = GetRaw32(ip + 16);
  if (verify_udp && csum != 0 && UdpChecksum(src_ip, dst_ip, udp, payload) != csum) {
    return FrameError::kBadUdpChecksum;
  }
  std::memcpy(out->addrs.dst_mac, p, 6);
  std::memcpy(out->addrs.src_mac, p + 6, 6);
  out->addrs.src_ip = src_ip;
  out->addrs.dst_ip = dst_ip;
  out->addrs.src_port = GetRaw16(udp);
  out->addrs.dst_port = GetRaw16(udp + 2);
  out->payload_offset = kFrameHeaderBytes;
  out->payload_len = payload.size();
  return FrameError::kOk;
}

}  // namespace ina::net
