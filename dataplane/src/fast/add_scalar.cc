// Scalar payload kernels: the twin every SIMD variant is tested against.
#include <cstring>

#include "add.h"

namespace ina::dp::fast {
namespace {

inline uint32_t LoadSwapped(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return __builtin_bswap32(v);
}

void SwapCopy(void* dst, const void* src, size_t n) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t v = LoadSwapped(s + 4 * i);
    std::memcpy(d + 4 * i, &v, sizeof(v));
  }
}

void SwapAdd(uint32_t* acc, const void* src, size_t n) {
  const auto* s = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < n; ++i) acc[i] += LoadSwapped(s + 4 * i);
}

}  // namespace

const AddKernels kScalarKernels = {"scalar", SwapCopy, SwapAdd};

}  // namespace ina::dp::fast
