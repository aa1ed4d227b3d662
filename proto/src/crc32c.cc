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

namespace {

// Carry-less a * b mod P, both as reflected polynomials (bit 31 is x^0), as zlib's multmodp.
uint32_t MulModP(uint32_t a, uint32_t b) {
  uint32_t m = uint32_t{1} << 31, p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) == 0) return p;
    }
    m >>= 1;
    b = (b & 1) ? (b >> 1) ^ kCrc32cPolyReflected : b >> 1;
  }
}

// kX2n[k] = x^(2^k) mod P.
constexpr std::array<uint32_t, 32> kX2n = [] {
  std::array<uint32_t, 32> t{};
  t[0] = uint32_t{1} << 30;  // x^1
  for (size_t k = 1; k < 32; ++k) {
    // t[k] = t[k-1]^2 (MulModP, constexpr-evaluable inline).
    uint32_t a = t[k - 1], b = t[k - 1], m = uint32_t{1} << 31, p = 0;
    for (;;) {
      if (a & m) {
        p ^= b;
        if ((a & (m - 1)) == 0) break;
      }
      m >>= 1;
      b = (b & 1) ? (b >> 1) ^ kCrc32cPolyReflected : b >> 1;
    }
    t[k] = p;
  }
  return t;
}();

}  // namespace

uint32_t Crc32cShiftFactor(size_t len_b) {
  uint32_t p = uint32_t{1} << 31;  // x^0
  // x^(8 len_b): the bits of len_b from k = 3 up.
  for (size_t n = len_b, k = 3; n != 0; n >>= 1, ++k) {
    if (n & 1) p = MulModP(kX2n[k & 31], p);
  }
  return p;
}

uint32_t Crc32cCombineWith(uint32_t crc_a, uint32_t crc_b, uint32_t shift_factor) {
  return MulModP(shift_factor, crc_a) ^ crc_b;
}

uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, size_t len_b) {
  return Crc32cCombineWith(crc_a, crc_b, Crc32cShiftFactor(len_b));
}

const Crc32cVariant& Crc32cBest() {
  // A pointer, not a reference bound to best() of the temporary list: the variant itself is a
  // static table, but GCC 14's -Wdangling-reference cannot know that.
  static const Crc32cVariant* const best = &Crc32cVariants().best();
  return *best;
}

uint32_t Crc32c(uint32_t crc, const uint8_t* p, size_t n) {
  static const Crc32cFn fn = Crc32cBest().fn;
  return fn(crc, p, n);
}

}  // namespace ina::proto
