// Every SIMD payload kernel this CPU can run against the scalar twin, and the scalar twin against
// the wire accessors, on random data of every length 0..256 and unaligned pointers.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <vector>

#include "../ref/test_util.h"
#include "add.h"
#include "ina/proto/wire.h"

namespace ina::dp::fast {
namespace {

constexpr size_t kGuard = 64;  // bytes checked untouched after the n elements

TEST(AddKernels, ListEndsWithScalar) {
  const AddVariantList list = AddVariants();
  ASSERT_GE(list.size, 1u);
  EXPECT_EQ(list.items[list.size - 1], &kScalarKernels);
  for (size_t i = 0; i < list.size; ++i) std::printf("kernel available: %s\n", list.items[i]->name);
}

TEST(AddKernels, ScalarMatchesWireAccessors) {
  const uint64_t seed = testing::TestSeed();
  std::mt19937_64 rng(seed);
  for (size_t n = 0; n <= proto::kMaxK; ++n) {
    std::vector<uint8_t> src(4 * n + 3);
    for (auto& b : src) b = static_cast<uint8_t>(rng());
    const uint8_t* s = src.data() + 3;  // odd alignment
    std::vector<uint32_t> acc(n), copy(n);
    for (auto& a : acc) a = static_cast<uint32_t>(rng());
    std::vector<uint32_t> want_add(n), want_copy(n);
    for (size_t i = 0; i < n; ++i) {
      want_copy[i] = proto::Load32(s + 4 * i);
      want_add[i] = acc[i] + want_copy[i];
    }
    kScalarKernels.swap_copy(copy.data(), s, n);
    kScalarKernels.swap_add(acc.data(), s, n);
    ASSERT_EQ(copy, want_copy) << "n=" << n;
    ASSERT_EQ(acc, want_add) << "n=" << n;
  }
}

class SimdKernelTest : public ::testing::TestWithParam<const AddKernels*> {};

TEST_P(SimdKernelTest, MatchesScalarTwinOnEveryLength) {
  const AddKernels& k = *GetParam();
  const uint64_t seed = testing::TestSeed(k.name);
  std::mt19937_64 rng(seed);
  for (size_t n = 0; n <= proto::kMaxK; ++n) {
    for (size_t misalign : {0, 1, 2, 3, 22}) {
      const size_t bytes = 4 * n;
      std::vector<uint8_t> src(bytes + misalign + kGuard);
      for (auto& b : src) b = static_cast<uint8_t>(rng());
      const uint8_t* s = src.data() + misalign;
      // swap_copy into an unaligned byte buffer with a guard zone.
      std::vector<uint8_t> dst_a(bytes + misalign + kGuard, 0xA5), dst_b = dst_a;
      k.swap_copy(dst_a.data() + misalign, s, n);
      kScalarKernels.swap_copy(dst_b.data() + misalign, s, n);
      ASSERT_EQ(dst_a, dst_b) << k.name << " swap_copy n=" << n << " misalign=" << misalign;
      // swap_add into an accumulator with a guard zone (wrapping adds included).
      std::vector<uint32_t> acc_a(n + kGuard / 4);
      for (auto& a : acc_a) a = static_cast<uint32_t>(rng());
      std::vector<uint32_t> acc_b = acc_a;
      k.swap_add(acc_a.data(), s, n);
      kScalarKernels.swap_add(acc_b.data(), s, n);
      ASSERT_EQ(acc_a, acc_b) << k.name << " swap_add n=" << n << " misalign=" << misalign;
    }
  }
}

std::vector<const AddKernels*> SimdKernels() {
  std::vector<const AddKernels*> v;
  const AddVariantList list = AddVariants();
  for (size_t i = 0; i < list.size; ++i) {
    if (list.items[i] != &kScalarKernels) v.push_back(list.items[i]);
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cpu, SimdKernelTest, ::testing::ValuesIn(SimdKernels()),
                         [](const auto& info) { return std::string(info.param->name); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SimdKernelTest);  // a CPU without AVX2

}  // namespace
}  // namespace ina::dp::fast
