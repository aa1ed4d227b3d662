// Targets without a vector variant: the scalar twin only (see checksum.h).
#include "common/checksum.h"

namespace ina::net::internal {

ChecksumVariantList ChecksumVariants() {
  ChecksumVariantList list;
  list.Add(&kChecksumScalar);
  return list;
}

}  // namespace ina::net::internal
