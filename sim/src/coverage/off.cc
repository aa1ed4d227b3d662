// The ordinary model has no coverage counters (coverage.h).
#include "coverage.h"

namespace ina::sim {

void WriteCoverage(VerilatedContext&) {}

}  // namespace ina::sim
