// The CRC32C arithmetic of the GPU's per-block payload CRCs (ina/gpu/crc.h), written once for the
// host compiler and for CUDA device code (INA_HD, as ina/gpu/quant_elem.h), so that the unit
// tests check it against proto::Crc32c without a GPU.
//
// Conventions. proto::Crc32c(crc, p, n) is zlib's: the register starts at ~crc and the result is
// the final register inverted. Here the *raw register* functions take and return the register
// itself (no inversion), reflected as the table-driven CRC32C always is (bit 31 is x^0). They are
// linear over GF(2): Raw(a ^ b, A ^ B) = Raw(a, A) ^ Raw(b, B) for equal lengths, and
//   Raw(r, A || B) = Shift(Raw(r, A), |B|) ^ Raw(0, B),   Shift(r, m) = r * x^(8m) mod P,
// which is what lets 32 lanes each take a segment of a block and combine their registers.
//
// The lane scheme of one block (BlockCrcLane / BlockCrcFactors / BlockCrcCombine):
//  - a block is `words` 32-bit words (4 * count bytes), G lanes (a power of two <= 32) take it;
//    each lane s = ceil(words / G) words, and the block is thought of as pad = G * s - words zero
//    words followed by the block. Leading zeros leave a zero register zero, so the padded block's
//    Raw(0, .) is the block's own; lane g takes padded words [g * s, (g + 1) * s), so every lane
//    but the first busy one has exactly s real words and the shifts below depend on g only.
//  - zlib's initial register ~0 is folded into the data: Raw(~0, W || rest) = Raw(0, (W ^ ~0) ||
//    rest) for the first word W (four bytes of input XOR into the register before any table
//    step), so the lane holding word 0 XORs it with ~0 and every lane starts from register 0.
//  - lane g's register is shifted over the (G - 1 - g) * s words after its segment, a multiply by
//    factor[g] = x^(32 * s * (G - 1 - g)) mod P (once per block length: the kernel computes them
//    per thread block), and the G products XORed: the block's raw register; its inversion is the
//    CRC.
// The device kernel reads the block as aligned little-endian 32-bit words (CUDA devices and
// supported hosts are little-endian, see quant_elem.h).
//
// Tables: the slicing-by-4 table (4 x 256 words, 4 KiB) is a constexpr value (MakeCrc32cTables);
// the kernel copies it into shared memory once per thread block.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ina/gpu/quant_elem.h"  // INA_HD

namespace ina::gpu::crc {

inline constexpr uint32_t kPolyReflected = 0x82F63B78u;  // Castagnoli, reflected

struct Crc32cTables {
  // t[0]: the byte table (register after one byte from reg ^ byte: t[0][(reg ^ b) & 0xFF] ^
  // (reg >> 8)); t[j][i]: t[0][i] carried over j more zero bytes.
  uint32_t t[4][256];
};

INA_HD constexpr Crc32cTables MakeCrc32cTables() {
  Crc32cTables tb{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int b = 0; b < 8; ++b) c = (c & 1) ? kPolyReflected ^ (c >> 1) : c >> 1;
    tb.t[0][i] = c;
  }
  for (int j = 1; j < 4; ++j) {
    for (uint32_t i = 0; i < 256; ++i) {
      tb.t[j][i] = (tb.t[j - 1][i] >> 8) ^ tb.t[0][tb.t[j - 1][i] & 0xFF];
    }
  }
  return tb;
}

// The raw register after one little-endian 32-bit word (four bytes) from `reg`.
INA_HD inline uint32_t RawWord(const uint32_t (*t)[256], uint32_t reg, uint32_t word) {
  const uint32_t x = reg ^ word;
  return t[3][x & 0xFF] ^ t[2][(x >> 8) & 0xFF] ^ t[1][(x >> 16) & 0xFF] ^ t[0][x >> 24];
}

