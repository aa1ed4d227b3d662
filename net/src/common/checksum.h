// The ones'-complement sum kernels behind ChecksumAdd (frame.h), private to net/: the sum of the
// buffer as native-order 16-bit words (an odd last byte padded with a zero byte after it), in a
// 64-bit accumulator, not folded. Byte order does not matter to the folded result up to one final
// byte swap (RFC 1071, 2.B). Variants as every kernel family's (ina/base/variants.h): SSE2 on
// x86-64 (part of the base ISA there, so listed without a CPU check), and the scalar twin, always
// built, that the tests hold every variant to.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ina/base/variants.h"

namespace ina::net::internal {

struct ChecksumKernel {
  const char* name;
  uint64_t (*sum)(const uint8_t* p, size_t n);
};

uint64_t NativeSumScalar(const uint8_t* p, size_t n);
extern const ChecksumKernel kChecksumScalar;
extern const ChecksumKernel kChecksumSse2;  // x86-64 builds only

// The variants this build and CPU can run, best first; the last is the scalar twin.
using ChecksumVariantList = base::VariantList<ChecksumKernel>;
ChecksumVariantList ChecksumVariants();

}  // namespace ina::net::internal
