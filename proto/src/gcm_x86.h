// Private to ina::sec: the x86-64 AES-GCM pieces both variants share (gcm_aesni.cc: AES-NI and
// PCLMULQDQ, four blocks at a time; gcm_vaes.cc: VAES and VPCLMULQDQ on 512-bit registers, sixteen
// at a time, this file's code for what is left). Each includes it compiled with its own ISA flags,
// so everything here has internal linkage (an unnamed namespace): an inline function with external
// linkage would be one function for the linker, which could hand the AES-NI variant the copy
// compiled for AVX-512.
//
// GHASH works on 128-bit blocks as big-endian bit strings over GF(2^128). With every block
// byte-reversed (Bswap), a carry-less multiply of the two values, the 256-bit product shifted left
// by one bit and reduced modulo x^128 + x^7 + x^2 + x + 1 is the byte-reversed GCM product
// (Gueron and Kounavis, "Intel Carry-Less Multiplication Instruction and its Usage for Computing
// the GCM Mode", Intel, 2010: algorithm 5). Shift and reduction are linear, so several products are
// added unreduced and reduced once (X' = (X + B1) H^4 + B2 H^3 + B3 H^2 + B4 H).
#pragma once

#include <immintrin.h>

#include <cstring>

#include "gcm_internal.h"

namespace ina::proto::internal {
namespace {

inline __m128i Bswap(__m128i x) {
  return _mm_shuffle_epi8(x, _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}
inline __m128i Load(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline void Store(uint8_t* p, __m128i x) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), x); }

// The unreduced product a * b, added into (lo, mid, hi): lo + mid x^64 + hi x^128.
struct Wide {
  __m128i lo = _mm_setzero_si128(), mid = _mm_setzero_si128(), hi = _mm_setzero_si128();
  void MulAdd(__m128i a, __m128i b) {
    lo = _mm_xor_si128(lo, _mm_clmulepi64_si128(a, b, 0x00));
    hi = _mm_xor_si128(hi, _mm_clmulepi64_si128(a, b, 0x11));
    mid = _mm_xor_si128(
        mid, _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x10), _mm_clmulepi64_si128(a, b, 0x01)));
  }
  // Shifted left by one and reduced: the byte-reversed GCM product.
  __m128i Reduce() const {
    __m128i l = _mm_xor_si128(lo, _mm_slli_si128(mid, 8));
    __m128i h = _mm_xor_si128(hi, _mm_srli_si128(mid, 8));
    // h:l <<= 1 (256 bits).
    __m128i cl = _mm_srli_epi32(l, 31);
    __m128i ch = _mm_srli_epi32(h, 31);
    l = _mm_slli_epi32(l, 1);
    h = _mm_slli_epi32(h, 1);
    const __m128i carry_across = _mm_srli_si128(cl, 12);
    ch = _mm_slli_si128(ch, 4);
    cl = _mm_slli_si128(cl, 4);
    l = _mm_or_si128(l, cl);
    h = _mm_or_si128(_mm_or_si128(h, ch), carry_across);
    // The reduction: first phase.
    __m128i a = _mm_xor_si128(_mm_xor_si128(_mm_slli_epi32(l, 31), _mm_slli_epi32(l, 30)),
                              _mm_slli_epi32(l, 25));
    const __m128i a_hi = _mm_srli_si128(a, 4);
    a = _mm_slli_si128(a, 12);
    l = _mm_xor_si128(l, a);
    // Second phase.
    __m128i b = _mm_xor_si128(_mm_xor_si128(_mm_srli_epi32(l, 1), _mm_srli_epi32(l, 2)),
                              _mm_srli_epi32(l, 7));
    b = _mm_xor_si128(b, a_hi);
    l = _mm_xor_si128(l, b);
    return _mm_xor_si128(h, l);
  }
};

inline __m128i Mul(__m128i a, __m128i b) {
  Wide w;
  w.MulAdd(a, b);
  return w.Reduce();
}

struct Keys {
  const __m128i* rk;     // 11 round keys
  const __m128i* hp;     // H^1 .. H^16, byte-reversed
  const uint8_t* hdesc;  // GcmKey::h_descending
  __m128i h[4];          // H^1 .. H^4
  explicit Keys(const GcmKey& k)
      : rk(reinterpret_cast<const __m128i*>(k.round_keys)),
        hp(reinterpret_cast<const __m128i*>(k.h_powers)),
        hdesc(k.h_descending) {
#pragma GCC unroll 16
    for (int i = 0; i < 4; ++i) h[i] = hp[i];
  }
};

