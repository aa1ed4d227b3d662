// Private to host/src/quant: the pieces the kernel files share.
//
// Each SIMD file is compiled with its own -m flags, so nothing it defines may be an inline function
// that other files also use (the linker could keep the AVX copy for everyone). The files therefore
// share only plain declarations: the scalar functions (compiled without extra flags, used for the
// SIMD tails) and one table getter per variant, which quant.cc calls only after checking the CPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ina/host/quant.h"
#include "ina/proto/wire.h"

namespace ina::host::quant::internal {

// Exponent range as biased values: block_exp returns values in [kBiasedMin, kBiasedMax].
inline constexpr int kBiasedMin = proto::kExpMin + proto::kExpBias;  // 31
inline constexpr int kBiasedMax = proto::kExpMax + proto::kExpBias;  // 255
static_assert(kBiasedMin >= 1 && kBiasedMax <= 255, "biased exponents must fit a uint8_t");

// The scalar reference kernels (quant_scalar.cc). The SIMD variants call them for their tails.
uint8_t ScalarBlockExp(const float* x, size_t n, bool* nonfinite);
void ScalarQuantize(const float* x, size_t n, uint8_t biased_exp, int precision, uint8_t* out);
void ScalarDequantize(const uint8_t* in, size_t n, uint8_t biased_exp, int precision, float* out);
void ScalarToWire(const int32_t* x, size_t n, uint8_t* out);
void ScalarFromWire(const uint8_t* in, size_t n, int32_t* out);
void ScalarDivide(float* x, size_t n, float d);

// Kernels::divide's range: |x| bit patterns (sign cleared) that take the multiply-and-correct
// path. Below 2^-80 the quotient or the remainder could leave the normal range (d <= 4096 keeps
// x / d >= 2^-92); above 2^126 q0 d could overflow; Inf and NaN lie above too. Zero is in range
// (0 * r = 0, and the correction adds 0).
inline constexpr uint32_t kDivideMinBits = 0x17800000;  // 2^-80
inline constexpr uint32_t kDivideMaxBits = 0x7e800000;  // 2^126
// Kernels::quantize_crc for a variant's quantize: quantizes kCrcPieceElems at a time, each piece
// followed by proto::Crc32c over the bytes just written (the best CRC variant, chosen in
// ina::proto). Compiled without SIMD flags (quant.cc); every variant's table calls it with its own
// quantize.
using QuantizeFn = void (*)(const float* x, size_t n, uint8_t biased_exp, int precision,
                            uint8_t* out);
uint32_t QuantizeThenCrc(QuantizeFn quantize, const float* x, size_t n, uint8_t biased_exp,
                         int precision, uint8_t* out);
uint32_t ScalarQuantizeCrc(const float* x, size_t n, uint8_t biased_exp, int precision,
                           uint8_t* out);

// Biased exponent from the largest finite |x| bit pattern (sign cleared): the smallest E with
// |x| < 2^E, clamped to [kExpMin, kExpMax], plus kExpBias. Denormals and zero give kExpMin.
// Shared arithmetic for every variant: all of them reduce to this one pattern first.
uint8_t BiasedExpFromMaxBits(uint32_t max_abs_bits);

// Bit pattern of the float 2^(P - E) (quantize scale) and 2^(E - P) (dequantize scale) for a
// biased exponent and precision. The exponent is clamped to [kExpMin, kExpMax] first, so the
// result is always a normal float (see quant.h).
uint32_t QuantScaleBits(uint8_t biased_exp, int precision);
uint32_t DequantScaleBits(uint8_t biased_exp, int precision);

// Kernel tables of the SIMD files, or nullptr when the compiler could not build them. The caller
// checks the CPU before using a table.
const Kernels* Avx2Table();
const Kernels* Avx512Table();

}  // namespace ina::host::quant::internal
