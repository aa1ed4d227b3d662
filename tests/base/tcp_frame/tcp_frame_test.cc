// The TCP side channels' one framing (ina/base/tcp_frame.h): known bytes both ways.
#include "ina/base/tcp_frame.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>

namespace ina {
namespace {

TEST(TcpFrame, HeadIsBigEndianLengthThenTag) {
  std::array<uint8_t, kTcpFrameHeadBytes> b{};
  EncodeTcpFrameHead({0x0102030405060708ull, 0x0A0B0C0Du}, b.data());
  const std::array<uint8_t, kTcpFrameHeadBytes> want = {1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13};
  EXPECT_EQ(b, want);
  const TcpFrameHead h = DecodeTcpFrameHead(b.data());
  EXPECT_EQ(h.body, 0x0102030405060708ull);
  EXPECT_EQ(h.tag, 0x0A0B0C0Du);
}

TEST(TcpFrame, ExtremesRoundTrip) {
  for (const TcpFrameHead in :
       {TcpFrameHead{0, 0}, TcpFrameHead{UINT64_MAX, UINT32_MAX}, TcpFrameHead{12, 0x80000000u}}) {
    std::array<uint8_t, kTcpFrameHeadBytes> b{};
    EncodeTcpFrameHead(in, b.data());
    const TcpFrameHead out = DecodeTcpFrameHead(b.data());
    EXPECT_EQ(out.body, in.body);
    EXPECT_EQ(out.tag, in.tag);
  }
}

}  // namespace
}  // namespace ina
