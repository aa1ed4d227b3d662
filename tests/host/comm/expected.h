// The independent expected results of an all-reduce, shared by the communicator's tests: quantize
// each rank's input with the agreed block exponent using the scalar kernels, sum in int64,
// dequantize; also checks the quant.h error bound against the float64 sum.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

#include "ina/host/quant.h"
#include "ina/proto/wire.h"

namespace ina::host::testutil {

// Inputs whose blocks have very different magnitudes (and some all-zero blocks).
inline std::vector<float> RandomFloats(std::mt19937_64& rng, size_t n, int k) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> scale(-20, 20);
  std::vector<float> v(n);
  for (size_t b = 0; b * k < n; ++b) {
    const int s = scale(rng);
    const bool zero = (rng() % 16) == 0;
    for (size_t j = b * k; j < std::min(n, (b + 1) * k); ++j) {
      v[j] = zero ? 0.0f : std::ldexp(normal(rng), s);
    }
  }
  return v;
}

// The independent expected result (see the file comment); also checks the error bound.
inline std::vector<float> ExpectedFloat(const std::vector<std::vector<float>>& in, int k) {
  const auto& sk = quant::ScalarKernels();
  const int world = static_cast<int>(in.size());
  const int p = quant::Precision(world);
  const size_t n = in[0].size();
  std::vector<float> out(n);
  std::vector<uint8_t> wire(size_t{4} * k);
  std::vector<int64_t> sum(k);
  for (size_t off = 0; off < n; off += k) {
    const size_t cnt = std::min<size_t>(k, n - off);
    uint8_t e = 0;
    bool nonfinite = false;
    for (const auto& x : in) {
      bool nf = false;
      e = std::max(e, sk.block_exp(x.data() + off, cnt, &nf));
      nonfinite |= nf;
    }
    if (nonfinite) {
      std::fill_n(out.data() + off, cnt, std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    std::fill(sum.begin(), sum.end(), 0);
    for (const auto& x : in) {
      sk.quantize(x.data() + off, cnt, e, p, wire.data());
      for (size_t j = 0; j < cnt; ++j) {
        sum[j] += static_cast<int32_t>(proto::Load32(wire.data() + 4 * j));
      }
    }
    for (size_t j = 0; j < cnt; ++j) {
      EXPECT_LE(std::llabs(sum[j]), int64_t{1} << 30) << "quantized sum overflows the bound";
      proto::Store32(wire.data() + 4 * j, static_cast<uint32_t>(static_cast<int32_t>(sum[j])));
    }
    sk.dequantize(wire.data(), cnt, e, p, out.data() + off);
    // The documented bound against the exact float64 sum.
    const int ue = e - proto::kExpBias;
    const double half_ulp = std::ldexp(1.0, ue - p - 1) * world;
    for (size_t j = 0; j < cnt; ++j) {
      double s = 0;
      for (const auto& x : in) s += x[off + j];
      const double bound = half_ulp + std::ldexp(std::abs(s) + half_ulp, -24);
      EXPECT_LE(std::abs(out[off + j] - s), bound) << "element " << off + j;
    }
  }
  return out;
}

inline std::vector<int32_t> ExpectedInt(const std::vector<std::vector<int32_t>>& in) {
  std::vector<int32_t> out(in[0].size());
  for (size_t j = 0; j < out.size(); ++j) {
    uint32_t s = 0;
    for (const auto& x : in) s += static_cast<uint32_t>(x[j]);
    out[j] = static_cast<int32_t>(s);
  }
  return out;
}

// Bitwise equality; any NaN matches any NaN.
inline ::testing::AssertionResult SameFloats(const std::vector<float>& got,
                                             const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size differs";
  for (size_t j = 0; j < got.size(); ++j) {
    const bool ok = (std::isnan(got[j]) && std::isnan(want[j])) ||
                    std::bit_cast<uint32_t>(got[j]) == std::bit_cast<uint32_t>(want[j]);
    if (!ok) {
      return ::testing::AssertionFailure()
             << "element " << j << ": got " << got[j] << " want " << want[j];
    }
  }
  return ::testing::AssertionSuccess();
}

// Bitwise equality, NaN payloads included: a path that must be the same arithmetic as another.
inline ::testing::AssertionResult SameBits(const std::vector<float>& got,
                                           const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size differs";
  for (size_t j = 0; j < got.size(); ++j) {
    if (std::bit_cast<uint32_t>(got[j]) != std::bit_cast<uint32_t>(want[j])) {
      return ::testing::AssertionFailure()
             << "element " << j << ": got " << got[j] << " want " << want[j];
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace ina::host::testutil
