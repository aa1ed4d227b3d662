// ina-rtlsim's engine factory (see rtl_engines.h).
#include "rtl_engines.h"

#include <cstdlib>

namespace ina::sim::rtlsim {
namespace {

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

std::string EngineDescription() {
  return "verilated RTL core, " + std::to_string(kRtlPoolSlots) + " slots, " +
         std::to_string(kRtlJobs) + " jobs (--engine and --slots are ignored)";
}

Result<std::unique_ptr<RtlEngine>> MakeEngine() {
  CoreSim::Options o;
  INA_ASSIGN_OR_RETURN(o.idle, EnvRate("INA_RTLSIM_IDLE"));
  INA_ASSIGN_OR_RETURN(o.stall, EnvRate("INA_RTLSIM_STALL"));
  return std::make_unique<RtlEngine>(o);
}

}  // namespace ina::sim::rtlsim
