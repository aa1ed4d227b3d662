// The engines the fast-engine tests check: the fast engine on every kernel set this CPU runs.
#include "../ref/test_util.h"
#include "fast_engine_internal.h"

namespace ina::dp::testing {

std::vector<EngineFactory> EnginesUnderTest() {
  std::vector<EngineFactory> v;
  const fast::AddVariantList list = fast::AddVariants();
  for (size_t i = 0; i < list.size; ++i) {
    const fast::AddKernels* k = list.items[i];
    v.push_back({std::string("fast_") + k->name,
                 [k](const EngineLimits& l) { return fast::MakeFastEngineWithKernels(l, *k); }});
  }
  return v;
}

}  // namespace ina::dp::testing
