// AES-128-GCM with VAES and VPCLMULQDQ on 512-bit registers (gcm_internal.h): GHASH of sixteen
// blocks per reduction (four per register, against H^16 .. H^1) and counter mode sixteen blocks
// per AES round; what is left of a message (under 256 bytes) goes through the AES-NI pieces of
// gcm_x86.h. Compiled with AVX-512 (F, BW), VAES and VPCLMULQDQ flags, reached only through
// FastGcm's CPU check.
#include "gcm_x86.h"

namespace ina::proto::internal {
namespace {

inline __m512i Bswap512(__m512i x) {
  const __m512i mask =
      _mm512_broadcast_i32x4(_mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  return _mm512_shuffle_epi8(x, mask);  // within each 128-bit lane
}

// The four 128-bit lanes of x added (xor) into one.
inline __m128i Fold(__m512i x) {
  const __m256i y = _mm256_xor_si256(_mm512_castsi512_si256(x), _mm512_extracti64x4_epi64(x, 1));
  return _mm_xor_si128(_mm256_castsi256_si128(y), _mm256_extracti128_si256(y, 1));
}

struct Vaes {
  // Sixteen blocks per reduction, and the last k <= 16 blocks (the last one zero-padded) in one
  // more: block i of k is multiplied by H^(k-i), X added into block 0.
  static __m128i Ghash(const Keys& k, __m128i x, const uint8_t* p, size_t n) {
    while (n > 0) {
      const size_t bytes = n < 256 ? n : 256;
      const size_t blocks = (bytes + 15) / 16;
      const uint8_t* powers = k.hdesc + 16 * (16 - blocks);  // H^blocks .. H^1, then zeros
      __m512i lo = _mm512_setzero_si512(), mid = lo, hi = lo;
#pragma GCC unroll 16
      for (int j = 0; j < 4; ++j) {
        const size_t at = 64 * static_cast<size_t>(j);
        __m512i d;
        if (bytes >= at + 64) {
          d = _mm512_loadu_si512(p + at);
        } else if (bytes > at) {
          d = _mm512_maskz_loadu_epi8(_bzhi_u64(~uint64_t{0}, static_cast<unsigned>(bytes - at)),
                                      p + at);
        } else {
          break;
        }
        d = Bswap512(d);
        if (j == 0) d = _mm512_xor_si512(d, _mm512_zextsi128_si512(x));
        const __m512i pw = _mm512_loadu_si512(powers + at);
        lo = _mm512_xor_si512(lo, _mm512_clmulepi64_epi128(d, pw, 0x00));
        hi = _mm512_xor_si512(hi, _mm512_clmulepi64_epi128(d, pw, 0x11));
        mid = _mm512_xor_si512(mid, _mm512_xor_si512(_mm512_clmulepi64_epi128(d, pw, 0x01),
                                                     _mm512_clmulepi64_epi128(d, pw, 0x10)));
      }
      Wide w;
      w.lo = Fold(lo);
      w.mid = Fold(mid);
      w.hi = Fold(hi);
      x = w.Reduce();
      p += bytes;
      n -= bytes;
    }
    return x;
  }

  static void Ctr(const Keys& k, __m128i j0_reversed, const uint8_t* in, uint8_t* out, size_t n) {
    // Byte-reversed counter blocks (lane 0 of each 128-bit lane is the 32-bit counter), from 2.
    __m512i c = _mm512_add_epi32(_mm512_broadcast_i32x4(j0_reversed),
                                 _mm512_set_epi32(0, 0, 0, 4, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 1));
    const __m512i four = _mm512_set_epi32(0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4);
    uint32_t done = 0;
    while (n >= 256) {
      __m512i b[4];
#pragma GCC unroll 16
      for (int j = 0; j < 4; ++j) {
        b[j] = _mm512_xor_si512(Bswap512(c), _mm512_broadcast_i32x4(k.rk[0]));
        c = _mm512_add_epi32(c, four);
      }
#pragma GCC unroll 16
      for (int r = 1; r < 10; ++r) {
        const __m512i rk = _mm512_broadcast_i32x4(k.rk[r]);
#pragma GCC unroll 16
        for (int j = 0; j < 4; ++j) b[j] = _mm512_aesenc_epi128(b[j], rk);
      }
      const __m512i last = _mm512_broadcast_i32x4(k.rk[10]);
#pragma GCC unroll 16
      for (int j = 0; j < 4; ++j) {
        b[j] = _mm512_aesenclast_epi128(b[j], last);
        _mm512_storeu_si512(out + 64 * j, _mm512_xor_si512(b[j], _mm512_loadu_si512(in + 64 * j)));
      }
      in += 256;
      out += 256;
      n -= 256;
      done += 16;
    }
    if (n > 0) {
      // The rest from counter 2 + done: the AES-NI loop starts at j0 + 1.
      internal::Ctr(k, _mm_add_epi32(j0_reversed, _mm_set_epi32(0, 0, 0, static_cast<int>(done))),
                    in, out, n);
    }
  }
};

}  // namespace

extern const GcmVariant kGcmVaes;
const GcmVariant kGcmVaes = {"vaes_avx512", Init, Seal<Vaes>, Open<Vaes>};

}  // namespace ina::proto::internal
