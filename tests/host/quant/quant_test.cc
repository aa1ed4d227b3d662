// Quantization kernels, unit tests: Precision(), known answers for every variant (rounding, byte
// order, exponent edges, nothing written past n), wire round trips, and ActiveKernels() with the
// INA_QUANT override. Random inputs print their seed; INA_SEED=<n> replays.
#include "ina/host/quant.h"

#include "ina/proto/crc32c.h"
#include "quant_test_util.h"

namespace ina::host::quant {
namespace {

using namespace ::ina::host::quant::testing;  // NOLINT: test helpers

// ---------------------------------------------------------------------------------------------
// Precision

TEST(QuantPrecision, MatchesContract) {
  EXPECT_EQ(Precision(1), 30);
  EXPECT_EQ(Precision(2), 29);
  EXPECT_EQ(Precision(3), 28);
  EXPECT_EQ(Precision(4), 28);
  EXPECT_EQ(Precision(5), 27);
  EXPECT_EQ(Precision(8), 27);
  EXPECT_EQ(Precision(9), 26);
  EXPECT_EQ(Precision(33), 24);
  EXPECT_EQ(Precision(64), 24);
  for (int w = 1; w <= 64; ++w) {
    // world * 2^P <= 2^30 and the bound is tight: 2 * world * 2^P > 2^30 ... P is maximal.
    const int p = Precision(w);
    EXPECT_LE(static_cast<int64_t>(w) << p, int64_t{1} << 30) << "world " << w;
    EXPECT_GT(static_cast<int64_t>(w) << (p + 1), int64_t{1} << 30) << "world " << w;
  }
}

// ---------------------------------------------------------------------------------------------
// Known answers, for every variant.

class QuantKat : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantKat, BlockExp) {
  INA_GET_KERNELS_OR_SKIP(k, GetParam());
  struct Case {
    float x;
    int e;  // unbiased expected exponent
  };
  const Case cases[] = {
      {1.0f, 1},                         // |1| < 2^1
      {-1.0f, 1},                        // sign ignored
      {0.75f, 0},                        // 0.75 < 2^0
      {0.5f, 0},                         // 0.5 = 2^-1 is not < 2^-1
      {std::nextafter(0.5f, 0.0f), -1},  // just below 2^-1
      {0.0f, proto::kExpMin},            // zero
      {-0.0f, proto::kExpMin},           // negative zero
      {FromBits(1), proto::kExpMin},     // smallest denormal
      {std::ldexp(1.0f, -97), -96},      // 2^-97 < 2^-96 = kExpMin exactly
      {std::ldexp(1.0f, -96), -95},      // at the boundary: next exponent
      {std::ldexp(1.0f, -110), -96},     // clamped up to kExpMin
      {std::numeric_limits<float>::max(), 128},
      {std::ldexp(1.0f, 127), 128},
      {3.0f, 2},
  };
  for (const Case& c : cases) {
    for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{16}, size_t{33}}) {
      for (size_t pos = 0; pos < n; ++pos) {
        std::vector<float> x(n, 0.0f);
        x[pos] = c.x;
        bool nonfinite = true;
        EXPECT_EQ(k->block_exp(x.data(), n, &nonfinite), c.e + proto::kExpBias)
            << "x=" << c.x << " n=" << n << " pos=" << pos;
        EXPECT_FALSE(nonfinite);
      }
    }
  }
  bool nonfinite = true;
  EXPECT_EQ(k->block_exp(nullptr, 0, &nonfinite), kBiasedMin);
  EXPECT_FALSE(nonfinite);
  // Non-finite elements are reported and ignored for the exponent.
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN(),
                    -std::numeric_limits<float>::quiet_NaN(), FromBits(0x7f800001u)}) {
    for (size_t n : {size_t{1}, size_t{8}, size_t{17}, size_t{40}}) {
      for (size_t pos = 0; pos < n; ++pos) {
        std::vector<float> x(n, 0.25f);  // E = -1
        x[pos] = bad;
        nonfinite = false;
        const int want = n == 1 ? proto::kExpMin : -1;
        EXPECT_EQ(k->block_exp(x.data(), n, &nonfinite), want + proto::kExpBias);
        EXPECT_TRUE(nonfinite) << "n=" << n << " pos=" << pos;
      }
    }
  }
}

