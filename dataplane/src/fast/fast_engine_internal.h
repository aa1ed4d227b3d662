// Test and benchmark hooks: a fast engine forced onto one kernel set (so every SIMD variant runs
// the differential tests, not only the one this CPU would pick) and one CRC32C variant, or with
// the CRC32C trailer neither checked nor computed (benchmarks only: what the check costs).
#pragma once

#include <memory>

#include "add.h"
#include "ina/dp/fast_engine.h"
#include "ina/proto/crc32c.h"

namespace ina::dp::fast {

struct FastOptions {
  // false: rule 4 of engine.h is skipped and results carry a zero trailer. Not an Engine any more
  // (the other fabrics and every worker check the trailer): ina-engine-bench's "no CRC" rows only.
  bool check_crc = true;
  proto::Crc32cFn crc = nullptr;  // nullptr: proto::Crc32cBest()
};

// As MakeFastEngine, with `kernels` (which must outlive the engine and run on this CPU).
std::unique_ptr<Engine> MakeFastEngineWithKernels(const EngineLimits& limits,
                                                  const AddKernels& kernels,
                                                  const FastOptions& options = {});

}  // namespace ina::dp::fast
