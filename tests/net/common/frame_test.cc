// The frame codec: checksums against values computed by hand / by an independent RFC 1071
// implementation, round trips, and every malformed case Parse names.
#include "ina/net/frame.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

#include "common/checksum.h"

namespace ina::net {
namespace {

uint32_t Ip(const char* s) {
  in_addr a{};
  EXPECT_EQ(inet_pton(AF_INET, s, &a), 1);
  return a.s_addr;
}

TEST(Checksum, Rfc1071Example) {
  // RFC 1071 section 3: the words 0001 f203 f4f5 f6f7 sum to ddf2.
  const uint8_t b[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  EXPECT_EQ(ChecksumAdd(b), 0xddf2u);
  EXPECT_EQ(ChecksumFinish(ChecksumAdd(b)), 0x220d);
}

TEST(Checksum, Ipv4HeaderKnownValue) {
  // The well-known example header 4500 0073 0000 4000 4011 b861 c0a8 0001 c0a8 00c7.
  const uint8_t ip[20] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                          0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  EXPECT_EQ(Ipv4HeaderChecksum(ip), 0xb861);
}

TEST(Checksum, UdpKnownValues) {
  // Values from an independent Python RFC 1071 implementation (pseudo header + header + data).
  std::array<uint8_t, 30> payload;
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i);
  const uint8_t udp[8] = {0x9c, 0x40, 0xb7, 0x98, 0x00, 38, 0xAA, 0xBB};  // 40000 -> 47000
  EXPECT_EQ(UdpChecksum(Ip("10.77.1.1"), Ip("10.77.0.1"), udp, payload), 0xc34b);
  const uint8_t odd[] = {'h', 'e', 'l', 'l', 'o'};  // odd length: the last byte is padded
  const uint8_t udp2[8] = {0x04, 0xd2, 0x16, 0x2e, 0x00, 13, 0, 0};  // 1234 -> 5678
  EXPECT_EQ(UdpChecksum(Ip("127.0.0.1"), Ip("127.0.0.1"), udp2, odd), 0xa2ff);
}

TEST(Checksum, LongBuffersMatchTheWordByWordSum) {
  std::vector<uint8_t> b(1087);
  uint32_t x = 12345;
  for (auto& v : b) v = static_cast<uint8_t>((x = x * 1103515245 + 12345) >> 16);
  uint64_t s = 0;
  for (size_t i = 0; i + 1 < b.size(); i += 2) s += (b[i] << 8) | b[i + 1];
  s += b.back() << 8;
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  EXPECT_EQ(ChecksumAdd(b), s);
}

TEST(Checksum, EveryVariantMatchesItsScalarTwin) {
  // Every length 0 .. 2100 at every alignment 0 .. 7, plus one buffer past a 64 KiB chunk.
  std::vector<uint8_t> b(70000 + 8);
  uint32_t x = 99;
  for (auto& v : b) v = static_cast<uint8_t>((x = x * 1664525 + 1013904223) >> 24);
  auto fold = [](uint64_t s) {
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    return s;
  };
  const internal::ChecksumVariantList list = internal::ChecksumVariants();
  ASSERT_GE(list.size, 1u);
  EXPECT_EQ(list.items[list.size - 1], &internal::kChecksumScalar);
  for (const internal::ChecksumKernel* k : list) {
    SCOPED_TRACE(k->name);
    for (size_t off = 0; off < 8; ++off) {
      for (size_t n = 0; n <= 2100; ++n) {
        ASSERT_EQ(fold(k->sum(b.data() + off, n)),
                  fold(internal::NativeSumScalar(b.data() + off, n)))
            << "offset " << off << " length " << n;
      }
    }
  }
  std::fill(b.begin(), b.end(), 0xFF);  // the largest lane values
  for (const internal::ChecksumKernel* k : list) {
    EXPECT_EQ(fold(k->sum(b.data() + 1, 70000)),
              fold(internal::NativeSumScalar(b.data() + 1, 70000)))
        << k->name;
  }
}

struct Built {
  std::vector<uint8_t> frame;
  FrameAddrs a;
};

Built Make(size_t payload_len) {
  Built b;
  const uint8_t src[6] = {2, 0, 0, 0, 0, 1}, dst[6] = {2, 0, 0, 0, 0, 2};
  std::memcpy(b.a.src_mac, src, 6);
  std::memcpy(b.a.dst_mac, dst, 6);
  b.a.src_ip = Ip("10.77.1.1");
  b.a.dst_ip = Ip("10.77.0.1");
  b.a.src_port = htons(40000);
  b.a.dst_port = htons(47000);
  b.frame.resize(kFrameHeaderBytes + payload_len);
  for (size_t i = 0; i < payload_len; ++i) b.frame[kFrameHeaderBytes + i] = static_cast<uint8_t>(i);
  BuildUdpHeaders(b.a, {b.frame.data() + kFrameHeaderBytes, payload_len}, b.frame.data());
  return b;
}

TEST(Frame, BuildThenParseRoundTrips) {
  for (size_t len : {size_t{0}, size_t{1}, size_t{22}, size_t{1046}, kMaxUdpPayload}) {
    Built b = Make(len);
    ParsedFrame pf;
    ASSERT_EQ(ParseUdpFrame(b.frame, &pf), FrameError::kOk) << len;
    EXPECT_EQ(pf.payload_offset, kFrameHeaderBytes);
    EXPECT_EQ(pf.payload_len, len);
    EXPECT_EQ(pf.addrs.src_ip, b.a.src_ip);
    EXPECT_EQ(pf.addrs.dst_ip, b.a.dst_ip);
    EXPECT_EQ(pf.addrs.src_port, b.a.src_port);
    EXPECT_EQ(pf.addrs.dst_port, b.a.dst_port);
    EXPECT_EQ(std::memcmp(pf.addrs.src_mac, b.a.src_mac, 6), 0);
    EXPECT_EQ(std::memcmp(pf.addrs.dst_mac, b.a.dst_mac, 6), 0);
    // The UDP checksum is in the frame, not 0.
    EXPECT_NE(b.frame[40] | b.frame[41], 0);
  }
}

TEST(Frame, WireLayoutIsBigEndian) {
  Built b = Make(30);
  EXPECT_EQ(b.frame[12], 0x08);  // EtherType IPv4
  EXPECT_EQ(b.frame[13], 0x00);
  EXPECT_EQ(b.frame[14], 0x45);
  EXPECT_EQ((b.frame[16] << 8) | b.frame[17], 20 + 8 + 30);  // IPv4 total length
  EXPECT_EQ(b.frame[23], 17);                                // UDP
  EXPECT_EQ((b.frame[34] << 8) | b.frame[35], 40000);
  EXPECT_EQ((b.frame[36] << 8) | b.frame[37], 47000);
  EXPECT_EQ((b.frame[38] << 8) | b.frame[39], 38);
  EXPECT_EQ((b.frame[40] << 8) | b.frame[41], 0xc34b);  // the known value above
}

TEST(Frame, EthernetPaddingIsNotPayload) {
  Built b = Make(4);
  b.frame.resize(60, 0xEE);  // minimum Ethernet frame
  ParsedFrame pf;
  ASSERT_EQ(ParseUdpFrame(b.frame, &pf), FrameError::kOk);
  EXPECT_EQ(pf.payload_len, 4u);
}

TEST(Frame, ZeroUdpChecksumMeansNone) {
  Built b = Make(30);
  b.frame[40] = b.frame[41] = 0;
  b.frame[kFrameHeaderBytes + 3] ^= 0xFF;  // would fail a checksum, but there is none
  ParsedFrame pf;
  EXPECT_EQ(ParseUdpFrame(b.frame, &pf), FrameError::kOk);
}

TEST(Frame, BuildWithoutUdpChecksumWritesZeroAndTheRestUnchanged) {
  Built with = Make(30);
  Built without = Make(30);
  BuildUdpHeaders(without.a, {without.frame.data() + kFrameHeaderBytes, 30}, without.frame.data(),
                  /*udp_checksum=*/false);
  EXPECT_EQ(without.frame[40] | without.frame[41], 0);
  with.frame[40] = with.frame[41] = 0;
  EXPECT_EQ(with.frame, without.frame);  // IPv4 header checksum and everything else as before
  ParsedFrame pf;
  EXPECT_EQ(ParseUdpFrame(without.frame, &pf), FrameError::kOk);
}

// A datagram port's TX (dpdk.h, ipv4_datagrams): the datagram of a built frame with its IPv4
// checksum wiped comes back as the same frame, checksum filled in.
TEST(Frame, Ipv4FrameOfADatagramIsTheFrameItCameFrom) {
  Built b = Make(100);
  std::vector<uint8_t> dg(b.frame.begin() + kEthBytes, b.frame.end());
  dg[10] = dg[11] = 0;
  std::vector<uint8_t> out(kEthBytes + dg.size(), 0xEE);
  BuildIpv4Frame(b.a.dst_mac, b.a.src_mac, dg, out.data());
  EXPECT_EQ(out, b.frame);
  ParsedFrame pf;
  EXPECT_EQ(ParseUdpFrame(out, &pf), FrameError::kOk);
}

TEST(Frame, MalformedFramesAreNamed) {
  ParsedFrame pf;
  {
    Built b = Make(30);
    EXPECT_EQ(ParseUdpFrame({b.frame.data(), 41}, &pf), FrameError::kShort);
  }
  {
    Built b = Make(30);
    b.frame[12] = 0x08, b.frame[13] = 0x06;  // ARP
    EXPECT_EQ(ParseUdpFrame(b.frame, &pf), FrameError::kNotIpv4);
  }
  {
    Built b = Make(30);
    b.frame[14] = 0x46;  // IHL 6: options
    EXPECT_EQ(ParseUdpFrame(b.frame, &pf), FrameError::kIpOptions);
  }
  {
    Built b = Make(30);
    b.frame[20] |= 0x20;  // MF
    EXPECT_EQ(ParseUdpFrame(b.frame, &pf), FrameError::kFragment);
  }
  {
    Built b = Make(30);
    b.frame[23] = 6;  // TCP
    EXPECT_EQ(ParseUdpFrame(b.frame, &pf), FrameError::kNotUdp);
  }
  {
    Built b = Make(30);
    b.frame[22] ^= 1;  // TTL changed, checksum not
    EXPECT_EQ(ParseUdpFrame(b.frame, &pf), FrameError::kBadIpChecksum);
  }
  {
    Built b = Make(30);
    b.frame.resize(b.frame.size() - 1);  // IPv4 length beyond the frame
    EXPECT_EQ(ParseUdpFrame(b.frame, &pf), FrameError::kBadLength);
  }
  {
    Built b = Make(30);
    b.frame[39] += 1;  // UDP length disagrees with IPv4's
    EXPECT_EQ(ParseUdpFrame(b.frame, &pf), FrameError::kBadLength);
  }
  {
    Built b = Make(30);
    b.frame[kFrameHeaderBytes + 7] ^= 0x10;  // payload bit flip
    EXPECT_EQ(ParseUdpFrame(b.frame, &pf), FrameError::kBadUdpChecksum);
    EXPECT_EQ(ParseUdpFrame(b.frame, &pf, /*verify_udp=*/false), FrameError::kOk);
  }
  EXPECT_EQ(FrameErrorName(FrameError::kBadUdpChecksum), "bad_udp_checksum");
}

}  // namespace
}  // namespace ina::net
