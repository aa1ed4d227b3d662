// The CUDA memory domain on a GPU (label hw: skips with the reason where there is no device).
// Two communicators in threads against the in-process TestFabric (the real control plane and
// ina::dp_ref behind UDP on 127.0.0.1): every all-reduce of device memory is compared bit for bit
// with the host-memory call on the same values (the host path is checked against an independent
// computation by host_comm_test). Also: pointer checks (host memory refused, naming what it is),
// ordering after the caller's stream, and staging reuse.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "expected.h"
#include "ina/gpu/device.h"
#include "ina/gpu/memory_domain.h"
#include "ina/host/communicator.h"
#include "support/seed.h"
#include "test_fabric.h"

namespace ina::gpu {
namespace {

using host::CommConfig;
using host::Communicator;
using host::MemoryDomain;
using host::testutil::RandomFloats;
using host::testutil::SameFloats;

#define SKIP_WITHOUT_GPU()                                                    \
  do {                                                                        \
    const Result<int> n = DeviceCount();                                      \
    if (!n.ok()) GTEST_SKIP() << "no CUDA device: " << n.status().ToString(); \
  } while (0)

void ParallelFor(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i) ts.emplace_back(fn, i);
  for (auto& t : ts) t.join();
}

TEST(GpuDomainHwTest, DeviceAllReduceBitIdenticalToHostPath) {
  SKIP_WITHOUT_GPU();
  const uint64_t seed = ina::tests::Seed();
  auto fabric = testing::TestFabric::Start({});
  ASSERT_TRUE(fabric.ok()) << fabric.status().ToString();
  constexpr int kWorld = 2;
  std::vector<std::unique_ptr<Communicator>> comms(kWorld);
  std::vector<std::unique_ptr<MemoryDomain>> doms(kWorld);
  ParallelFor(kWorld, [&](int r) {
    CommConfig c;
    c.switch_host = "127.0.0.1";
    c.switch_port = (*fabric)->port();
    c.job_id = 12;
    c.world_size = kWorld;
    c.rank = static_cast<uint16_t>(r);
    c.k = 256;
    c.window = 64;
    auto cr = Communicator::Create(c);
    ASSERT_TRUE(cr.ok()) << cr.status().ToString();
    comms[r] = std::move(cr).value();
    CudaDomainOptions o;
    o.chunk_bytes = 256 * 4 * 16;  // many chunks for the sizes below
    auto d = MakeCudaDomain(o);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    doms[r] = std::move(d).value();
  });
  for (int r = 0; r < kWorld; ++r) ASSERT_NE(comms[r], nullptr);
  for (size_t n : {size_t{1} << 20, size_t{1}, size_t{255}, size_t{4096 + 3}, size_t{100000}}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<std::vector<float>> host(kWorld), dev_out(kWorld);
    std::vector<Status> errs(kWorld * 3);
    ParallelFor(kWorld, [&](int r) {
      std::mt19937_64 rng(seed * 7919 + n + r);
      host[r] = RandomFloats(rng, n, 256);
      auto buf = DeviceBuffer::Allocate(n * 4);
      ASSERT_TRUE(buf.ok()) << buf.status().ToString();
      cudaStream_t s = nullptr;
      ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
      // The upload is on the caller's stream, not waited for: the all-reduce must order after it.
      ASSERT_EQ(cudaMemcpyAsync(buf->data(), host[r].data(), n * 4, cudaMemcpyHostToDevice, s),
                cudaSuccess);
      errs[r * 3] = comms[r]->AllReduce(std::span<float>(buf->as<float>(), n), *doms[r], s);
      dev_out[r].resize(n);
      ASSERT_EQ(cudaMemcpy(dev_out[r].data(), buf->data(), n * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      errs[r * 3 + 1] = comms[r]->AllReduce(std::span<float>(host[r]));
      // Host memory passed as device memory is refused at the call, naming what it is.
      errs[r * 3 + 2] = comms[r]->AllReduce(std::span<float>(host[r]), *doms[r]).code() ==
                                StatusCode::kInvalidArgument
                            ? Status::Ok()
                            : Internal("host memory was not refused");
      (void)cudaStreamDestroy(s);
    });
    for (const Status& e : errs) ASSERT_TRUE(e.ok()) << e.ToString();
    for (int r = 0; r < kWorld; ++r) {
      EXPECT_TRUE(SameFloats(dev_out[r], host[r])) << "rank " << r;
    }
  }
}

}  // namespace
}  // namespace ina::gpu
