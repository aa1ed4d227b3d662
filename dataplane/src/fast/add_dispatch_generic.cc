// Kernel choice on CPUs without an x86 SIMD variant: scalar only.
#include "add.h"

namespace ina::dp::fast {

AddVariantList AddVariants() { return AddVariantList::Only(&kScalarKernels); }

}  // namespace ina::dp::fast
