// The CUDA domain's GPUDirect side (label hw: skips with the reason where there is no device, or
// where the device cannot export dma-bufs): AllocNicBuffer's memory and dma-buf fd, Quantize
// into a NicBuffer against Quantize into staging, PayloadCrcs over staging and over a NicBuffer
// against proto::Crc32c of the same bytes and against HostDomain (the reference), Dequantize from
// a NicBuffer, and the range checks. INA_SEED=<n> replays.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ina/gpu/device.h"
#include "ina/gpu/dmabuf.h"
#include "ina/gpu/memory_domain.h"
#include "ina/host/memory_domain.h"
#include "ina/host/quant.h"
#include "ina/proto/crc32c.h"
#include "support/seed.h"

namespace ina::gpu {
namespace {

using host::MemoryDomain;
using host::NicBuffer;
using std::chrono::seconds;

#define SKIP_WITHOUT_GPU()                                                    \
  do {                                                                        \
    const Result<int> n = DeviceCount();                                      \
    if (!n.ok()) GTEST_SKIP() << "no CUDA device: " << n.status().ToString(); \
  } while (0)

// Finite floats, one magnitude per block (as gradients), some zero blocks.
std::vector<float> Gradients(std::mt19937_64& rng, size_t n, size_t k) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (size_t b = 0; b * k < n; ++b) {
    const int s = static_cast<int>(rng() % 41) - 20;
    const bool zero = rng() % 16 == 0;
    for (size_t j = b * k; j < std::min(n, (b + 1) * k); ++j) {
      v[j] = zero ? 0.0f : std::ldexp(normal(rng), s);
    }
  }
  return v;
}

std::vector<uint32_t> CpuCrcs(const uint8_t* wire, size_t n, size_t k) {
  std::vector<uint32_t> c((n + k - 1) / k);
  for (size_t b = 0; b < c.size(); ++b) {
    c[b] = proto::Crc32c(0, wire + 4 * k * b, 4 * std::min(k, n - b * k));
  }
  return c;
}

void WaitOk(MemoryDomain& d, const Result<MemoryDomain::Fence>& f) {
  ASSERT_TRUE(f.ok()) << d.name() << ": " << f.status().ToString();
  const Result<bool> w = d.Wait(*f, seconds(30));
  ASSERT_TRUE(w.ok()) << d.name() << ": " << w.status().ToString();
  ASSERT_TRUE(*w) << d.name() << ": fence " << *f << " not complete after 30 s";
}

// A CUDA domain and, where the device exports dma-bufs, a NicBuffer of `bytes`; skips otherwise
// (the reason is the Status AllocNicBuffer returned, which must be DmaBufSupport's).
class GpuNicBufferHwTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    auto d = MakeCudaDomain();
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    cuda_ = std::move(*d);
    auto h = host::MakeHostDomain();
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    host_ = std::move(*h);
  }

  // Skips the test (with the reason) when the device has no dma-buf support.
  std::unique_ptr<NicBuffer> NicOrSkip(size_t bytes) {
    const Status support = DmaBufSupport(0);
    auto b = cuda_->AllocNicBuffer(bytes);
    if (!support.ok()) {
      EXPECT_FALSE(b.ok()) << "AllocNicBuffer succeeded although " << support.ToString();
      if (!b.ok()) {
        EXPECT_NE(b.status().message().find(support.message()), std::string::npos)
            << b.status().ToString() << " does not say " << support.ToString();
      }
      std::printf("GPUDirect RDMA off: %s\n", b.status().ToString().c_str());
      return nullptr;
    }
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    return b.ok() ? std::move(*b) : nullptr;
  }

  std::unique_ptr<MemoryDomain> cuda_;
  std::unique_ptr<MemoryDomain> host_;
};

#define NIC_OR_SKIP(var, bytes) \
  auto var = NicOrSkip(bytes);  \
  if (HasFailure()) return;     \
  if (var == nullptr) GTEST_SKIP() << "no dma-buf on this device: " << DmaBufSupport(0).ToString()

