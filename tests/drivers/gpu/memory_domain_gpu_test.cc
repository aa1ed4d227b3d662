// The CUDA memory domain on a GPU (label hw: skips with the reason where there is no device).
// Two communicators in threads against the in-process TestFabric (the real control plane and
// ina::dp_ref behind UDP on 127.0.0.1): every all-reduce of device memory is compared bit for bit
// with the host-memory call on the same values (the host path is checked against an independent
// computation by host_comm_test), quantizing on the GPU, on the CPU, and one rank each. Also:
// pointer checks (host memory refused, naming what it is), ordering after the caller's stream,
// staging reuse, and the domain's quantization calls against HostDomain's.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "expected.h"
#include "ina/gpu/device.h"
#include "ina/gpu/memory_domain.h"
#include "ina/host/communicator.h"
#include "ina/host/memory_domain.h"
#include "ina/host/quant.h"
#include "support/seed.h"
#include "test_fabric.h"

namespace ina::gpu {
namespace {

using host::AllReduceOptions;
using host::CommConfig;
using host::Communicator;
using host::MemoryDomain;
using host::testutil::RandomFloats;

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

// Bit for bit, NaN patterns included.
::testing::AssertionResult SameBits(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size differs";
  for (size_t j = 0; j < got.size(); ++j) {
    uint32_t a, b;
    std::memcpy(&a, &got[j], 4);
    std::memcpy(&b, &want[j], 4);
    if (a != b) {
      return ::testing::AssertionFailure()
             << "element " << j << ": got " << got[j] << " want " << want[j];
    }
  }
  return ::testing::AssertionSuccess();
}

// How each rank's CUDA domain runs float tensors.
enum class Mode {
  kQuantize,  // both ranks quantize on the GPU (the default)
  kCopy,      // both stage float32 and quantize on the CPU
  kMixed,     // rank 0 on the GPU, rank 1 on the CPU: the same packets on the wire
};

class GpuDomainHwTest : public ::testing::TestWithParam<Mode> {};

// `world` ranks of job `job` on an in-process fabric, each with a communicator and a CUDA domain
// (many chunks: 16 blocks of 256) quantizing as `mode` says. ok: every rank was made.
struct Ranks {
  std::unique_ptr<testing::TestFabric> fabric;
  std::vector<std::unique_ptr<MemoryDomain>> doms;  // before comms: outlive their staging
  std::vector<std::unique_ptr<Communicator>> comms;
  bool ok = false;
};
Ranks StartRanks(int world, uint16_t job, Mode mode) {
  Ranks j;
  auto fabric = testing::TestFabric::Start({});
  EXPECT_TRUE(fabric.ok()) << fabric.status().ToString();
  if (!fabric.ok()) return j;
  j.fabric = std::move(fabric).value();
  j.comms.resize(world);
  j.doms.resize(world);
  ParallelFor(world, [&](int r) {
    CommConfig c;
    c.switch_host = "127.0.0.1";
    c.switch_port = j.fabric->port();
    c.job_id = job;
    c.world_size = static_cast<uint16_t>(world);
    c.rank = static_cast<uint16_t>(r);
    c.k = 256;
    c.window = 64;
    auto cr = Communicator::Create(c);
    ASSERT_TRUE(cr.ok()) << cr.status().ToString();
    CudaDomainOptions o;
    o.chunk_bytes = 256 * 4 * 16;  // many chunks for the sizes the tests use
    o.quantize = mode == Mode::kQuantize || (mode == Mode::kMixed && r == 0);
    auto d = MakeCudaDomain(o);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    int pools = 0;
    ASSERT_EQ(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, 0), cudaSuccess);
    EXPECT_EQ((*d)->quantizes(), o.quantize && pools != 0);
    j.comms[r] = std::move(cr).value();
    j.doms[r] = std::move(d).value();
  });
  j.ok = true;
  for (int r = 0; r < world; ++r) j.ok = j.ok && j.comms[r] != nullptr && j.doms[r] != nullptr;
  return j;
}

// Two ranks, device tensors uploaded on the caller's stream without a wait (the all-reduce orders
// after it), float (with an Inf in one rank's block: that block's result is NaN) and int32: the
// device results are bit-identical to the host call's; host memory is refused at the call.
TEST_P(GpuDomainHwTest, DeviceAllReduceBitIdenticalToHostPath) {
  SKIP_WITHOUT_GPU();
  const Mode mode = GetParam();
  const uint64_t seed = ina::tests::Seed();
  constexpr int kWorld = 2;
  Ranks j = StartRanks(kWorld, 12, mode);
  auto& comms = j.comms;
  auto& doms = j.doms;
  ASSERT_TRUE(j.ok);
  for (size_t n : {size_t{1} << 20, size_t{1}, size_t{255}, size_t{4096 + 3}, size_t{100000}}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<std::vector<float>> host(kWorld), dev_out(kWorld);
    std::vector<std::vector<int32_t>> ihost(kWorld), idev_out(kWorld);
    std::vector<Status> errs(kWorld * 5);
    ParallelFor(kWorld, [&](int r) {
      std::mt19937_64 rng(seed * 7919 + n + r);
      host[r] = RandomFloats(rng, n, 256);
      if (n > 600 && r == 1) host[r][513] = std::numeric_limits<float>::infinity();
      ihost[r].resize(n);
      for (auto& x : ihost[r]) x = static_cast<int32_t>(rng() >> 8);
      auto buf = DeviceBuffer::Allocate(n * 4);
      ASSERT_TRUE(buf.ok()) << buf.status().ToString();
      auto ibuf = DeviceBuffer::Allocate(n * 4);
      ASSERT_TRUE(ibuf.ok()) << ibuf.status().ToString();
      cudaStream_t s = nullptr;
      ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
      // The upload is on the caller's stream, not waited for: the all-reduce must order after it.
      ASSERT_EQ(cudaMemcpyAsync(buf->data(), host[r].data(), n * 4, cudaMemcpyHostToDevice, s),
                cudaSuccess);
      errs[r * 5] = comms[r]->AllReduce(std::span<float>(buf->as<float>(), n), *doms[r], s);
      ASSERT_EQ(cudaMemcpyAsync(ibuf->data(), ihost[r].data(), n * 4, cudaMemcpyHostToDevice, s),
                cudaSuccess);
      errs[r * 5 + 1] =
          comms[r]->AllReduce(std::span<int32_t>(ibuf->as<int32_t>(), n), *doms[r], s);
      dev_out[r].resize(n);
      idev_out[r].resize(n);
      ASSERT_EQ(cudaMemcpy(dev_out[r].data(), buf->data(), n * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      ASSERT_EQ(cudaMemcpy(idev_out[r].data(), ibuf->data(), n * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      errs[r * 5 + 2] = comms[r]->AllReduce(std::span<float>(host[r]));
      errs[r * 5 + 3] = comms[r]->AllReduce(std::span<int32_t>(ihost[r]));
      // Host memory passed as device memory is refused at the call, naming what it is.
      errs[r * 5 + 4] = comms[r]->AllReduce(std::span<float>(host[r]), *doms[r]).code() ==
                                StatusCode::kInvalidArgument
                            ? Status::Ok()
                            : Internal("host memory was not refused");
      (void)cudaStreamDestroy(s);
    });
    for (const Status& e : errs) ASSERT_TRUE(e.ok()) << e.ToString();
    for (int r = 0; r < kWorld; ++r) {
      EXPECT_TRUE(SameBits(dev_out[r], host[r])) << "rank " << r;
      EXPECT_EQ(idev_out[r], ihost[r]) << "rank " << r;
    }
    if (n > 600) {
      EXPECT_TRUE(std::isnan(host[0][512])) << "the block with an Inf";
    }
  }
}

// Averaging (AllReduceOptions::average) over three ranks (the divisor no power of two): the device
// call divides in the CUDA domain's Dequantize (fused, DequantizeAvgElem) or, copying, in staging
// on the CPU; either way bit-identical to the averaged host call, which is the sum / float(3).
TEST_P(GpuDomainHwTest, AveragedDeviceAllReduceBitIdenticalToHostPath) {
  SKIP_WITHOUT_GPU();
  const Mode mode = GetParam();
  const uint64_t seed = ina::tests::Seed();
  constexpr int kWorld = 3;
  Ranks j = StartRanks(kWorld, 13, mode);
  auto& comms = j.comms;
  auto& doms = j.doms;
  ASSERT_TRUE(j.ok);
  AllReduceOptions avg;
  avg.average = true;
  for (size_t n : {size_t{1}, size_t{4096 + 3}, size_t{100000}}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<std::vector<float>> host(kWorld), dev_out(kWorld);
    std::vector<std::vector<int32_t>> ihost(kWorld), idev_out(kWorld);
    std::vector<Status> errs(kWorld * 4);
    ParallelFor(kWorld, [&](int r) {
      std::mt19937_64 rng(seed * 7919 + n + r + 17);
      host[r] = RandomFloats(rng, n, 256);
      if (n > 600 && r == 2) host[r][513] = std::numeric_limits<float>::quiet_NaN();
      ihost[r].resize(n);
      for (auto& x : ihost[r]) x = static_cast<int32_t>(rng());
      auto buf = DeviceBuffer::Allocate(n * 4);
      ASSERT_TRUE(buf.ok()) << buf.status().ToString();
      auto ibuf = DeviceBuffer::Allocate(n * 4);
      ASSERT_TRUE(ibuf.ok()) << ibuf.status().ToString();
      ASSERT_EQ(cudaMemcpy(buf->data(), host[r].data(), n * 4, cudaMemcpyHostToDevice),
                cudaSuccess);
      ASSERT_EQ(cudaMemcpy(ibuf->data(), ihost[r].data(), n * 4, cudaMemcpyHostToDevice),
                cudaSuccess);
      // A pageable cudaMemcpy may return before its DMA lands; the kernels run on other streams.
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      errs[r * 4] =
          comms[r]->AllReduce(std::span<float>(buf->as<float>(), n), *doms[r], nullptr, avg);
      errs[r * 4 + 1] =
          comms[r]->AllReduce(std::span<int32_t>(ibuf->as<int32_t>(), n), *doms[r], nullptr, avg);
      dev_out[r].resize(n);
      idev_out[r].resize(n);
      ASSERT_EQ(cudaMemcpy(dev_out[r].data(), buf->data(), n * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      ASSERT_EQ(cudaMemcpy(idev_out[r].data(), ibuf->data(), n * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      errs[r * 4 + 2] = comms[r]->AllReduce(std::span<float>(host[r]), avg);
      errs[r * 4 + 3] = comms[r]->AllReduce(std::span<int32_t>(ihost[r]), avg);
    });
    for (const Status& e : errs) ASSERT_TRUE(e.ok()) << e.ToString();
    for (int r = 0; r < kWorld; ++r) {
      EXPECT_TRUE(SameBits(dev_out[r], host[r])) << "rank " << r;
      EXPECT_EQ(idev_out[r], ihost[r]) << "rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, GpuDomainHwTest,
                         ::testing::Values(Mode::kQuantize, Mode::kCopy, Mode::kMixed),
                         [](const ::testing::TestParamInfo<Mode>& i) {
                           return std::string(i.param == Mode::kQuantize ? "gpu_quant"
                                              : i.param == Mode::kCopy   ? "cpu_quant"
                                                                         : "mixed");
                         });

// The CUDA domain's quantization calls against HostDomain's (the CPU kernels), bit for bit, with
// the agreed exponents raised above the local ones as a fabric's max does, and averaging.
TEST(GpuDomainCallsHwTest, MatchHostDomain) {
  SKIP_WITHOUT_GPU();
  auto cuda = MakeCudaDomain();
  ASSERT_TRUE(cuda.ok()) << cuda.status().ToString();
  if (!(*cuda)->quantizes()) GTEST_SKIP() << "the device has no stream-ordered memory pools";
  auto hostd = host::MakeHostDomain();
  ASSERT_TRUE(hostd.ok()) << hostd.status().ToString();
  std::mt19937_64 rng(ina::tests::Seed() + 17);
  for (size_t k : {size_t{256}, size_t{64}, size_t{7}}) {
    for (size_t n : {size_t{1}, k, 3 * k + 2, size_t{100003}}) {
      SCOPED_TRACE("k=" + std::to_string(k) + " n=" + std::to_string(n));
      const size_t blocks = (n + k - 1) / k;
      std::vector<float> x = RandomFloats(rng, n, static_cast<int>(k));
      if (blocks > 2) x[k + 1] = std::numeric_limits<float>::quiet_NaN();
      auto dx = DeviceBuffer::Allocate(n * 4);
      auto dout = DeviceBuffer::Allocate(n * 4);
      ASSERT_TRUE(dx.ok() && dout.ok());
      ASSERT_EQ(cudaMemcpy(dx->data(), x.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
      // A pageable cudaMemcpy may return before its DMA lands; the kernels run on other streams.
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      auto st = (*cuda)->AllocStaging(4 * n + 3 * blocks);
      ASSERT_TRUE(st.ok()) << st.status().ToString();
      uint8_t* wire = (*st)->data();
      uint8_t* exps = wire + 4 * n;
      uint8_t* nf = exps + blocks;
      uint8_t* agreed = nf + blocks;
      auto fe = (*cuda)->BlockExps(dx->as<float>(), n, k, exps, nf);
      ASSERT_TRUE(fe.ok()) << fe.status().ToString();
      auto we = (*cuda)->Wait(*fe, std::chrono::seconds(30));
      ASSERT_TRUE(we.ok() && *we) << we.status().ToString();
      std::vector<uint8_t> hexps(blocks), hnf(blocks);
      auto he = (*hostd)->BlockExps(x.data(), n, k, hexps.data(), hnf.data());
      ASSERT_TRUE(he.ok() && *(*hostd)->Wait(*he, std::chrono::seconds(30)));
      EXPECT_EQ(std::vector<uint8_t>(exps, exps + blocks), hexps);
      EXPECT_EQ(std::vector<uint8_t>(nf, nf + blocks), hnf);
      for (size_t b = 0; b < blocks; ++b) {
        agreed[b] = static_cast<uint8_t>(std::min(255, hexps[b] + static_cast<int>(rng() % 3)));
      }
      const int precision = host::quant::Precision(4);
      auto fq = (*cuda)->Quantize(dx->as<float>(), n, k, agreed, precision, wire);
      ASSERT_TRUE(fq.ok()) << fq.status().ToString();
      auto wq = (*cuda)->Wait(*fq, std::chrono::seconds(30));
      ASSERT_TRUE(wq.ok() && *wq) << wq.status().ToString();
      std::vector<uint8_t> hwire(4 * n);
      auto hq = (*hostd)->Quantize(x.data(), n, k, agreed, precision, hwire.data());
      ASSERT_TRUE(hq.ok() && *(*hostd)->Wait(*hq, std::chrono::seconds(30)));
      for (size_t b = 0; b < blocks; ++b) {  // nonfinite blocks: unspecified on either side
        if (hnf[b] != 0) continue;
        const size_t cnt = std::min(k, n - b * k);
        EXPECT_EQ(std::memcmp(wire + 4 * b * k, hwire.data() + 4 * b * k, 4 * cnt), 0)
            << "block " << b;
      }
      for (int divisor : {1, 3}) {
        // The same input words on both sides (the GPU's, in pinned staging).
        auto fd = (*cuda)->Dequantize(dout->as<float>(), wire, n, k, agreed, precision, divisor);
        ASSERT_TRUE(fd.ok()) << fd.status().ToString();
        auto wd = (*cuda)->Wait(*fd, std::chrono::seconds(30));
        ASSERT_TRUE(wd.ok() && *wd) << wd.status().ToString();
        std::vector<float> got(n), want(n);
        ASSERT_EQ(cudaMemcpy(got.data(), dout->data(), n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
        auto hd = (*hostd)->Dequantize(want.data(), wire, n, k, agreed, precision, divisor);
        ASSERT_TRUE(hd.ok() && *(*hostd)->Wait(*hd, std::chrono::seconds(30)));
        EXPECT_TRUE(SameBits(got, want)) << "divisor " << divisor;
      }
    }
  }
}

}  // namespace
}  // namespace ina::gpu
