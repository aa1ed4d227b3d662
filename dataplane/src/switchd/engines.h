// ina-switchd's engine factory: which aggregation engines this build has, by name. Private to the
// ina-switchd executable: the switch loop library (ina::switchd_loop) takes the engine built here.
//
// The fast engine is linked only when its library exists (ina_dp_fast); CMake then compiles
// engines_fast.cc, else engines_ref_only.cc. Both define the functions below.
#pragma once

#include <memory>
#include <string_view>

#include "ina/base/status.h"
#include "ina/dp/engine.h"
#include "ina/dp/ref_engine.h"

namespace ina::dp::switchd {

// "fast" when the fast engine is built in, else "ref".
std::string_view DefaultEngineName();
// "fast|ref" or "ref".
std::string_view EngineNames();
// A human description of the engine `kind` would pick (for the start-up config print).
std::string EngineDescription(std::string_view kind);
// InvalidArgument for an unknown kind; Unimplemented for "fast" in a build without it.
Result<std::unique_ptr<Engine>> MakeEngine(std::string_view kind, const EngineLimits& limits);

}  // namespace ina::dp::switchd
