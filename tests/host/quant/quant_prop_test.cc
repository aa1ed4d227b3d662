// Quantization kernels, property tests: each SIMD variant bit-exact to the scalar reference on
// random and edge inputs, and the quant.h error bound through the whole pipeline for worlds 1..64.
// Each test prints its seed; INA_SEED=<n> replays it.
#include "ina/host/quant.h"
#include "quant_test_util.h"

namespace ina::host::quant {
namespace {

using namespace ::ina::host::quant::testing;  // NOLINT: test helpers

// ---------------------------------------------------------------------------------------------
// SIMD variants against the scalar reference, bit for bit.

class QuantSimdVsScalar : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantSimdVsScalar, BlockExp) {
  INA_GET_KERNELS_OR_SKIP(k, GetParam());
  const Kernels& ref = ScalarKernels();
  std::mt19937_64 rng(TestSeed());
  for (int round = 0; round < 20; ++round) {
    for (size_t n : Lengths()) {
      std::vector<float> x(n);
      // Mostly small values, with rare edge values so that the max sits anywhere (often the tail).
      const bool allow_nonfinite = round % 3 == 0;
      for (auto& v : x) {
        v = rng() % 8 == 0 ? EdgeFloat(rng, allow_nonfinite) : std::ldexp(1.0f, -int(rng() % 40));
      }
      bool nf_ref = false, nf = true;
      const uint8_t e_ref = ref.block_exp(x.data(), n, &nf_ref);
      const uint8_t e = k->block_exp(x.data(), n, &nf);
      ASSERT_EQ(e, e_ref) << "n=" << n << " round=" << round;
      ASSERT_EQ(nf, nf_ref) << "n=" << n << " round=" << round;
      // A single extreme element at each position (including every tail lane).
      if (n > 0 && n <= 40) {
        for (size_t pos = 0; pos < n; ++pos) {
          std::vector<float> y(n, 1.0f);
          y[pos] = EdgeFloat(rng, true);
          ASSERT_EQ(k->block_exp(y.data(), n, &nf), ref.block_exp(y.data(), n, &nf_ref))
              << "n=" << n << " pos=" << pos << " bits=" << Bits(y[pos]);
          ASSERT_EQ(nf, nf_ref);
        }
      }
    }
  }
}

TEST_P(QuantSimdVsScalar, Quantize) {
  INA_GET_KERNELS_OR_SKIP(k, GetParam());
  const Kernels& ref = ScalarKernels();
  std::mt19937_64 rng(TestSeed());
  for (int round = 0; round < 30; ++round) {
    for (size_t n : Lengths()) {
      std::vector<float> x(n);
      for (auto& v : x) v = EdgeFloat(rng, false);
      uint8_t e = ref.block_exp(x.data(), n, nullptr);
      // Sometimes a larger exponent, as when another worker's block has a bigger max.
      if (rng() % 2) e = static_cast<uint8_t>(std::min<int>(kBiasedMax, e + int(rng() % 40)));
      // Add exact ties and values right at the top of the range [.., 2^E).
      const int p = 24 + static_cast<int>(rng() % 7);
      const int ue = e - proto::kExpBias;
      for (size_t i = 0; i < n; i += 3) {
        const float unit = std::ldexp(1.0f, ue - p);
        switch (rng() % 3) {
          case 0:
            x[i] = (static_cast<float>(rng() % 1024) + 0.5f) * unit * (rng() % 2 ? 1 : -1);
            break;
          case 1:
            x[i] = std::nextafter(std::ldexp(1.0f, ue), 0.0f) * (rng() % 2 ? 1 : -1);
            break;
          default:
            break;
        }
        if (!std::isfinite(x[i]) || std::fabs(x[i]) >= std::ldexp(1.0, ue)) x[i] = 0;
      }
      std::vector<uint8_t> got(4 * n + 64, kGuard), want(4 * n + 64, kGuard);
      ref.quantize(x.data(), n, e, p, want.data());
      k->quantize(x.data(), n, e, p, got.data());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i], want[i])
            << "byte " << i << " n=" << n << " e=" << int(e) << " p=" << p
            << (i < 4 * n ? "" : " (past n)") << " x=" << (i < 4 * n ? x[i / 4] : 0.0f);
      }
    }
  }
}

