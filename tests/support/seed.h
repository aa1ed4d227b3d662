// The seed of every test with random inputs, so that CI is deterministic and a failure replays.
//
//   INA_SEED unset or empty   the fixed seed `fixed` (CI runs these).
//   INA_SEED=<n>              n (decimal or 0x hex): replays a printed seed.
//   INA_SEED=random           a fresh 64-bit seed from std::random_device, for soak runs.
//
// Every call prints "INA_SEED=<n>" (with `what`, when given) on stdout, where ctest
// --output-on-failure shows it next to the failure. Bad input (INA_SEED=abc) exits the test
// process with status 2 and a message on stderr: a typo must not silently run another seed.
// Threading: reads the environment; call from the test's thread.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

namespace ina::tests {

inline constexpr uint64_t kDefaultSeed = 1;

inline uint64_t Seed(uint64_t fixed = kDefaultSeed, const char* what = nullptr) {
  uint64_t seed = fixed;
  const char* s = std::getenv("INA_SEED");
  if (s != nullptr && *s != '\0') {
    if (std::strcmp(s, "random") == 0) {
      std::random_device rd;
      seed = (uint64_t{rd()} << 32) | rd();
    } else {
      char* end = nullptr;
      errno = 0;
      seed = std::strtoull(s, &end, 0);
      if (errno != 0 || end == s || *end != '\0' || *s == '-') {
        std::fprintf(stderr, "INA_SEED=%s: expected an unsigned integer or 'random'\n", s);
        std::exit(2);
      }
    }
  }
  if (what != nullptr) {
    std::printf("%s INA_SEED=%llu\n", what, static_cast<unsigned long long>(seed));
  } else {
    std::printf("INA_SEED=%llu\n", static_cast<unsigned long long>(seed));
  }
  std::fflush(stdout);
  return seed;
}

}  // namespace ina::tests
