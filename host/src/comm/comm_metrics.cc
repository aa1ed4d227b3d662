// A worker's counters as Prometheus text (see ina/host/comm_metrics.h).
#include "ina/host/comm_metrics.h"

namespace ina::host {

static_assert(sizeof(CommStats) == kCommStatFields.size() * sizeof(uint64_t),
              "every CommStats field has a metric in kCommStatFields");

std::string FormatCommMetrics(const CommStats& s, uint16_t job_id, uint16_t rank) {
  const std::string labels =
      "{job=\"" + std::to_string(job_id) + "\",rank=\"" + std::to_string(rank) + "\"}";
  std::string out;
  for (const CommStatField& f : kCommStatFields) {
    const std::string m(f.metric);
    out += "# HELP " + m + " " + std::string(f.help) + "\n# TYPE " + m + " counter\n";
    out += m + labels + " " + std::to_string(s.*f.field) + "\n";
  }
  return out;
}

}  // namespace ina::host
