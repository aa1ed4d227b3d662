// libFuzzer target: the RoCEv2 codec (ina/proto/roce.h) and the CRC32C trailer (crc32c.h).
//
// Input: byte 0 = mode bits, then the bytes the mode reads.
//  - ParseUdSend on the whole rest as a UDP payload: it never reads outside the input; a packet
//    it accepts rebuilds (BuildUdSend) into one that parses to the same fields and message.
//  - A datagram built from the input (BuildIpv4Udp + BuildUdSend, fields and message from the
//    input) gets its ICRC (ComputeIcrc/StoreIcrc): IcrcOk holds, still holds after the variant
//    fields (TOS, TTL, IP checksum, UDP checksum, BTH resv8a) change, and fails after any one
//    bit of a covered byte is flipped (a CRC detects every single-bit error).
//  - Every CRC32C variant the CPU runs agrees with the scalar twin on the input; a sealed message
//    passes MessageCrcOk, and fails it with any one bit flipped.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "ina/proto/crc32c.h"
#include "ina/proto/roce.h"
#include "support/fuzz_check.h"

namespace {

using namespace ina::proto;
using namespace ina::proto::roce;

uint32_t Load32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}

void CheckParse(std::span<const uint8_t> in) {
  UdSend s;
  const ParseError e = ParseUdSend(in, &s);
  if (e != ParseError::kOk) {
    FUZZ_CHECK(e != ParseError::kShort || in.size() < kUdOverheadBytes, "kShort at %zu bytes",
               in.size());
    return;
  }
  FUZZ_CHECK(
      s.message.data() >= in.data() && s.message.data() + s.message.size() <= in.data() + in.size(),
      "message outside the packet");
  FUZZ_CHECK(s.message.size() + kUdOverheadBytes + GetBthPadCount(in.data()) == in.size(),
             "message %zu + overhead + pad != %zu", s.message.size(), in.size());
  std::vector<uint8_t> out(kUdOverheadBytes + s.message.size() + 3);
  const size_t len = BuildUdSend(s, out);
  FUZZ_CHECK(len != 0 && len % 4 == 0 && len <= out.size(), "BuildUdSend gave %zu", len);
  UdSend t;
  FUZZ_CHECK(ParseUdSend(std::span(out.data(), len), &t) == ParseError::kOk, "rebuilt fails");
  FUZZ_CHECK(t.opcode == s.opcode && t.pkey == s.pkey && t.dest_qp == s.dest_qp && t.psn == s.psn &&
                 t.qkey == s.qkey && t.src_qp == s.src_qp,
             "rebuilt fields differ");
  FUZZ_CHECK(t.message.size() == s.message.size() &&
                 std::memcmp(t.message.data(), s.message.data(), s.message.size()) == 0,
             "rebuilt message differs");
}

void CheckIcrc(const uint8_t* data, size_t size) {
  if (size < 24) return;
  UdSend s;
  s.pkey = static_cast<uint16_t>(Load32(data));
  s.dest_qp = Load32(data + 4) & 0xFFFFFF;
  s.psn = Load32(data + 8) & 0xFFFFFF;
  s.qkey = Load32(data + 12);
  s.src_qp = Load32(data + 16) & 0xFFFFFF;
  const uint8_t flip = data[20];
  const uint16_t ip_id = static_cast<uint16_t>(data[21] << 8 | data[22]);
  const uint8_t variant = data[23];
  s.message = std::span(data + 24, std::min<size_t>(size - 24, kMaxPacketBytes));
  std::vector<uint8_t> dgram(kIpv4Bytes + kUdpBytes + kUdOverheadBytes + s.message.size() + 3);
  const size_t udp_len = BuildUdSend(s, std::span(dgram).subspan(kIpv4Bytes + kUdpBytes));
  FUZZ_CHECK(udp_len != 0, "BuildUdSend refused a buffer that fits");
  BuildIpv4Udp(0x0100007f, 0x0200007f, 0xC000 | ip_id, kUdpPort, ip_id, udp_len, dgram.data());
  dgram.resize(kIpv4Bytes + kUdpBytes + udp_len);
  StoreIcrc(dgram.data() + dgram.size() - kIcrcBytes, ComputeIcrc(dgram));
  FUZZ_CHECK(IcrcOk(dgram), "fresh ICRC does not check");
  // The variant fields are masked: changing them keeps the ICRC valid.
  std::vector<uint8_t> v = dgram;
  v[1] ^= variant;
  v[8] ^= variant;
  v[10] ^= variant;
  v[27] ^= variant;
  v[kIpv4Bytes + kUdpBytes + 4] ^= variant;
  FUZZ_CHECK(IcrcOk(v), "a change of masked fields broke the ICRC");
  // One covered bit flipped: the ICRC must catch it.
  const size_t covered = dgram.size() - kIcrcBytes;
  size_t pos = (size_t{flip} * 7919 + size) % covered;
  while (pos == 1 || pos == 8 || pos == 10 || pos == 11 || pos == 26 || pos == 27 ||
         pos == kIpv4Bytes + kUdpBytes + 4) {
    pos = (pos + 1) % covered;
  }
  dgram[pos] ^= static_cast<uint8_t>(1u << (flip % 8));
  FUZZ_CHECK(!IcrcOk(dgram), "ICRC missed a flipped bit at byte %zu", pos);
}

void CheckCrc32c(const uint8_t* data, size_t size) {
  const uint32_t want = Crc32cScalar(0, data, size);
  const Crc32cVariantList list = Crc32cVariants();
  for (size_t i = 0; i < list.size; ++i) {
    FUZZ_CHECK(list.items[i]->fn(0, data, size) == want, "%s differs from scalar at %zu bytes",
               list.items[i]->name, size);
  }
  // Continuation: the CRC of A then B is Crc32c(Crc32c(0, A), B).
  const size_t split = size == 0 ? 0 : data[0] % (size + 1);
  FUZZ_CHECK(Crc32c(Crc32c(0, data, split), data + split, size - split) == want, "split %zu",
             split);
  std::vector<uint8_t> msg(data, data + size);
  msg.resize(size + kCrcBytes);
  SealMessage(msg.data(), size);
  FUZZ_CHECK(MessageCrcOk(msg), "sealed message does not check");
  const size_t pos = size == 0 ? 0 : (size_t{data[size - 1]} * 31) % msg.size();
  msg[pos] ^= static_cast<uint8_t>(1u << (size % 8));
  FUZZ_CHECK(!MessageCrcOk(msg), "CRC32C missed a flipped bit at byte %zu", pos);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  const std::span<const uint8_t> rest(data + 1, size - 1);
  if (mode & 1) CheckParse(rest);
  if (mode & 2) CheckIcrc(rest.data(), rest.size());
  if (mode & 4) CheckCrc32c(rest.data(), rest.size());
  return 0;
}
