// CRC32C by carry-less multiplication on 512-bit vectors (AVX-512 VPCLMULQDQ; this file alone is
// compiled with -mavx512f -mavx512dq -mvpclmulqdq -msse4.2). The SSE4.2 crc32 instruction does 8
// bytes per cycle at best (one unit); folding with VPCLMULQDQ does 64 bytes per two multiplies.
//
// Folding (the reflected form of Intel's "Fast CRC computation for generic polynomials using
// PCLMULQDQ", 2009). A 16-byte chunk is a polynomial of degree < 128 whose first byte's low bit is
// the x^127 term; its first 8 bytes H are the terms x^127..x^64, its last 8 bytes L x^63..x^0.
// Moving the chunk D bits further down the message multiplies it by x^D, and only its value mod P
// matters: H x^(64+D) + L x^D = clmul(H, K1) + clmul(L, K2) (mod P), with K1 = x^(64+D-1) mod P and
// K2 = x^(D-1) mod P stored reflected in the high 32 bits of a 64-bit lane (a reflected 64 x 64
// product lands one degree short of the 128-bit chunk's, hence the -1). The product has degree
// < 127 and is XORed into the chunk D bits on. Four 512-bit accumulators (16 chunks) move 256 bytes
// per step; then they are folded into one, its four chunks into one, and 16-byte chunks follow.
// The last chunk X is reduced by the crc32 instruction: the register after X's 16 bytes from 0 is
// X x^32 mod P, the register of the message so far. The CRC so far enters as the first 4 bytes'
// XOR (the register's initial value), and the tail of fewer than 16 bytes goes through crc32.
// Buffers shorter than 256 bytes go to the SSE4.2 variant.
#include <immintrin.h>

#include <cstring>

#include "crc32c_internal.h"

namespace ina::proto::internal {

extern const Crc32cVariant kCrc32cSse42;

namespace {

// x^m mod P, reflected (bit i = the x^(31-i) term): the register carried over m zero bits from
// the polynomial 1.
uint32_t XPowModP(unsigned m) {
  uint32_t r = 0x80000000u;
  for (unsigned i = 0; i < m; ++i) r = (r >> 1) ^ ((r & 1) ? kCrc32cPolyReflected : 0);
  return r;
}

// {K1, K2} for a fold over D bits, in one 128-bit lane.
__m128i FoldConstants(unsigned d) {
  return _mm_set_epi64x(static_cast<long long>(uint64_t{XPowModP(d - 1)} << 32),
                        static_cast<long long>(uint64_t{XPowModP(64 + d - 1)} << 32));
}

struct Constants {
  __m512i k2048, k1536, k1024, k512;
  __m128i k384, k256, k128;
  Constants()
      : k2048(_mm512_broadcast_i32x4(FoldConstants(2048))),
        k1536(_mm512_broadcast_i32x4(FoldConstants(1536))),
        k1024(_mm512_broadcast_i32x4(FoldConstants(1024))),
        k512(_mm512_broadcast_i32x4(FoldConstants(512))),
        k384(FoldConstants(384)),
        k256(FoldConstants(256)),
        k128(FoldConstants(128)) {}
};

// x moved on by the fold of k, XOR y (0x96: a ^ b ^ c).
inline __m512i Fold(__m512i x, __m512i k, __m512i y) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                   _mm512_clmulepi64_epi128(x, k, 0x11), y, 0x96);
}
inline __m128i Fold(__m128i x, __m128i k, __m128i y) {
  return _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), y);
}

uint32_t Crc32cAvx512(uint32_t crc, const uint8_t* p, size_t n) {
  if (n < 256) return kCrc32cSse42.fn(crc, p, n);
  static const Constants k;
  __m512i z0 = _mm512_loadu_si512(p);
  __m512i z1 = _mm512_loadu_si512(p + 64);
  __m512i z2 = _mm512_loadu_si512(p + 128);
  __m512i z3 = _mm512_loadu_si512(p + 192);
  z0 = _mm512_xor_si512(z0, _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(~crc))));
  p += 256;
  n -= 256;
  for (; n >= 256; n -= 256, p += 256) {
    z0 = Fold(z0, k.k2048, _mm512_loadu_si512(p));
    z1 = Fold(z1, k.k2048, _mm512_loadu_si512(p + 64));
    z2 = Fold(z2, k.k2048, _mm512_loadu_si512(p + 128));
    z3 = Fold(z3, k.k2048, _mm512_loadu_si512(p + 192));
  }
  __m512i z = Fold(z0, k.k1536, Fold(z1, k.k1024, Fold(z2, k.k512, z3)));
  for (; n >= 64; n -= 64, p += 64) z = Fold(z, k.k512, _mm512_loadu_si512(p));
  __m128i x =
      Fold(_mm512_extracti32x4_epi32(z, 0), k.k384,
           Fold(_mm512_extracti32x4_epi32(z, 1), k.k256,
                Fold(_mm512_extracti32x4_epi32(z, 2), k.k128, _mm512_extracti32x4_epi32(z, 3))));
  for (; n >= 16; n -= 16, p += 16) {
    x = Fold(x, k.k128, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  uint64_t c = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(x)));
  c = _mm_crc32_u64(c, static_cast<uint64_t>(_mm_extract_epi64(x, 1)));
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, *p);
  return ~c32;
}

}  // namespace

extern const Crc32cVariant kCrc32cAvx512;
const Crc32cVariant kCrc32cAvx512 = {"avx512_vpclmul", Crc32cAvx512};

}  // namespace ina::proto::internal
