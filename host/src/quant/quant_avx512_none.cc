// Built instead of quant_avx512.cc when the compiler rejects the AVX-512 flags (see
// CMakeLists.txt).
#include "internal.h"

namespace ina::host::quant::internal {

const Kernels* Avx512Table() { return nullptr; }

}  // namespace ina::host::quant::internal
