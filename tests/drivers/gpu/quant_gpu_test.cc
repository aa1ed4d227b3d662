// The CUDA kernels (ina/gpu/quant.h) against the CPU kernels (ScalarKernels(), block by block) on
// random tensors: every dtype, K in {64, 256, 7}, n in {0, 1, K-1, K, K+1, large}, dense and
// packet-strided layouts, aligned (vector) and misaligned (per-element) paths, with and without
// averaging. Needs a CUDA device: skips with the reason otherwise. INA_SEED=<n> replays.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "ina/gpu/device.h"
#include "ina/gpu/quant.h"
#include "ina/gpu/quant_elem.h"
#include "ina/host/quant.h"

namespace ina::gpu {
namespace {

using host::quant::ScalarKernels;
namespace e = ::ina::gpu::elem;

constexpr uint8_t kGuard = 0xA5;

uint64_t TestSeed() {
  uint64_t seed = 11;
  if (const char* env = std::getenv("INA_SEED"); env != nullptr && *env != '\0') {
    seed = std::strtoull(env, nullptr, 0);
  }
  std::printf("INA_SEED=%llu (set INA_SEED to replay)\n", static_cast<unsigned long long>(seed));
  return seed;
}

#define ASSERT_OK(expr)                                       \
  do {                                                        \
    const ::ina::Status st_ = (expr);                         \
    ASSERT_TRUE(st_.ok()) << #expr << ": " << st_.ToString(); \
  } while (0)

// A device copy of host bytes (plus `pad` bytes in front, to misalign on purpose).
DeviceBuffer Upload(const void* src, size_t bytes, size_t pad = 0) {
  Result<DeviceBuffer> b = DeviceBuffer::Allocate(bytes + pad + 16);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  if (!b.ok()) return DeviceBuffer();
  if (bytes > 0) {
    EXPECT_EQ(cudaMemcpy(b->as<uint8_t>() + pad, src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
  return std::move(*b);
}

std::vector<uint8_t> Download(const DeviceBuffer& b, size_t bytes, size_t pad = 0) {
  std::vector<uint8_t> v(bytes);
  if (bytes > 0) {
    EXPECT_EQ(cudaMemcpy(v.data(), b.as<uint8_t>() + pad, bytes, cudaMemcpyDeviceToHost),
              cudaSuccess);
  }
  return v;
}

DeviceBuffer Filled(size_t bytes, uint8_t value) {
  std::vector<uint8_t> v(bytes, value);
  return Upload(v.data(), bytes);
}

// A random tensor of `dtype` (raw bytes) and its exact float values. Finite unless `nonfinite`,
// which puts an Inf or NaN into about one block in eight.
struct Tensor {
  std::vector<uint8_t> raw;
  std::vector<float> f;
};

Tensor RandomTensor(std::mt19937_64& rng, DType dtype, size_t n, int k, bool nonfinite) {
  Tensor t;
  t.raw.resize(n * DTypeBytes(dtype));
  t.f.resize(n);
  std::uniform_int_distribution<uint32_t> bits;
  const size_t blocks = BlockCount(n, k);
  for (size_t b = 0; b < blocks; ++b) {
    // One magnitude range per block, as gradients; occasionally zeros, denormals, extremes.
    const uint32_t top = dtype == DType::kFloat16 ? 1 + rng() % 30 : 1 + rng() % 254;
    const bool bad_block = nonfinite && rng() % 8 == 0;
    for (size_t i = b * k; i < std::min(n, (b + 1) * static_cast<size_t>(k)); ++i) {
      const uint32_t r = bits(rng);
      const uint32_t field = rng() % 16 == 0 ? 0 : static_cast<uint32_t>(rng() % (top + 1));
      float v;
      if (dtype == DType::kFloat16) {
        uint16_t h = static_cast<uint16_t>((r & 0x83ffu) | (std::min(field, 30u) << 10));
        if (bad_block && rng() % 4 == 0) h = rng() % 2 ? 0x7c00 : 0xfe01;
        std::memcpy(&t.raw[2 * i], &h, 2);
        v = e::Float16ToFloat(h);
      } else {
        uint32_t u = (r & 0x807fffffu) | (std::min(field, 254u) << 23);
        if (bad_block && rng() % 4 == 0) u = rng() % 2 ? 0xff800000u : 0x7fc00001u;
        if (dtype == DType::kBFloat16) {
          const uint16_t h = static_cast<uint16_t>(u >> 16);
          std::memcpy(&t.raw[2 * i], &h, 2);
          v = e::BFloat16ToFloat(h);
        } else {
          std::memcpy(&t.raw[4 * i], &u, 4);
          std::memcpy(&v, &u, 4);
        }
      }
      t.f[i] = v;
    }
  }
  return t;
}

using Param = std::tuple<DType, int>;  // dtype, K

class GpuQuantTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    const Result<int> count = DeviceCount();
    if (!count.ok()) GTEST_SKIP() << "no CUDA device: " << count.status().ToString();
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  void Sync() { ASSERT_OK(CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize")); }

  std::vector<size_t> Sizes(int k) const {
    const size_t kk = static_cast<size_t>(k);
    return {0, 1, kk - 1, kk, kk + 1, 3 * kk + 2, (size_t{1} << 20) + 3};
  }

  cudaStream_t stream_ = nullptr;
};

TEST_P(GpuQuantTest, BlockExpsMatchCpu) {
  const auto [dtype, k] = GetParam();
  std::mt19937_64 rng(TestSeed());
  for (size_t n : Sizes(k)) {
    const Tensor t = RandomTensor(rng, dtype, n, k, /*nonfinite=*/true);
    const size_t blocks = BlockCount(n, k);
    std::vector<uint8_t> want_e(blocks), want_bad(blocks);
    for (size_t b = 0; b < blocks; ++b) {
      const size_t cnt = std::min(static_cast<size_t>(k), n - b * k);
      bool bad = false;
      want_e[b] = ScalarKernels().block_exp(t.f.data() + b * k, cnt, &bad);
      want_bad[b] = bad ? 1 : 0;
    }
    // Aligned (vector loads when K % 4 == 0) and shifted by one element (per-element loads).
    for (size_t pad : {size_t{0}, DTypeBytes(dtype)}) {
      const DeviceBuffer x = Upload(t.raw.data(), t.raw.size(), pad);
      const DeviceBuffer exps = Filled(blocks + 1, kGuard);
      const DeviceBuffer bad = Filled(blocks + 1, kGuard);
      ASSERT_OK(BlockExps(x.as<uint8_t>() + pad, dtype, n, k, exps.as<uint8_t>(), bad.as<uint8_t>(),
                          stream_));
      Sync();
      std::vector<uint8_t> got_e = Download(exps, blocks + 1);
      std::vector<uint8_t> got_bad = Download(bad, blocks + 1);
      EXPECT_EQ(got_e.back(), kGuard) << "wrote past the last block";
      EXPECT_EQ(got_bad.back(), kGuard);
      got_e.pop_back();
      got_bad.pop_back();
      ASSERT_EQ(got_e, want_e) << DTypeName(dtype) << " k=" << k << " n=" << n << " pad=" << pad;
      ASSERT_EQ(got_bad, want_bad) << DTypeName(dtype) << " k=" << k << " n=" << n;
    }
  }
}

TEST_P(GpuQuantTest, QuantizeMatchesCpu) {
  const auto [dtype, k] = GetParam();
  std::mt19937_64 rng(TestSeed() + 1);
  const size_t kk = static_cast<size_t>(k);
  for (size_t n : Sizes(k)) {
    const Tensor t = RandomTensor(rng, dtype, n, k, /*nonfinite=*/false);
    const size_t blocks = BlockCount(n, k);
    // Exponents as after the fabric's max: the block's own or somewhat larger.
    std::vector<uint8_t> exps(blocks);
    for (size_t b = 0; b < blocks; ++b) {
      const size_t cnt = std::min(kk, n - b * kk);
      const int own = ScalarKernels().block_exp(t.f.data() + b * kk, cnt, nullptr);
      exps[b] = static_cast<uint8_t>(std::min(255, own + static_cast<int>(rng() % 3)));
    }
    const int p = host::quant::Precision(1 + static_cast<int>(rng() % 8));
    // Dense, packet slots (16-byte multiple: vector stores), and a 4-byte-multiple stride.
    for (size_t stride : {4 * kk, 4 * kk + 64, 4 * kk + 4}) {
      std::vector<uint8_t> want(blocks * stride, kGuard);
      for (size_t b = 0; b < blocks; ++b) {
        const size_t cnt = std::min(kk, n - b * kk);
        ScalarKernels().quantize(t.f.data() + b * kk, cnt, exps[b], p, want.data() + b * stride);
      }
      for (size_t pad : {size_t{0}, DTypeBytes(dtype)}) {
        const DeviceBuffer x = Upload(t.raw.data(), t.raw.size(), pad);
        const DeviceBuffer e_dev = Upload(exps.data(), exps.size());
        const DeviceBuffer out = Filled(want.size() + 64, kGuard);
        ASSERT_OK(Quantize(x.as<uint8_t>() + pad, dtype, n, k, e_dev.as<uint8_t>(), p,
                           out.as<uint8_t>(), stride == 4 * kk ? 0 : stride, stream_));
        Sync();
        const std::vector<uint8_t> got = Download(out, want.size() + 64);
        for (size_t i = want.size(); i < got.size(); ++i) {
          ASSERT_EQ(got[i], kGuard) << "wrote past the end at " << i;
        }
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_EQ(got[i], want[i])
              << DTypeName(dtype) << " k=" << k << " n=" << n << " stride=" << stride
              << " pad=" << pad << " byte " << i << " (block " << i / stride << ")";
        }
      }
    }
  }
}

TEST_P(GpuQuantTest, DequantizeMatchesCpu) {
  const auto [dtype, k] = GetParam();
  if (dtype != DType::kFloat32) GTEST_SKIP() << "dequantize writes float32 only";
  std::mt19937_64 rng(TestSeed() + 2);
  const size_t kk = static_cast<size_t>(k);
  for (size_t n : Sizes(k)) {
    const size_t blocks = BlockCount(n, k);
    const int world = 1 + static_cast<int>(rng() % 8);
    const int p = host::quant::Precision(world);
    std::vector<uint8_t> exps(blocks);
    for (uint8_t& x : exps) x = rng() % 16 == 0 ? 0 : static_cast<uint8_t>(31 + rng() % 225);
    for (size_t stride : {4 * kk, 4 * kk + 64, 4 * kk + 4}) {
      // Sums as the fabric returns them: |sum| <= 2^30, plus the int32 extremes.
      std::vector<uint8_t> in(blocks * stride, kGuard);
      for (size_t i = 0; i < n; ++i) {
        int32_t v = static_cast<int32_t>(rng() % (2u << 30)) - (1 << 30);
        if (rng() % 1000 == 0) v = rng() % 2 ? INT32_MIN : INT32_MAX;
        e::StoreBe32(in.data() + (i / kk) * stride + (i % kk) * 4, v);
      }
      for (int divisor : {1, world, 3}) {
        std::vector<float> want(n);
        for (size_t b = 0; b < blocks; ++b) {
          const size_t cnt = std::min(kk, n - b * kk);
          ScalarKernels().dequantize(in.data() + b * stride, cnt, exps[b], p, want.data() + b * kk);
        }
        if (divisor > 1) {
          for (float& v : want) v /= static_cast<float>(divisor);
        }
        for (size_t pad : {size_t{0}, size_t{4}}) {
          const DeviceBuffer in_dev = Upload(in.data(), in.size(), pad);
          const DeviceBuffer e_dev = Upload(exps.data(), exps.size());
          const DeviceBuffer out = Filled(4 * n + 4 + 64, kGuard);
          ASSERT_OK(Dequantize(in_dev.as<uint8_t>() + pad, stride == 4 * kk ? 0 : stride, n, k,
                               e_dev.as<uint8_t>(), p, divisor,
                               reinterpret_cast<float*>(out.as<uint8_t>() + pad), stream_));
          Sync();
          const std::vector<uint8_t> got = Download(out, 4 * n + 4 + 64);
          for (size_t i = 4 * n + pad; i < got.size(); ++i) {
            ASSERT_EQ(got[i], kGuard) << "wrote past the end at " << i;
          }
          ASSERT_EQ(std::memcmp(got.data() + pad, want.data(), 4 * n), 0)
              << "k=" << k << " n=" << n << " stride=" << stride << " divisor=" << divisor
              << " pad=" << pad;
        }
      }
    }
  }
}

// Quantize then dequantize on the GPU, as a worker of a world of one: the result is within the
// documented bound of the input (a check that the pieces compose, beyond bit-exactness).
TEST_P(GpuQuantTest, RoundTripWithinBound) {
  const auto [dtype, k] = GetParam();
  std::mt19937_64 rng(TestSeed() + 3);
  const size_t n = (size_t{1} << 16) + 5;
  const Tensor t = RandomTensor(rng, dtype, n, k, false);
  const size_t blocks = BlockCount(n, k);
  const DeviceBuffer x = Upload(t.raw.data(), t.raw.size());
  const DeviceBuffer exps = Filled(blocks, 0);
  const DeviceBuffer q = Filled(4 * n, 0);
  const DeviceBuffer out = Filled(4 * n, 0);
  ASSERT_OK(BlockExps(x.data(), dtype, n, k, exps.as<uint8_t>(), nullptr, stream_));
  ASSERT_OK(Quantize(x.data(), dtype, n, k, exps.as<uint8_t>(), 30, q.as<uint8_t>(), 0, stream_));
  ASSERT_OK(
      Dequantize(q.as<uint8_t>(), 0, n, k, exps.as<uint8_t>(), 30, 1, out.as<float>(), stream_));
  Sync();
  const std::vector<uint8_t> e_host = Download(exps, blocks);
  const std::vector<uint8_t> got = Download(out, 4 * n);
  for (size_t i = 0; i < n; ++i) {
    float y;
    std::memcpy(&y, got.data() + 4 * i, 4);
    const double step = std::ldexp(1.0, e::ClampedExp(e_host[i / k]) - 30);
    ASSERT_LE(std::fabs(static_cast<double>(y) - t.f[i]), step / 2 + std::fabs(t.f[i]) * 0x1p-24)
        << "i=" << i;
  }
}

INSTANTIATE_TEST_SUITE_P(All, GpuQuantTest,
                         ::testing::Combine(::testing::Values(DType::kFloat32, DType::kBFloat16,
                                                              DType::kFloat16),
                                            ::testing::Values(64, 256, 7)),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return std::string(DTypeName(std::get<0>(info.param))) + "_k" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace ina::gpu
