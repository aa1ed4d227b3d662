// ina-bench's verdict: checks the workers' reports and rank 0's result against the inputs (rebuilt
// here from the seed), prints the summary lines (unless --quiet) and the one JSON line on stdout.
#pragma once

#include <string>

#include "launch.h"
#include "options.h"
#include "worker.h"

namespace ina::bench {

// --kill-rank: every surviving rank must have returned an error (in time). Returns the exit code
// (0: they all did).
int ReportKillDrill(const Options& o, const SharedView& view, const Reaped& reaped,
                    const std::string& switch_counters);

// A normal run: every rank succeeded, the results are bit-identical across ranks, exact and
// within the documented bound. Returns the exit code (0: verified).
int ReportRun(const Options& o, const SharedView& view, const Reaped& reaped,
              const std::string& switch_counters);

}  // namespace ina::bench
