// ina-rtlsim's engine factory: the functions of dataplane/src/switchd/engines.h, answered with the
// verilated RTL core (ina::sim::RtlEngine) whatever the kind, so ina-switchd's loop (switch.cc,
// compiled into ina-rtlsim unchanged) runs the RTL. Plus what ina-rtlsim's main reports.
#pragma once

#include "ina/sim/rtl_engine.h"

namespace ina::sim::rtlsim {

// The engine the factory made last (nullptr before); owned by the Switch.
const RtlEngine* LastEngine();

}  // namespace ina::sim::rtlsim
