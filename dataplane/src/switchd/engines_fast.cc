// Engine factory for builds with the fast engine (see engines.h).
#include <string>

#include "engines.h"
#include "ina/dp/fast_engine.h"

namespace ina::dp::switchd {

std::string_view DefaultEngineName() { return "fast"; }
std::string_view EngineNames() { return "fast|ref"; }
std::string EngineDescription(std::string_view kind) {
  if (kind == "fast") return "fast (payload kernel " + std::string(FastEngineKernelName()) + ")";
  return "reference (oracle)";
}

Result<std::unique_ptr<Engine>> MakeEngine(std::string_view kind, const EngineLimits& limits) {
  if (kind == "ref") return MakeReferenceEngine(limits);
  if (kind == "fast") {
    std::unique_ptr<Engine> e = MakeFastEngine(limits);
    if (!e) return ResourceExhausted("--engine fast: cannot allocate the slot pool");
    return e;
  }
  return InvalidArgument("--engine: unknown engine '" + std::string(kind) +
                         "' (expected fast or ref)");
}

}  // namespace ina::dp::switchd
