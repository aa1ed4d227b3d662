// The scalar ones'-complement sum (see checksum.h).
#include <cstring>

#include "common/checksum.h"

namespace ina::net::internal {

uint64_t NativeSumScalar(const uint8_t* p, size_t n) {
  uint64_t acc = 0;  // 32-bit halves: carries collect in the high bits (fine below 2^32 words)
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    acc += (w & 0xFFFFFFFFu) + (w >> 32);
    p += 8;
    n -= 8;
  }
  while (n >= 2) {
    uint16_t w;
    std::memcpy(&w, p, 2);
    acc += w;
    p += 2;
    n -= 2;
  }
  if (n == 1) {
    uint16_t w = 0;
    std::memcpy(&w, p, 1);
    acc += w;
  }
  return acc;
}

const ChecksumKernel kChecksumScalar = {"scalar", NativeSumScalar};

}  // namespace ina::net::internal
