// The SSE2 ones'-complement sum (x86-64: SSE2 is in the base ISA; see checksum.h).
// 32 bytes per step: 16-bit words widened to 32-bit lanes and added; a lane takes at most 2^16
// words before it could overflow, so buffers are summed in chunks of 64 KiB.
#include <emmintrin.h>

#include <algorithm>

#include "common/checksum.h"

namespace ina::net::internal {

namespace {

uint64_t Sse2Sum(const uint8_t* p, size_t n) {
  uint64_t total = 0;
  const __m128i zero = _mm_setzero_si128();
  while (n >= 32) {
    size_t chunk = std::min<size_t>(n & ~size_t{31}, 65536);
    n -= chunk;
    __m128i acc0 = zero, acc1 = zero;
    for (; chunk > 0; chunk -= 32, p += 32) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
      acc0 = _mm_add_epi32(acc0, _mm_unpacklo_epi16(a, zero));
      acc1 = _mm_add_epi32(acc1, _mm_unpackhi_epi16(a, zero));
      acc0 = _mm_add_epi32(acc0, _mm_unpacklo_epi16(b, zero));
      acc1 = _mm_add_epi32(acc1, _mm_unpackhi_epi16(b, zero));
    }
    alignas(16) uint32_t lanes[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(lanes), acc0);
    _mm_store_si128(reinterpret_cast<__m128i*>(lanes + 4), acc1);
    for (uint32_t l : lanes) total += l;
  }
  return total + NativeSumScalar(p, n);
}

}  // namespace

const ChecksumKernel kChecksumSse2 = {"sse2", Sse2Sum};

}  // namespace ina::net::internal
