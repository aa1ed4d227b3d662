// CRC32C (ina/proto/crc32c.h): every variant against the known answers gen.py computed with its own
// plain Python CRC (crc32c_kat.txt), and every variant against the scalar twin on random buffers
// of every length and alignment the data path sees; the message trailer helpers.
#include "ina/proto/crc32c.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kat_file.h"
#include "support/seed.h"

namespace ina::proto {
namespace {

struct CrcKat {
  std::vector<uint8_t> bytes;
  uint32_t crc;
};

std::vector<CrcKat> LoadCrcKats() {
  std::ifstream in(INA_CRC_KAT_FILE);
  EXPECT_TRUE(in.good()) << "cannot open " << INA_CRC_KAT_FILE;
  std::vector<CrcKat> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    std::string hex, crc;
    ss >> hex >> crc;
    out.push_back({hex == "-" ? std::vector<uint8_t>{} : FromHex(hex),
                   static_cast<uint32_t>(std::stoul(crc, nullptr, 0))});
  }
  return out;
}

std::vector<const Crc32cVariant*> Variants() {
  const Crc32cVariantList l = Crc32cVariants();
  return {l.items, l.items + l.size};
}

TEST(Crc32c, ListEndsWithTheScalarTwinAndBestIsFirst) {
  const auto v = Variants();
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(v.back()->fn, &Crc32cScalar);
  EXPECT_EQ(&Crc32cBest(), v.front());
  std::printf("crc32c variants:");
  for (const auto* x : v) std::printf(" %s", x->name);
  std::printf("\n");
}

TEST(Crc32c, CheckValue) {
  const uint8_t s[] = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
  for (const auto* v : Variants()) EXPECT_EQ(v->fn(0, s, sizeof s), kCrc32cCheck) << v->name;
  EXPECT_EQ(Crc32c(0, s, sizeof s), 0xE3069283u);
}

TEST(Crc32c, EveryVariantMatchesPythonKnownAnswers) {
  const auto kats = LoadCrcKats();
  ASSERT_GE(kats.size(), 300u);
  for (const auto* v : Variants()) {
    SCOPED_TRACE(v->name);
    for (const auto& k : kats) {
      ASSERT_EQ(v->fn(0, k.bytes.data(), k.bytes.size()), k.crc) << k.bytes.size() << " bytes";
    }
  }
}

TEST(Crc32c, VariantsMatchTheScalarTwinOnRandomBuffersAndSplits) {
  std::mt19937_64 g(tests::Seed(1, "Crc32c.Random"));
  std::vector<uint8_t> buf(5000 + 64);
  for (auto& b : buf) b = static_cast<uint8_t>(g());
  for (int it = 0; it < 3000; ++it) {
    const size_t n = it < 1100 ? static_cast<size_t>(it) : g() % 5000;
    const size_t align = g() % 64;
    const uint8_t* p = buf.data() + align;
    const uint32_t want = Crc32cScalar(0, p, n);
    const size_t cut = n == 0 ? 0 : g() % (n + 1);
    for (const auto* v : Variants()) {
      ASSERT_EQ(v->fn(0, p, n), want) << v->name << " n=" << n << " align=" << align;
      // Continuing a CRC (zlib's convention) gives the CRC of the concatenation.
      ASSERT_EQ(v->fn(v->fn(0, p, cut), p + cut, n - cut), want) << v->name << " cut " << cut;
    }
  }
}

// Combining the CRCs of two parts gives the CRC of their concatenation (the GPUDirect sender's
// seal: a host header's CRC with a device payload's, docs/gpu.md).
TEST(Crc32c, CombineEqualsTheCrcOfTheConcatenation) {
  std::mt19937_64 g(tests::Seed(2, "Crc32c.Combine"));
  std::vector<uint8_t> buf(9000);
  for (auto& b : buf) b = static_cast<uint8_t>(g());
  for (int it = 0; it < 2000; ++it) {
    const size_t n = it < 300 ? static_cast<size_t>(it) : g() % buf.size();
    const size_t cut = n == 0 ? 0 : g() % (n + 1);
    const uint32_t a = Crc32c(0, buf.data(), cut);
    const uint32_t b = Crc32c(0, buf.data() + cut, n - cut);
    const uint32_t want = Crc32cScalar(0, buf.data(), n);
    ASSERT_EQ(Crc32cCombine(a, b, n - cut), want) << "n=" << n << " cut=" << cut;
    ASSERT_EQ(Crc32cCombineWith(a, b, Crc32cShiftFactor(n - cut)), want);
  }
  // An ina data message: header, then a payload the sender never reads.
  EXPECT_EQ(Crc32cCombine(Crc32c(0, buf.data(), 24), Crc32c(0, buf.data() + 24, 1024), 1024),
            Crc32c(0, buf.data(), 24 + 1024));
  EXPECT_EQ(Crc32cCombine(0x12345678u, 0, 0), 0x12345678u);  // an empty second part
}

TEST(Crc32c, SealAndCheckAMessage) {
  std::vector<uint8_t> m(kHeaderBytes + 8 + kCrcBytes, 0);
  for (size_t i = 0; i < kHeaderBytes + 8; ++i) m[i] = static_cast<uint8_t>(i * 7);
  EXPECT_EQ(SealMessage(m.data(), kHeaderBytes + 8), m.size());
  EXPECT_EQ(LoadCrc(m.data() + kHeaderBytes + 8), Crc32cScalar(0, m.data(), kHeaderBytes + 8));
  EXPECT_TRUE(MessageCrcOk(m));
  EXPECT_TRUE(MessageCrcOk(m, Crc32cScalar));
  // The residue: the register over the message and its trailer is a constant.
  EXPECT_EQ(~Crc32cScalar(0, m.data(), m.size()), kCrc32cResidue);
  for (size_t i = 0; i < m.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      auto bad = m;
      bad[i] ^= static_cast<uint8_t>(1u << bit);
      ASSERT_FALSE(MessageCrcOk(bad)) << "byte " << i << " bit " << bit;
    }
  }
  EXPECT_FALSE(MessageCrcOk(std::span<const uint8_t>(m.data(), 3)));
  EXPECT_FALSE(MessageCrcOk(std::span(m).first(m.size() - 1)));
}

}  // namespace
}  // namespace ina::proto
