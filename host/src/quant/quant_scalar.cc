// The scalar reference kernels: plain loops, the oracle every SIMD variant is tested against.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "internal.h"

namespace ina::host::quant {
namespace internal {
namespace {

constexpr uint32_t kAbsMask = 0x7fffffffu;
constexpr uint32_t kInfBits = 0x7f800000u;  // |x| bits >= this: Inf or NaN

uint32_t FloatBits(float f) { return std::bit_cast<uint32_t>(f); }

// Float with exponent field `field` (clamped to the normal range) and a zero mantissa:
// 2^(field-127).
uint32_t PowerOfTwoBits(int field) {
  return static_cast<uint32_t>(std::clamp(field, 1, 254)) << 23;
}

int ClampedExp(uint8_t biased_exp) {
  return std::clamp(static_cast<int>(biased_exp) - proto::kExpBias, proto::kExpMin, proto::kExpMax);
}

}  // namespace

uint8_t BiasedExpFromMaxBits(uint32_t max_abs_bits) {
  const int b = static_cast<int>(max_abs_bits >> 23);  // IEEE biased exponent, 0..254
  // Normal: |x| in [2^(b-127), 2^(b-126)), so the smallest E with |x| < 2^E is b - 126.
  const int e = b == 0 ? proto::kExpMin : b - 126;
  return static_cast<uint8_t>(std::clamp(e, proto::kExpMin, proto::kExpMax) + proto::kExpBias);
}

uint32_t QuantScaleBits(uint8_t biased_exp, int precision) {
  return PowerOfTwoBits(precision - ClampedExp(biased_exp) + 127);
}

uint32_t DequantScaleBits(uint8_t biased_exp, int precision) {
  return PowerOfTwoBits(ClampedExp(biased_exp) - precision + 127);
}

uint8_t ScalarBlockExp(const float* x, size_t n, bool* nonfinite) {
  // For non-negative floats the bit patterns order like the values, so the max |x| is the max of
  // the sign-cleared patterns.
  uint32_t max_bits = 0;
  bool bad = false;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t a = FloatBits(x[i]) & kAbsMask;
    if (a >= kInfBits) {
      bad = true;
    } else {
      max_bits = std::max(max_bits, a);
    }
  }
  if (nonfinite != nullptr) *nonfinite = bad;
  return BiasedExpFromMaxBits(max_bits);
}

void ScalarQuantize(const float* x, size_t n, uint8_t biased_exp, int precision, uint8_t* out) {
  const float scale = std::bit_cast<float>(QuantScaleBits(biased_exp, precision));
  for (size_t i = 0; i < n; ++i) {
    // The multiply by a power of two is exact (or underflows far below 0.5, which rounds to 0
    // either way); nearbyint rounds to nearest even in the default rounding mode.
    const int32_t q = static_cast<int32_t>(std::nearbyint(x[i] * scale));
    const uint32_t be = __builtin_bswap32(static_cast<uint32_t>(q));
    std::memcpy(out + 4 * i, &be, 4);
  }
}

void ScalarDequantize(const uint8_t* in, size_t n, uint8_t biased_exp, int precision, float* out) {
  const float scale = std::bit_cast<float>(DequantScaleBits(biased_exp, precision));
  for (size_t i = 0; i < n; ++i) {
    uint32_t be;
    std::memcpy(&be, in + 4 * i, 4);
    out[i] = static_cast<float>(static_cast<int32_t>(__builtin_bswap32(be))) * scale;
  }
}

void ScalarToWire(const int32_t* x, size_t n, uint8_t* out) {
  for (size_t i = 0; i < n; ++i) {
    const uint32_t be = __builtin_bswap32(static_cast<uint32_t>(x[i]));
    std::memcpy(out + 4 * i, &be, 4);
  }
}

void ScalarDivide(float* x, size_t n, float d) {
  for (size_t i = 0; i < n; ++i) x[i] /= d;
}

void ScalarFromWire(const uint8_t* in, size_t n, int32_t* out) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t be;
    std::memcpy(&be, in + 4 * i, 4);
    out[i] = static_cast<int32_t>(__builtin_bswap32(be));
  }
}

}  // namespace internal

const Kernels& ScalarKernels() {
  static constexpr Kernels kScalar = {
      "scalar",
      internal::ScalarBlockExp,
      internal::ScalarQuantize,
      internal::ScalarDequantize,
      internal::ScalarToWire,
      internal::ScalarFromWire,
      internal::ScalarQuantizeCrc,
      internal::ScalarDivide,
  };
  return kScalar;
}

}  // namespace ina::host::quant
