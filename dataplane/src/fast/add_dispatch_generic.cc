// Kernel choice on CPUs without an x86 SIMD variant: scalar only.
#include "add.h"

namespace ina::dp::fast {

KernelList AvailableKernels() { return {{&kScalarKernels}, 1}; }

}  // namespace ina::dp::fast
