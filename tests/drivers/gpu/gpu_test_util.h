// Shared helpers of the drivers/gpu tests: seeds, random tensors of every input dtype, and the
// CPU references (ScalarKernels() applied block by block, in the blocked layouts of
// ina/gpu/quant.h).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "ina/gpu/quant_elem.h"
#include "ina/host/quant.h"

namespace ina::gpu::testing {

namespace e = ::ina::gpu::elem;
using host::quant::ScalarKernels;

inline constexpr uint8_t kGuard = 0xA5;  // fill around outputs to catch stray writes

// The input element types, as ina/gpu/quant.h's DType (kept here so host-only tests need not
// include the CUDA API header).
enum class InType { kFloat32, kBFloat16, kFloat16 };
inline size_t InBytes(InType t) { return t == InType::kFloat32 ? 4 : 2; }
inline const char* InName(InType t) {
  return t == InType::kFloat32 ? "float32" : (t == InType::kBFloat16 ? "bfloat16" : "float16");
}
inline void PrintTo(InType t, std::ostream* os) { *os << InName(t); }

// Fixed by default (CI), INA_SEED overrides; printed either way.
inline uint64_t TestSeed(uint64_t fixed) {
  uint64_t seed = fixed;
  if (const char* env = std::getenv("INA_SEED"); env != nullptr && *env != '\0') {
    seed = std::strtoull(env, nullptr, 0);
  }
  std::printf("INA_SEED=%llu (set INA_SEED to replay)\n", static_cast<unsigned long long>(seed));
  ::testing::Test::RecordProperty("INA_SEED", std::to_string(seed));
  return seed;
}

inline size_t Blocks(size_t n, int k) { return (n + static_cast<size_t>(k) - 1) / k; }

// The element counts every layout test covers for a K.
inline std::vector<size_t> Sizes(int k) {
  const size_t kk = static_cast<size_t>(k);
  return {0, 1, kk - 1, kk, kk + 1, 3 * kk + 2, (size_t{1} << 20) + 3};
}

// A random tensor (raw bytes of its dtype) and its exact float values. Finite unless
// `nonfinite`, which puts Inf or NaN into about one block in eight.
struct Tensor {
  std::vector<uint8_t> raw;
  std::vector<float> f;
};

inline Tensor RandomTensor(std::mt19937_64& rng, InType type, size_t n, int k, bool nonfinite) {
  Tensor t;
  t.raw.resize(n * InBytes(type));
  t.f.resize(n);
  const size_t kk = static_cast<size_t>(k);
  for (size_t b = 0; b < Blocks(n, k); ++b) {
    // One magnitude range per block, as gradients; some zeros / denormals, and the extremes.
    const uint32_t top = type == InType::kFloat16 ? 1 + rng() % 30 : 1 + rng() % 254;
    const bool bad_block = nonfinite && rng() % 8 == 0;
    for (size_t i = b * kk; i < std::min(n, (b + 1) * kk); ++i) {
      const auto r = static_cast<uint32_t>(rng());
      const uint32_t field = rng() % 16 == 0 ? 0 : static_cast<uint32_t>(rng() % (top + 1));
      if (type == InType::kFloat16) {
        auto h = static_cast<uint16_t>((r & 0x83ffu) | (field << 10));
        if (bad_block && rng() % 4 == 0) h = rng() % 2 ? 0x7c00 : 0xfe01;
        std::memcpy(&t.raw[2 * i], &h, 2);
        t.f[i] = e::Float16ToFloat(h);
        continue;
      }
      uint32_t u = (r & 0x807fffffu) | (field << 23);
      if (bad_block && rng() % 4 == 0) u = rng() % 2 ? 0xff800000u : 0x7fc00001u;
      if (type == InType::kBFloat16) {
        const auto h = static_cast<uint16_t>(u >> 16);
        std::memcpy(&t.raw[2 * i], &h, 2);
        t.f[i] = e::BFloat16ToFloat(h);
      } else {
        std::memcpy(&t.raw[4 * i], &u, 4);
        std::memcpy(&t.f[i], &u, 4);
      }
    }
  }
  return t;
}

// CPU references.
inline void CpuBlockExps(const std::vector<float>& f, int k, std::vector<uint8_t>* exps,
                         std::vector<uint8_t>* bad) {
  const size_t kk = static_cast<size_t>(k), n = f.size();
  exps->assign(Blocks(n, k), 0);
  bad->assign(Blocks(n, k), 0);
  for (size_t b = 0; b < exps->size(); ++b) {
    bool nf = false;
    (*exps)[b] = ScalarKernels().block_exp(f.data() + b * kk, std::min(kk, n - b * kk), &nf);
    (*bad)[b] = nf ? 1 : 0;
  }
}

// Exponents as after the fabric's max: each block's own or up to two larger.
inline std::vector<uint8_t> RaisedExps(std::mt19937_64& rng, const std::vector<float>& f, int k) {
  std::vector<uint8_t> exps, bad;
  CpuBlockExps(f, k, &exps, &bad);
  for (uint8_t& x : exps) x = static_cast<uint8_t>(std::min<int>(255, x + rng() % 3));
  return exps;
}

// Blocked big-endian layout, block b at b * stride; bytes between blocks stay kGuard.
inline std::vector<uint8_t> CpuQuantize(const std::vector<float>& f, int k,
                                        const std::vector<uint8_t>& exps, int p, size_t stride) {
  const size_t kk = static_cast<size_t>(k), n = f.size();
  std::vector<uint8_t> out(Blocks(n, k) * stride, kGuard);
  for (size_t b = 0; b < Blocks(n, k); ++b) {
    ScalarKernels().quantize(f.data() + b * kk, std::min(kk, n - b * kk), exps[b], p,
                             out.data() + b * stride);
  }
  return out;
}

// Random sums (|v| <= 2^30, some int32 extremes) in the blocked layout.
inline std::vector<uint8_t> RandomWire(std::mt19937_64& rng, size_t n, int k, size_t stride) {
  const size_t kk = static_cast<size_t>(k);
  std::vector<uint8_t> in(Blocks(n, k) * stride, kGuard);
  for (size_t i = 0; i < n; ++i) {
    int32_t v = static_cast<int32_t>(rng() % (2u << 30)) - (1 << 30);
    if (rng() % 1000 == 0) v = rng() % 2 ? INT32_MIN : INT32_MAX;
    e::StoreBe32(in.data() + (i / kk) * stride + (i % kk) * 4, v);
  }
  return in;
}

// Dequantize reference: ScalarKernels().dequantize per block, then / float(divisor) if > 1.
inline std::vector<float> CpuDequantize(const std::vector<uint8_t>& in, size_t stride, size_t n,
                                        int k, const std::vector<uint8_t>& exps, int p,
                                        int divisor) {
  const size_t kk = static_cast<size_t>(k);
  std::vector<float> out(n);
  for (size_t b = 0; b < Blocks(n, k); ++b) {
    ScalarKernels().dequantize(in.data() + b * stride, std::min(kk, n - b * kk), exps[b], p,
                               out.data() + b * kk);
  }
  if (divisor > 1) {
    for (float& v : out) v /= static_cast<float>(divisor);
  }
  return out;
}

inline std::vector<uint8_t> RandomDequantExps(std::mt19937_64& rng, size_t blocks) {
  std::vector<uint8_t> exps(blocks);
  for (uint8_t& x : exps) x = rng() % 16 == 0 ? 0 : static_cast<uint8_t>(31 + rng() % 225);
  return exps;
}

// Index of the first differing byte, or -1.
inline long FirstDiff(const void* a, const void* b, size_t bytes) {
  // An empty vector's data() may be null, which memcmp must not get even for 0 bytes.
  if (bytes == 0 || std::memcmp(a, b, bytes) == 0) return -1;
  const auto* x = static_cast<const uint8_t*>(a);
  const auto* y = static_cast<const uint8_t*>(b);
  for (size_t i = 0; i < bytes; ++i) {
    if (x[i] != y[i]) return static_cast<long>(i);
  }
  return -1;
}

}  // namespace ina::gpu::testing
