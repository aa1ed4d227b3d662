// Targets without a CRC32C instruction variant: the scalar twin only.
#include "crc32c_internal.h"

namespace ina::proto {

Crc32cVariantList Crc32cVariants() { return Crc32cVariantList::Only(&internal::kCrc32cScalar); }

}  // namespace ina::proto
