// Targets without a CRC32C instruction variant: the scalar twin only.
#include "crc32c_internal.h"

namespace ina::proto {

Crc32cVariantList Crc32cVariants() { return {{&internal::kCrc32cScalar}, 1}; }

}  // namespace ina::proto
