// Engine factory for builds without the fast engine (see engines.h).
#include <string>

#include "engines.h"

namespace ina::dp::switchd {

std::string_view DefaultEngineName() { return "ref"; }
std::string_view EngineNames() { return "ref"; }
std::string EngineDescription(std::string_view kind) { return "reference (oracle)"; }

Result<std::unique_ptr<Engine>> MakeEngine(std::string_view kind, const EngineLimits& limits) {
  if (kind == "ref") return MakeReferenceEngine(limits);
  if (kind == "fast") return Unimplemented("--engine fast: this build has no fast engine");
  return InvalidArgument("--engine: unknown engine '" + std::string(kind) + "' (expected ref)");
}

}  // namespace ina::dp::switchd
