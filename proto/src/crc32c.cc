// The scalar twin of CRC32C, the zero-extension helpers and the choice of variant.
#include <array>

#include "crc32c_internal.h"

namespace ina::proto {
namespace {

constexpr std::array<uint32_t, 256> kTable = [] {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? kCrc32cPolyReflected ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}();

uint32_t Raw(uint32_t reg, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) reg = kTable[(reg ^ p[i]) & 0xFF] ^ (reg >> 8);
  return reg;
}

}  // namespace

uint32_t Crc32cScalar(uint32_t crc, const uint8_t* p, size_t n) { return ~Raw(~crc, p, n); }

namespace internal {

const Crc32cVariant kCrc32cScalar = {"scalar", Crc32cScalar};

uint32_t Crc32cZeros(uint32_t reg, size_t n) {
  for (size_t i = 0; i < n; ++i) reg = kTable[reg & 0xFF] ^ (reg >> 8);
  return reg;
}

void Crc32cShift::Init(size_t bytes) {
  uint32_t column[32];
  for (int m = 0; m < 32; ++m) column[m] = Crc32cZeros(uint32_t{1} << m, bytes);
  for (int k = 0; k < 4; ++k) {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t v = 0;
      for (int bit = 0; bit < 8; ++bit) {
        if (b & (1u << bit)) v ^= column[8 * k + bit];
      }
      t[k][b] = v;
    }
  }
}

}  // namespace internal

const Crc32cVariant& Crc32cBest() {
  static const Crc32cVariant* const best = Crc32cVariants().items[0];
  return *best;
}

uint32_t Crc32c(uint32_t crc, const uint8_t* p, size_t n) {
  static const Crc32cFn fn = Crc32cBest().fn;
  return fn(crc, p, n);
}

}  // namespace ina::proto
