// Variant choice on x86-64 (see checksum.h): SSE2 is in the base ISA, so it needs no CPU check.
#include "common/checksum.h"

namespace ina::net::internal {

ChecksumVariantList ChecksumVariants() {
  ChecksumVariantList list;
  list.Add(&kChecksumSse2);
  list.Add(&kChecksumScalar);
  return list;
}

}  // namespace ina::net::internal
