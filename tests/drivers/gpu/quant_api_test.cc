// ina/gpu/quant.h and device.h without a device: bad arguments are rejected before anything is
// enqueued (so these run on any machine), CUDA errors become Status naming the call, and device
// discovery fails cleanly (no hang, no throw) where there is no driver or no device.
#include <gtest/gtest.h>

#include <cstdint>

#include "ina/gpu/crc.h"
#include "ina/gpu/device.h"
#include "ina/gpu/quant.h"

namespace ina::gpu {
namespace {

// Host pointers stand in for device ones: every call below fails its checks first.
alignas(16) float f32[64];
alignas(16) uint8_t bytes[1024];
alignas(16) float out[64];

TEST(GpuApi, BlockExpsRejectsBadArguments) {
  EXPECT_EQ(BlockExps(f32, DType::kFloat32, 8, 0, bytes, nullptr, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockExps(nullptr, DType::kFloat32, 8, 4, bytes, nullptr, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockExps(f32, DType::kFloat32, 8, 4, nullptr, nullptr, nullptr).code(),
            StatusCode::kInvalidArgument);
  const Status mis = BlockExps(bytes + 1, DType::kFloat16, 8, 4, bytes, nullptr, nullptr);
  EXPECT_EQ(mis.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mis.message().find("float16 input not aligned"), std::string::npos) << mis.ToString();
  EXPECT_EQ(BlockExps(f32, static_cast<DType>(9), 8, 4, bytes, nullptr, nullptr).code(),
            StatusCode::kInvalidArgument);
  // n == 0 enqueues nothing, so it succeeds without a device.
  EXPECT_TRUE(BlockExps(nullptr, DType::kFloat32, 0, 4, nullptr, nullptr, nullptr).ok());
}

TEST(GpuApi, QuantizeRejectsBadArguments) {
  auto q = [](const void* x, size_t n, int k, int p, uint8_t* o, size_t stride) {
    return Quantize(x, DType::kFloat32, n, k, bytes, p, o, stride, nullptr).code();
  };
  EXPECT_EQ(q(f32, 8, 0, 29, bytes, 0), StatusCode::kInvalidArgument);
  EXPECT_EQ(q(f32, 8, 4, 0, bytes, 0), StatusCode::kInvalidArgument);
  EXPECT_EQ(q(f32, 8, 4, 31, bytes, 0), StatusCode::kInvalidArgument);
  EXPECT_EQ(q(f32, 8, 4, 29, bytes, 12), StatusCode::kInvalidArgument);  // stride < 4 * k
  EXPECT_EQ(q(f32, 8, 4, 29, bytes, 18), StatusCode::kInvalidArgument);  // not a multiple of 4
  EXPECT_EQ(q(f32, 8, 4, 29, bytes + 2, 0), StatusCode::kInvalidArgument);
  EXPECT_EQ(q(nullptr, 8, 4, 29, bytes, 0), StatusCode::kInvalidArgument);
  EXPECT_EQ(q(reinterpret_cast<const uint8_t*>(f32) + 2, 8, 4, 29, bytes, 0),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Quantize(f32, DType::kFloat32, 8, 4, nullptr, 29, bytes, 0, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(Quantize(nullptr, DType::kBFloat16, 0, 4, nullptr, 29, nullptr, 0, nullptr).ok());
  const Status s = Quantize(f32, DType::kFloat32, 8, 4, bytes, 29, bytes, 8, nullptr);
  EXPECT_NE(s.message().find("gpu Quantize: block stride 8 bytes"), std::string::npos)
      << s.ToString();
}

TEST(GpuApi, DequantizeRejectsBadArguments) {
  auto d = [](const uint8_t* in, size_t stride, int k, int p, int div, float* o) {
    return Dequantize(in, stride, 8, k, bytes, p, div, o, nullptr).code();
  };
  EXPECT_EQ(d(bytes, 0, 0, 29, 1, out), StatusCode::kInvalidArgument);
  EXPECT_EQ(d(bytes, 0, 4, 31, 1, out), StatusCode::kInvalidArgument);
  EXPECT_EQ(d(bytes, 0, 4, 29, 0, out), StatusCode::kInvalidArgument);
  EXPECT_EQ(d(bytes, 0, 4, 29, -3, out), StatusCode::kInvalidArgument);
  EXPECT_EQ(d(bytes, 4, 4, 29, 1, out), StatusCode::kInvalidArgument);
  EXPECT_EQ(d(bytes + 1, 0, 4, 29, 1, out), StatusCode::kInvalidArgument);
  EXPECT_EQ(d(bytes, 0, 4, 29, 1, reinterpret_cast<float*>(bytes + 2)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(d(bytes, 0, 4, 29, 1, nullptr), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Dequantize(nullptr, 0, 0, 4, nullptr, 29, 4, nullptr, nullptr).ok());
}

TEST(GpuApi, CudaStatusNamesTheCall) {
  EXPECT_TRUE(CudaStatus(cudaSuccess, "cudaFree(p)").ok());
  const Status s = CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc(&p, 64)");
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("cuda: cudaMalloc(&p, 64): cudaErrorMemoryAllocation"),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(CudaStatus(cudaErrorNoDevice, "x").code(), StatusCode::kUnavailable);
  EXPECT_EQ(CudaStatus(cudaErrorInsufficientDriver, "x").code(), StatusCode::kUnavailable);
  EXPECT_EQ(CudaStatus(cudaErrorInvalidValue, "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaStatus(cudaErrorLaunchFailure, "x").code(), StatusCode::kInternal);
}

// On a machine without a driver or device, discovery and allocation fail with a Status (and the
// hw tests skip on that); with a device, they work.
TEST(GpuApi, DiscoveryFailsCleanlyOrWorks) {
  const Result<int> count = DeviceCount();
  if (!count.ok()) {
    EXPECT_EQ(count.status().code(), StatusCode::kUnavailable) << count.status().ToString();
    EXPECT_NE(count.status().message().find("cudaGetDeviceCount"), std::string::npos);
    const Result<DeviceBuffer> buf = DeviceBuffer::Allocate(1024);
    ASSERT_FALSE(buf.ok());
    EXPECT_NE(buf.status().message().find("cudaMalloc"), std::string::npos)
        << buf.status().ToString();
    return;
  }
  EXPECT_GE(*count, 1);
  Result<DeviceBuffer> buf = DeviceBuffer::Allocate(1024);
  ASSERT_TRUE(buf.ok()) << buf.status().ToString();
  EXPECT_NE(buf->data(), nullptr);
  EXPECT_EQ(buf->size(), 1024u);
  DeviceBuffer moved = std::move(*buf);
  EXPECT_EQ(buf->data(), nullptr);
  EXPECT_EQ(moved.size(), 1024u);
}

TEST(GpuApi, EmptyAllocationNeedsNoDevice) {
  Result<DeviceBuffer> buf = DeviceBuffer::Allocate(0);
  ASSERT_TRUE(buf.ok());
  EXPECT_EQ(buf->data(), nullptr);
}

TEST(GpuApi, BlockCrcsRejectsBadArguments) {
  auto* crcs = reinterpret_cast<uint32_t*>(bytes + 512);
  EXPECT_EQ(BlockCrcs(bytes, 8, 0, crcs, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockCrcs(nullptr, 8, 4, crcs, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockCrcs(bytes, 8, 4, nullptr, nullptr).code(), StatusCode::kInvalidArgument);
  const Status mis = BlockCrcs(bytes + 2, 8, 4, crcs, nullptr);
  EXPECT_EQ(mis.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mis.message().find("aligned to 4 bytes"), std::string::npos) << mis.ToString();
  EXPECT_TRUE(BlockCrcs(nullptr, 0, 4, nullptr, nullptr).ok());  // n == 0: nothing enqueued
}

TEST(GpuApi, DTypes) {
  EXPECT_EQ(DTypeBytes(DType::kFloat32), 4u);
  EXPECT_EQ(DTypeBytes(DType::kBFloat16), 2u);
  EXPECT_EQ(DTypeBytes(DType::kFloat16), 2u);
  EXPECT_EQ(DTypeName(DType::kBFloat16), "bfloat16");
  EXPECT_EQ(BlockCount(0, 64), 0u);
  EXPECT_EQ(BlockCount(1, 64), 1u);
  EXPECT_EQ(BlockCount(64, 64), 1u);
  EXPECT_EQ(BlockCount(65, 64), 2u);
}

}  // namespace
}  // namespace ina::gpu
