// ina-rtlsim's engine factory (see rtl_engines.h).
#include "rtl_engines.h"

#include <cstdlib>

namespace ina::sim::rtlsim {
std::string EngineDescription() {
  return "verilated RTL core, " + std::to_string(kRtlPoolSlots) + " slots, " +
         std::to_string(kRtlJobs) + " jobs (--engine does not matter)";
}

dp::switchd::EngineMenu Menu() {
  return dp::switchd::EngineMenu{kEngineNames, kDefaultEngine, kRtlPoolSlots, /*rtl=*/true};
}

Result<std::unique_ptr<RtlEngine>> MakeEngine(double idle, double stall,
                                              const TraceOptions& trace) {
  if (!(idle >= 0 && idle < 1) || !(stall >= 0 && stall < 1)) {
    return InvalidArgument("rtl idle/stall probabilities must be in [0, 1)");
  }
  CoreSim::Options o;
  o.idle = idle;
  o.stall = stall;
  o.trace = trace;
  auto engine = std::make_unique<RtlEngine>(o);
  if (!trace.path.empty() && engine->sim().trace_path().empty()) {
    return Unavailable("--trace " + trace.path + ": cannot write the file");
  }
  return engine;
}

}  // namespace ina::sim::rtlsim
