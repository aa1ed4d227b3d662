// The benchmark's verifier must itself catch wrong results: a flipped bit, an error past the
// bound, a missing NaN; and its inputs must be deterministic per (seed, rank).
#include "verify.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace ina::bench {
namespace {

std::vector<std::vector<float>> Inputs(int world, size_t n, uint64_t seed) {
  std::vector<std::vector<float>> in;
  for (int r = 0; r < world; ++r) in.push_back(MakeFloatInput(seed, r, n));
  return in;
}

TEST(Verify, InputsAreDeterministicPerSeedAndRank) {
  EXPECT_EQ(MakeFloatInput(5, 1, 1000), MakeFloatInput(5, 1, 1000));
  EXPECT_NE(MakeFloatInput(5, 1, 1000), MakeFloatInput(5, 2, 1000));
  EXPECT_NE(MakeFloatInput(5, 1, 1000), MakeFloatInput(6, 1, 1000));
  EXPECT_EQ(MakeIntInput(5, 1, 100), MakeIntInput(5, 1, 100));
}

TEST(Verify, ExactResultPassesAndIsCloseToFloat64Sum) {
  auto in = Inputs(4, 3000, 9);
  auto want = ExpectFloat(in, 256);
  auto c = CheckFloat(want.exact, want);
  EXPECT_TRUE(c.exact);
  EXPECT_TRUE(c.within_bound) << c.detail;
  EXPECT_LT(c.max_rel_err, 1e-6);
  EXPECT_GT(c.max_rel_err, 0);  // quantization does lose something
}

TEST(Verify, FlippedLowBitBreaksExactnessOnly) {
  auto in = Inputs(3, 1000, 11);
  auto want = ExpectFloat(in, 64);
  auto out = want.exact;
  size_t i = 0;
  while (out[i] == 0) ++i;
  uint32_t bits;
  std::memcpy(&bits, &out[i], 4);
  bits ^= 1;
  std::memcpy(&out[i], &bits, 4);
  auto c = CheckFloat(out, want);
  EXPECT_FALSE(c.exact);
  EXPECT_EQ(c.first_bad, i);
}

TEST(Verify, ErrorPastTheBoundIsCaught) {
  auto in = Inputs(2, 500, 12);
  auto want = ExpectFloat(in, 256);
  auto out = want.exact;
  out[77] = static_cast<float>(want.sum64[77] + 4 * want.bound[77] + 1e-30);
  auto c = CheckFloat(out, want);
  EXPECT_FALSE(c.within_bound);
  EXPECT_EQ(c.first_bad, 77u);
}

TEST(Verify, NonFiniteInputMakesTheBlockNaN) {
  auto in = Inputs(2, 600, 13);
  in[1][300] = std::numeric_limits<float>::infinity();
  auto want = ExpectFloat(in, 256);
  for (size_t i = 256; i < 512; ++i) EXPECT_TRUE(std::isnan(want.exact[i])) << i;
  EXPECT_FALSE(std::isnan(want.exact[255]));
  auto out = want.exact;
  out[300] = 1.0f;
  EXPECT_FALSE(CheckFloat(out, want).within_bound);
}

TEST(Verify, IntSumWraps) {
  std::vector<std::vector<int32_t>> in = {{INT32_MAX, -5}, {1, 2}};
  auto s = ExpectInt(in);
  EXPECT_EQ(s[0], INT32_MIN);
  EXPECT_EQ(s[1], -3);
}

}  // namespace
}  // namespace ina::bench
