// AVX-512 kernels: 16 floats per step; the tail (n % 16 elements) uses masked loads and stores, so
// no scalar loop and no access past the end. Bit-identical to the scalar reference (same IEEE
// multiply, cvtps rounds to nearest even under the default MXCSR like nearbyint). Compiled with
// -mavx512f -mavx512bw -mavx512dq -mavx512vl; used only after quant.cc has checked the CPU.
// Everything here is file-local or a plain intrinsic (see internal.h).
#include <immintrin.h>

#include "internal.h"

namespace ina::host::quant::internal {
namespace {

constexpr size_t kW = 16;

__m512i ByteSwapMask() {
  return _mm512_broadcast_i32x4(
      _mm_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12));
}

// Lanes [0, n - i) of the step starting at i, all 16 for a full step.
__mmask16 StepMask(size_t i, size_t n) {
  const size_t left = n - i;
  return left >= kW ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
}

// Horizontal max of 16 unsigned lanes (GCC 12's _mm512_reduce_max_epu32 trips -Wuninitialized).
uint32_t ReduceMaxU32(__m512i v) {
  v = _mm512_max_epu32(v, _mm512_shuffle_i32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = _mm512_max_epu32(v, _mm512_shuffle_i32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  __m128i m = _mm512_castsi512_si128(v);
  m = _mm_max_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
  m = _mm_max_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
  return static_cast<uint32_t>(_mm_cvtsi128_si32(m));
}

uint8_t BlockExp(const float* x, size_t n, bool* nonfinite) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i max_finite = _mm512_set1_epi32(0x7f7fffff);
  __m512i vmax = _mm512_setzero_si512();
  __mmask16 bad_any = 0;
  for (size_t i = 0; i < n; i += kW) {
    // Masked-off lanes load as 0: neutral for the max and finite.
    const __m512i a = _mm512_and_si512(_mm512_maskz_loadu_epi32(StepMask(i, n), x + i), abs_mask);
    const __mmask16 bad = _mm512_cmpgt_epu32_mask(a, max_finite);
    bad_any = static_cast<__mmask16>(bad_any | bad);
    vmax = _mm512_mask_max_epu32(vmax, static_cast<__mmask16>(~bad), vmax, a);
  }
  if (nonfinite != nullptr) *nonfinite = bad_any != 0;
  return BiasedExpFromMaxBits(ReduceMaxU32(vmax));
}

void Quantize(const float* x, size_t n, uint8_t biased_exp, int precision, uint8_t* out) {
  const __m512 scale = _mm512_castsi512_ps(
      _mm512_set1_epi32(static_cast<int>(QuantScaleBits(biased_exp, precision))));
  const __m512i bswap = ByteSwapMask();
  for (size_t i = 0; i < n; i += kW) {
    const __mmask16 m = StepMask(i, n);
    const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), scale));
    _mm512_mask_storeu_epi32(out + 4 * i, m, _mm512_shuffle_epi8(q, bswap));
  }
}

void Dequantize(const uint8_t* in, size_t n, uint8_t biased_exp, int precision, float* out) {
  const __m512 scale = _mm512_castsi512_ps(
      _mm512_set1_epi32(static_cast<int>(DequantScaleBits(biased_exp, precision))));
  const __m512i bswap = ByteSwapMask();
  for (size_t i = 0; i < n; i += kW) {
    const __mmask16 m = StepMask(i, n);
    const __m512i v = _mm512_shuffle_epi8(_mm512_maskz_loadu_epi32(m, in + 4 * i), bswap);
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_cvtepi32_ps(v), scale));
  }
}

void ToWire(const int32_t* x, size_t n, uint8_t* out) {
  const __m512i bswap = ByteSwapMask();
  for (size_t i = 0; i < n; i += kW) {
    const __mmask16 m = StepMask(i, n);
    _mm512_mask_storeu_epi32(out + 4 * i, m,
                             _mm512_shuffle_epi8(_mm512_maskz_loadu_epi32(m, x + i), bswap));
  }
}

void FromWire(const uint8_t* in, size_t n, int32_t* out) {
  const __m512i bswap = ByteSwapMask();
  for (size_t i = 0; i < n; i += kW) {
    const __mmask16 m = StepMask(i, n);
    _mm512_mask_storeu_epi32(out + i, m,
                             _mm512_shuffle_epi8(_mm512_maskz_loadu_epi32(m, in + 4 * i), bswap));
  }
}

uint32_t QuantizeCrc(const float* x, size_t n, uint8_t biased_exp, int precision, uint8_t* out) {
  return QuantizeThenCrc(Quantize, x, n, biased_exp, precision, out);
}

// Kernels::divide: 16 elements per step take q0 = x r, e = x - q0 d (exact), q0 + e r; lanes
// outside [kDivideMinBits, kDivideMaxBits] (zero aside) are divided instead.
void Divide(float* x, size_t n, float d) {
  const __m512 dv = _mm512_set1_ps(d);
  const __m512 rv = _mm512_set1_ps(1.0f / d);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i below = _mm512_set1_epi32(static_cast<int>(kDivideMinBits));
  const __m512i above = _mm512_set1_epi32(static_cast<int>(kDivideMaxBits));
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  for (size_t i = 0; i < n; i += kW) {
    const __mmask16 m = StepMask(i, n);
    const __m512 a = _mm512_maskz_loadu_ps(m, x + i);
    const __m512i bits = _mm512_and_si512(_mm512_castps_si512(a), abs_mask);
    const __mmask16 out =
        _mm512_mask_cmplt_epu32_mask(_mm512_test_epi32_mask(bits, bits), bits, below) |
        _mm512_cmpgt_epu32_mask(bits, above);
    const __m512 q0 = _mm512_mul_ps(a, rv);
    // x = -0 would come out +0 from the sum: x's sign restored (x != 0: the quotient has it).
    const __m512i corrected =
        _mm512_castps_si512(_mm512_fmadd_ps(_mm512_fnmadd_ps(q0, dv, a), rv, q0));
    __m512 q = _mm512_castsi512_ps(
        _mm512_or_si512(corrected, _mm512_and_si512(_mm512_castps_si512(a), sign)));
    if (out != 0) q = _mm512_mask_div_ps(q, out, a, dv);
    _mm512_mask_storeu_ps(x + i, m, q);
  }
}

constexpr Kernels kAvx512 = {
    "avx512", BlockExp, Quantize, Dequantize, ToWire, FromWire, QuantizeCrc, Divide,
};

}  // namespace

const Kernels* Avx512Table() { return &kAvx512; }

}  // namespace ina::host::quant::internal
