// The ones'-complement sum kernel behind ChecksumAdd (frame.h), private to net/: the sum of the
// buffer as native-order 16-bit words (an odd last byte padded with a zero byte after it), in a
// 64-bit accumulator, not folded. Byte order does not matter to the folded result up to one final
// byte swap (RFC 1071, 2.B). NativeSum is the variant this target builds (SSE2 on x86-64, where it
// is part of the base ISA; the scalar twin elsewhere); NativeSumScalar is the scalar twin, always
// built, that the tests hold it to.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ina::net::internal {

uint64_t NativeSum(const uint8_t* p, size_t n);
uint64_t NativeSumScalar(const uint8_t* p, size_t n);

}  // namespace ina::net::internal
