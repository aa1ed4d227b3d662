// The shared per-element arithmetic of the GPU kernels (ina/gpu/quant_elem.h), built here by the
// host compiler, against the CPU oracle ina::host::quant::ScalarKernels(), element by element:
// exponent edges and clamping, zeros, denormals, ties to even, values just below 2^E, Inf/NaN,
// every bfloat16 and float16 bit pattern, byte order, averaging, and seeded random blocks
// (INA_SEED=<n> replays; the seed is printed).
#include "ina/gpu/quant_elem.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "ina/host/quant.h"
#include "ina/proto/wire.h"

namespace ina::gpu::elem {
namespace {

using host::quant::ScalarKernels;

uint64_t TestSeed() { return testing::TestSeed(20261202); }

float F(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t B(float f) { return std::bit_cast<uint32_t>(f); }

// The CPU oracle on one element.
uint8_t CpuExp(float x, bool* nonfinite) { return ScalarKernels().block_exp(&x, 1, nonfinite); }
std::array<uint8_t, 4> CpuQuant(float x, uint8_t e, int p) {
  std::array<uint8_t, 4> out{};
  ScalarKernels().quantize(&x, 1, e, p, out.data());
  return out;
}
float CpuDequant(const uint8_t* in, uint8_t e, int p) {
  float out;
  ScalarKernels().dequantize(in, 1, e, p, &out);
  return out;
}

// The shared functions on one element, as the kernels compose them.
std::array<uint8_t, 4> ElemQuant(float x, uint8_t e, int p) {
  std::array<uint8_t, 4> out{};
  StoreBe32(out.data(), QuantizeElem(x, QuantScale(e, p)));
  // The kernels store the word form; it must give the same bytes.
  std::array<uint8_t, 4> word_bytes{};
  const uint32_t w = WireWord(QuantizeElem(x, QuantScale(e, p)));
  std::memcpy(word_bytes.data(), &w, 4);
  EXPECT_EQ(out, word_bytes);
  return out;
}

std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

// Largest |x| a block at biased exponent e may hold (the float just below 2^E).
float BelowPow2(uint8_t e) {
  const int E = ClampedExp(e);
  return std::nextafter(std::ldexp(1.0f, E), 0.0f);
}

const int kPrecisions[] = {30, 29, 28, 27, 26, 25, 24, 1};

// ---------------------------------------------------------------------------------------------
// Block exponent.

TEST(GpuElemExp, EveryExponentFieldMatchesCpu) {
  for (uint32_t field = 0; field <= 255; ++field) {
    for (uint32_t mant : {0u, 1u, 0x400000u, 0x7fffffu}) {
      for (uint32_t sign : {0u, 0x80000000u}) {
        const float x = F(sign | (field << 23) | mant);
        bool cpu_bad = false;
        const uint8_t cpu = CpuExp(x, &cpu_bad);
        EXPECT_EQ(BiasedExpFromMaxBits(ExpContribution(x)), cpu) << Hex(B(x));
        EXPECT_EQ(IsNonFinite(x), cpu_bad) << Hex(B(x));
        EXPECT_EQ(IsNonFinite(x), !std::isfinite(x)) << Hex(B(x));
      }
    }
  }
}

TEST(GpuElemExp, KnownAnswers) {
  EXPECT_EQ(BiasedExpFromMaxBits(ExpContribution(1.0f)), 1 + proto::kExpBias);
  EXPECT_EQ(BiasedExpFromMaxBits(ExpContribution(0.5f)), 0 + proto::kExpBias);
  EXPECT_EQ(BiasedExpFromMaxBits(ExpContribution(-0.0f)), kBiasedMin);
  EXPECT_EQ(BiasedExpFromMaxBits(ExpContribution(F(1))), kBiasedMin);  // denormal
  EXPECT_EQ(BiasedExpFromMaxBits(ExpContribution(std::numeric_limits<float>::max())), kBiasedMax);
  EXPECT_EQ(ExpContribution(std::numeric_limits<float>::infinity()), 0u);
  EXPECT_EQ(ExpContribution(std::numeric_limits<float>::quiet_NaN()), 0u);
  EXPECT_TRUE(IsNonFinite(-std::numeric_limits<float>::infinity()));
  EXPECT_TRUE(IsNonFinite(F(0xff800001u)));  // signalling NaN, sign set
}

// A block's exponent and flag are the max / OR of the element contributions, as the kernels
// reduce them.
TEST(GpuElemExp, RandomBlocksMatchCpu) {
  std::mt19937_64 rng(TestSeed());
  std::uniform_int_distribution<uint32_t> bits;
  for (int round = 0; round < 4000; ++round) {
    const size_t n = 1 + rng() % 300;
    std::vector<float> x(n);
    const bool with_bad = rng() % 4 == 0;
    const uint32_t field_hi = 1 + static_cast<uint32_t>(rng() % 254);
    for (float& v : x) {
      uint32_t b = bits(rng);
      // Mostly one magnitude range per block (as gradients), sometimes anything.
      if (rng() % 8 != 0) b = (b & 0x807fffffu) | ((rng() % (field_hi + 1)) << 23);
      v = F(b);
      if (!with_bad && !std::isfinite(v)) v = 0.0f;
    }
    uint32_t max_bits = 0;
    bool bad = false;
    for (float v : x) {
      max_bits = std::max(max_bits, ExpContribution(v));
      bad = bad || IsNonFinite(v);
    }
    bool cpu_bad = false;
    const uint8_t cpu = ScalarKernels().block_exp(x.data(), n, &cpu_bad);
    ASSERT_EQ(BiasedExpFromMaxBits(max_bits), cpu) << "round " << round;
    ASSERT_EQ(bad, cpu_bad) << "round " << round;
  }
}

// ---------------------------------------------------------------------------------------------
// Quantize.

TEST(GpuElemQuant, EdgeValuesAtEveryExponentAndPrecision) {
  size_t checked = 0;
  for (int e = 0; e <= 255; ++e) {
    const auto be = static_cast<uint8_t>(e);
    const int E = ClampedExp(be);
    for (int p : kPrecisions) {
      std::vector<float> xs = {0.0f,
                               -0.0f,
                               F(1),
                               F(0x80000001u),
                               F(0x007fffffu),
                               F(0x00800000u),
                               BelowPow2(be),
                               -BelowPow2(be),
                               std::ldexp(1.0f, E - 1),
                               -std::ldexp(1.0f, E - 1)};
      // Ties and near-ties at the quantization step 2^(E - P): m + 1/2 for small m (ties to
      // even), and the floats next to them.
      for (int m = 0; m < 6; ++m) {
        const float tie = std::ldexp(static_cast<float>(m) + 0.5f, E - p);
        if (!(std::fabs(tie) < std::ldexp(1.0f, E))) continue;
        xs.insert(xs.end(), {tie, -tie, std::nextafter(tie, 0.0f), std::nextafter(tie, 1e30f)});
      }
      for (float x : xs) {
        if (!(std::fabs(x) < std::ldexp(1.0f, E))) continue;  // the kernels' contract
        ASSERT_EQ(ElemQuant(x, be, p), CpuQuant(x, be, p))
            << "x=" << Hex(B(x)) << " biased_exp=" << e << " precision=" << p;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 20000u);
}

TEST(GpuElemQuant, TiesRoundToEven) {
  // E = 1, P = 29: step 2^-28. x = (m + 1/2) steps quantizes to the even neighbour.
  const uint8_t be = static_cast<uint8_t>(1 + proto::kExpBias);
  const float scale = QuantScale(be, 29);
  EXPECT_EQ(B(scale), B(std::ldexp(1.0f, 28)));
  for (int m = 0; m < 64; ++m) {
    const float x = std::ldexp(static_cast<float>(m) + 0.5f, -28);
    const int32_t even = m % 2 == 0 ? m : m + 1;
    EXPECT_EQ(QuantizeElem(x, scale), even) << "m=" << m;
    EXPECT_EQ(QuantizeElem(-x, scale), -even) << "m=" << m;
  }
}

TEST(GpuElemQuant, ScalesMatchTheContract) {
  for (int e = 0; e <= 255; ++e) {
    for (int p : kPrecisions) {
      const int E = ClampedExp(static_cast<uint8_t>(e));
      EXPECT_GE(E, proto::kExpMin);
      EXPECT_LE(E, proto::kExpMax);
      const float q = QuantScale(static_cast<uint8_t>(e), p);
      const float d = DequantScale(static_cast<uint8_t>(e), p);
      EXPECT_TRUE(std::isnormal(q) && std::isnormal(d)) << e << " " << p;
      if (p >= 24) {  // no clamping of the scale in the range the protocol uses
        EXPECT_EQ(q, std::ldexp(1.0f, p - E)) << e << " " << p;
        EXPECT_EQ(d, std::ldexp(1.0f, E - p)) << e << " " << p;
      }
    }
  }
}

TEST(GpuElemQuant, RandomValuesMatchCpu) {
  std::mt19937_64 rng(TestSeed() + 1);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2000000; ++i) {
    float x = F(bits(rng));
    if (!std::isfinite(x)) continue;
    bool bad;
    // At the element's own exponent or (as after the fabric's max) a larger one.
    const int own = CpuExp(x, &bad);
    const auto be = static_cast<uint8_t>(std::min(kBiasedMax, own + static_cast<int>(rng() % 3)));
    const int p = kPrecisions[rng() % 7];
    ASSERT_EQ(ElemQuant(x, be, p), CpuQuant(x, be, p))
        << "x=" << Hex(B(x)) << " biased_exp=" << int{be} << " precision=" << p;
  }
}

// ---------------------------------------------------------------------------------------------
// Dequantize, averaging, byte order.

TEST(GpuElemDequant, EdgeAndRandomWordsMatchCpu) {
  std::mt19937_64 rng(TestSeed() + 2);
  std::vector<int32_t> qs = {0,
                             1,
                             -1,
                             2,
                             (1 << 24) + 1,
                             (1 << 24) + 3,
                             (1 << 25) + 2,
                             -((1 << 24) + 1),
                             1 << 30,
                             -(1 << 30),
                             std::numeric_limits<int32_t>::max(),
                             std::numeric_limits<int32_t>::min()};
  for (int i = 0; i < 200; ++i) qs.push_back(static_cast<int32_t>(rng()));
  for (int e = 0; e <= 255; ++e) {
    const auto be = static_cast<uint8_t>(e);
    for (int p : kPrecisions) {
      for (int32_t q : qs) {
        uint8_t wire[4];
        StoreBe32(wire, q);
        const float cpu = CpuDequant(wire, be, p);
        uint32_t w;
        std::memcpy(&w, wire, 4);
        const float scale = DequantScale(be, p);
        ASSERT_EQ(B(DequantizeElem(LoadBe32(wire), scale)), B(cpu))
            << "q=" << q << " e=" << e << " p=" << p;
        ASSERT_EQ(B(DequantizeElem(FromWireWord(w), scale)), B(cpu));
      }
    }
  }
}

TEST(GpuElemDequant, AveragingIsOneCorrectlyRoundedDivision) {
  std::mt19937_64 rng(TestSeed() + 3);
  for (int i = 0; i < 300000; ++i) {
    const auto q = static_cast<int32_t>(rng());
    const auto be = static_cast<uint8_t>(kBiasedMin + rng() % (kBiasedMax - kBiasedMin + 1));
    // World sizes of one switch (up to 64), of trees of them, and past the fast path's range.
    const int world = 1 + static_cast<int>(i % 4 == 0 ? rng() % 20000 : rng() % 64);
    const int p = host::quant::Precision(world);
    uint8_t wire[4];
    StoreBe32(wire, q);
    const float cpu = CpuDequant(wire, be, p);
    const float avg = DequantizeAvgElem(LoadBe32(wire), DequantScale(be, p),
                                        MakeAvgDivisor(static_cast<float>(world)));
    // Definition: the CPU kernel's result divided by float(world) ...
    ASSERT_EQ(B(avg), B(cpu / static_cast<float>(world))) << "q=" << q << " world=" << world;
    // ... which is the correctly rounded quotient (a double quotient rounded to float is: 53 >=
    // 2 * 24 + 2 bits), denormal results included.
    ASSERT_EQ(B(avg), B(static_cast<float>(static_cast<double>(cpu) / world)))
        << "q=" << q << " world=" << world;
  }
  // Denormal quotients: the smallest step at kExpMin, P = 30 is 2^-126; halving goes below.
  const float tiny =
      DequantizeAvgElem(1, DequantScale(static_cast<uint8_t>(kBiasedMin), 30), MakeAvgDivisor(2));
  EXPECT_EQ(B(tiny), B(std::ldexp(1.0f, -127)));
  EXPECT_FALSE(std::isnormal(tiny));
}

// The fast path (a multiply and two FMAs, no division) against the division, for every significand
// of the dequantized value: whether the correction rounds right depends only on the significands
// of a and d (powers of two scale both sides exactly), so each odd d once covers d 2^j. Here the
// world sizes of one switch (d <= 65) and a few beyond; the same check over every odd d up to
// kAvgFastMaxDivisor (4095) found no difference when the bound was chosen (a one-off run, 17 G
// quotients). Also both ends of the scales that take the fast path.
TEST(GpuElemDequant, AveragingFastPathEqualsTheDivisionForEverySignificand) {
  std::vector<int> divisors;
  for (int d = 3; d <= 65; d += 2) divisors.push_back(d);
  for (int d : {255, 1001, 4095}) divisors.push_back(d);
  for (int d : divisors) {
    const AvgDivisor div = MakeAvgDivisor(static_cast<float>(d));
    uint64_t wrong = 0;
    for (uint32_t m = 0; m < (1u << 23); m += (d > 65 ? 7 : 1)) {
      // a = (2^23 + m) 2^-23 = 1.m; as q = 2^23 + m with scale 2^-23.
      const auto q = static_cast<int32_t>((1u << 23) | m);
      const float got = DequantizeAvgElem(q, 0x1p-23f, div);
      wrong += B(got) != B(DequantizeElem(q, 0x1p-23f) / static_cast<float>(d));
    }
    ASSERT_EQ(wrong, 0u) << "d=" << d;
  }
  std::mt19937_64 rng(TestSeed() + 5);
  for (float scale : {0x1p-80f, 0x1p-79f, 0x1p94f, 0x1p95f}) {
    for (int i = 0; i < 20000; ++i) {
      const auto q = static_cast<int32_t>(rng());
      const int d = 2 + static_cast<int>(rng() % 4095);
      const float a = DequantizeElem(q, scale);
      const float want = static_cast<float>(static_cast<double>(a) / d);
      ASSERT_EQ(B(DequantizeAvgElem(q, scale, MakeAvgDivisor(static_cast<float>(d)))), B(want))
          << "q=" << q << " scale=" << scale << " d=" << d;
    }
  }
}

TEST(GpuElemWire, ByteOrderMatchesCpu) {
  std::mt19937_64 rng(TestSeed() + 4);
  std::vector<int32_t> xs = {0,
                             1,
                             -1,
                             0x12345678,
                             std::numeric_limits<int32_t>::min(),
                             std::numeric_limits<int32_t>::max()};
  for (int i = 0; i < 1000; ++i) xs.push_back(static_cast<int32_t>(rng()));
  for (int32_t v : xs) {
    uint8_t cpu[4];
    ScalarKernels().to_wire(&v, 1, cpu);
    uint8_t mine[4];
    StoreBe32(mine, v);
    ASSERT_EQ(std::memcmp(cpu, mine, 4), 0) << v;
    const uint32_t w = WireWord(v);
    ASSERT_EQ(std::memcmp(cpu, &w, 4), 0) << v;
    int32_t back;
    ScalarKernels().from_wire(mine, 1, &back);
    ASSERT_EQ(LoadBe32(mine), back);
    ASSERT_EQ(FromWireWord(w), v);
  }
  const uint8_t* p = nullptr;
  uint8_t b[4];
  StoreBe32(b, 0x12345678);
  p = b;
  EXPECT_EQ(p[0], 0x12);
  EXPECT_EQ(p[3], 0x78);
}

// ---------------------------------------------------------------------------------------------
// bfloat16 and float16: every bit pattern.

// Independent reference: sign * mantissa * 2^exponent with ldexp, from the format's fields.
double HalfRef(uint16_t h, int exp_bits, int mant_bits) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  const int e = (h >> mant_bits) & ((1 << exp_bits) - 1);
  const int m = h & ((1 << mant_bits) - 1);
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == (1 << exp_bits) - 1) {
    return m == 0 ? s * std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::quiet_NaN();
  }
  if (e == 0) return s * std::ldexp(static_cast<double>(m), 1 - bias - mant_bits);
  return s * std::ldexp(static_cast<double>(m + (1 << mant_bits)), e - bias - mant_bits);
}

// One input converted, then the float path: exponent, nonfinite flag and quantized value at its
// own exponent and two larger ones, against the CPU kernels on the converted float.
void CheckAgainstCpuAfterConversion(float f, uint16_t h) {
  bool cpu_bad = false;
  const uint8_t cpu_e = CpuExp(f, &cpu_bad);
  ASSERT_EQ(BiasedExpFromMaxBits(ExpContribution(f)), cpu_e) << Hex(h);
  ASSERT_EQ(IsNonFinite(f), cpu_bad) << Hex(h);
  if (cpu_bad) return;
  for (int up = 0; up < 3; ++up) {
    const auto be = static_cast<uint8_t>(std::min(kBiasedMax, cpu_e + up));
    for (int p : {30, 27, 24}) {
      ASSERT_EQ(ElemQuant(f, be, p), CpuQuant(f, be, p)) << Hex(h) << " e=" << int{be};
    }
  }
}

TEST(GpuElemHalf, EveryBFloat16Pattern) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const float f = ToFloat(BFloat16{bits});
    EXPECT_EQ(B(f), B(BFloat16ToFloat(bits)));
    const double ref = HalfRef(bits, 8, 7);
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(f)) << Hex(h);
      ASSERT_EQ(B(f) >> 16, h) << "payload kept";
    } else {
      ASSERT_EQ(static_cast<double>(f), ref) << Hex(h);
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << Hex(h);  // -0 stays -0
    }
    CheckAgainstCpuAfterConversion(f, bits);
  }
}

TEST(GpuElemHalf, EveryFloat16Pattern) {
  size_t denormals = 0;
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const float f = ToFloat(Float16{bits});
    EXPECT_EQ(B(f), B(Float16ToFloat(bits)));
    const double ref = HalfRef(bits, 5, 10);
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(f)) << Hex(h);
      ASSERT_EQ((B(f) >> 13) & 0x3ffu, h & 0x3ffu) << "payload kept";
      ASSERT_EQ(B(f) >> 31, h >> 15);
    } else {
      ASSERT_EQ(static_cast<double>(f), ref) << Hex(h);
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << Hex(h);
    }
#ifdef __FLT16_MANT_DIG__
    // The compiler's own conversion as a second reference.
    _Float16 hv;
    std::memcpy(&hv, &bits, 2);
    const float c = static_cast<float>(hv);
    if (!std::isnan(c)) {
      ASSERT_EQ(B(f), B(c)) << Hex(h);
    }
#endif
    if ((h & 0x7c00u) == 0 && (h & 0x3ffu) != 0) ++denormals;
    CheckAgainstCpuAfterConversion(f, bits);
  }
  EXPECT_EQ(denormals, 2u * 1023u);
}

}  // namespace
}  // namespace ina::gpu::elem
