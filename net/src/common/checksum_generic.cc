// Targets without a vector variant: NativeSum is the scalar twin (see checksum.h).
#include "common/checksum.h"

namespace ina::net::internal {

uint64_t NativeSum(const uint8_t* p, size_t n) { return NativeSumScalar(p, n); }

}  // namespace ina::net::internal
