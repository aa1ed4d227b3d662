#include "test_util.h"

namespace ina::dp::testing {

std::vector<EngineFactory> EnginesUnderTest() {
  return {{"ref", [](const EngineLimits& l) { return MakeReferenceEngine(l); }}};
}

}  // namespace ina::dp::testing
