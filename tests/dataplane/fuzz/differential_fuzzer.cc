// libFuzzer entry point (clang only): traps when the engines disagree.
#include <cstdio>
#include <string>

#include "differential.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string diff = ina::dp::fuzz::DifferentialCheck(data, size);
  if (!diff.empty()) {
    std::fprintf(stderr, "differential: %s\n", diff.c_str());
    __builtin_trap();
  }
  return 0;
}
