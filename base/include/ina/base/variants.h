// The one way ina chooses among SIMD twins (every kernel family: the trailer's CRC32C, the fast
// engine's add, quantization, the IPv4/UDP checksum).
//
// A family has a table type (a `name` and function pointers), one file per instruction set
// compiled with its own flags, and the scalar twin, always built. One function per family returns
// a VariantList: the variants this build and this CPU can run, best first, ending with the scalar
// twin. It is defined in a dispatch file compiled without ISA flags (one per target: x86-64 checks
// the CPU with __builtin_cpu_supports, which also checks that the OS saves the vector state;
// other targets list the scalar twin only), so no vector instruction runs before the check. The
// family uses best(), chosen once; tests run every item against the scalar twin.
//
// Contract: Add ignores null (a variant the compiler could not build) and never holds more than
// kMax; best() REQUIRES size > 0 (the scalar twin is always added last). Only the dispatch file
// and the users call these members: a file compiled with ISA flags must not (its copy of an inline
// function could be the one the linker keeps for every caller).
#pragma once

#include <cstddef>
#include <string_view>

namespace ina::base {

template <typename Table, size_t kMax = 4>
struct VariantList {
  const Table* items[kMax] = {};
  size_t size = 0;

  // A list of one: the scalar twin (the dispatch file of a target without vector variants).
  static constexpr VariantList Only(const Table* scalar) {
    VariantList list;
    list.Add(scalar);
    return list;
  }
  constexpr void Add(const Table* t) {
    if (t != nullptr && size < kMax) items[size++] = t;
  }
  const Table& best() const { return *items[0]; }
  // The variant called `name` (Table::name), or nullptr when this build or CPU has none.
  const Table* Find(std::string_view name) const {
    for (size_t i = 0; i < size; ++i) {
      if (name == items[i]->name) return items[i];
    }
    return nullptr;
  }
  const Table* const* begin() const { return items; }
  const Table* const* end() const { return items + size; }
};

}  // namespace ina::base
