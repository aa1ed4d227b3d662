// The fast software aggregation engine: the same rules as ina/dp/engine.h (and bit-identical
// results and counters to the reference engine, which the tests check packet for packet), built
// for throughput on one core.
//
// Layout: a small metadata record per pool slot copy (pool_slots x 2, preallocated); each job's
// slot memory (window x 2 copies x K int32, 64-byte aligned: 256 B a copy at K=64, 8 KiB at
// K=2048) allocated by AddJob and freed by RemoveJob, on the control path; a direct-index job table
// (job id -> entry index, 65536 x uint16) in front of max_jobs job entries; counters as a plain
// uint64 array; one preallocated result buffer. Per packet: no allocation, locks, exceptions or
// logging. The big-endian payload is byte-swapped and added with the best SIMD kernel the CPU has
// (AVX-512BW, AVX2 or scalar), chosen once when the engine is made; the CRC32C trailer of each
// packet is checked, and computed for each result, with the best ina/proto/crc32c.h variant.
//
// Threading: single-threaded like every Engine; run one per core.
#pragma once

#include <memory>
#include <string_view>

#include "ina/dp/engine.h"
#include "ina/dp/ref_engine.h"  // EngineLimits (declarations only; no code is shared)

namespace ina::dp {

// Returns a fast engine with an empty job table and zero counters, or nullptr if its tables
// cannot be allocated. AddJob is ResourceExhausted when the job's slot memory cannot be.
// REQUIRES: limits.pool_slots >= 1, limits.max_jobs >= 1, limits.max_k one of proto::kKValues.
std::unique_ptr<Engine> MakeFastEngine(const EngineLimits& limits);

// The name of the payload kernel MakeFastEngine picks on this CPU: "avx512", "avx2" or "scalar".
std::string_view FastEngineKernelName();

}  // namespace ina::dp
