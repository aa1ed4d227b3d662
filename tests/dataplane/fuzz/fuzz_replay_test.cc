// Replays the committed corpus, then random and structured-random inputs, through the differential
// check, so compilers without libFuzzer (gcc) still run it. Seed printed; INA_SEED replays.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>

#include "../ref/test_util.h"
#include "differential.h"

namespace ina::dp::fuzz {
namespace {

TEST(FuzzReplay, Corpus) {
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(INA_FUZZ_CORPUS_DIR)) {
    std::ifstream f(entry.path(), std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)),
                                     std::istreambuf_iterator<char>());
    EXPECT_EQ(DifferentialCheck(bytes.data(), bytes.size()), "") << entry.path();
    ++files;
  }
  EXPECT_GE(files, 3u);
}

// Appends a data packet for job 0/1 with small random fields, so most are near-valid.
void AppendPacket(std::vector<uint8_t>& in, std::mt19937_64& rng) {
  const uint16_t count = rng() % 4 == 0 ? rng() % 257 : (rng() % 2 ? 64 : rng() % 8);
  std::vector<uint8_t> p(proto::kHeaderBytes + 4 * count);
  for (auto& b : p) b = static_cast<uint8_t>(rng());
  proto::SetVersion(p.data(), rng() % 16 ? proto::kVersion : rng() % 4);
  proto::SetType(p.data(), static_cast<proto::MsgType>(rng() % 16 ? 1 : rng() % 8));
  proto::SetFlags(p.data(), rng() % 8);
  proto::SetJob(p.data(), rng() % 8 ? rng() % 2 : rng() % 4);
  proto::SetRank(p.data(), rng() % 10);
  proto::SetSlot(p.data(), rng() % 5);
  proto::SetGen(p.data(), static_cast<uint16_t>(rng() % 6 - 2));
  proto::SetCount(p.data(), rng() % 16 ? count : rng() % 300);
  // Mostly offsets a slot's history can carry: block slot + j*W with W 1..4 and K 64 or 256.
  const uint32_t block = proto::GetSlot(p.data()) + (rng() % 3) * (1 + rng() % 4);
  proto::SetOffset(p.data(), rng() % 4 == 0 ? rng() % 3 : block * (rng() % 2 ? 64 : 256));
  if (rng() % 8 == 0) p.resize(rng() % (p.size() + 4));
  if (rng() % 8 == 0 && !p.empty()) p[rng() % p.size()] ^= 1u << (rng() % 8);
  // Mostly sealed by the harness (the rules after the CRC run); some left to drop_bad_crc.
  const uint16_t seal = rng() % 8 ? 0x8000 : 0;
  in.push_back(static_cast<uint8_t>((p.size() | seal) >> 8));
  in.push_back(static_cast<uint8_t>(p.size()));
  in.insert(in.end(), p.begin(), p.end());
}

TEST(FuzzReplay, RandomInputs) {
  const uint64_t seed = dp::testing::TestSeed();
  std::printf("INA_SEED=%llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 3000 && !HasFailure(); ++i) {
    std::vector<uint8_t> in(4);
    for (auto& b : in) b = static_cast<uint8_t>(rng());
    if (i % 4 == 0) {  // pure garbage
      in.resize(4 + rng() % 4000);
      for (auto& b : in) b = static_cast<uint8_t>(rng());
    } else {  // structured: many near-valid packets
      const int n = 1 + static_cast<int>(rng() % 200);
      for (int k = 0; k < n; ++k) AppendPacket(in, rng);
    }
    const std::string diff = DifferentialCheck(in.data(), in.size());
    ASSERT_EQ(diff, "") << "input " << i << " (INA_SEED=" << seed << ")";
  }
}

}  // namespace
}  // namespace ina::dp::fuzz
