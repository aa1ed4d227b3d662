// The CUDA memory domain's calls complete while another kernel on the device waits for them
// (label hw: skips without a device). This is the shape of NCCL's CollNet with GPU buffers: NCCL's
// kernel spins until the plugin's all-reduce, which runs the domain's kernels, is done. Under
// lazy loading (CUDA_MODULE_LOADING=LAZY, the default since CUDA 12.2) a kernel's first launch
// loads it and may wait for the device's running work under the context's lock, so a domain that
// launched its kernels for the first time there would never return (the NCCL GPU-buffer hang of
// issue #22; docs/nccl.md, "GPU buffers"). The domain loads its kernels when it is made
// (LoadQuantKernels, LoadCrcKernels); this test fails without that.
//
// One test per process, by design: a kernel loaded by an earlier test would hide the fault.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <string>
#include <vector>

#include "ina/gpu/device.h"
#include "ina/gpu/memory_domain.h"
#include "ina/host/memory_domain.h"
#include "spin_kernel.h"

namespace ina::gpu {
namespace {

using host::MemoryDomain;
using std::chrono::seconds;

// Mapped page-locked ints the spinning kernel and the host both see.
struct Flags {
  int* flag = nullptr;
  int* started = nullptr;
  int* gave_up = nullptr;
};

TEST(GpuLazyLoadHwTest, DomainCallsCompleteWhileAnotherKernelWaitsForThem) {
  // Before the process's first CUDA call, which reads it.
  ::setenv("CUDA_MODULE_LOADING", "LAZY", 1);
  const Result<int> n = DeviceCount();
  if (!n.ok()) GTEST_SKIP() << "no CUDA device: " << n.status().ToString();

  auto dom = MakeCudaDomain({});
  ASSERT_TRUE(dom.ok()) << dom.status().ToString();
  MemoryDomain& d = **dom;
  if (!d.quantizes()) GTEST_SKIP() << d.name() << " does not quantize (no memory pools)";

  // Everything allocated before the spinner starts (allocation may synchronise on its own).
  constexpr size_t kN = 4096 + 7, kK = 256;
  const size_t blocks = (kN + kK - 1) / kK;
  float* src = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&src), kN * sizeof(float)), cudaSuccess);
  std::vector<float> host(kN);
  for (size_t i = 0; i < kN; ++i) host[i] = static_cast<float>(i % 97) - 48.0f;
  ASSERT_EQ(cudaMemcpy(src, host.data(), kN * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  // Staging: the wire, then the CRCs (4-byte aligned after it), exponents and nonfinite flags.
  auto staging = d.AllocStaging(4 * kN + 4 * blocks + 2 * blocks);
  ASSERT_TRUE(staging.ok()) << staging.status().ToString();
  uint8_t* wire = (*staging)->data();
  auto* crcs = reinterpret_cast<uint32_t*>(wire + 4 * kN);
  uint8_t* exps = wire + 4 * kN + 4 * blocks;
  uint8_t* nonfinite = exps + blocks;
  Flags f;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&f.flag), 3 * sizeof(int), cudaHostAllocMapped),
            cudaSuccess);
  f.started = f.flag + 1;
  f.gave_up = f.flag + 2;
  *f.flag = *f.started = *f.gave_up = 0;
  int *dflag = nullptr, *dstarted = nullptr, *dgave_up = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dflag), f.flag, 0), cudaSuccess);
  dstarted = dflag + 1;
  dgave_up = dflag + 2;
  cudaStream_t spin_stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&spin_stream, cudaStreamNonBlocking), cudaSuccess);
  const long long max_cycles = 100'000'000'000LL;  // about a minute at 1.5-2 GHz

  ASSERT_EQ(testing::LaunchSpin(dflag, dstarted, max_cycles, dgave_up, spin_stream), cudaSuccess);
  const auto t0 = std::chrono::steady_clock::now();
  while (*static_cast<volatile int*>(f.started) == 0 &&
         std::chrono::steady_clock::now() - t0 < seconds(10)) {
  }
  ASSERT_EQ(*static_cast<volatile int*>(f.started), 1)
      << "the spinning kernel did not start in 10 s";

  // The domain's four kernel families, each for the first time in this process, while the
  // spinner runs; on another thread, so a blocked launch cannot block the test.
  auto work = std::async(std::launch::async, [&]() -> Status {
    const auto wait = [&](Result<MemoryDomain::Fence> fence, const char* what) -> Status {
      if (!fence.ok()) return fence.status().WithContext(what);
      Result<bool> done = d.Wait(*fence, std::chrono::microseconds(seconds(10)));
      if (!done.ok()) return done.status().WithContext(what);
      return *done ? Status::Ok() : DeadlineExceeded(std::string(what) + ": not done in 10 s");
    };
    INA_RETURN_IF_ERROR(wait(d.BlockExps(src, kN, kK, exps, nonfinite), "BlockExps"));
    INA_RETURN_IF_ERROR(wait(d.Quantize(src, kN, kK, exps, 20, wire), "Quantize"));
    INA_RETURN_IF_ERROR(wait(d.PayloadCrcs(wire, kN, kK, crcs), "PayloadCrcs"));
    return wait(d.Dequantize(src, wire, kN, kK, exps, 20, 1), "Dequantize");
  });
  const bool finished = work.wait_for(seconds(20)) == std::future_status::ready;
  *static_cast<volatile int*>(f.flag) = 1;  // releases the spinner, and with it a blocked launch
  const Status st = work.get();
  ASSERT_EQ(cudaStreamSynchronize(spin_stream), cudaSuccess);
  EXPECT_TRUE(finished) << "the domain's calls did not return in 20 s while another kernel "
                           "waited for them (a kernel loaded at its first launch under lazy "
                           "loading); they returned after that kernel was released";
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(*f.gave_up, 0) << "the spinner timed out on its own: the overlap was not tested";
  (void)cudaStreamDestroy(spin_stream);
  (void)cudaFreeHost(f.flag);
  (void)cudaFree(src);
}

}  // namespace
}  // namespace ina::gpu