TEST_P(QuantSimdVsScalar, Dequantize) {
  INA_GET_KERNELS_OR_SKIP(k, GetParam());
  const Kernels& ref = ScalarKernels();
  std::mt19937_64 rng(TestSeed());
  for (int round = 0; round < 30; ++round) {
    for (size_t n : Lengths()) {
      std::vector<uint8_t> in(4 * n);
      for (size_t i = 0; i < n; ++i) {
        uint32_t v = static_cast<uint32_t>(rng());
        switch (rng() % 6) {
          case 0:
            v = 0;
            break;
          case 1:
            v >>= rng() % 32;
            break;  // small magnitudes
          case 2:
            v = 0x80000000u;
            break;  // INT32_MIN
          case 3:
            v = 0x01000001u + (rng() % 64);
            break;  // > 2^24: float rounding of the int
          default:
            break;
        }
        proto::Store32(in.data() + 4 * i, v);
      }
      const uint8_t e = static_cast<uint8_t>(kBiasedMin + rng() % (kBiasedMax - kBiasedMin + 1));
      const int p = 24 + static_cast<int>(rng() % 7);
      std::vector<float> got(n + 16, 42.0f), want(n + 16, 42.0f);
      ref.dequantize(in.data(), n, e, p, want.data());
      k->dequantize(in.data(), n, e, p, got.data());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(Bits(got[i]), Bits(want[i]))
            << "i=" << i << " n=" << n << " e=" << int(e) << " p=" << p;
      }
    }
  }
}

TEST_P(QuantSimdVsScalar, Wire) {
  INA_GET_KERNELS_OR_SKIP(k, GetParam());
  const Kernels& ref = ScalarKernels();
  std::mt19937_64 rng(TestSeed());
  for (size_t n : Lengths()) {
    std::vector<int32_t> x(n);
    for (auto& v : x) v = static_cast<int32_t>(rng());
    std::vector<uint8_t> got(4 * n + 64, kGuard), want(4 * n + 64, kGuard);
    ref.to_wire(x.data(), n, want.data());
    k->to_wire(x.data(), n, got.data());
    ASSERT_EQ(got, want) << "n=" << n;
    std::vector<int32_t> back_got(n + 16, 3), back_want(n + 16, 3);
    ref.from_wire(want.data(), n, back_want.data());
    k->from_wire(want.data(), n, back_got.data());
    ASSERT_EQ(back_got, back_want) << "n=" << n;
  }
}

