// The GPU kernels' per-thread bodies (ina/gpu/quant_map.h), run by the host compiler for every
// thread of every launch of the kernels' plan (quant_plan.h, through plan_emu.h), against the CPU
// kernels: block exponents (lanes of a group combined as the warp reduction does), quantize and
// dequantize in dense and packet-strided layouts, vector and per-element paths, tails, 32- and
// 64-bit indices, K up to 2048. Coverage, bounds and alignment of every access are
// drv_gpu_plan_test's. What this cannot check without a GPU: the launches themselves and the
// warp intrinsics (drv_gpu_quant_hw_test does, on a device).
#include "ina/gpu/quant_map.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_test_util.h"
#include "plan_emu.h"

namespace ina::gpu::map {
namespace {

using namespace ::ina::gpu::testing;  // NOLINT: test helpers
using namespace ::ina::gpu::plan;     // NOLINT: the plan under test

// A buffer whose data() + pad is exactly `pad` bytes past a 64-byte boundary, filled with kGuard.
class Buf {
 public:
  Buf(size_t bytes, size_t pad) : store_(bytes + pad + 128, kGuard), pad_(pad) {}
  uint8_t* data() {
    auto p = reinterpret_cast<uintptr_t>(store_.data());
    return reinterpret_cast<uint8_t*>((p + 63) / 64 * 64) + pad_;
  }
  // Bytes after the first `bytes` that must still be kGuard (64 of them).
  bool GuardIntact(size_t bytes) {
    for (size_t i = 0; i < 64; ++i) {
      if (data()[bytes + i] != kGuard) return false;
    }
    return true;
  }

