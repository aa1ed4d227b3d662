// CRC32C (Castagnoli): the check every ina message ends with (proto/ina.toml [crc],
// docs/protocol.md "Integrity"), in one place for the host, the dataplane and net/.
//
// Crc32c(crc, p, n) follows zlib's crc32 convention: start with crc = 0, and the CRC of A then B is
// Crc32c(Crc32c(0, A), B). Variants, as the SIMD kernels elsewhere: the scalar twin (portable
// table lookups, slicing-by-8; always built; tested against gen.py's Python CRC, and every other
// variant is tested against it) and, on x86-64, `sse42` (the SSE4.2 crc32 instruction on three
// interleaved streams, combined with zero-extension tables) and `avx512_vpclmul` (carry-less
// multiplication folding 256 bytes per step on 512-bit vectors; buffers under 256 bytes go to
// sse42).
// The best variant the CPU runs is chosen once, on the first call (thread-safe), never by #ifdef.
//
// Message helpers: SealMessage writes the trailer (the CRC of every byte before it, little-endian,
// proto::StoreCrc) after a message; MessageCrcOk checks a received one. No allocation, no throw;
// every function may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ina/base/variants.h"
#include "ina/proto/wire.h"

namespace ina::proto {

using Crc32cFn = uint32_t (*)(uint32_t crc, const uint8_t* p, size_t n);

struct Crc32cVariant {
  const char* name;
  Crc32cFn fn;
};

// The scalar twin: eight table lookups per 8 bytes, no CPU-specific instruction.
uint32_t Crc32cScalar(uint32_t crc, const uint8_t* p, size_t n);

// The variants this build and CPU can run, best first; the last is always the scalar twin
// (ina/base/variants.h: the one selection mechanism of every kernel family).
using Crc32cVariantList = base::VariantList<Crc32cVariant>;
Crc32cVariantList Crc32cVariants();

// The variant Crc32c uses (the first of Crc32cVariants()).
const Crc32cVariant& Crc32cBest();

// The CRC32C of p[0, n) continuing `crc` (0 to start). n may be 0 (returns crc).
uint32_t Crc32c(uint32_t crc, const uint8_t* p, size_t n);

// The CRC32C of A followed by B from crc_a = Crc32c(0, A), crc_b = Crc32c(0, B) and B's length
// (zlib's crc32_combine for the Castagnoli polynomial): crc_a carried over len_b zero bytes, XOR
// crc_b. For a sender that seals a message whose payload it never reads (GPUDirect RDMA: the
// payload's CRC comes from the device, docs/gpu.md). O(log len_b) carry-less products.
uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, size_t len_b);
// The same with the shift by len_b bytes computed once (Crc32cShiftFactor(len_b)): for many
// messages whose second part has one length.
uint32_t Crc32cShiftFactor(size_t len_b);
uint32_t Crc32cCombineWith(uint32_t crc_a, uint32_t crc_b, uint32_t shift_factor);

// Writes the trailer of the message msg[0, len) into msg[len, len + kCrcBytes) and returns
// len + kCrcBytes. REQUIRES: those kCrcBytes bytes are writable.
inline size_t SealMessage(uint8_t* msg, size_t len, Crc32cFn fn = Crc32c) {
  StoreCrc(msg + len, fn(0, msg, len));
  return len + kCrcBytes;
}

// True when `msg` (trailer included) holds at least kCrcBytes bytes and its last kCrcBytes are the
// CRC32C of the bytes before them.
inline bool MessageCrcOk(std::span<const uint8_t> msg, Crc32cFn fn = Crc32c) {
  if (msg.size() < kCrcBytes) return false;
  const size_t n = msg.size() - kCrcBytes;
  return fn(0, msg.data(), n) == LoadCrc(msg.data() + n);
}

}  // namespace ina::proto