TEST_P(QuantKat, QuantizeRoundsToNearestEvenBigEndian) {
  INA_GET_KERNELS_OR_SKIP(k, GetParam());
  // E = 1, P = 30: q = x * 2^29. Values chosen as multiples of 2^-30 to hit exact ties.
  const uint8_t e = 1 + proto::kExpBias;
  const float unit = std::ldexp(1.0f, -29);
  const std::vector<float> x = {1.0f,
                                -1.0f,
                                0.0f,
                                -0.0f,
                                2.5f * unit,
                                3.5f * unit,
                                -2.5f * unit,
                                -3.5f * unit,
                                0.5f * unit,
                                1.5f * unit,
                                std::nextafter(2.0f, 0.0f),
                                -std::nextafter(2.0f, 0.0f),
                                FromBits(1),
                                0.4999f * unit,
                                0.5001f * unit,
                                7.0f * unit,
                                1.25f};
  const std::vector<int32_t> want = {
      1 << 29,        -(1 << 29),      0, 0, 2, 4, -2,       -4, 0, 2,
      (1 << 30) - 64, -(1 << 30) + 64, 0, 0, 1, 7, 671088640};
  ASSERT_EQ(x.size(), want.size());
  std::vector<uint8_t> out(4 * x.size() + 8, kGuard);
  k->quantize(x.data(), x.size(), e, 30, out.data());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(static_cast<int32_t>(proto::Load32(out.data() + 4 * i)), want[i]) << "i=" << i;
  }
  for (size_t i = 4 * x.size(); i < out.size(); ++i) EXPECT_EQ(out[i], kGuard) << "wrote past n";
  // Big-endian: 2^29 is 20 00 00 00.
  EXPECT_EQ(out[0], 0x20);
  EXPECT_EQ(out[1], 0x00);
  EXPECT_EQ(out[3], 0x00);
}

TEST_P(QuantKat, DequantizeScales) {
  INA_GET_KERNELS_OR_SKIP(k, GetParam());
  const std::vector<int32_t> q = {1 << 29, -(1 << 29), 0, 1, -3, 0x7fffffff, INT32_MIN, 16777217};
  std::vector<uint8_t> wire(4 * q.size());
  for (size_t i = 0; i < q.size(); ++i)
    proto::Store32(wire.data() + 4 * i, static_cast<uint32_t>(q[i]));
  std::vector<float> out(q.size() + 3, 42.0f);
  k->dequantize(wire.data(), q.size(), 1 + proto::kExpBias, 30, out.data());  // scale 2^-29
  const float s = std::ldexp(1.0f, -29);
  const std::vector<float> want = {1.0f, -1.0f, 0.0f, s, -3 * s, 4.0f, -4.0f, 16777216.0f * s};
  for (size_t i = 0; i < q.size(); ++i) EXPECT_EQ(Bits(out[i]), Bits(want[i])) << "i=" << i;
  for (size_t i = q.size(); i < out.size(); ++i) EXPECT_EQ(out[i], 42.0f) << "wrote past n";
  // Smallest scale: E = kExpMin, P = 30 gives 2^-126, still a normal float.
  const int32_t one = 1;
  uint8_t one_wire[4];
  k->to_wire(&one, 1, one_wire);
  float tiny = 0;
  k->dequantize(one_wire, 1, kBiasedMin, 30, &tiny);
  EXPECT_EQ(Bits(tiny), Bits(std::numeric_limits<float>::min()));
}