 private:
  std::vector<uint8_t> store_;
  size_t pad_;
};

template <typename T>
void EmulateBlockExps(const T* x, size_t n, int k, uint8_t* exps, uint8_t* nonfinite,
                      bool* used_vec) {
  const std::string lanes = RunBlockExps(x, n, k, exps, nonfinite, used_vec);
  EXPECT_EQ(lanes, "");
}

template <typename T, typename Index>
plan::Plan EmulateQuantize(const T* x, size_t n, int k, const uint8_t* exps, int p, uint8_t* out,
                           size_t stride) {
  return RunQuantize<T, Index>(x, n, k, exps, p, out, stride);
}

template <typename Index>
plan::Plan EmulateDequantize(const uint8_t* in, size_t stride, size_t n, int k, const uint8_t* exps,
                             int p, int divisor, float* out) {
  return RunDequantize<Index>(in, stride, n, k, exps, p, divisor, out);
}

template <typename Fn>
auto WithType(InType t, Fn fn) {
  switch (t) {
    case InType::kBFloat16:
      return fn(elem::BFloat16{});
    case InType::kFloat16:
      return fn(elem::Float16{});
    case InType::kFloat32:
      break;
  }
  return fn(0.0f);
}

using Param = std::tuple<InType, int>;  // input type, K

class GpuMapTest : public ::testing::TestWithParam<Param> {};

TEST_P(GpuMapTest, BlockExpsMatchCpu) {
  const auto [type, k] = GetParam();
  std::mt19937_64 rng(TestSeed(21));
  for (size_t n : Sizes(k)) {
    const Tensor t = RandomTensor(rng, type, n, k, /*nonfinite=*/true);
    std::vector<uint8_t> want_e, want_bad;
    CpuBlockExps(t.f, k, &want_e, &want_bad);
    for (size_t pad : {size_t{0}, InBytes(type)}) {
      Buf x(t.raw.size(), pad);
      std::copy(t.raw.begin(), t.raw.end(), x.data());
      std::vector<uint8_t> got_e(want_e.size() + 1, kGuard), got_bad(want_e.size() + 1, kGuard);
      bool vec = false;
      WithType(type, [&](auto tag) {
        using T = decltype(tag);
        EmulateBlockExps(reinterpret_cast<const T*>(x.data()), n, k, got_e.data(), got_bad.data(),
                         &vec);
        return 0;
      });
      EXPECT_EQ(vec, k % 4 == 0 && pad == 0) << "path choice";
      EXPECT_EQ(got_e.back(), kGuard);
      EXPECT_EQ(got_bad.back(), kGuard);
      got_e.pop_back();
      got_bad.pop_back();
      ASSERT_EQ(got_e, want_e) << InName(type) << " k=" << k << " n=" << n << " pad=" << pad;
      ASSERT_EQ(got_bad, want_bad) << InName(type) << " k=" << k << " n=" << n;
    }
  }
}

TEST_P(GpuMapTest, QuantizeMatchesCpu) {
  const auto [type, k] = GetParam();
  std::mt19937_64 rng(TestSeed(22));
  const size_t kk = static_cast<size_t>(k);
  for (size_t n : Sizes(k)) {
    const Tensor t = RandomTensor(rng, type, n, k, /*nonfinite=*/false);
    const std::vector<uint8_t> exps = RaisedExps(rng, t.f, k);
    const int p = host::quant::Precision(1 + static_cast<int>(rng() % 8));
    for (size_t stride : {4 * kk, 4 * kk + 64, 4 * kk + 4}) {
      const std::vector<uint8_t> want = CpuQuantize(t.f, k, exps, p, stride);
      for (size_t pad : {size_t{0}, InBytes(type)}) {
        for (bool idx64 : {false, true}) {
          Buf x(t.raw.size(), pad);
          std::copy(t.raw.begin(), t.raw.end(), x.data());
          Buf out(want.size(), 0);
          const plan::Plan plan = WithType(type, [&](auto tag) {
            using T = decltype(tag);
            const T* xt = reinterpret_cast<const T*>(x.data());
            return idx64
                       ? EmulateQuantize<T, uint64_t>(xt, n, k, exps.data(), p, out.data(), stride)
                       : EmulateQuantize<T, uint32_t>(xt, n, k, exps.data(), p, out.data(), stride);
          });
          EXPECT_EQ(plan.vec_elems, k % 4 == 0 && pad == 0 ? n / 4 * 4 : 0) << "path choice";
          if (plan.vec_elems > 0) {
            EXPECT_EQ(plan.wide_io, stride % 16 == 0);
          }
          EXPECT_TRUE(out.GuardIntact(want.size())) << "wrote past the last block";
          const long diff = FirstDiff(out.data(), want.data(), want.size());
          ASSERT_EQ(diff, -1) << InName(type) << " k=" << k << " n=" << n << " stride=" << stride
                              << " pad=" << pad << " block " << diff / static_cast<long>(stride);
        }
      }
    }
  }
}

TEST_P(GpuMapTest, DequantizeMatchesCpu) {
  const auto [type, k] = GetParam();
  if (type != InType::kFloat32) GTEST_SKIP() << "dequantize writes float32 only";
  std::mt19937_64 rng(TestSeed(23));
  const size_t kk = static_cast<size_t>(k);
  for (size_t n : Sizes(k)) {
    const std::vector<uint8_t> exps = RandomDequantExps(rng, Blocks(n, k));
    const int world = 1 + static_cast<int>(rng() % 8);
    const int p = host::quant::Precision(world);
    for (size_t stride : {4 * kk, 4 * kk + 64, 4 * kk + 4}) {
      const std::vector<uint8_t> in = RandomWire(rng, n, k, stride);
      for (int divisor : {1, world, 3}) {
        const std::vector<float> want = CpuDequantize(in, stride, n, k, exps, p, divisor);
        for (size_t pad : {size_t{0}, size_t{4}}) {
          Buf in_buf(in.size(), pad);
          std::copy(in.begin(), in.end(), in_buf.data());
          Buf out(4 * n, pad);
          float* o = reinterpret_cast<float*>(out.data());
          const plan::Plan plan = (n % 2 == 0)
                                      ? EmulateDequantize<uint32_t>(in_buf.data(), stride, n, k,
                                                                    exps.data(), p, divisor, o)
                                      : EmulateDequantize<uint64_t>(in_buf.data(), stride, n, k,
                                                                    exps.data(), p, divisor, o);
          EXPECT_EQ(plan.vec_elems, k % 4 == 0 && pad == 0 ? n / 4 * 4 : 0) << "path choice";
          EXPECT_TRUE(out.GuardIntact(4 * n));
          ASSERT_EQ(FirstDiff(out.data(), want.data(), 4 * n), -1)
              << "k=" << k << " n=" << n << " stride=" << stride << " divisor=" << divisor
              << " pad=" << pad;
        }
      }
    }
  }
}

TEST(GpuMapPlan, GroupsAndPaths) {
  EXPECT_EQ(BlockExpGroup(64, true), 16u);
  EXPECT_EQ(BlockExpGroup(256, true), 32u);
  EXPECT_EQ(BlockExpGroup(256, false), 32u);
  EXPECT_EQ(BlockExpGroup(7, false), 8u);
  EXPECT_EQ(BlockExpGroup(1, false), 1u);
  EXPECT_EQ(BlockExpGroup(4, true), 1u);
  alignas(64) static uint8_t buf[256];
  EXPECT_EQ(PlanQuantize(buf, 4, 10, 64, buf, 256).vec_elems, 8u);
  EXPECT_TRUE(PlanQuantize(buf, 4, 10, 64, buf, 256).wide_io);
  EXPECT_FALSE(PlanQuantize(buf, 4, 10, 64, buf, 260).wide_io);
  EXPECT_FALSE(PlanQuantize(buf, 4, 10, 64, buf + 4, 256).wide_io);
  EXPECT_EQ(PlanQuantize(buf + 8, 4, 10, 64, buf, 256).vec_elems, 0u);  // x not 16-aligned
  EXPECT_EQ(PlanQuantize(buf + 8, 2, 10, 64, buf, 256).vec_elems, 8u);  // 8 bytes do for halves
  EXPECT_EQ(PlanQuantize(buf, 4, 10, 6, buf, 256).vec_elems, 0u);       // K % 4 != 0
  EXPECT_EQ(PlanDequantize(buf, 256, 10, 64, reinterpret_cast<float*>(buf + 4)).vec_elems, 0u);
}

INSTANTIATE_TEST_SUITE_P(All, GpuMapTest,
                         ::testing::Combine(::testing::Values(InType::kFloat32, InType::kBFloat16,
                                                              InType::kFloat16),
                                            ::testing::Values(64, 256, 7, 4, 1, 512, 1024, 2048)),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return std::string(InName(std::get<0>(info.param))) + "_k" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace ina::gpu::map
