// Variant choice on x86-64: compiled without ISA flags, so the CPU check runs on any x86-64 CPU
// before any SSE4.2 code is reached.
#include "crc32c_internal.h"

namespace ina::proto {
namespace internal {
extern const Crc32cVariant kCrc32cSse42;
extern const Crc32cVariant kCrc32cAvx512;
}  // namespace internal

Crc32cVariantList Crc32cVariants() {
  Crc32cVariantList list;
  __builtin_cpu_init();
  const bool sse42 = __builtin_cpu_supports("sse4.2");
  if (sse42 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("pclmul")) {
    list.Add(&internal::kCrc32cAvx512);
  }
  if (sse42) list.Add(&internal::kCrc32cSse42);
  list.Add(&internal::kCrc32cScalar);
  return list;
}

}  // namespace ina::proto
