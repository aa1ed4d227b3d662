// AVX-512 payload kernels (this file alone is compiled with -mavx512f -mavx512bw): 16 elements per
// step, a byte shuffle for the swap, a masked step for the tail.
#include <immintrin.h>

#include "add.h"

namespace ina::dp::fast {
namespace {

inline __m512i SwapMask() {
  // Per 128-bit lane, bytes 3 2 1 0, 7 6 5 4, ... (each int32 little-endian below).
  return _mm512_set4_epi32(0x0C0D0E0F, 0x08090A0B, 0x04050607, 0x00010203);
}

inline __mmask16 TailMask(size_t left) {
  return static_cast<__mmask16>((1u << left) - 1);  // left < 16
}

void SwapCopy(void* dst, const void* src, size_t n) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  const __m512i mask = SwapMask();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i v = _mm512_loadu_si512(s + 4 * i);
    _mm512_storeu_si512(d + 4 * i, _mm512_shuffle_epi8(v, mask));
  }
  if (i < n) {
    const __mmask16 m = TailMask(n - i);
    const __m512i v = _mm512_maskz_loadu_epi32(m, s + 4 * i);
    _mm512_mask_storeu_epi32(d + 4 * i, m, _mm512_shuffle_epi8(v, mask));
  }
}

void SwapAdd(uint32_t* acc, const void* src, size_t n) {
  const auto* s = static_cast<const uint8_t*>(src);
  const __m512i mask = SwapMask();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i v = _mm512_shuffle_epi8(_mm512_loadu_si512(s + 4 * i), mask);
    _mm512_storeu_si512(acc + i, _mm512_add_epi32(_mm512_loadu_si512(acc + i), v));
  }
  if (i < n) {
    const __mmask16 m = TailMask(n - i);
    const __m512i v = _mm512_shuffle_epi8(_mm512_maskz_loadu_epi32(m, s + 4 * i), mask);
    _mm512_mask_storeu_epi32(acc + i, m, _mm512_add_epi32(_mm512_maskz_loadu_epi32(m, acc + i), v));
  }
}

}  // namespace

extern const AddKernels kAvx512Kernels;
const AddKernels kAvx512Kernels = {"avx512", SwapCopy, SwapAdd};

}  // namespace ina::dp::fast