// Averaging: the multiply-and-correct path against the division, bit for bit. Whether the
// correction rounds right depends only on the significands of x and d, so every significand with
// every odd d up to 65 (every world of one switch: even d only shift the exponent) and a few
// larger ones up to kFastDivideMax; then random values across the whole float range, the edges of
// the fast path's range, zeros, denormals, Inf and NaN, at every length (tails and masks).
TEST_P(QuantSimdVsScalar, DivideIsTheCorrectlyRoundedQuotient) {
  INA_GET_KERNELS_OR_SKIP(k, GetParam());
  std::vector<float> x(1u << 23), want(1u << 23);
  std::vector<int> divisors;
  for (int d = 3; d <= 65; d += 2) divisors.push_back(d);
  for (int d : {255, 1001, kFastDivideMax - 1}) divisors.push_back(d);
  for (int d : divisors) {
    for (uint32_t m = 0; m < x.size(); ++m) {
      x[m] = std::bit_cast<float>((127u << 23) | m);
      want[m] = x[m] / static_cast<float>(d);
    }
    k->divide(x.data(), x.size(), static_cast<float>(d));
    size_t wrong = 0;
    for (size_t i = 0; i < x.size(); ++i) wrong += Bits(x[i]) != Bits(want[i]);
    ASSERT_EQ(wrong, 0u) << "d=" << d;
  }
  std::mt19937_64 rng(TestSeed());
  const float edges[] = {0.0f,
                         -0.0f,
                         0x1p-80f,
                         0x1.fffffep-81f,
                         0x1p126f,
                         0x1.000002p126f,
                         0x1p-149f,
                         0x1p-126f,
                         0x1.fffffep127f,
                         std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::quiet_NaN()};
  for (int round = 0; round < 40; ++round) {
    for (size_t n : Lengths()) {
      std::vector<float> got(n + 16, 42.0f);
      for (size_t i = 0; i < n; ++i) {
        got[i] = rng() % 4 == 0 ? edges[rng() % std::size(edges)]
                                : std::bit_cast<float>(static_cast<uint32_t>(rng()));
        if (rng() % 2) got[i] = -got[i];
      }
      const float d = static_cast<float>(2 + rng() % (kFastDivideMax - 1));
      std::vector<float> ref = got;
      for (size_t i = 0; i < n; ++i) ref[i] = got[i] / d;
      k->divide(got.data(), n, d);
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(Bits(got[i]), Bits(ref[i])) << "i=" << i << " n=" << n << " d=" << d;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, QuantSimdVsScalar, ::testing::Values("avx2", "avx512"),
                         [](const auto& info) { return info.param; });

// ---------------------------------------------------------------------------------------------
// The quant.h error bound, through the whole pipeline: per-worker exponents, fabric max, quantize,
// int sum (as the switch does), dequantize; against the exact sum.

class QuantErrorBound : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantErrorBound, HoldsForWorlds1To64) {
  INA_GET_KERNELS_OR_SKIP(k, GetParam());
  std::mt19937_64 rng(TestSeed());
  constexpr size_t kK = 256;
  int overflowed = 0;
  for (int world = 1; world <= 64; ++world) {
    for (int trial = 0; trial < 4; ++trial) {
      const int p = Precision(world);
      // Magnitudes: a top exponent anywhere in (and below) the valid range; each worker scales
      // down by a few binades; each value spans up to 30 more.
      const int top =
          proto::kExpMin - 30 + static_cast<int>(rng() % (proto::kExpMax - proto::kExpMin + 31));
      std::vector<std::vector<float>> x(world, std::vector<float>(kK));
      uint8_t e = proto::kExpNone;
      for (int w = 0; w < world; ++w) {
        const int wtop = top - static_cast<int>(rng() % 4);
        for (auto& v : x[w]) {
          const float m = 0.5f + static_cast<float>(rng() % (1u << 23)) * std::ldexp(1.0f, -24);
          v = std::ldexp(m, wtop - static_cast<int>(rng() % 31)) * (rng() % 2 ? 1.0f : -1.0f);
          if (rng() % 50 == 0) v = rng() % 2 ? 0.0f : -0.0f;
        }
        bool nonfinite = true;
        const uint8_t we = k->block_exp(x[w].data(), kK, &nonfinite);
        ASSERT_FALSE(nonfinite);
        e = std::max(e, we);  // the fabric's max-reduce
      }
      const int ue = e - proto::kExpBias;
      std::vector<int64_t> sum(kK, 0);
      std::vector<uint8_t> wire(4 * kK);
      std::vector<int32_t> q(kK);
      for (int w = 0; w < world; ++w) {
        k->quantize(x[w].data(), kK, e, p, wire.data());
        k->from_wire(wire.data(), kK, q.data());
        for (size_t i = 0; i < kK; ++i) {
          ASSERT_LE(std::llabs(q[i]), int64_t{1} << p);
          sum[i] += q[i];
        }
      }
      std::vector<int32_t> sum32(kK);
      for (size_t i = 0; i < kK; ++i) {
        ASSERT_LE(std::llabs(sum[i]), int64_t{1} << 30) << "world=" << world << " i=" << i;
        sum32[i] = static_cast<int32_t>(sum[i]);
      }
      k->to_wire(sum32.data(), kK, wire.data());
      std::vector<float> out(kK);
      k->dequantize(wire.data(), kK, e, p, out.data());
      // Reference sum in long double (64-bit significand): the values of one element span about
      // 60 bits, so it is exact or off by 2^-63 |S|, far inside the bound's 2^-24 |S| term.
      const long double half_unit = std::ldexp(1.0L, ue - p - 1);
      for (size_t i = 0; i < kK; ++i) {
        long double s = 0;
        for (int w = 0; w < world; ++w) s += x[w][i];
        const long double bound =
            world * half_unit + std::ldexp(1.0L, -24) * (std::fabs(s) + world * half_unit);
        if (std::isinf(out[i])) {
          // The sum of `world` finite floats can exceed the float range (E near kExpMax); the
          // bound of quant.h only covers results that are finite. Inf is right only if the exact
          // result, within the bound, may lie beyond FLT_MAX, and only with the sum's sign.
          ASSERT_GE(std::fabs(s) + bound,
                    static_cast<long double>(std::numeric_limits<float>::max()))
              << "world=" << world << " i=" << i << " sum=" << static_cast<double>(s);
          ASSERT_EQ(std::signbit(out[i]), std::signbit(s));
          ++overflowed;
          continue;
        }
        const long double err = std::fabs(static_cast<long double>(out[i]) - s);
        ASSERT_LE(err, bound) << "world=" << world << " trial=" << trial << " i=" << i
                              << " E=" << ue << " P=" << p << " sum=" << static_cast<double>(s)
                              << " out=" << out[i];
      }
    }
  }
  std::printf("%d of %zu results overflowed to Inf (exact sum beyond the float range)\n",
              overflowed, 64 * 4 * kK);
  EXPECT_LT(overflowed, static_cast<int>(64 * 4 * kK / 10));  // the bound is what we test
}

INSTANTIATE_TEST_SUITE_P(Variants, QuantErrorBound, ::testing::Values("scalar", "avx2", "avx512"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ina::host::quant
