// FastGcm on x86-64: compiled without ISA flags, so the CPU check runs on any x86-64 CPU before
// any AES-NI code is reached.
#include "gcm_internal.h"

namespace ina::proto::internal {

extern const GcmVariant kGcmAesni;
extern const GcmVariant kGcmVaes;

GcmVariantList GcmVariants() {
  GcmVariantList list;
  __builtin_cpu_init();
  const bool aesni = __builtin_cpu_supports("aes") && __builtin_cpu_supports("pclmul") &&
                     __builtin_cpu_supports("ssse3") && __builtin_cpu_supports("sse4.1");
  if (aesni && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("vaes") &&
      __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("bmi2")) {
    list.Add(&kGcmVaes);
  }
  if (aesni) list.Add(&kGcmAesni);
  return list;
}

}  // namespace ina::proto::internal
