// FastGcm on x86-64: compiled without ISA flags, so the CPU check runs on any x86-64 CPU before
// any AES-NI code is reached.
#include <cpuid.h>

#include "gcm_internal.h"

namespace ina::proto::internal {

extern const GcmVariant kGcmAesni;
extern const GcmVariant kGcmVaes;

namespace {

// CPUID leaf 7's VAES bit (ECX bit 9): clang 14's __builtin_cpu_supports does not know "vaes".
// The AVX-512 checks beside it (__builtin_cpu_supports) include the OS's saving of the registers.
bool HasVaes() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) != 0 && ((c >> 9) & 1) != 0;
}

}  // namespace

GcmVariantList GcmVariants() {
  GcmVariantList list;
  __builtin_cpu_init();
  const bool aesni = __builtin_cpu_supports("aes") && __builtin_cpu_supports("pclmul") &&
                     __builtin_cpu_supports("ssse3") && __builtin_cpu_supports("sse4.1");
  if (aesni && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && HasVaes() && __builtin_cpu_supports("vpclmulqdq") &&
      __builtin_cpu_supports("bmi2")) {
    list.Add(&kGcmVaes);
  }
  if (aesni) list.Add(&kGcmAesni);
  return list;
}

}  // namespace ina::proto::internal
