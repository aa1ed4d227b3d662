// AVX2 payload kernels (this file alone is compiled with -mavx2): 8 elements per step, a byte
// shuffle for the swap, scalar tail.
#include <immintrin.h>

#include <cstring>

#include "add.h"

namespace ina::dp::fast {
namespace {

inline __m256i SwapMask() {
  return _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12,  //
                          3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
}

void SwapCopy(void* dst, const void* src, size_t n) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  const __m256i mask = SwapMask();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 4 * i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 4 * i), _mm256_shuffle_epi8(v, mask));
  }
  for (; i < n; ++i) {
    uint32_t v;
    std::memcpy(&v, s + 4 * i, 4);
    v = __builtin_bswap32(v);
    std::memcpy(d + 4 * i, &v, 4);
  }
}

void SwapAdd(uint32_t* acc, const void* src, size_t n) {
  const auto* s = static_cast<const uint8_t*>(src);
  const __m256i mask = SwapMask();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 4 * i));
    __m256i* a = reinterpret_cast<__m256i*>(acc + i);
    _mm256_storeu_si256(a, _mm256_add_epi32(_mm256_loadu_si256(a), _mm256_shuffle_epi8(v, mask)));
  }
  for (; i < n; ++i) {
    uint32_t v;
    std::memcpy(&v, s + 4 * i, 4);
    acc[i] += __builtin_bswap32(v);
  }
}

}  // namespace

extern const AddKernels kAvx2Kernels;
const AddKernels kAvx2Kernels = {"avx2", SwapCopy, SwapAdd};

}  // namespace ina::dp::fast
