// The per-element arithmetic of block-scaled quantization, written once for the host compiler and
// for CUDA device code (INA_HD is `__host__ __device__` under nvcc and empty otherwise).
//
// These functions are the GPU kernels' (drivers/gpu/src/quant.cu) whole arithmetic; built by the
// host compiler they are checked element by element against the CPU oracle,
// ina::host::quant::ScalarKernels() (host/src/quant/quant_scalar.cc), which defines the results:
//   - block exponent: the max over a block of the sign-cleared bit patterns of its finite elements
//     (non-negative floats order like their patterns), then E = the smallest integer with
//     |x| < 2^E, clamped to [proto::kExpMin, proto::kExpMax]; zero and denormals give kExpMin.
//     Inf/NaN elements do not contribute and set the block's nonfinite flag.
//   - quantize: q = round_to_nearest_even(x * 2^(P - E)) as int32, E clamped as above. The scale
//     is an exact power of two (a normal float for every clamped E and P in [24, 30]), so the only
//     rounding is the one to an integer. REQUIRES (as the CPU kernel): x finite, |x| < 2^E.
//   - wire: int32 elements travel big-endian.
//   - dequantize: float(q) (round to nearest even) * 2^(E - P), exact power-of-two scale.
//   - averaging (fused into dequantize, an extension of the CPU kernels defined here): the
//     dequantized float divided by float(divisor) with one IEEE division (correctly rounded, on
//     the GPU too: device code must not be built with -prec-div=false or --use_fast_math). The
//     CPU equivalent is ScalarKernels().dequantize followed by `out[i] / float(divisor)`.
//   - bfloat16 / float16 inputs: their bit patterns are converted to float exactly (every bf16
//     and f16 value is a float), then quantized as floats. NaN payloads are kept (f16: shifted
//     into the float mantissa, quiet bit to quiet bit).
// Nothing here depends on the floating-point environment except the rounding mode, which must be
// the default round-to-nearest-even (rintf honours it on the host; CUDA rounds so always).
// Device code must be built without flush-to-zero (nvcc's default): the f16 denormal conversion
// and the averaging division produce denormals.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "ina/proto/wire.h"

#ifdef __CUDACC__
#define INA_HD __host__ __device__
#else
#define INA_HD
#endif
#ifndef __CUDA_ARCH__
static_assert(std::endian::native == std::endian::little,
              "WireWord assumes a little-endian host, as x86-64, arm64 hosts and CUDA devices are");
#endif

namespace ina::gpu::elem {

inline constexpr uint32_t kAbsMask = 0x7fffffffu;
inline constexpr uint32_t kInfBits = 0x7f800000u;  // |x| bits >= this: Inf or NaN
inline constexpr int kBiasedMin = proto::kExpMin + proto::kExpBias;
inline constexpr int kBiasedMax = proto::kExpMax + proto::kExpBias;

// ---------------------------------------------------------------------------------------------
// Bit casts (the only per-compiler lines: device code has intrinsics, the host std::bit_cast).

INA_HD inline uint32_t FloatBits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  return std::bit_cast<uint32_t>(f);
#endif
}

INA_HD inline float BitsToFloat(uint32_t b) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(b);
#else
  return std::bit_cast<float>(b);
#endif
}

INA_HD inline int ClampInt(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// ---------------------------------------------------------------------------------------------
// Half-width inputs: exact conversion of the bit pattern to float.

// bfloat16 is the upper half of a float.
INA_HD inline float BFloat16ToFloat(uint16_t h) {
  return BitsToFloat(static_cast<uint32_t>(h) << 16);
}

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
INA_HD inline float Float16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) return BitsToFloat(sign | kInfBits | (mant << 13));  // Inf, NaN (payload kept)
  if (exp == 0) {
    // Zero or denormal mant * 2^-24: the int converts exactly (< 2^10) and the power-of-two scale
    // keeps it exact (the product is a normal float, >= 2^-24).
    return BitsToFloat(sign | FloatBits(static_cast<float>(mant) * 0x1p-24f));
  }
  return BitsToFloat(sign | ((exp + (127 - 15)) << 23) | (mant << 13));
}

// Input element types of the kernels, as their bit patterns; ToFloat converts exactly.
struct BFloat16 {
  uint16_t bits;
};
struct Float16 {
  uint16_t bits;
};
INA_HD inline float ToFloat(float x) { return x; }
INA_HD inline float ToFloat(BFloat16 x) { return BFloat16ToFloat(x.bits); }
INA_HD inline float ToFloat(Float16 x) { return Float16ToFloat(x.bits); }

// ---------------------------------------------------------------------------------------------
// Block exponent.

// One element's contribution to its block's max: the sign-cleared pattern if finite, else 0.
INA_HD inline uint32_t ExpContribution(float x) {
  const uint32_t a = FloatBits(x) & kAbsMask;
  return a < kInfBits ? a : 0u;
}

INA_HD inline bool IsNonFinite(float x) { return (FloatBits(x) & kAbsMask) >= kInfBits; }

// Biased block exponent from the block's max contribution: the smallest E with |x| < 2^E,
// clamped to [kExpMin, kExpMax], plus kExpBias.
INA_HD inline uint8_t BiasedExpFromMaxBits(uint32_t max_abs_bits) {
  const int b = static_cast<int>(max_abs_bits >> 23);  // IEEE biased exponent, 0..254
  // Normal: |x| in [2^(b-127), 2^(b-126)), so the smallest E with |x| < 2^E is b - 126.
  const int e = b == 0 ? proto::kExpMin : b - 126;
  return static_cast<uint8_t>(ClampInt(e, proto::kExpMin, proto::kExpMax) + proto::kExpBias);
}

