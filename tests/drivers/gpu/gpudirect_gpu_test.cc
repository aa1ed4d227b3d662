// GPUDirect RDMA's send path on a GPU, without an RDMA NIC (label hw; skips without a GPU): two
// ranks quantize device tensors in the CUDA domain straight into its NIC buffer (device memory
// exported as a dma-buf), the device computes each block's payload CRC, and every block's packet
// is the host's header and trailer around a body in device memory. GatherTransport
// (tests/host/comm/gather_transport.h) stands in for the NIC: it takes the dma-buf, reads each
// body from device memory as the NIC's DMA would (cudaMemcpy here) and sends the whole message
// over UDP to the in-process fabric, which checks every trailer. Results must be bit-identical to
// the host path's. Where the device has no dma-buf support, the ranks fall back to host staging
// with DmaBufSupport's reason, and the results must still match. What only a NIC can show (its
// DMA reading the exported memory) is not here: docs/gpu.md.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "expected.h"
#include "gather_transport.h"
#include "ina/gpu/device.h"
#include "ina/gpu/dmabuf.h"
#include "ina/gpu/memory_domain.h"
#include "ina/host/communicator.h"
#include "support/seed.h"
#include "test_fabric.h"

namespace ina::gpu {
namespace {

using host::CommConfig;
using host::MemoryDomain;
using host::testutil::RandomFloats;
using host::testutil::SameBits;

TEST(GpuDirectHw, DeviceQuantizedPayloadsFromTheNicBufferGiveTheHostPathsResults) {
  const Result<int> devices = DeviceCount();
  if (!devices.ok()) GTEST_SKIP() << "no CUDA device: " << devices.status().ToString();
  const uint64_t seed = ina::tests::Seed();
  testing::FabricOptions fo;
  fo.drop = 0.02;
  fo.seed = seed;
  auto fabric = testing::TestFabric::Start(fo);
  ASSERT_TRUE(fabric.ok()) << fabric.status().ToString();
  constexpr int kWorld = 2;
  std::vector<std::unique_ptr<MemoryDomain>> doms;  // before the communicators: they outlive them
  for (int r = 0; r < kWorld; ++r) {
    auto d = MakeCudaDomain({});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    doms.push_back(std::move(d).value());
  }
  if (!doms[0]->quantizes()) GTEST_SKIP() << "the device has no memory pools: no quantizing";
  CommConfig base = testing::FabricConfig(**fabric, 31, kWorld, 256, 64);
  base.rto_initial_us = 20000;
  testing::GatherLog log;
  testing::GatherOptions go;
  go.take_dmabuf = true;  // a NIC with dma-buf support
  go.read_body = [](uint8_t* dst, const uint8_t* body, size_t n) -> Status {
    const cudaError_t e = cudaMemcpy(dst, body, n, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
      return Internal(std::string("gather: cudaMemcpy: ") + cudaGetErrorName(e));
    return Status::Ok();
  };
  auto comms = testing::CreateGathering(base, &log, go);
  ASSERT_TRUE(testing::AllCreated(comms));
  for (size_t n : {size_t{1}, size_t{256 * 64 * 3 + 17}, size_t{1} << 20}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<std::vector<float>> host(kWorld), dev_out(kWorld);
    std::vector<Status> errs(2 * kWorld);
    testing::ParallelFor(kWorld, [&](int r) {
      std::mt19937_64 rng(seed * 7919 + n + r);
      host[r] = RandomFloats(rng, n, 256);
      if (n > 600 && r == 1) host[r][513] = std::numeric_limits<float>::infinity();
      auto buf = DeviceBuffer::Allocate(n * 4);
      ASSERT_TRUE(buf.ok()) << buf.status().ToString();
      ASSERT_EQ(cudaMemcpy(buf->data(), host[r].data(), n * 4, cudaMemcpyHostToDevice),
                cudaSuccess);
      // A pageable cudaMemcpy may return before its DMA lands; the kernels run on other streams.
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      errs[2 * r] = comms[r]->AllReduce(std::span<float>(buf->as<float>(), n), *doms[r]);
      dev_out[r].resize(n);
      ASSERT_EQ(cudaMemcpy(dev_out[r].data(), buf->data(), n * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      errs[2 * r + 1] = comms[r]->AllReduce(std::span<float>(host[r]));
    });
    for (const Status& e : errs) ASSERT_TRUE(e.ok()) << e.ToString();
    for (int r = 0; r < kWorld; ++r) EXPECT_TRUE(SameBits(dev_out[r], host[r])) << "rank " << r;
  }
  const Status dmabuf = DmaBufSupport(0);
  for (int r = 0; r < kWorld; ++r) {
    const std::string path = comms[r]->device_send_path();
    std::printf("rank %d: send path '%s', %llu packets from the device\n", r, path.c_str(),
                static_cast<unsigned long long>(comms[r]->stats().packets_from_device));
    if (dmabuf.ok()) {
      EXPECT_EQ(path, "gpudirect") << "rank " << r;
      EXPECT_GT(comms[r]->stats().packets_from_device, 0u) << "rank " << r;
    } else {
      EXPECT_EQ(path.rfind("host staging: ", 0), 0u) << path;
      EXPECT_NE(path.find(dmabuf.message()), std::string::npos)
          << path << " (DmaBufSupport: " << dmabuf.ToString() << ")";
    }
  }
  if (dmabuf.ok()) {
    EXPECT_GT(log.gathered.load(), 0u);
  }
  EXPECT_GT((*fabric)->dropped(), 0u) << "no loss was injected";
}

}  // namespace
}  // namespace ina::gpu
