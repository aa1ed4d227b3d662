// Precision() and the kernel choice: each SIMD variant is offered only when the compiler built it
// and the CPU (with OS support for the register state) runs it; ActiveKernels() picks the fastest
// once, or the one INA_QUANT names.
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "internal.h"

namespace ina::host::quant {

int Precision(int world) {
  // ceil(log2(world)) is the bit width of world - 1 (0 for world == 1).
  const unsigned above = world > 1 ? static_cast<unsigned>(world - 1) : 0u;
  return 30 - std::bit_width(above);
}

const Kernels* Avx2Kernels() {
  // __builtin_cpu_supports also checks that the OS saves the YMM/ZMM state (XGETBV).
  static const Kernels* const kKernels =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? internal::Avx2Table()
                                                                      : nullptr;
  return kKernels;
}

const Kernels* Avx512Kernels() {
  static const Kernels* const kKernels =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")
          ? internal::Avx512Table()
          : nullptr;
  return kKernels;
}

namespace {

const Kernels& ChooseKernels() {
  const char* env = std::getenv("INA_QUANT");
  if (env != nullptr && *env != '\0') {
    const std::string_view want(env);
    const Kernels* k = nullptr;
    if (want == "scalar") {
      k = &ScalarKernels();
    } else if (want == "avx2") {
      k = Avx2Kernels();
    } else if (want == "avx512") {
      k = Avx512Kernels();
    } else {
      std::fprintf(stderr, "ina: INA_QUANT=%s is not one of scalar|avx2|avx512; using scalar\n",
                   env);
      return ScalarKernels();
    }
    if (k == nullptr) {
      std::fprintf(stderr, "ina: INA_QUANT=%s is not available on this CPU/build; using scalar\n",
                   env);
      return ScalarKernels();
    }
    return *k;
  }
  // AVX2 first: measured no slower than AVX-512 for these memory-bound kernels
  // (docs/benchmarks-quant.md), and it avoids AVX-512 frequency drops on older parts.
  if (const Kernels* k = Avx2Kernels()) return *k;
  if (const Kernels* k = Avx512Kernels()) return *k;
  return ScalarKernels();
}

}  // namespace

const Kernels& ActiveKernels() {
  static const Kernels& kChosen = ChooseKernels();  // thread-safe static initialisation
  return kChosen;
}

}  // namespace ina::host::quant
