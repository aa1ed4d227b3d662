// CRC32C with the SSE4.2 crc32 instruction (this file alone is compiled with -msse4.2).
//
// One crc32 of 8 bytes has a latency of 3 cycles and a throughput of 1 per cycle, so one chain of
// them runs at a third of the unit's speed. A block of 3L bytes is taken as three streams of L
// bytes, each with its own register (the first continuing the CRC so far, the others from zero),
// interleaved in one loop; then, the register being linear, reg(ABC) = z_L(z_L(rA) ^ rB) ^ rC,
// where z_L (the register after L zero bytes) is four table lookups (Crc32cShift). Blocks of
// 3 x 256, then at most one each of 3 x 128, 3 x 64, 3 x 32 bytes; the rest (< 96 bytes) one chain.
#include <nmmintrin.h>

#include <cstring>

#include "crc32c_internal.h"

namespace ina::proto::internal {
namespace {

constexpr size_t kBlocks[] = {256, 128, 64, 32};

struct Shifts {
  Crc32cShift s[4];
  Shifts() {
    for (size_t i = 0; i < 4; ++i) s[i].Init(kBlocks[i]);
  }
};

inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

template <size_t L>
inline uint64_t Block(uint64_t c0, const uint8_t* p, const Crc32cShift& z) {
  uint64_t c1 = 0, c2 = 0;
  for (size_t i = 0; i < L; i += 8) {
    c0 = _mm_crc32_u64(c0, Load64(p + i));
    c1 = _mm_crc32_u64(c1, Load64(p + L + i));
    c2 = _mm_crc32_u64(c2, Load64(p + 2 * L + i));
  }
  return z.Apply(z.Apply(static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1)) ^
         static_cast<uint32_t>(c2);
}

uint32_t Crc32cSse42(uint32_t crc, const uint8_t* p, size_t n) {
  static const Shifts shifts;
  uint64_t c = static_cast<uint32_t>(~crc);
  while (n >= 3 * 256) {
    c = Block<256>(c, p, shifts.s[0]);
    p += 3 * 256;
    n -= 3 * 256;
  }
  if (n >= 3 * 128) {
    c = Block<128>(c, p, shifts.s[1]);
    p += 3 * 128;
    n -= 3 * 128;
  }
  if (n >= 3 * 64) {
    c = Block<64>(c, p, shifts.s[2]);
    p += 3 * 64;
    n -= 3 * 64;
  }
  if (n >= 3 * 32) {
    c = Block<32>(c, p, shifts.s[3]);
    p += 3 * 32;
    n -= 3 * 32;
  }
  for (; n >= 8; n -= 8, p += 8) c = _mm_crc32_u64(c, Load64(p));
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, *p);
  return ~c32;
}

}  // namespace

extern const Crc32cVariant kCrc32cSse42;
const Crc32cVariant kCrc32cSse42 = {"sse42", Crc32cSse42};

}  // namespace ina::proto::internal
