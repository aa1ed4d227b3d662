// Writing a core model's coverage counters. Two peers, chosen by target: ina::sim (the ordinary
// model) links coverage/off.cc, which does nothing; ina_sim_cov (CMake INA_RTL_COVERAGE: the model
// verilated with --coverage) links coverage/on.cc, which writes the context's counters to
// $INA_RTL_COVERAGE_DIR (default: the working directory) as core-<pid>-<n>.dat, one file per model,
// for scripts/rtl_coverage.py or verilator_coverage to merge (docs/rtl/coverage.md).
// Called once per model, after its final(); thread-safe (models may end on several threads).
#pragma once

class VerilatedContext;

namespace ina::sim {

void WriteCoverage(VerilatedContext& ctx);

}  // namespace ina::sim
