// Deterministic test data and independent verification of all-reduce results.
//
// The inputs are a pure function of (seed, rank, elements), so the parent of the benchmark's
// worker processes (or a test) can rebuild every rank's input and compute, without any network:
//   - the float64 sum S of the inputs,
//   - the exact result ina must produce: each block quantized with the agreed exponent (the max
//     of the ranks' block exponents), summed in int64, dequantized (scalar kernels),
//   - the per-element error bound of host/include/ina/host/quant.h.
// Everything here is single-threaded and allocates; it is not on any data path.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ina::bench {

// Floats spanning several orders of magnitude per block (so block exponents differ), with some
// zero blocks and a few exact small integers. Same (seed, rank, n) -> same values.
std::vector<float> MakeFloatInput(uint64_t seed, int rank, size_t n);
// int32 values in [-2^20, 2^20] (plus a few extremes when `wrap` so the sum wraps).
std::vector<int32_t> MakeIntInput(uint64_t seed, int rank, size_t n, bool wrap = false);

struct FloatExpectation {
  std::vector<float> exact;   // what every worker must hold, bit for bit
  std::vector<double> sum64;  // float64 sum of the inputs
  std::vector<double> bound;  // |out - sum64| allowed per element
};

// REQUIRES: inputs.size() == world >= 1, all the same length; k in proto::kKValues.
FloatExpectation ExpectFloat(const std::vector<std::vector<float>>& inputs, int k);
// Wrapping int32 sum.
std::vector<int32_t> ExpectInt(const std::vector<std::vector<int32_t>>& inputs);

// --average (AllReduceOptions::average, ina/host/communicator.h): the sum's expectation made the
// mean's. Float: exact / float(world) with one IEEE division (the definition every path must
// meet bit for bit; NaN stays NaN), sum64 / world, and the bound / world plus the division's own
// rounding (half an ulp of the quotient, 2^-150 below the normal range). int32: the wrapped sum
// divided truncating toward zero. REQUIRES: world >= 1.
void AverageExpectation(FloatExpectation* e, int world);
void AverageInt(std::vector<int32_t>* sums, int world);

struct FloatCheck {
  bool exact = true;            // out == expectation.exact bitwise
  bool within_bound = true;     // |out - sum64| <= bound everywhere
  double max_rel_err = 0;       // max |out - sum64| / max |sum64| (normwise; 0 when the sum is 0)
  size_t first_bad = SIZE_MAX;  // first element that breaks exactness or the bound
  std::string detail;           // says what differs at first_bad
};
FloatCheck CheckFloat(std::span<const float> out, const FloatExpectation& expected);

// FNV-1a 64 of the bytes: a fingerprint to compare results across processes.
uint64_t Fingerprint(std::span<const uint8_t> bytes);

}  // namespace ina::bench
