// The reference aggregation engine: the oracle.
//
// A plain, obviously correct implementation of the rules in ina/dp/engine.h, written for
// readability rather than speed (std containers, one heap-allocated result per emitted packet). The
// fast engine (ina/dp/fast_engine.h) and the RTL are checked against it packet for packet; it
// shares no code with either.
//
// Threading: like every Engine, single-threaded; the caller serialises all calls.
#pragma once

#include <cstdint>
#include <memory>

#include "ina/dp/engine.h"

namespace ina::dp {

// Sizes of an engine's tables, fixed at construction.
struct EngineLimits {
  uint32_t pool_slots =
      16384;                // slots in the pool (each slot holds two copies of up to K elements)
  uint16_t max_jobs = 256;  // jobs installed at once; AddJob beyond it is ResourceExhausted
  // The largest K a job may use (Engine::max_k; AddJob refuses more with InvalidArgument): a
  // software engine standing in for hardware built for smaller frames, as the RTL's MaxK.
  uint16_t max_k = proto::kMaxK;
};

// Returns a reference engine with an empty job table and zero counters.
// REQUIRES: limits.pool_slots >= 1, limits.max_jobs >= 1, limits.max_k one of proto::kKValues.
std::unique_ptr<Engine> MakeReferenceEngine(const EngineLimits& limits);

}  // namespace ina::dp