TEST_P(QuantKat, WireRoundTrip) {
  INA_GET_KERNELS_OR_SKIP(k, GetParam());
  std::mt19937_64 rng(TestSeed());
  for (size_t n : Lengths()) {
    std::vector<int32_t> x(n);
    for (auto& v : x) v = static_cast<int32_t>(rng());
    if (n > 0) x[0] = INT32_MIN;
    std::vector<uint8_t> wire(4 * n + 8, kGuard);
    k->to_wire(x.data(), n, wire.data());
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(proto::Load32(wire.data() + 4 * i), static_cast<uint32_t>(x[i])) << "n=" << n;
    }
    for (size_t i = 4 * n; i < wire.size(); ++i) ASSERT_EQ(wire[i], kGuard) << "wrote past n";
    std::vector<int32_t> back(n + 2, 7);
    k->from_wire(wire.data(), n, back.data());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], x[i]);
    ASSERT_EQ(back[n], 7);
    ASSERT_EQ(back[n + 1], 7);
  }
}

// quantize_crc writes what quantize writes (nothing past n) and returns the CRC32C of it, by the
// CRC's scalar twin; lengths around the kCrcPieceElems pieces it is computed in.
TEST_P(QuantKat, QuantizeCrcIsQuantizeThenItsCrc) {
  INA_GET_KERNELS_OR_SKIP(k, GetParam());
  std::mt19937_64 rng(TestSeed());
  std::vector<size_t> lengths = Lengths();
  for (size_t n : {kCrcPieceElems - 1, kCrcPieceElems, kCrcPieceElems + 1, 2 * kCrcPieceElems,
                   3 * kCrcPieceElems + 17}) {
    lengths.push_back(n);
  }
  for (size_t n : lengths) {
    std::vector<float> x(n);
    for (auto& v : x) v = EdgeFloat(rng, false);
    const uint8_t e = k->block_exp(x.data(), n, nullptr);
    const int p = Precision(static_cast<int>(1 + rng() % 64));
    std::vector<uint8_t> got(4 * n + 8, kGuard), want(4 * n + 8, kGuard);
    k->quantize(x.data(), n, e, p, want.data());
    const uint32_t crc = k->quantize_crc(x.data(), n, e, p, got.data());
    ASSERT_EQ(got, want) << "n=" << n;
    ASSERT_EQ(crc, proto::Crc32cScalar(0, want.data(), 4 * n)) << "n=" << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, QuantKat, ::testing::Values("scalar", "avx2", "avx512"),
                         [](const auto& info) { return info.param; });

// ---------------------------------------------------------------------------------------------
// ActiveKernels and KernelsByName (CommConfig::quant; INA_QUANT reaches it through FromEnv only,
// tests/host/comm/config_test.cc).

// The documented preference: AVX2, then AVX-512 (measured no faster here), then scalar.
const Kernels* Best() {
  if (Avx2Kernels() != nullptr) return Avx2Kernels();
  if (Avx512Kernels() != nullptr) return Avx512Kernels();
  return &ScalarKernels();
}

TEST(QuantActive, DefaultIsPreferredAvailable) {
  EXPECT_EQ(&ActiveKernels(), Best());
  EXPECT_EQ(&ActiveKernels(), &ActiveKernels());
}

// The library reads no environment: INA_QUANT set in the process changes nothing here.
TEST(QuantActive, EnvironmentIsNotReadByTheLibrary) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("INA_QUANT", "scalar", 1);
        const Kernels& k = ActiveKernels();
        std::fprintf(stderr, "active=%.*s\n", static_cast<int>(k.name.size()), k.name.data());
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "^active=" + std::string(Best()->name) + "\n$");
}

TEST(QuantActive, ByNameGivesEachAvailableVariant) {
  EXPECT_EQ(KernelsByName("auto"), &ActiveKernels());
  EXPECT_EQ(KernelsByName("scalar"), &ScalarKernels());
  EXPECT_EQ(KernelsByName("avx2"), Avx2Kernels());
  EXPECT_EQ(KernelsByName("avx512"), Avx512Kernels());
  for (const char* name : {"avx2", "avx512"}) {
    if (KernelsByName(name) != nullptr) {
      EXPECT_EQ(KernelsByName(name)->name, name);
    }
  }
  EXPECT_EQ(KernelsByName("sse9"), nullptr);
  EXPECT_EQ(KernelsByName(""), nullptr);
}

}  // namespace
}  // namespace ina::host::quant
