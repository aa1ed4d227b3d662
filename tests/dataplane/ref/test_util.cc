#include "test_util.h"

#include <cstdlib>
#include <random>
#include <string>

namespace ina::dp::testing {

uint64_t TestSeed() {
  if (const char* s = std::getenv("INA_SEED"); s != nullptr && *s != '\0') {
    return std::strtoull(s, nullptr, 0);
  }
  std::random_device rd;
  return (uint64_t{rd()} << 32) | rd();
}

}  // namespace ina::dp::testing
