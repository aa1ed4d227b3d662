#include "test_util.h"

#include <cstdlib>
#include <random>
#include <string>

#include "support/seed.h"

namespace ina::dp::testing {

uint64_t TestSeed(const char* what) { return tests::Seed(tests::kDefaultSeed, what); }

}  // namespace ina::dp::testing
