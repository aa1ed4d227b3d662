// Precision(), the averaging division (DivideBy) and the kernel choice: each SIMD variant is
// offered only when the compiler built it and the CPU (with OS support for the register state) runs
// it; the variant list (ina/base/variants.h) is built once: ActiveKernels() is its best,
// KernelsByName the one a CommConfig names.
#include <bit>
#include <string_view>

#include "ina/base/variants.h"
#include "ina/proto/crc32c.h"
#include "internal.h"

namespace ina::host::quant {

int Precision(int world) {
  // ceil(log2(world)) is the bit width of world - 1 (0 for world == 1).
  const unsigned above = world > 1 ? static_cast<unsigned>(world - 1) : 0u;
  return 30 - std::bit_width(above);
}

void DivideBy(const Kernels& k, float* x, size_t n, int divisor) {
  if (divisor <= 1) return;
  const Kernels& kk = divisor > kFastDivideMax ? ScalarKernels() : k;
  kk.divide(x, n, static_cast<float>(divisor));
}

void DivideBy(float* x, size_t n, int divisor) { DivideBy(ActiveKernels(), x, n, divisor); }

void DivideBy(int32_t* x, size_t n, int divisor) {
  if (divisor <= 1) return;
  for (size_t i = 0; i < n; ++i) x[i] /= divisor;
}

namespace internal {

uint32_t QuantizeThenCrc(QuantizeFn quantize, const float* x, size_t n, uint8_t biased_exp,
                         int precision, uint8_t* out) {
  uint32_t crc = 0;
  for (size_t i = 0; i < n; i += kCrcPieceElems) {
    const size_t cnt = n - i < kCrcPieceElems ? n - i : kCrcPieceElems;
    quantize(x + i, cnt, biased_exp, precision, out + 4 * i);
    crc = proto::Crc32c(crc, out + 4 * i, 4 * cnt);
  }
  return crc;
}

uint32_t ScalarQuantizeCrc(const float* x, size_t n, uint8_t biased_exp, int precision,
                           uint8_t* out) {
  return QuantizeThenCrc(ScalarQuantize, x, n, biased_exp, precision, out);
}

}  // namespace internal

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

// The variants, best first (ina/base/variants.h). AVX2 before AVX-512: measured no slower for
// these memory-bound kernels (docs/benchmarks-quant.md), and it avoids AVX-512 frequency drops on
// older parts.
base::VariantList<Kernels> QuantVariants() {
  base::VariantList<Kernels> list;
  list.Add(Avx2Kernels());
  list.Add(Avx512Kernels());
  list.Add(&ScalarKernels());
  return list;
}

const base::VariantList<Kernels>& Variants() {
  static const base::VariantList<Kernels> kList = QuantVariants();  // thread-safe, once
  return kList;
}

}  // namespace

const Kernels& ActiveKernels() { return Variants().best(); }

const Kernels* KernelsByName(std::string_view name) {
  if (name == "auto") return &ActiveKernels();
  return Variants().Find(name);
}

}  // namespace ina::host::quant
