// Kernel choice on CPUs without an x86 SIMD variant: scalar only.
#include "add.h"

namespace ina::dp::fast {

AddVariantList AddVariants() {
  AddVariantList list;
  list.Add(&kScalarKernels);
  return list;
}

}  // namespace ina::dp::fast
