// Test hook: a fast engine forced onto one kernel set (so every SIMD variant runs the
// differential tests, not only the one this CPU would pick).
#pragma once

#include <memory>

#include "add.h"
#include "ina/dp/fast_engine.h"

namespace ina::dp::fast {

// As MakeFastEngine, with `kernels` (which must outlive the engine and run on this CPU).
std::unique_ptr<Engine> MakeFastEngineWithKernels(const EngineLimits& limits,
                                                  const AddKernels& kernels);

}  // namespace ina::dp::fast