// ---------------------------------------------------------------------------------------------
// Scales.

// Unbiased E of a biased exponent, clamped to [kExpMin, kExpMax] (0, "no block", gives kExpMin).
INA_HD inline int ClampedExp(uint8_t biased_exp) {
  return ClampInt(static_cast<int>(biased_exp) - proto::kExpBias, proto::kExpMin, proto::kExpMax);
}

// 2^(field - 127) with the exponent field clamped to the normal range.
INA_HD inline float PowerOfTwo(int field) {
  return BitsToFloat(static_cast<uint32_t>(ClampInt(field, 1, 254)) << 23);
}

INA_HD inline float QuantScale(uint8_t biased_exp, int precision) {
  return PowerOfTwo(precision - ClampedExp(biased_exp) + 127);
}

INA_HD inline float DequantScale(uint8_t biased_exp, int precision) {
  return PowerOfTwo(ClampedExp(biased_exp) - precision + 127);
}

// ---------------------------------------------------------------------------------------------
// Quantize / dequantize one element.

// round_to_nearest_even(x * scale) as int32. REQUIRES: |x * scale| <= 2^30 (x finite and
// |x| < 2^E for scale = QuantScale(E, P)).
INA_HD inline int32_t QuantizeElem(float x, float scale) {
  // The product is exact (or so far below 0.5 that it rounds to 0 either way); rintf rounds to
  // nearest even and the int conversion of the integral result is exact.
  return static_cast<int32_t>(rintf(x * scale));
}

INA_HD inline float DequantizeElem(int32_t q, float scale) { return static_cast<float>(q) * scale; }

// Averaging: the dequantized value divided by the divisor d (the world size, >= 1), correctly
// rounded, as the CPU's quant::DivideBy gives, but without a division per element. A float
// division is a multi-instruction sequence on the GPU (a reciprocal on the quarter-rate special
// function unit, its refinement, and a range check with a slow path); here d's reciprocal
// r = RN(1/d) is taken once per thread, and each element costs a multiply and two FMAs:
//   q0 = RN(a r)            (within 1 ulp of a/d)
//   e  = a - q0 d           (exact: one FMA)
//   q1 = RN(q0 + e r)       (= RN(a/d): Markstein's correction, Handbook of Floating-Point
//                            Arithmetic, 2nd ed., section 4.7)
// The theorem needs no underflow or overflow in q0 d and e; the per-block scale keeps a = x scale
// inside that range unless the block's exponent is extreme, where the element takes the plain
// division instead (a branch uniform over a block). quant_elem_test checks q1 against the division
// for every significand of a with every odd d up to 65 and a few larger (even d only shift the
// exponent); a one-off run of the same check over every odd d up to 4095 found no difference:
// kAvgFastMaxDivisor is how far that was checked.
inline constexpr float kAvgFastMaxDivisor = 4096.0f;

struct AvgDivisor {
  float d;      // the divisor, an integer >= 1
  float recip;  // RN(1 / d)
};

INA_HD inline AvgDivisor MakeAvgDivisor(float d) { return AvgDivisor{d, 1.0f / d}; }

INA_HD inline float DequantizeAvgElem(int32_t q, float scale, AvgDivisor div) {
  const float a = DequantizeElem(q, scale);
  // |q| < 2^31: |a| < 2^126 keeps q0 d finite; scale >= 2^-80 keeps a / d >= 2^-92 (normal, with
  // room for e) whenever a != 0 (a == 0 gives +0 both ways).
  if (!(scale >= 0x1p-80f && scale <= 0x1p95f && div.d <= kAvgFastMaxDivisor)) return a / div.d;
  const float q0 = a * div.recip;
  const float e = fmaf(-q0, div.d, a);
  return fmaf(e, div.recip, q0);  // a is never -0 (q 0 gives +0), so no sign to restore
}

// ---------------------------------------------------------------------------------------------
// Wire byte order.

INA_HD inline uint32_t ByteSwap32(uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0x0000ff00u) | ((v << 8) & 0x00ff0000u) | (v << 24);
}

// The native (little-endian) 32-bit word whose bytes in memory are v big-endian, and back: what
// the kernels store and load as words (or as 4-word vectors).
INA_HD inline uint32_t WireWord(int32_t v) { return ByteSwap32(static_cast<uint32_t>(v)); }
INA_HD inline int32_t FromWireWord(uint32_t w) { return static_cast<int32_t>(ByteSwap32(w)); }

// Byte-wise big-endian store / load of one element (any alignment).
INA_HD inline void StoreBe32(uint8_t* p, int32_t v) {
  const uint32_t u = static_cast<uint32_t>(v);
  p[0] = static_cast<uint8_t>(u >> 24);
  p[1] = static_cast<uint8_t>(u >> 16);
  p[2] = static_cast<uint8_t>(u >> 8);
  p[3] = static_cast<uint8_t>(u);
}

INA_HD inline int32_t LoadBe32(const uint8_t* p) {
  return static_cast<int32_t>((static_cast<uint32_t>(p[0]) << 24) |
                              (static_cast<uint32_t>(p[1]) << 16) |
                              (static_cast<uint32_t>(p[2]) << 8) | static_cast<uint32_t>(p[3]));
}

}  // namespace ina::gpu::elem
