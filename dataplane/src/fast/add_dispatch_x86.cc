// Kernel choice on x86-64: compiled without ISA flags, so the CPU checks run on any x86-64 CPU
// before any AVX code is reached.
#include "add.h"

namespace ina::dp::fast {

extern const AddKernels kAvx2Kernels;
extern const AddKernels kAvx512Kernels;

AddVariantList AddVariants() {
  AddVariantList list;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) {
    list.Add(&kAvx512Kernels);
  }
  if (__builtin_cpu_supports("avx2")) list.Add(&kAvx2Kernels);
  list.Add(&kScalarKernels);
  return list;
}

}  // namespace ina::dp::fast
