// Targets without AES-NI: libcrypto's AES-GCM only.
#include "gcm_internal.h"

namespace ina::proto::internal {

GcmVariantList GcmVariants() { return {}; }

}  // namespace ina::proto::internal
