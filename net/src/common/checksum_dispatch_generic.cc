// Targets without a vector variant: the scalar twin only (see checksum.h).
#include "common/checksum.h"

namespace ina::net::internal {

ChecksumVariantList ChecksumVariants() { return ChecksumVariantList::Only(&kChecksumScalar); }

}  // namespace ina::net::internal