inline __m128i Aes(const __m128i* rk, __m128i x) {
  x = _mm_xor_si128(x, rk[0]);
#pragma GCC unroll 16
  for (int r = 1; r < 10; ++r) x = _mm_aesenc_si128(x, rk[r]);
  return _mm_aesenclast_si128(x, rk[10]);
}

inline __m128i ExpandStep(__m128i key, __m128i assist) {
  assist = _mm_shuffle_epi32(assist, 0xFF);
  key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
  key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
  key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
  return _mm_xor_si128(key, assist);
}

// GHASH of n bytes from p into x (byte-reversed), the last block zero-padded.
__m128i Ghash(const Keys& k, __m128i x, const uint8_t* p, size_t n) {
  while (n >= 64) {
    Wide w;
    w.MulAdd(_mm_xor_si128(x, Bswap(Load(p))), k.h[3]);
    w.MulAdd(Bswap(Load(p + 16)), k.h[2]);
    w.MulAdd(Bswap(Load(p + 32)), k.h[1]);
    w.MulAdd(Bswap(Load(p + 48)), k.h[0]);
    x = w.Reduce();
    p += 64;
    n -= 64;
  }
  for (; n >= 16; p += 16, n -= 16) x = Mul(_mm_xor_si128(x, Bswap(Load(p))), k.h[0]);
  if (n > 0) {
    alignas(16) uint8_t tail[16] = {};
    std::memcpy(tail, p, n);
    x = Mul(_mm_xor_si128(x, Bswap(Load(tail))), k.h[0]);
  }
  return x;
}

