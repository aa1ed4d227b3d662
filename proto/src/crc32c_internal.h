// Private to the CRC32C library (crc32c.h): the variants' definitions and the raw-register helpers
// the SSE4.2 variant's combine step uses.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ina/proto/crc32c.h"

namespace ina::proto::internal {

extern const Crc32cVariant kCrc32cScalar;

// The raw register (no init, no final inversion) after n zero bytes from `reg`, bytewise.
uint32_t Crc32cZeros(uint32_t reg, size_t n);

// reg -> the register after `bytes` zero bytes, as four 256-entry tables (it is linear in reg).
struct Crc32cShift {
  uint32_t t[4][256];
  void Init(size_t bytes);
  uint32_t Apply(uint32_t reg) const {
    return t[0][reg & 0xFF] ^ t[1][(reg >> 8) & 0xFF] ^ t[2][(reg >> 16) & 0xFF] ^ t[3][reg >> 24];
  }
};

}  // namespace ina::proto::internal
