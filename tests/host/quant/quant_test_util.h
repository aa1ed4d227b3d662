// Shared helpers of the quantization tests (quant_test.cc: unit, quant_prop_test.cc: prop).
#pragma once

#include <gtest/gtest.h>

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

#include "ina/host/quant.h"
#include "ina/proto/wire.h"
#include "support/seed.h"

namespace ina::host::quant::testing {

inline constexpr int kBiasedMin = proto::kExpMin + proto::kExpBias;
inline constexpr int kBiasedMax = proto::kExpMax + proto::kExpBias;
inline constexpr uint8_t kGuard = 0xA5;  // fill beyond the output to catch writes past n

inline uint64_t TestSeed() {
  const uint64_t seed = ina::tests::Seed();  // fixed unless INA_SEED says otherwise; printed
  ::testing::Test::RecordProperty("INA_SEED", std::to_string(seed));
  return seed;
}

inline float FromBits(uint32_t b) { return std::bit_cast<float>(b); }
inline uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }

inline const Kernels* VariantByName(const std::string& name) {
  if (name == "scalar") return &ScalarKernels();
  if (name == "avx2") return Avx2Kernels();
  if (name == "avx512") return Avx512Kernels();
  return nullptr;
}

#define INA_GET_KERNELS_OR_SKIP(var, variant)                                                   \
  const Kernels* var = VariantByName(variant);                                                  \
  if (var == nullptr) GTEST_SKIP() << (variant) << " kernels unavailable on this CPU or build"; \
  ASSERT_EQ(var->name, (variant))

// A float from a mix of classes that stresses the kernels: random bit patterns, zeros of both
// signs, denormals, exact powers of two (the 2^E boundary of the block below), the float just
// below a power of two, the extremes, and (if allowed) Inf and NaN.
inline float EdgeFloat(std::mt19937_64& rng, bool allow_nonfinite) {
  std::uniform_int_distribution<uint32_t> bits;
  const uint32_t sign = (rng() & 1) << 31;
  for (;;) {
    float f;
    switch (rng() % 10) {
      case 0:
        f = FromBits(sign);  // +0 / -0
        break;
      case 1:
        f = FromBits(sign | (bits(rng) & 0x007fffffu));  // denormal (or zero)
        break;
      case 2:
        f = FromBits(sign | ((bits(rng) % 254 + 1) << 23));  // exactly 2^k
        break;
      case 3:
        f = FromBits(sign | (((bits(rng) % 254 + 1) << 23) - 1));  // just below 2^k
        break;
      case 4:
        f = FromBits(sign | 0x7f7fffffu);  // largest finite
        break;
      case 5:
        f = FromBits(sign | 0x00800000u);  // smallest normal
        break;
      case 6:
        f = FromBits(rng() & 1 ? 0x7f800000u | sign : 0x7fc00000u | (bits(rng) & 0x803fffffu));
        break;
      default:
        f = FromBits(bits(rng));
        break;
    }
    if (allow_nonfinite || std::isfinite(f)) return f;
  }
}

// Lengths that cover n = 0, every tail length for 8- and 16-wide vectors, and packet sizes.
inline std::vector<size_t> Lengths() {
  std::vector<size_t> n;
  for (size_t i = 0; i <= 40; ++i) n.push_back(i);
  for (size_t k : {63, 64, 65, 127, 128, 129, 255, 256, 257, 1000}) n.push_back(k);
  return n;
}

}  // namespace ina::host::quant::testing