TEST_F(GpuNicBufferHwTest, AllocExportsDeviceMemoryAsDmaBuf) {
  NIC_OR_SKIP(nic, 3 << 20);
  EXPECT_GE(nic->size(), size_t{3} << 20);
  EXPECT_EQ(nic->size() % (size_t{2} << 20), 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(nic->data()) % static_cast<uintptr_t>(getpagesize()), 0u);
  EXPECT_EQ(nic->dmabuf_offset(), 0u);
  ASSERT_GE(nic->dmabuf_fd(), 0);
  struct stat st {};
  EXPECT_EQ(fstat(nic->dmabuf_fd(), &st), 0) << std::strerror(errno);
  char link[256] = {};
  const std::string fdpath = "/proc/self/fd/" + std::to_string(nic->dmabuf_fd());
  const ssize_t len = readlink(fdpath.c_str(), link, sizeof(link) - 1);
  std::printf("dma-buf fd %d: %s, %zu bytes at %p\n", nic->dmabuf_fd(), len > 0 ? link : "?",
              nic->size(), static_cast<void*>(nic->data()));
  EXPECT_NE(std::string(link).find("dmabuf"), std::string::npos) << link;
  // Device memory of this domain, usable as such.
  EXPECT_TRUE(cuda_->CheckPointer(nic->data(), nic->size()).ok());
  EXPECT_EQ(cudaMemset(nic->data(), 0x3C, nic->size()), cudaSuccess);
  uint8_t last = 0;
  EXPECT_EQ(cudaMemcpy(&last, nic->data() + nic->size() - 1, 1, cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(last, 0x3C);
  // Two buffers at once, freed in either order.
  NIC_OR_SKIP(second, 1);
  EXPECT_EQ(second->size(), size_t{2} << 20);
  EXPECT_NE(second->dmabuf_fd(), nic->dmabuf_fd());
  nic.reset();
  second.reset();
}

// Quantize into a NicBuffer writes the bytes Quantize into staging writes (and HostDomain);
// PayloadCrcs over either equals the CPU's CRC of those bytes and HostDomain's; Dequantize from
// the NicBuffer equals Dequantize from staging.
TEST_F(GpuNicBufferHwTest, QuantizeAndCrcsInNicBufferMatchStagingAndHostDomain) {
  if (!cuda_->quantizes()) GTEST_SKIP() << "the device has no stream-ordered memory pools";
  NIC_OR_SKIP(nic, 8 << 20);
  std::mt19937_64 rng(tests::Seed(20261207, "nic quantize"));
  const int precision = host::quant::Precision(4);
  for (size_t k : {size_t{256}, size_t{64}, size_t{7}}) {
    for (size_t n : {size_t{1}, k, 3 * k + 2, size_t{100003}}) {
      SCOPED_TRACE("k=" + std::to_string(k) + " n=" + std::to_string(n));
      const size_t blocks = (n + k - 1) / k;
      const std::vector<float> x = Gradients(rng, n, k);
      auto dx = DeviceBuffer::Allocate(4 * n);
      auto dout = DeviceBuffer::Allocate(4 * n);
      ASSERT_TRUE(dx.ok() && dout.ok());
      ASSERT_EQ(cudaMemcpy(dx->data(), x.data(), 4 * n, cudaMemcpyHostToDevice), cudaSuccess);
      // A pageable cudaMemcpy may return before its DMA lands; the kernels run on other streams.
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint8_t> exps(blocks), nf(blocks);
      WaitOk(*host_, host_->BlockExps(x.data(), n, k, exps.data(), nf.data()));
      auto st = cuda_->AllocStaging(4 * n + blocks + 8 * blocks);
      ASSERT_TRUE(st.ok()) << st.status().ToString();
      uint8_t* wire = (*st)->data();
      auto* crcs_staged = reinterpret_cast<uint32_t*>(wire + 4 * n);
      auto* crcs_nic = crcs_staged + blocks;
      uint8_t* agreed = reinterpret_cast<uint8_t*>(crcs_nic + blocks);
      for (size_t b = 0; b < blocks; ++b) {
        agreed[b] = static_cast<uint8_t>(std::min(255, exps[b] + static_cast<int>(rng() % 3)));
      }
      // Not at the buffer's start: the communicator quantizes chunk after chunk into it.
      uint8_t* nwire = nic->data() + 4 * k * (rng() % 4);
      ASSERT_LE(nwire + 4 * n, nic->data() + nic->size());
      WaitOk(*cuda_, cuda_->Quantize(dx->as<float>(), n, k, agreed, precision, wire));
      WaitOk(*cuda_, cuda_->Quantize(dx->as<float>(), n, k, agreed, precision, nwire));
      std::vector<uint8_t> from_nic(4 * n);
      ASSERT_EQ(cudaMemcpy(from_nic.data(), nwire, 4 * n, cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(std::memcmp(from_nic.data(), wire, 4 * n), 0);
      std::vector<uint8_t> hwire(4 * n);
      WaitOk(*host_, host_->Quantize(x.data(), n, k, agreed, precision, hwire.data()));
      EXPECT_EQ(std::memcmp(hwire.data(), wire, 4 * n), 0);

      WaitOk(*cuda_, cuda_->PayloadCrcs(wire, n, k, crcs_staged));
      WaitOk(*cuda_, cuda_->PayloadCrcs(nwire, n, k, crcs_nic));
      std::vector<uint32_t> hcrcs(blocks);
      WaitOk(*host_, host_->PayloadCrcs(hwire.data(), n, k, hcrcs.data()));
      const std::vector<uint32_t> want = CpuCrcs(wire, n, k);
      EXPECT_EQ(std::vector<uint32_t>(crcs_staged, crcs_staged + blocks), want);
      EXPECT_EQ(std::vector<uint32_t>(crcs_nic, crcs_nic + blocks), want);
      EXPECT_EQ(hcrcs, want);

      WaitOk(*cuda_, cuda_->Dequantize(dout->as<float>(), nwire, n, k, agreed, precision, 3));
      std::vector<float> got(n), ref(n);
      ASSERT_EQ(cudaMemcpy(got.data(), dout->data(), 4 * n, cudaMemcpyDeviceToHost), cudaSuccess);
      WaitOk(*host_, host_->Dequantize(ref.data(), wire, n, k, agreed, precision, 3));
      EXPECT_EQ(std::memcmp(got.data(), ref.data(), 4 * n), 0);
    }
  }
}

// A range that starts in a NicBuffer and runs past its end is an error, not a silent copy.
TEST_F(GpuNicBufferHwTest, RangesPastTheBufferAreRefused) {
  NIC_OR_SKIP(nic, 1);
  auto st = cuda_->AllocStaging(64);
  ASSERT_TRUE(st.ok());
  auto* crcs = reinterpret_cast<uint32_t*>((*st)->data());
  const Result<MemoryDomain::Fence> f =
      cuda_->PayloadCrcs(nic->data() + nic->size() - 4, 2, 1, crcs);
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument) << f.status().ToString();
  WaitOk(*cuda_, cuda_->PayloadCrcs(nic->data() + nic->size() - 8, 2, 1, crcs));
}

// PayloadCrcs over staging needs no dma-buf: random words, K from 1 to 1024, against the CPU's
// CRC and HostDomain's.
TEST_F(GpuNicBufferHwTest, PayloadCrcsOverStagingMatchHostDomain) {
  std::mt19937_64 rng(tests::Seed(20261208, "staged crcs"));
  for (size_t k : {size_t{1}, size_t{7}, size_t{64}, size_t{256}, size_t{1024}}) {
    for (size_t n : {size_t{1}, k - 1, k, k + 1, 5 * k + 3, size_t{262147}}) {
      if (n == 0) continue;
      SCOPED_TRACE("k=" + std::to_string(k) + " n=" + std::to_string(n));
      const size_t blocks = (n + k - 1) / k;
      auto st = cuda_->AllocStaging(4 * n + 4 * blocks);
      ASSERT_TRUE(st.ok()) << st.status().ToString();
      uint8_t* wire = (*st)->data();
      for (size_t i = 0; i < 4 * n; ++i) wire[i] = static_cast<uint8_t>(rng());
      auto* crcs = reinterpret_cast<uint32_t*>(wire + 4 * n);
      WaitOk(*cuda_, cuda_->PayloadCrcs(wire, n, k, crcs));
      std::vector<uint32_t> hcrcs(blocks);
      WaitOk(*host_, host_->PayloadCrcs(wire, n, k, hcrcs.data()));
      const std::vector<uint32_t> want = CpuCrcs(wire, n, k);
      EXPECT_EQ(std::vector<uint32_t>(crcs, crcs + blocks), want);
      EXPECT_EQ(hcrcs, want);
    }
  }
}

}  // namespace
}  // namespace ina::gpu
