// Payload kernels of the fast engine: byte-swap (big-endian wire <-> host order) fused with a copy
// or a wrapping int32 add. One file per instruction set (add_scalar.cc, add_avx2.cc,
// add_avx512.cc, each compiled with its own flags); the dispatcher picks one at start-up from what
// the CPU supports. Every variant is tested against the scalar twin.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ina/base/variants.h"

namespace ina::dp::fast {

struct AddKernels {
  const char* name;
  // dst[i] = bswap32(src[i]) for i < n. Unaligned pointers are fine; ranges must not overlap.
  void (*swap_copy)(void* dst, const void* src, size_t n);
  // acc[i] += bswap32(src[i]) (mod 2^32) for i < n. Unaligned pointers are fine.
  void (*swap_add)(uint32_t* acc, const void* src, size_t n);
};

extern const AddKernels kScalarKernels;

// Kernels this build and CPU can run, best first (always ends with the scalar ones); the first
// is what the fast engine uses (ina/base/variants.h: the one selection mechanism of every kernel
// family).
using AddVariantList = base::VariantList<AddKernels>;
AddVariantList AddVariants();

}  // namespace ina::dp::fast
