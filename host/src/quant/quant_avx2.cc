// AVX2 kernels: 8 floats per step, the tail (n % 8 elements) by the scalar functions, so every
// output is bit-identical to the scalar reference. Compiled with -mavx2 -mfma; used only after
// quant.cc has checked the CPU. Everything here is file-local or a plain intrinsic: no inline
// library function may be emitted from this file (see internal.h).
#include <immintrin.h>

#include "internal.h"

namespace ina::host::quant::internal {
namespace {

constexpr size_t kW = 8;

__m256i ByteSwapMask() {
  return _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12,  //
                          3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
}

uint8_t BlockExp(const float* x, size_t n, bool* nonfinite) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i max_finite = _mm256_set1_epi32(0x7f7fffff);
  __m256i vmax = _mm256_setzero_si256();
  __m256i vbad = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + kW <= n; i += kW) {
    const __m256i a =
        _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), abs_mask);
    const __m256i bad = _mm256_cmpgt_epi32(a, max_finite);  // a >= 0, so signed compare is fine
    vbad = _mm256_or_si256(vbad, bad);
    vmax = _mm256_max_epu32(vmax, _mm256_andnot_si256(bad, a));
  }
  // Horizontal max of 8 lanes.
  __m128i m = _mm_max_epu32(_mm256_castsi256_si128(vmax), _mm256_extracti128_si256(vmax, 1));
  m = _mm_max_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
  m = _mm_max_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
  const uint32_t max_bits = static_cast<uint32_t>(_mm_cvtsi128_si32(m));
  bool tail_bad = false;
  // BiasedExpFromMaxBits is monotone, so the max of the two exponents is the exponent of the max.
  const uint8_t tail_exp = ScalarBlockExp(x + i, n - i, &tail_bad);
  const uint8_t vec_exp = BiasedExpFromMaxBits(max_bits);
  if (nonfinite != nullptr) *nonfinite = tail_bad || !_mm256_testz_si256(vbad, vbad);
  return vec_exp > tail_exp ? vec_exp : tail_exp;
}

void Quantize(const float* x, size_t n, uint8_t biased_exp, int precision, uint8_t* out) {
  const __m256 scale = _mm256_castsi256_ps(
      _mm256_set1_epi32(static_cast<int>(QuantScaleBits(biased_exp, precision))));
  const __m256i bswap = ByteSwapMask();
  size_t i = 0;
  for (; i + kW <= n; i += kW) {
    // cvtps rounds with MXCSR, round-to-nearest-even by default: the same as nearbyint.
    const __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), scale));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 4 * i), _mm256_shuffle_epi8(q, bswap));
  }
  ScalarQuantize(x + i, n - i, biased_exp, precision, out + 4 * i);
}

void Dequantize(const uint8_t* in, size_t n, uint8_t biased_exp, int precision, float* out) {
  const __m256 scale = _mm256_castsi256_ps(
      _mm256_set1_epi32(static_cast<int>(DequantScaleBits(biased_exp, precision))));
  const __m256i bswap = ByteSwapMask();
  size_t i = 0;
  for (; i + kW <= n; i += kW) {
    const __m256i v = _mm256_shuffle_epi8(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 4 * i)), bswap);
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_cvtepi32_ps(v), scale));
  }
  ScalarDequantize(in + 4 * i, n - i, biased_exp, precision, out + i);
}

void ToWire(const int32_t* x, size_t n, uint8_t* out) {
  const __m256i bswap = ByteSwapMask();
  size_t i = 0;
  for (; i + kW <= n; i += kW) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 4 * i), _mm256_shuffle_epi8(v, bswap));
  }
  ScalarToWire(x + i, n - i, out + 4 * i);
}

void FromWire(const uint8_t* in, size_t n, int32_t* out) {
  const __m256i bswap = ByteSwapMask();
  size_t i = 0;
  for (; i + kW <= n; i += kW) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 4 * i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_shuffle_epi8(v, bswap));
  }
  ScalarFromWire(in + 4 * i, n - i, out + i);
}

uint32_t QuantizeCrc(const float* x, size_t n, uint8_t biased_exp, int precision, uint8_t* out) {
  return QuantizeThenCrc(Quantize, x, n, biased_exp, precision, out);
}

// Kernels::divide: 8 elements per step take q0 = x r, e = x - q0 d (exact), q0 + e r; a step
// with an element outside [kDivideMinBits, kDivideMaxBits] (zero aside) divides instead.
void Divide(float* x, size_t n, float d) {
  const __m256 dv = _mm256_set1_ps(d);
  const __m256 rv = _mm256_set1_ps(1.0f / d);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i below = _mm256_set1_epi32(static_cast<int>(kDivideMinBits));
  const __m256i above = _mm256_set1_epi32(static_cast<int>(kDivideMaxBits));
  const __m256i zero = _mm256_setzero_si256();
  const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
  size_t i = 0;
  for (; i + kW <= n; i += kW) {
    const __m256 a = _mm256_loadu_ps(x + i);
    const __m256i bits = _mm256_and_si256(_mm256_castps_si256(a), abs_mask);
    const __m256i tiny =
        _mm256_andnot_si256(_mm256_cmpeq_epi32(bits, zero), _mm256_cmpgt_epi32(below, bits));
    const __m256i out = _mm256_or_si256(tiny, _mm256_cmpgt_epi32(bits, above));
    __m256 q;
    if (_mm256_testz_si256(out, out)) {
      const __m256 q0 = _mm256_mul_ps(a, rv);
      // The sum of the correction and q0 is +0 for x = -0: x's sign restored (for x != 0 the
      // quotient has it already).
      q = _mm256_or_ps(_mm256_fmadd_ps(_mm256_fnmadd_ps(q0, dv, a), rv, q0),
                       _mm256_and_ps(a, sign));
    } else {
      q = _mm256_div_ps(a, dv);
    }
    _mm256_storeu_ps(x + i, q);
  }
  ScalarDivide(x + i, n - i, d);
}

constexpr Kernels kAvx2 = {
    "avx2", BlockExp, Quantize, Dequantize, ToWire, FromWire, QuantizeCrc, Divide,
};

}  // namespace

const Kernels* Avx2Table() { return &kAvx2; }

}  // namespace ina::host::quant::internal
