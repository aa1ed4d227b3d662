// AES-128-GCM with AES-NI and PCLMULQDQ (gcm_internal.h, the pieces in gcm_x86.h): compiled with
// -maes -mpclmul -mssse3 -msse4.1, reached only through FastGcm's CPU check.
#include "gcm_x86.h"

namespace ina::proto::internal {

extern const GcmVariant kGcmAesni;
const GcmVariant kGcmAesni = {"aesni", Init, Seal<Sse>, Open<Sse>};

}  // namespace ina::proto::internal
