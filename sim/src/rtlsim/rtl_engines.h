// ina-rtlsim's engine factory: the verilated RTL core (ina::sim::RtlEngine) whatever --engine
// names, for the switch loop (ina::switchd_loop) that ina-rtlsim's main hands it to.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "ina/base/status.h"
#include "ina/dp/switchd/config.h"
#include "ina/sim/rtl_engine.h"

namespace ina::sim::rtlsim {

// --engine accepts these; fast and ref (ina-bench passes --engine) mean the RTL too.
inline constexpr std::string_view kEngineNames = "rtl|fast|ref";
inline constexpr std::string_view kDefaultEngine = "rtl";

// The start-up config print's description: the core's fixed pool and job table.
std::string EngineDescription();

// The menu ina-rtlsim parses its flags with: the names above, the core's fixed pool (--slots
// must be it), and the --rtl-idle / --rtl-stall flags (env INA_RTLSIM_IDLE / INA_RTLSIM_STALL).
dp::switchd::EngineMenu Menu();

// A new core; `idle` and `stall` are probabilities in [0, 1) of an idle s_axis cycle / a low
// m_axis_tready (Config::rtl_idle / rtl_stall; 0: the same results, only slower; for exercising
// the core's backpressure end to end). The pool and job table are fixed when the core is
// verilated. `trace`: the core's FST waveform window (empty path: none). Errors: InvalidArgument
// for a probability outside [0, 1), Unavailable for a trace file that cannot be written.
Result<std::unique_ptr<RtlEngine>> MakeEngine(double idle, double stall,
                                              const TraceOptions& trace = {});

}  // namespace ina::sim::rtlsim
