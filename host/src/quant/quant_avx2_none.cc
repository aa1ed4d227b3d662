// Built instead of quant_avx2.cc when the compiler rejects -mavx2 -mfma (see CMakeLists.txt).
#include "internal.h"

namespace ina::host::quant::internal {

const Kernels* Avx2Table() { return nullptr; }

}  // namespace ina::host::quant::internal