// The raw register after the bytes p[0, n) from `reg` (any alignment: words are assembled from
// bytes), slicing-by-4, then bytewise.
INA_HD inline uint32_t RawBytes(const uint32_t (*t)[256], uint32_t reg, const uint8_t* p,
                                size_t n) {
  for (; n >= 4; n -= 4, p += 4) {
    const uint32_t w =
        uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
    reg = RawWord(t, reg, w);
  }
  for (; n > 0; --n, ++p) reg = t[0][(reg ^ *p) & 0xFF] ^ (reg >> 8);
  return reg;
}

// zlib convention, as proto::Crc32c(crc, p, n).
INA_HD inline uint32_t Crc32c(const uint32_t (*t)[256], uint32_t crc, const uint8_t* p, size_t n) {
  return ~RawBytes(t, ~crc, p, n);
}

// a * b mod P, both reflected polynomials (bit 31 is x^0), as zlib's multmodp.
INA_HD constexpr uint32_t MulModP(uint32_t a, uint32_t b) {
  uint32_t m = uint32_t{1} << 31, p = 0;
  while (m != 0) {
    if (a & m) p ^= b;
    m >>= 1;
    b = (b & 1) ? (b >> 1) ^ kPolyReflected : b >> 1;
  }
  return p;
}

// x^(8 * bytes) mod P: Shift(r, bytes) = MulModP(X8n(bytes), r).
INA_HD constexpr uint32_t X8n(uint64_t bytes) {
  uint32_t p = uint32_t{1} << 31;   // x^0
  uint32_t sq = uint32_t{1} << 23;  // x^8
  for (uint64_t e = bytes; e != 0; e >>= 1) {
    if (e & 1) p = MulModP(sq, p);
    sq = MulModP(sq, sq);
  }
  return p;
}

// The per-lane segment of a block of `words` words taken by `lanes` lanes.
struct LaneSplit {
  uint32_t s;    // words per lane
  uint32_t pad;  // leading zero words: lanes * s - words
};
INA_HD constexpr LaneSplit SplitBlock(uint32_t words, uint32_t lanes) {
  const uint32_t s = (words + lanes - 1) / lanes;
  return {s, lanes * s - words};
}

// Lane g's multiplier, x^(32 * s * (lanes - 1 - g)) mod P. REQUIRES: lanes a power of two
// <= 32, g < lanes, words >= 1.
INA_HD constexpr uint32_t BlockCrcFactor(uint32_t words, uint32_t lanes, uint32_t g) {
  return X8n(uint64_t{4} * SplitBlock(words, lanes).s * (lanes - 1 - g));
}

// factor[g] = BlockCrcFactor(words, lanes, g) for g < lanes (the rest untouched).
INA_HD constexpr void BlockCrcFactors(uint32_t words, uint32_t lanes, uint32_t* factor) {
  for (uint32_t g = 0; g < lanes; ++g) factor[g] = BlockCrcFactor(words, lanes, g);
}

// Lane g's raw register over its segment of the block w[0, words) (zero-register start, word 0
// XORed with ~0; words are little-endian).
INA_HD inline uint32_t BlockCrcLane(const uint32_t (*t)[256], const uint32_t* w, uint32_t words,
                                    uint32_t lanes, uint32_t g) {
  const LaneSplit sp = SplitBlock(words, lanes);
  const uint32_t begin = g * sp.s, end = begin + sp.s;  // padded indices
  uint32_t reg = 0;
  for (uint32_t i = begin < sp.pad ? sp.pad : begin; i < end; ++i) {
    const uint32_t j = i - sp.pad;
    reg = RawWord(t, reg, j == 0 ? ~w[j] : w[j]);
  }
  return reg;
}

// One lane's contribution to the block's register (XOR the lanes' and invert: the CRC).
INA_HD constexpr uint32_t BlockCrcTerm(uint32_t lane_reg, uint32_t factor) {
  return MulModP(factor, lane_reg);
}

// Lanes for blocks of k elements: 32 when each lane gets at least 4 words, else fewer (a power of
// two), so that short blocks do not leave most of a warp idle.
INA_HD constexpr uint32_t BlockCrcLanes(uint32_t k) {
  uint32_t g = 32;
  while (g > 1 && k < 4 * g) g /= 2;
  return g;
}

}  // namespace ina::gpu::crc
