// The CRC32C arithmetic of the GPU's payload CRCs (ina/gpu/crc_elem.h), built by the host
// compiler, against proto::Crc32c (the CPU's, itself tested against gen.py's): the byte-range
// CRC on random buffers, lengths and offsets; the shift (x^8m mod P) against the CRC of zero
// bytes; and the kernel's lane scheme (every lane count, every block length from 1 to 300 words
// and random longer ones), simulated lane by lane. INA_SEED=<n> replays; the seed is printed.
#include "ina/gpu/crc_elem.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "ina/proto/crc32c.h"
#include "support/seed.h"

namespace ina::gpu::crc {
namespace {

constexpr Crc32cTables kTables = MakeCrc32cTables();

std::vector<uint8_t> RandomBytes(std::mt19937_64& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// The block's CRC as the kernel computes it: each of `lanes` lanes its segment, then combined.
uint32_t LaneCrc(const std::vector<uint8_t>& block, uint32_t lanes) {
  const auto words = static_cast<uint32_t>(block.size() / 4);
  std::vector<uint32_t> w(words);
  std::memcpy(w.data(), block.data(), block.size());  // little-endian host (quant_elem.h)
  uint32_t factor[32];
  BlockCrcFactors(words, lanes, factor);
  uint32_t reg = 0;
  for (uint32_t g = 0; g < lanes; ++g) {
    const uint32_t r = BlockCrcLane(kTables.t, w.data(), words, lanes, g);
    reg ^= BlockCrcTerm(r, factor[g]);
  }
  return ~reg;
}

TEST(GpuCrcElemTest, TableMatchesKnownValues) {
  // CRC32C("123456789") = 0xE3069283 (the check value of the Castagnoli CRC).
  const char* s = "123456789";
  EXPECT_EQ(Crc32c(kTables.t, 0, reinterpret_cast<const uint8_t*>(s), 9), 0xE3069283u);
  EXPECT_EQ(Crc32c(kTables.t, 0, nullptr, 0), 0u);
}

TEST(GpuCrcElemTest, BytesMatchCpuCrc32c) {
  std::mt19937_64 rng(tests::Seed(20261203, "crc bytes"));
  const std::vector<uint8_t> buf = RandomBytes(rng, 5000);
  for (int i = 0; i < 3000; ++i) {
    const size_t off = rng() % 64;
    const size_t n = i < 300 ? static_cast<size_t>(i) : rng() % (buf.size() - off);
    const uint32_t seed_crc = i % 3 == 0 ? 0 : static_cast<uint32_t>(rng());
    ASSERT_EQ(Crc32c(kTables.t, seed_crc, buf.data() + off, n),
              proto::Crc32c(seed_crc, buf.data() + off, n))
        << "offset " << off << " length " << n << " crc " << seed_crc;
  }
}

TEST(GpuCrcElemTest, ShiftIsTheRegisterOverZeroBytes) {
  std::mt19937_64 rng(tests::Seed(20261204, "crc shift"));
  const std::vector<uint8_t> zeros(4096, 0);
  for (size_t m : {size_t{0}, size_t{1}, size_t{3}, size_t{4}, size_t{7}, size_t{64}, size_t{1000},
                   size_t{4095}}) {
    for (int r = 0; r < 20; ++r) {
      const auto reg = static_cast<uint32_t>(rng());
      EXPECT_EQ(MulModP(X8n(m), reg), RawBytes(kTables.t, reg, zeros.data(), m)) << m;
    }
  }
  // As the CPU's combine: the CRC of A || B from the parts.
  const std::vector<uint8_t> ab = RandomBytes(rng, 777);
  const size_t la = 300;
  const uint32_t a = proto::Crc32c(0, ab.data(), la);
  const uint32_t b = proto::Crc32c(0, ab.data() + la, ab.size() - la);
  EXPECT_EQ(MulModP(X8n(ab.size() - la), a) ^ b, proto::Crc32c(0, ab.data(), ab.size()));
}

TEST(GpuCrcElemTest, LaneSchemeMatchesCpuCrc32c) {
  std::mt19937_64 rng(tests::Seed(20261205, "crc lanes"));
  for (uint32_t lanes = 1; lanes <= 32; lanes *= 2) {
    for (uint32_t words = 1; words <= 300; ++words) {
      const std::vector<uint8_t> block = RandomBytes(rng, 4 * words);
      ASSERT_EQ(LaneCrc(block, lanes), proto::Crc32c(0, block.data(), block.size()))
          << words << " words over " << lanes << " lanes";
    }
    for (int i = 0; i < 20; ++i) {
      const auto words = static_cast<uint32_t>(1 + rng() % 9000);
      const std::vector<uint8_t> block = RandomBytes(rng, 4 * words);
      ASSERT_EQ(LaneCrc(block, lanes), proto::Crc32c(0, block.data(), block.size()))
          << words << " words over " << lanes << " lanes";
    }
  }
  // All zeros and all ones (the ~0 fold into word 0 must not cancel anything).
  for (uint8_t fill : {uint8_t{0}, uint8_t{0xFF}}) {
    const std::vector<uint8_t> block(4 * 1024, fill);
    EXPECT_EQ(LaneCrc(block, 32), proto::Crc32c(0, block.data(), block.size()));
  }
}

TEST(GpuCrcElemTest, LanesPerBlock) {
  EXPECT_EQ(BlockCrcLanes(1), 1u);
  EXPECT_EQ(BlockCrcLanes(8), 2u);
  EXPECT_EQ(BlockCrcLanes(64), 16u);
  EXPECT_EQ(BlockCrcLanes(127), 16u);
  EXPECT_EQ(BlockCrcLanes(128), 32u);
  EXPECT_EQ(BlockCrcLanes(1u << 20), 32u);
}

}  // namespace
}  // namespace ina::gpu::crc
