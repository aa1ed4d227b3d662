// The CUDA kernels (ina/gpu/quant.h) against the CPU kernels (ScalarKernels(), block by block) on
// random tensors: every dtype, K in {64, 256, 7, 512, 1024, 2048}, n in {0, 1, K-1, K, K+1,
// large}, dense and packet-strided layouts, aligned (vector) and misaligned (per-element) paths,
// every base alignment of 0..15 elements, with and without averaging. Needs a CUDA device: skips
// with the reason otherwise. INA_SEED=<n> replays.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_test_util.h"
#include "ina/gpu/device.h"
#include "ina/gpu/quant.h"
#include "ina/gpu/quant_elem.h"
#include "ina/host/quant.h"

namespace ina::gpu {

// Test names and messages print the dtype by name.
void PrintTo(DType dtype, std::ostream* os) { *os << DTypeName(dtype); }

namespace {

using namespace ::ina::gpu::testing;  // NOLINT: test helpers

#define ASSERT_OK(expr)                                       \
  do {                                                        \
    const ::ina::Status st_ = (expr);                         \
    ASSERT_TRUE(st_.ok()) << #expr << ": " << st_.ToString(); \
  } while (0)

// Every copy and fill goes on the kernels' stream and is waited for. A plain cudaMemcpy from
// pageable memory may return before its DMA has landed ("API synchronization behavior" in the
// CUDA runtime docs), and it runs on the legacy stream, which does not order the kernels of a
// cudaStreamNonBlocking stream after it: a fill that lands late overwrites what a kernel wrote.

// A device copy of host bytes (plus `pad` bytes in front, to misalign on purpose).
DeviceBuffer Upload(const void* src, size_t bytes, cudaStream_t s, size_t pad = 0) {
  Result<DeviceBuffer> b = DeviceBuffer::Allocate(bytes + pad + 16);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  if (!b.ok()) return DeviceBuffer();
  if (bytes > 0) {
    EXPECT_EQ(cudaMemcpyAsync(b->as<uint8_t>() + pad, src, bytes, cudaMemcpyHostToDevice, s),
              cudaSuccess);
  }
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  return std::move(*b);
}

std::vector<uint8_t> Download(const DeviceBuffer& b, size_t bytes, cudaStream_t s, size_t pad = 0) {
  std::vector<uint8_t> v(bytes);
  if (bytes > 0) {
    EXPECT_EQ(cudaMemcpyAsync(v.data(), b.as<uint8_t>() + pad, bytes, cudaMemcpyDeviceToHost, s),
              cudaSuccess);
  }
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  return v;
}

DeviceBuffer Filled(size_t bytes, uint8_t value, cudaStream_t s) {
  Result<DeviceBuffer> b = DeviceBuffer::Allocate(bytes + 16);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  if (!b.ok()) return DeviceBuffer();
  EXPECT_EQ(cudaMemsetAsync(b->data(), value, bytes + 16, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  return std::move(*b);
}

// Where got and want first differ, with the bytes and whether got holds the guard fill from there
// to the end of that block (a write lost or overwritten) or other values (a wrong write).
std::string DiffReport(const uint8_t* got, const uint8_t* want, size_t bytes, size_t block_bytes) {
  const long d = FirstDiff(got, want, bytes);
  if (d < 0) return "";
  const auto i = static_cast<size_t>(d);
  const size_t end = std::min(bytes, (i / block_bytes + 1) * block_bytes);
  bool guard = true;
  for (size_t j = i; j < end; ++j) guard = guard && got[j] == kGuard;
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "first difference at byte %zu (block %zu): got 0x%02x, want 0x%02x; %s", i,
                i / block_bytes, got[i], want[i],
                guard ? "got is the guard fill to the block's end" : "got is not the guard fill");
  return buf;
}

InType In(DType d) {
  return d == DType::kFloat32 ? InType::kFloat32
                              : (d == DType::kBFloat16 ? InType::kBFloat16 : InType::kFloat16);
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

  cudaStream_t stream_ = nullptr;
};

TEST_P(GpuQuantTest, BlockExpsMatchCpu) {
  const auto [dtype, k] = GetParam();
  std::mt19937_64 rng(TestSeed(11));
  for (size_t n : Sizes(k)) {
    const Tensor t = RandomTensor(rng, In(dtype), n, k, /*nonfinite=*/true);
    std::vector<uint8_t> want_e, want_bad;
    CpuBlockExps(t.f, k, &want_e, &want_bad);
    const size_t blocks = want_e.size();
    // Aligned (vector loads when K % 4 == 0) and shifted by one element (per-element loads).
    for (size_t pad : {size_t{0}, DTypeBytes(dtype)}) {
      const DeviceBuffer x = Upload(t.raw.data(), t.raw.size(), stream_, pad);
      const DeviceBuffer exps = Filled(blocks + 1, kGuard, stream_);
      const DeviceBuffer bad = Filled(blocks + 1, kGuard, stream_);
      ASSERT_OK(BlockExps(x.as<uint8_t>() + pad, dtype, n, k, exps.as<uint8_t>(), bad.as<uint8_t>(),
                          stream_));
      Sync();
      std::vector<uint8_t> got_e = Download(exps, blocks + 1, stream_);
      std::vector<uint8_t> got_bad = Download(bad, blocks + 1, stream_);
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
  std::mt19937_64 rng(TestSeed(12));
  const size_t kk = static_cast<size_t>(k);
  for (size_t n : Sizes(k)) {
    const Tensor t = RandomTensor(rng, In(dtype), n, k, /*nonfinite=*/false);
    const std::vector<uint8_t> exps = RaisedExps(rng, t.f, k);
    const int p = host::quant::Precision(1 + static_cast<int>(rng() % 8));
    const DeviceBuffer e_dev = Upload(exps.data(), exps.size(), stream_);
    // Dense, packet slots (16-byte multiple: vector stores), and a 4-byte-multiple stride.
    for (size_t stride : {4 * kk, 4 * kk + 64, 4 * kk + 4}) {
      const std::vector<uint8_t> want = CpuQuantize(t.f, k, exps, p, stride);
      for (size_t pad : {size_t{0}, DTypeBytes(dtype)}) {
        const DeviceBuffer x = Upload(t.raw.data(), t.raw.size(), stream_, pad);
        const DeviceBuffer out = Filled(want.size() + 64, kGuard, stream_);
        ASSERT_OK(Quantize(x.as<uint8_t>() + pad, dtype, n, k, e_dev.as<uint8_t>(), p,
                           out.as<uint8_t>(), stride == 4 * kk ? 0 : stride, stream_));
        Sync();
        const std::vector<uint8_t> got = Download(out, want.size() + 64, stream_);
        for (size_t i = want.size(); i < got.size(); ++i) {
          ASSERT_EQ(got[i], kGuard) << "wrote past the end at " << i;
        }
        ASSERT_EQ(DiffReport(got.data(), want.data(), want.size(), stride), "")
            << DTypeName(dtype) << " k=" << k << " n=" << n << " stride=" << stride
            << " pad=" << pad;
      }
    }
  }
}

TEST_P(GpuQuantTest, DequantizeMatchesCpu) {
  const auto [dtype, k] = GetParam();
  if (dtype != DType::kFloat32) GTEST_SKIP() << "dequantize writes float32 only";
  std::mt19937_64 rng(TestSeed(13));
  const size_t kk = static_cast<size_t>(k);
  for (size_t n : Sizes(k)) {
    const std::vector<uint8_t> exps = RandomDequantExps(rng, Blocks(n, k));
    const DeviceBuffer e_dev = Upload(exps.data(), exps.size(), stream_);
    const int world = 1 + static_cast<int>(rng() % 8);
    const int p = host::quant::Precision(world);
    for (size_t stride : {4 * kk, 4 * kk + 64, 4 * kk + 4}) {
      const std::vector<uint8_t> in = RandomWire(rng, n, k, stride);
      for (int divisor : {1, world, 3}) {
        const std::vector<float> want = CpuDequantize(in, stride, n, k, exps, p, divisor);
        for (size_t pad : {size_t{0}, size_t{4}}) {
          const DeviceBuffer in_dev = Upload(in.data(), in.size(), stream_, pad);
          const DeviceBuffer out = Filled(4 * n + pad + 64, kGuard, stream_);
          ASSERT_OK(Dequantize(in_dev.as<uint8_t>() + pad, stride == 4 * kk ? 0 : stride, n, k,
                               e_dev.as<uint8_t>(), p, divisor,
                               reinterpret_cast<float*>(out.as<uint8_t>() + pad), stream_));
          Sync();
          const std::vector<uint8_t> got = Download(out, 4 * n + pad + 64, stream_);
          for (size_t i = 4 * n + pad; i < got.size(); ++i) {
            ASSERT_EQ(got[i], kGuard) << "wrote past the end at " << i;
          }
          ASSERT_EQ(DiffReport(got.data() + pad, reinterpret_cast<const uint8_t*>(want.data()),
                               4 * n, 4 * kk),
                    "")
              << "k=" << k << " n=" << n << " stride=" << stride << " divisor=" << divisor
              << " pad=" << pad;
        }
      }
    }
  }
}

// Every base alignment (0..15 elements on the elements' side, 0/4/8/12 bytes on the int32
// side), lengths around vector and K-block boundaries and past one grid-stride round, dense,
// 4-byte and 16-byte strides: quantize and dequantize (plain and averaging) against the CPU,
// nothing written outside the output. The same cases run on the host in drv_gpu_plan_test.
TEST_P(GpuQuantTest, EveryAlignmentMatchesCpu) {
  const auto [dtype, k] = GetParam();
  std::mt19937_64 rng(TestSeed(15));
  const size_t kk = static_cast<size_t>(k), eb = DTypeBytes(dtype);
  for (size_t n : {size_t{1}, kk + 3, 3 * kk + 2, (size_t{1} << 16) + 5}) {
    const Tensor t = RandomTensor(rng, In(dtype), n, k, /*nonfinite=*/false);
    const std::vector<uint8_t> exps = RaisedExps(rng, t.f, k);
    const DeviceBuffer e_dev = Upload(exps.data(), exps.size(), stream_);
    const int p = host::quant::Precision(1 + static_cast<int>(rng() % 8));
    for (size_t stride : {4 * kk, 4 * kk + 4, 4 * kk + 16}) {
      const std::vector<uint8_t> want = CpuQuantize(t.f, k, exps, p, stride);
      const std::vector<uint8_t> wire = RandomWire(rng, n, k, stride);
      const std::vector<float> want_f = CpuDequantize(wire, stride, n, k, exps, p, 3);
      for (size_t a = 0; a < 16; ++a) {
        const size_t x_pad = a * eb, w_pad = 4 * (a % 4);
        const std::string where = std::string(DTypeName(dtype)) + " k=" + std::to_string(k) +
                                  " n=" + std::to_string(n) + " stride=" + std::to_string(stride) +
                                  " x_pad=" + std::to_string(x_pad) +
                                  " w_pad=" + std::to_string(w_pad);
        const DeviceBuffer x = Upload(t.raw.data(), t.raw.size(), stream_, x_pad);
        const DeviceBuffer out = Filled(w_pad + want.size() + 64, kGuard, stream_);
        ASSERT_OK(Quantize(x.as<uint8_t>() + x_pad, dtype, n, k, e_dev.as<uint8_t>(), p,
                           out.as<uint8_t>() + w_pad, stride, stream_));
        Sync();
        const std::vector<uint8_t> got = Download(out, w_pad + want.size() + 64, stream_);
        for (size_t i = 0; i < got.size(); ++i) {
          if (i < w_pad || i >= w_pad + want.size()) {
            ASSERT_EQ(got[i], kGuard) << where << ": wrote outside the output at " << i;
          }
        }
        ASSERT_EQ(DiffReport(got.data() + w_pad, want.data(), want.size(), stride), "")
            << "quantize " << where;
        if (dtype != DType::kFloat32) continue;  // dequantize has one output type
        // Dequantize: the float output at x_pad, the int32 input at w_pad, averaging by 3.
        const DeviceBuffer in_dev = Upload(wire.data(), wire.size(), stream_, w_pad);
        const DeviceBuffer fout = Filled(x_pad + 4 * n + 64, kGuard, stream_);
        ASSERT_OK(Dequantize(in_dev.as<uint8_t>() + w_pad, stride, n, k, e_dev.as<uint8_t>(), p, 3,
                             reinterpret_cast<float*>(fout.as<uint8_t>() + x_pad), stream_));
        Sync();
        const std::vector<uint8_t> fgot = Download(fout, x_pad + 4 * n + 64, stream_);
        for (size_t i = 0; i < fgot.size(); ++i) {
          if (i < x_pad || i >= x_pad + 4 * n) {
            ASSERT_EQ(fgot[i], kGuard) << where << ": dequantize wrote outside at " << i;
          }
        }
        ASSERT_EQ(DiffReport(fgot.data() + x_pad, reinterpret_cast<const uint8_t*>(want_f.data()),
                             4 * n, 4 * kk),
                  "")
            << "dequantize " << where;
      }
    }
  }
}

// Quantize then dequantize on the GPU, as a worker of a world of one: the result is within the
// documented bound of the input (the pieces compose, beyond bit-exactness).
TEST_P(GpuQuantTest, RoundTripWithinBound) {
  const auto [dtype, k] = GetParam();
  std::mt19937_64 rng(TestSeed(14));
  const size_t n = (size_t{1} << 16) + 5;
  const Tensor t = RandomTensor(rng, In(dtype), n, k, false);
  const size_t blocks = Blocks(n, k);
  const DeviceBuffer x = Upload(t.raw.data(), t.raw.size(), stream_);
  const DeviceBuffer exps = Filled(blocks, 0, stream_);
  const DeviceBuffer q = Filled(4 * n, 0, stream_);
  const DeviceBuffer out = Filled(4 * n, 0, stream_);
  ASSERT_OK(BlockExps(x.data(), dtype, n, k, exps.as<uint8_t>(), nullptr, stream_));
  ASSERT_OK(Quantize(x.data(), dtype, n, k, exps.as<uint8_t>(), 30, q.as<uint8_t>(), 0, stream_));
  ASSERT_OK(
      Dequantize(q.as<uint8_t>(), 0, n, k, exps.as<uint8_t>(), 30, 1, out.as<float>(), stream_));
  Sync();
  const std::vector<uint8_t> e_host = Download(exps, blocks, stream_);
  const std::vector<uint8_t> got = Download(out, 4 * n, stream_);
  for (size_t i = 0; i < n; ++i) {
    float y;
    std::memcpy(&y, got.data() + 4 * i, 4);
    const double step = std::ldexp(1.0, elem::ClampedExp(e_host[i / k]) - 30);
    ASSERT_LE(std::fabs(static_cast<double>(y) - t.f[i]), step / 2 + std::fabs(t.f[i]) * 0x1p-24)
        << "i=" << i;
  }
}

INSTANTIATE_TEST_SUITE_P(All, GpuQuantTest,
                         ::testing::Combine(::testing::Values(DType::kFloat32, DType::kBFloat16,
                                                              DType::kFloat16),
                                            ::testing::Values(64, 256, 7, 512, 1024, 2048)),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return std::string(DTypeName(std::get<0>(info.param))) + "_k" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace ina::gpu
