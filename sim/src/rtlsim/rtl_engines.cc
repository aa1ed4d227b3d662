// Engine factory of ina-rtlsim (see rtl_engines.h). Environment: INA_RTLSIM_IDLE and
// INA_RTLSIM_STALL, probabilities in [0, 1) of an idle s_axis cycle / a low m_axis_tready
// (default 0: the same results, only slower; for exercising the core's backpressure end to end).
#include "rtl_engines.h"

#include <cstdlib>
#include <string>

#include "engines.h"

namespace ina::sim::rtlsim {
namespace {

const RtlEngine* g_last = nullptr;

Result<double> EnvRate(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0.0;
  char* end = nullptr;
  const double x = std::strtod(v, &end);
  if (*end != '\0' || !(x >= 0 && x < 1)) {
    return InvalidArgument(std::string(name) + ": expected a probability in [0, 1)");
  }
  return x;
}

}  // namespace

const RtlEngine* LastEngine() { return g_last; }

}  // namespace ina::sim::rtlsim

namespace ina::dp::switchd {

std::string_view DefaultEngineName() { return "rtl"; }
// fast and ref are accepted (ina-bench passes --engine) and mean the RTL too.
std::string_view EngineNames() { return "rtl|fast|ref"; }
std::string EngineDescription(std::string_view) {
  return "verilated RTL core, " + std::to_string(sim::kRtlPoolSlots) + " slots, " +
         std::to_string(sim::kRtlJobs) + " jobs (--engine and --slots are ignored)";
}

Result<std::unique_ptr<Engine>> MakeEngine(std::string_view, const EngineLimits&) {
  sim::CoreSim::Options o;
  INA_ASSIGN_OR_RETURN(o.idle, sim::rtlsim::EnvRate("INA_RTLSIM_IDLE"));
  INA_ASSIGN_OR_RETURN(o.stall, sim::rtlsim::EnvRate("INA_RTLSIM_STALL"));
  auto e = std::make_unique<sim::RtlEngine>(o);
  sim::rtlsim::g_last = e.get();
  return std::unique_ptr<Engine>(std::move(e));
}

}  // namespace ina::dp::switchd
