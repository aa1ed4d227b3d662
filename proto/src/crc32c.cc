// The scalar twin of CRC32C, the zero-extension helpers and the choice of variant.
#include <array>

#include "crc32c_internal.h"

namespace ina::proto {
namespace {

// kSlice[0] is the byte table: the register after one byte from (reg ^ byte) is
// kSlice[0][(reg ^ byte) & 0xFF] ^ (reg >> 8). kSlice[k][i] is that table's entry carried over k
// more zero bytes, so eight bytes take eight independent lookups ("slicing-by-8").
constexpr std::array<std::array<uint32_t, 256>, 8> kSlice = [] {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? kCrc32cPolyReflected ^ (c >> 1) : c >> 1;
    t[0][i] = c;
  }
  for (size_t k = 1; k < 8; ++k) {
    for (uint32_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
  }
  return t;
}();
constexpr const std::array<uint32_t, 256>& kTable = kSlice[0];

inline uint32_t Le32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}

uint32_t Raw(uint32_t reg, const uint8_t* p, size_t n) {
  for (; n >= 8; n -= 8, p += 8) {
    const uint32_t lo = reg ^ Le32(p);
    const uint32_t hi = Le32(p + 4);
    reg = kSlice[7][lo & 0xFF] ^ kSlice[6][(lo >> 8) & 0xFF] ^ kSlice[5][(lo >> 16) & 0xFF] ^
          kSlice[4][lo >> 24] ^ kSlice[3][hi & 0xFF] ^ kSlice[2][(hi >> 8) & 0xFF] ^
          kSlice[1][(hi >> 16) & 0xFF] ^ kSlice[0][hi >> 24];
  }
  for (; n > 0; --n, ++p) reg = kTable[(reg ^ *p) & 0xFF] ^ (reg >> 8);
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
