// ina-rtlsim's engine factory: the verilated RTL core (ina::sim::RtlEngine) whatever --engine
// names, for the switch loop (ina::switchd_loop) that ina-rtlsim's main hands it to.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "ina/base/status.h"
#include "ina/sim/rtl_engine.h"

namespace ina::sim::rtlsim {

// --engine accepts these; fast and ref (ina-bench passes --engine) mean the RTL too.
inline constexpr std::string_view kEngineNames = "rtl|fast|ref";
inline constexpr std::string_view kDefaultEngine = "rtl";

// The start-up config print's description: the core's fixed pool and job table.
std::string EngineDescription();

// A new core. Environment: INA_RTLSIM_IDLE and INA_RTLSIM_STALL, probabilities in [0, 1) of an
// idle s_axis cycle / a low m_axis_tready (default 0: the same results, only slower; for
// exercising the core's backpressure end to end). --engine and --slots do not matter: the pool
// and job table are fixed when the core is verilated.
// Errors: InvalidArgument (an environment variable that is not such a probability).
Result<std::unique_ptr<RtlEngine>> MakeEngine();

}  // namespace ina::sim::rtlsim
