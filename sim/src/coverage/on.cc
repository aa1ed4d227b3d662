// The coverage model's counters to a file (coverage.h).
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "coverage.h"
#include "verilated.h"
#include "verilated_cov.h"

namespace ina::sim {

void WriteCoverage(VerilatedContext& ctx) {
  static std::atomic<int> models{0};
  const char* dir = std::getenv("INA_RTL_COVERAGE_DIR");
  const std::string path = std::string(dir != nullptr && *dir != '\0' ? dir : ".") + "/core-" +
                           std::to_string(getpid()) + "-" + std::to_string(models++) + ".dat";
  ctx.coveragep()->write(path.c_str());
}

}  // namespace ina::sim
