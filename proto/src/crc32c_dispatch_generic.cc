// Targets without a CRC32C instruction variant: the scalar twin only.
#include "crc32c_internal.h"

namespace ina::proto {

Crc32cVariantList Crc32cVariants() {
  Crc32cVariantList list;
  list.Add(&internal::kCrc32cScalar);
  return list;
}

}  // namespace ina::proto