// Counter mode from counter block 2 of `nonce` (GCM's first block after J0): out = in ^ keystream,
// n bytes (in and out may be the same).
void Ctr(const Keys& k, __m128i j0_reversed, const uint8_t* in, uint8_t* out, size_t n) {
  const __m128i one = _mm_set_epi32(0, 0, 0, 1);
  // Byte-reversed, the big-endian 32-bit counter of bytes 12..15 is lane 0: add 1 there (mod 2^32,
  // as GCM's inc32).
  __m128i c = _mm_add_epi32(j0_reversed, one);
  // Eight blocks per AES round: enough independent work to cover aesenc's latency.
  while (n >= 128) {
    __m128i b[8];
#pragma GCC unroll 16
    for (int i = 0; i < 8; ++i) {
      b[i] = _mm_xor_si128(Bswap(c), k.rk[0]);
      c = _mm_add_epi32(c, one);
    }
#pragma GCC unroll 16
    for (int r = 1; r < 10; ++r) {
#pragma GCC unroll 16
      for (int i = 0; i < 8; ++i) b[i] = _mm_aesenc_si128(b[i], k.rk[r]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 8; ++i) {
      b[i] = _mm_aesenclast_si128(b[i], k.rk[10]);
      Store(out + 16 * i, _mm_xor_si128(b[i], Load(in + 16 * i)));
    }
    in += 128;
    out += 128;
    n -= 128;
  }
  for (; n > 0; c = _mm_add_epi32(c, one)) {
    const __m128i ks = Aes(k.rk, Bswap(c));
    if (n >= 16) {
      Store(out, _mm_xor_si128(ks, Load(in)));
      in += 16;
      out += 16;
      n -= 16;
      continue;
    }
    alignas(16) uint8_t block[16] = {};
    std::memcpy(block, in, n);
    Store(block, _mm_xor_si128(ks, Load(block)));
    std::memcpy(out, block, n);
    n = 0;
  }
}

// J0 = nonce | 0x00000001, as loaded (not byte-reversed).
inline __m128i J0(const Nonce& nonce) {
  alignas(16) uint8_t j0[16] = {};
  std::memcpy(j0, nonce.data(), kNonceBytes);
  j0[15] = 1;
  return Load(j0);
}

// The tag of a message: associated data the header (retx cleared) and, in mac, the payload; in
// mac_encrypt the payload (already ciphertext) is the ciphertext. `Bulk` has the variant's
// Ghash and Ctr (Sse below, or gcm_vaes.cc's).
template <typename Bulk>
__m128i Tag(const Keys& k, SecMode mode, const uint8_t* msg, size_t len, __m128i j0) {
  const uint8_t* payload = msg + kHeaderBytes;
  const size_t p = len - kHeaderBytes;
  // The header and, in mac, the payload's first bytes: 256 bytes, one step of the widest bulk
  // GHASH, so the associated data's start costs no reduction of its own.
  alignas(64) uint8_t first[256];
  static_assert(kHeaderBytes < sizeof(first));
  std::memcpy(first, msg, kHeaderBytes);
  first[kFlagsOffset] &= static_cast<uint8_t>(~flags::kRetx);
  __m128i x = _mm_setzero_si128();
  uint64_t aad_bits, ct_bits;
  if (mode == SecMode::kMac) {
    const size_t head = p < sizeof(first) - kHeaderBytes ? p : sizeof(first) - kHeaderBytes;
    std::memcpy(first + kHeaderBytes, payload, head);
    x = Bulk::Ghash(k, x, first, kHeaderBytes + head);
    x = Bulk::Ghash(k, x, payload + head, p - head);
    aad_bits = uint64_t{len} * 8;
    ct_bits = 0;
  } else {
    x = Bulk::Ghash(k, x, first, kHeaderBytes);
    x = Bulk::Ghash(k, x, payload, p);
    aad_bits = uint64_t{kHeaderBytes} * 8;
    ct_bits = uint64_t{p} * 8;
  }
  // The lengths block, BE64(aad bits) | BE64(ciphertext bits), byte-reversed.
  const __m128i lengths =
      _mm_set_epi64x(static_cast<long long>(aad_bits), static_cast<long long>(ct_bits));
  x = Mul(_mm_xor_si128(x, lengths), k.h[0]);
  return _mm_xor_si128(Bswap(x), Aes(k.rk, j0));
}

void Init(GcmKey* out, const TrafficKey& key) {
  auto* rk = reinterpret_cast<__m128i*>(out->round_keys);
  rk[0] = Load(key.data());
#define INA_EXPAND(i, rcon) \
  rk[i] = ExpandStep(rk[i - 1], _mm_aeskeygenassist_si128(rk[i - 1], rcon))
  INA_EXPAND(1, 0x01);
  INA_EXPAND(2, 0x02);
  INA_EXPAND(3, 0x04);
  INA_EXPAND(4, 0x08);
  INA_EXPAND(5, 0x10);
  INA_EXPAND(6, 0x20);
  INA_EXPAND(7, 0x40);
  INA_EXPAND(8, 0x80);
  INA_EXPAND(9, 0x1B);
  INA_EXPAND(10, 0x36);
#undef INA_EXPAND
  auto* h = reinterpret_cast<__m128i*>(out->h_powers);
  h[0] = Bswap(Aes(rk, _mm_setzero_si128()));
  for (int i = 1; i < 16; ++i) h[i] = Mul(h[i - 1], h[0]);
  auto* d = reinterpret_cast<__m128i*>(out->h_descending);
  for (int i = 0; i < 16; ++i) d[i] = h[15 - i];
  for (int i = 16; i < 32; ++i) d[i] = _mm_setzero_si128();
}

template <typename Bulk>
void Seal(const GcmKey& key, SecMode mode, uint8_t* msg, size_t len, const Nonce& nonce) {
  const Keys k(key);
  const __m128i j0 = J0(nonce);
  if (mode == SecMode::kMacEncrypt) {
    Bulk::Ctr(k, Bswap(j0), msg + kHeaderBytes, msg + kHeaderBytes, len - kHeaderBytes);
  }
  Store(msg + len, Tag<Bulk>(k, mode, msg, len, j0));
}

template <typename Bulk>
bool Open(const GcmKey& key, SecMode mode, std::span<const uint8_t> msg, const Nonce& nonce,
          uint8_t* plain) {
  const Keys k(key);
  const size_t len = msg.size() - kTagBytes;
  const __m128i j0 = J0(nonce);
  const __m128i diff =
      _mm_xor_si128(Tag<Bulk>(k, mode, msg.data(), len, j0), Load(msg.data() + len));
  if (!_mm_testz_si128(diff, diff)) return false;  // one compare of all 16 bytes: constant time
  if (mode == SecMode::kMacEncrypt) {
    Bulk::Ctr(k, Bswap(j0), msg.data() + kHeaderBytes, plain, len - kHeaderBytes);
  }
  return true;
}

// The SSE variant's bulk: four blocks per GHASH reduction and per AES round.
struct Sse {
  static __m128i Ghash(const Keys& k, __m128i x, const uint8_t* p, size_t n) {
    return internal::Ghash(k, x, p, n);
  }
  static void Ctr(const Keys& k, __m128i j0_reversed, const uint8_t* in, uint8_t* out, size_t n) {
    internal::Ctr(k, j0_reversed, in, out, n);
  }
};

}  // namespace
}  // namespace ina::proto::internal
