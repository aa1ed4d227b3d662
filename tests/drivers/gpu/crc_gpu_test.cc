// The per-block CRC32C kernel (ina/gpu/crc.h) against proto::Crc32c of each block on random
// wire buffers: K from 1 (one lane per block) to 4096 (32 lanes, long segments), n in
// {1, K-1, K, K+1, 3K+2, 2^20+3} (a short last block, partial last warps), crcs guarded against
// stray writes; and the kernel's rate on 256 MiB (printed, not asserted). Needs a CUDA device:
// skips with the reason otherwise. INA_SEED=<n> replays.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "ina/gpu/crc.h"
#include "ina/gpu/device.h"
#include "ina/proto/crc32c.h"
#include "support/seed.h"

namespace ina::gpu {
namespace {

constexpr uint32_t kGuardCrc = 0xA5A5A5A5u;

class GpuCrcTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    const Result<int> count = DeviceCount();
    if (!count.ok()) GTEST_SKIP() << "no CUDA device: " << count.status().ToString();
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

TEST_P(GpuCrcTest, BlockCrcsMatchCpu) {
  const int k = GetParam();
  std::mt19937_64 rng(tests::Seed(20261206 + static_cast<uint64_t>(k), "gpu crc"));
  const auto kk = static_cast<size_t>(k);
  for (size_t n : {size_t{1}, kk - 1, kk, kk + 1, 3 * kk + 2, (size_t{1} << 20) + 3}) {
    if (n == 0) continue;
    std::vector<uint8_t> wire(4 * n);
    for (uint8_t& b : wire) b = static_cast<uint8_t>(rng());
    const size_t blocks = (n + kk - 1) / kk;
    Result<DeviceBuffer> dw = DeviceBuffer::Allocate(wire.size());
    Result<DeviceBuffer> dc = DeviceBuffer::Allocate(4 * (blocks + 1));
    ASSERT_TRUE(dw.ok() && dc.ok());
    ASSERT_EQ(cudaMemcpy(dw->data(), wire.data(), wire.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
    std::vector<uint32_t> got(blocks + 1, kGuardCrc);
    ASSERT_EQ(cudaMemcpy(dc->data(), got.data(), 4 * got.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
    // A pageable cudaMemcpy may return before its DMA lands; the kernels run on other streams.
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const Status s = BlockCrcs(dw->as<uint8_t>(), n, k, dc->as<uint32_t>(), stream_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), dc->data(), 4 * got.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (size_t b = 0; b < blocks; ++b) {
      const size_t count = std::min(kk, n - b * kk);
      ASSERT_EQ(got[b], proto::Crc32c(0, wire.data() + 4 * kk * b, 4 * count))
          << "k " << k << " n " << n << " block " << b;
    }
    EXPECT_EQ(got[blocks], kGuardCrc) << "stray write after the last block";
  }
}

INSTANTIATE_TEST_SUITE_P(Ks, GpuCrcTest, ::testing::Values(1, 3, 7, 32, 64, 127, 256, 1024, 4096));

// Rate at the default K (256) over 256 MiB; printed for docs/gpu.md, never asserted.
TEST_F(GpuCrcTest, Rate) {
  constexpr int k = 256;
  constexpr size_t n = size_t{64} << 20;
  Result<DeviceBuffer> dw = DeviceBuffer::Allocate(4 * n);
  Result<DeviceBuffer> dc = DeviceBuffer::Allocate(4 * (n / k));
  ASSERT_TRUE(dw.ok() && dc.ok());
  ASSERT_EQ(cudaMemset(dw->data(), 0x5A, 4 * n), cudaSuccess);
  cudaEvent_t a, b;
  ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  ASSERT_TRUE(BlockCrcs(dw->as<uint8_t>(), n, k, dc->as<uint32_t>(), stream_).ok());  // warm-up
  constexpr int kReps = 10;
  ASSERT_EQ(cudaEventRecord(a, stream_), cudaSuccess);
  for (int i = 0; i < kReps; ++i) {
    ASSERT_TRUE(BlockCrcs(dw->as<uint8_t>(), n, k, dc->as<uint32_t>(), stream_).ok());
  }
  ASSERT_EQ(cudaEventRecord(b, stream_), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(b), cudaSuccess);
  float ms = 0;
  ASSERT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
  std::printf("gpu BlockCrcs: k %d, %zu MiB: %.3f ms per call, %.1f GB/s\n", k, 4 * n >> 20,
              ms / kReps, 4.0 * n * kReps / (ms * 1e6));
  (void)cudaEventDestroy(a);
  (void)cudaEventDestroy(b);
}

}  // namespace
}  // namespace ina::gpu
