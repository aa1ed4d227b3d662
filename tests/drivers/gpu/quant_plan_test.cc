// The plan of the GPU quantization kernels (ina/gpu/quant_plan.h) with their thread bodies
// (quant_map.h), run on the host for every thread of every launch as quant.cu launches them,
// while an AccessWatch sees every load and store: for every dtype, K in the spec and beyond
// (1..2048), base alignments of 0..15 elements on each side, lengths around vector and K-block
// boundaries, dense / 4-byte / 16-byte strides, the plan's grid and small grids (many
// grid-stride rounds), 32- and 64-bit indices:
//  - every element is read exactly once and its output written exactly once;
//  - nothing outside the tensor, its blocks' element slots or the exponents is touched (bytes
//    between blocks and past the last element are never written);
//  - every access is aligned to its own size (16-byte vectors to 16 bytes, and so on);
//  - and the result equals the CPU kernels' (ScalarKernels(), block by block).
// Plus the real geometry on 2^20 + 3 elements (the second grid-stride round of 4096 CTAs), the
// shape of the H200 failures of issue #22. INA_SEED=<n> replays.
#include "ina/gpu/quant_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_test_util.h"
#include "ina/gpu/quant_map.h"
#include "plan_emu.h"

namespace ina::gpu::testing {
namespace {

// A host buffer with `pad` bytes from a 64-byte boundary to data(), and kGuard slack both sides.
class Buf {
 public:
  Buf(size_t bytes, size_t pad) : store_(bytes + pad + 192, kGuard) {
    auto p = reinterpret_cast<uintptr_t>(store_.data()) + 64;
    data_ = reinterpret_cast<uint8_t*>((p + 63) / 64 * 64) + pad;
  }
  uint8_t* data() { return data_; }
  bool SlackIntact(size_t bytes) const {
    for (size_t i = 1; i <= 64; ++i) {
      if (data_[-static_cast<ptrdiff_t>(i)] != kGuard || data_[bytes + i - 1] != kGuard) {
        return false;
      }
    }
    return true;
  }

 private:
  std::vector<uint8_t> store_;
  uint8_t* data_;
};

// Counts every access of the bodies per byte of the regions it knows; an access outside all of
// them, across a region's end, misaligned for its size, or a write to a read-only region is an
// error (the first few are kept).
class Watcher : public map::AccessWatch {
 public:
  Watcher() { map::g_access_watch = this; }
  ~Watcher() override { map::g_access_watch = nullptr; }

  int Add(const char* name, const void* base, size_t bytes, bool writable) {
    regions_.push_back({name, static_cast<const uint8_t*>(base), bytes, writable,
                        std::vector<uint16_t>(bytes, 0)});
    return static_cast<int>(regions_.size()) - 1;
  }
  const std::vector<uint16_t>& Count(int r) const { return regions_[r].count; }
  const std::vector<std::string>& errors() const { return errors_; }

  void Access(const void* p, size_t bytes, bool write) override {
    const auto* a = static_cast<const uint8_t*>(p);
    if (reinterpret_cast<uintptr_t>(p) % bytes != 0) {
      Error(std::to_string(bytes) + "-byte " + (write ? "store" : "load") + " misaligned");
    }
    for (Region& r : regions_) {
      if (a >= r.base && a < r.base + r.bytes) {
        const size_t off = static_cast<size_t>(a - r.base);
        if (off + bytes > r.bytes) {
          Error(std::string("access runs past the end of ") + r.name);
        } else if (write && !r.writable) {
          Error(std::string("store into read-only ") + r.name);
        } else {
          for (size_t i = 0; i < bytes; ++i) ++r.count[off + i];
        }
        return;
      }
    }
    Error(std::string(write ? "store" : "load") + " outside every region");
  }

 private:
  struct Region {
    const char* name;
    const uint8_t* base;
    size_t bytes;
    bool writable;
    std::vector<uint16_t> count;
  };
  void Error(std::string e) {
    if (errors_.size() < 4) errors_.push_back(std::move(e));
  }
  std::vector<Region> regions_;
  std::vector<std::string> errors_;
};

// Bytes of the blocked int32 layout up to the last element's word, and whether a byte is in an
// element's word (not between blocks).
size_t WireBytes(size_t n, size_t k, size_t stride) {
  return n == 0 ? 0 : ((n - 1) / k) * stride + ((n - 1) % k + 1) * 4;
}
bool InSlot(size_t off, size_t k, size_t stride) { return off % stride < 4 * k; }

// "" when every byte of the region was touched `want(off)` times, else the first offset that was
// not.
template <typename Want>
std::string CheckCounts(const std::vector<uint16_t>& c, const char* what, Want want) {
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i] != want(i)) {
      return std::string(what) + " byte " + std::to_string(i) + " touched " + std::to_string(c[i]) +
             " times, want " + std::to_string(want(i));
    }
  }
  return "";
}

std::vector<size_t> Lengths(size_t k) {
  std::vector<size_t> v = {1, 2,     3,     4,     5,     7,         8,         9,        k - 1,
                           k, k + 1, k + 3, k + 4, k + 5, 2 * k - 1, 2 * k + 3, 3 * k + 2};
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  v.erase(std::remove(v.begin(), v.end(), size_t{0}), v.end());
  return v;
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

struct Case {
  size_t n = 0;
  size_t x_pad = 0;    // bytes: the elements' side (quantize's input, dequantize's output)
  size_t w_pad = 0;    // bytes: the int32 side
  size_t stride = 0;   // bytes per block on the int32 side
  unsigned grid = 0;   // 0: the plan's
  bool idx64 = false;  // 64-bit indices
  std::string Name(InType t, int k) const {
    return std::string(InName(t)) + " k=" + std::to_string(k) + " n=" + std::to_string(n) +
           " x_pad=" + std::to_string(x_pad) + " w_pad=" + std::to_string(w_pad) +
           " stride=" + std::to_string(stride) + " grid=" + std::to_string(grid) +
           (idx64 ? " idx64" : "");
  }
};

// One quantize run under the watch; "" or what is wrong.
std::string QuantizeCase(InType type, int k, const Case& c, const Tensor& t,
                         const std::vector<uint8_t>& exps, int p,
                         const std::vector<uint8_t>& want) {
  const size_t eb = InBytes(type), kk = static_cast<size_t>(k);
  Buf x(c.n * eb, c.x_pad);
  std::memcpy(x.data(), t.raw.data(), c.n * eb);
  const size_t wire = WireBytes(c.n, kk, c.stride);
  Buf out(wire, c.w_pad);
  Watcher w;
  const int rx = w.Add("x", x.data(), c.n * eb, false);
  const int re = w.Add("exps", exps.data(), exps.size(), false);
  const int ro = w.Add("out", out.data(), wire, true);
  const pl::Plan plan = WithType(type, [&](auto tag) {
    using T = decltype(tag);
    const T* xt = reinterpret_cast<const T*>(x.data());
    return c.idx64
               ? RunQuantize<T, uint64_t>(xt, c.n, k, exps.data(), p, out.data(), c.stride, c.grid)
               : RunQuantize<T, uint32_t>(xt, c.n, k, exps.data(), p, out.data(), c.stride, c.grid);
  });
  if (!w.errors().empty()) return w.errors()[0];
  // The path the plan promises: vectors whenever K and the input's alignment allow.
  const bool vec_ok = kk % 4 == 0 && c.x_pad % (4 * eb) == 0;
  if (plan.vec_elems != (vec_ok ? c.n / 4 * 4 : 0)) return "path choice";
  if (plan.vec_elems > 0 && plan.wide_io != (c.w_pad % 16 == 0 && c.stride % 16 == 0)) {
    return "int32 access width choice";
  }
  std::string e = CheckCounts(w.Count(rx), "x", [](size_t) { return 1; });
  if (e.empty())
    e = CheckCounts(w.Count(ro), "out", [&](size_t o) { return InSlot(o, kk, c.stride) ? 1 : 0; });
  if (e.empty()) {
    const auto& ce = w.Count(re);
    if (std::count(ce.begin(), ce.end(), 0) != 0) e = "a block's exponent never read";
  }
  if (!e.empty()) return e;
  if (!out.SlackIntact(wire) || !x.SlackIntact(c.n * eb)) return "slack around a buffer changed";
  for (size_t i = 0; i < wire; ++i) {
    if (InSlot(i, kk, c.stride) && out.data()[i] != want[i]) {
      return "value differs from the CPU kernels at out byte " + std::to_string(i) + " (block " +
             std::to_string(i / c.stride) + ")";
    }
  }
  return "";
}

// One dequantize run under the watch; "" or what is wrong.
std::string DequantizeCase(int k, const Case& c, const std::vector<uint8_t>& in,
                           const std::vector<uint8_t>& exps, int p, int divisor,
                           const std::vector<float>& want) {
  const size_t kk = static_cast<size_t>(k);
  const size_t wire = WireBytes(c.n, kk, c.stride);
  Buf win(wire, c.w_pad);
  std::memcpy(win.data(), in.data(), wire);
  Buf out(4 * c.n, c.x_pad);
  float* o = reinterpret_cast<float*>(out.data());
  Watcher w;
  const int ri = w.Add("in", win.data(), wire, false);
  const int re = w.Add("exps", exps.data(), exps.size(), false);
  const int ro = w.Add("out", out.data(), 4 * c.n, true);
  const pl::Plan plan = c.idx64 ? RunDequantize<uint64_t>(win.data(), c.stride, c.n, k, exps.data(),
                                                          p, divisor, o, c.grid)
                                : RunDequantize<uint32_t>(win.data(), c.stride, c.n, k, exps.data(),
                                                          p, divisor, o, c.grid);
  if (!w.errors().empty()) return w.errors()[0];
  const bool vec_ok = kk % 4 == 0 && c.x_pad % 16 == 0;
  if (plan.vec_elems != (vec_ok ? c.n / 4 * 4 : 0)) return "path choice";
  if (plan.vec_elems > 0 && plan.wide_io != (c.w_pad % 16 == 0 && c.stride % 16 == 0)) {
    return "int32 access width choice";
  }
  std::string e =
      CheckCounts(w.Count(ri), "in", [&](size_t o) { return InSlot(o, kk, c.stride) ? 1 : 0; });
  if (e.empty()) e = CheckCounts(w.Count(ro), "out", [](size_t) { return 1; });
  if (e.empty()) {
    const auto& ce = w.Count(re);
    if (std::count(ce.begin(), ce.end(), 0) != 0) e = "a block's exponent never read";
  }
  if (!e.empty()) return e;
  if (!out.SlackIntact(4 * c.n) || !win.SlackIntact(wire)) return "slack around a buffer changed";
  const long diff = FirstDiff(out.data(), want.data(), 4 * c.n);
  if (diff >= 0) {
    return "value differs from the CPU kernels at element " + std::to_string(diff / 4) +
           " (block " + std::to_string(diff / 4 / static_cast<long>(kk)) + ")";
  }
  return "";
}

// The plan's grid or a small one (many grid-stride rounds), mixed over the alignments so that
// both the vector alignments (a % 4 == 0) and the others get both.
unsigned SmallGrid(size_t a, unsigned small) { return (a * 5) % 3 == 0 ? 0 : small; }

using Param = std::tuple<InType, int>;  // input type, K

class GpuPlanTest : public ::testing::TestWithParam<Param> {};

// Elements' side at 0..15 elements from a 64-byte boundary, the int32 side at 0, 4, 8, 12 bytes
// (cycled against it), three strides, the plan's grid and one CTA (many rounds), 32/64-bit.
TEST_P(GpuPlanTest, QuantizeCoversEveryElementOnceInBoundsAligned) {
  const auto [type, k] = GetParam();
  std::mt19937_64 rng(TestSeed(31));
  const size_t kk = static_cast<size_t>(k), eb = InBytes(type);
  size_t runs = 0;
  for (size_t n : Lengths(kk)) {
    const Tensor t = RandomTensor(rng, type, n, k, /*nonfinite=*/false);
    const std::vector<uint8_t> exps = RaisedExps(rng, t.f, k);
    const int p = host::quant::Precision(1 + static_cast<int>(rng() % 8));
    for (size_t stride : {4 * kk, 4 * kk + 4, 4 * kk + 16}) {
      const std::vector<uint8_t> want = CpuQuantize(t.f, k, exps, p, stride);
      for (size_t a = 0; a < 16; ++a) {
        Case c;
        c.n = n;
        c.x_pad = a * eb;
        c.w_pad = 4 * ((a + stride) % 4);
        c.stride = stride;
        c.grid = SmallGrid(a, 1);
        c.idx64 = a % 5 == 0;
        const std::string e = QuantizeCase(type, k, c, t, exps, p, want);
        ASSERT_EQ(e, "") << c.Name(type, k);
        ++runs;
      }
    }
  }
  std::printf("%zu quantize cases\n", runs);
}

TEST_P(GpuPlanTest, DequantizeCoversEveryElementOnceInBoundsAligned) {
  const auto [type, k] = GetParam();
  if (type != InType::kFloat32) GTEST_SKIP() << "dequantize has one type (int32 to float32)";
  std::mt19937_64 rng(TestSeed(32));
  const size_t kk = static_cast<size_t>(k);
  size_t runs = 0;
  for (size_t n : Lengths(kk)) {
    const std::vector<uint8_t> exps = RandomDequantExps(rng, Blocks(n, k));
    const int world = 2 + static_cast<int>(rng() % 7);
    const int p = host::quant::Precision(world);
    for (size_t stride : {4 * kk, 4 * kk + 4, 4 * kk + 16}) {
      const std::vector<uint8_t> in = RandomWire(rng, n, k, stride);
      for (int divisor : {1, world}) {
        const std::vector<float> want = CpuDequantize(in, stride, n, k, exps, p, divisor);
        for (size_t a = 0; a < 16; ++a) {
          Case c;
          c.n = n;
          c.x_pad = 4 * a;
          c.w_pad = 4 * ((a + stride / 4 + static_cast<size_t>(divisor)) % 4);
          c.stride = stride;
          c.grid = SmallGrid(a, 3);
          c.idx64 = a % 5 == 1;
          const std::string e = DequantizeCase(k, c, in, exps, p, divisor, want);
          ASSERT_EQ(e, "") << c.Name(type, k) << " divisor=" << divisor;
          ++runs;
        }
      }
    }
  }
  std::printf("%zu dequantize cases\n", runs);
}

TEST_P(GpuPlanTest, BlockExpsReadEveryElementOnceWithWholeLaneGroups) {
  const auto [type, k] = GetParam();
  std::mt19937_64 rng(TestSeed(33));
  const size_t kk = static_cast<size_t>(k), eb = InBytes(type);
  for (size_t n : Lengths(kk)) {
    const Tensor t = RandomTensor(rng, type, n, k, /*nonfinite=*/true);
    std::vector<uint8_t> want_e, want_bad;
    CpuBlockExps(t.f, k, &want_e, &want_bad);
    const size_t blocks = want_e.size();
    for (size_t a = 0; a < 16; ++a) {
      Buf x(n * eb, a * eb);
      std::memcpy(x.data(), t.raw.data(), n * eb);
      std::vector<uint8_t> got_e(blocks), got_bad(blocks);
      Watcher w;
      const int rx = w.Add("x", x.data(), n * eb, false);
      w.Add("exps", got_e.data(), blocks, true);
      w.Add("nonfinite", got_bad.data(), blocks, true);
      bool vec = false;
      const std::string lanes = WithType(type, [&](auto tag) {
        using T = decltype(tag);
        return RunBlockExps(reinterpret_cast<const T*>(x.data()), n, k, got_e.data(),
                            got_bad.data(), &vec, SmallGrid(a, 1));
      });
      const std::string where = std::string(InName(type)) + " k=" + std::to_string(k) +
                                " n=" + std::to_string(n) + " pad=" + std::to_string(a) + " el";
      ASSERT_EQ(lanes, "") << where;
      ASSERT_TRUE(w.errors().empty()) << where << ": " << w.errors()[0];
      EXPECT_EQ(vec, kk % 4 == 0 && a % 4 == 0) << where << ": path choice";
      ASSERT_EQ(CheckCounts(w.Count(rx), "x", [](size_t) { return 1; }), "") << where;
      ASSERT_EQ(got_e, want_e) << where;
      ASSERT_EQ(got_bad, want_bad) << where;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, GpuPlanTest,
    ::testing::Combine(::testing::Values(InType::kFloat32, InType::kBFloat16, InType::kFloat16),
                       ::testing::Values(1, 2, 3, 4, 7, 8, 64, 256, 512, 1024, 2048)),
    [](const ::testing::TestParamInfo<Param>& info) {
      return std::string(InName(std::get<0>(info.param))) + "_k" +
             std::to_string(std::get<1>(info.param));
    });

// The H200 failures' shape (issue #22): 2^20 + 3 elements, the base one element off, the plan's
// real grid (4096 CTAs: the last block's elements are in the second grid-stride round).
TEST(GpuPlanRealGrid, LargeTensorsOffByOneElement) {
  std::mt19937_64 rng(TestSeed(34));
  const size_t n = (size_t{1} << 20) + 3;
  for (InType type : {InType::kFloat32, InType::kBFloat16, InType::kFloat16}) {
    for (int k : {64, 256, 2048}) {
      const size_t kk = static_cast<size_t>(k);
      const Tensor t = RandomTensor(rng, type, n, k, false);
      const std::vector<uint8_t> exps = RaisedExps(rng, t.f, k);
      const std::vector<uint8_t> want = CpuQuantize(t.f, k, exps, 28, 4 * kk);
      for (size_t pad : {size_t{0}, size_t{1}}) {
        Case c;
        c.n = n;
        c.x_pad = pad * InBytes(type);
        c.stride = 4 * kk;
        ASSERT_EQ(QuantizeCase(type, k, c, t, exps, 28, want), "") << c.Name(type, k);
      }
    }
  }
  for (int k : {7, 64, 256}) {
    const size_t kk = static_cast<size_t>(k);
    const std::vector<uint8_t> exps = RandomDequantExps(rng, Blocks(n, k));
    const std::vector<uint8_t> in = RandomWire(rng, n, k, 4 * kk);
    const std::vector<float> want = CpuDequantize(in, 4 * kk, n, k, exps, 28, 3);
    for (size_t pad : {size_t{0}, size_t{4}}) {
      Case c;
      c.n = n;
      c.x_pad = pad;
      c.w_pad = pad;
      c.stride = 4 * kk;
      ASSERT_EQ(DequantizeCase(k, c, in, exps, 28, 3, want), "") << c.Name(InType::kFloat32, k);
    }
  }
}

TEST(GpuPlanLaunches, GeometryAndIndexWidth) {
  alignas(64) static uint8_t buf[64];
  // Vectors, then the tail; grids capped; a 2^20 + 3 per-element launch takes two rounds.
  const pl::Plan v = pl::PlanQuantize(buf, 4, (size_t{1} << 20) + 3, 256, buf, 1024);
  const pl::Launches lv = pl::LaunchesOf(v);
  ASSERT_EQ(lv.count, 2);
  EXPECT_EQ(lv.item[0].body, pl::Body::kVecWide);
  EXPECT_EQ(lv.item[0].end, size_t{1} << 18);
  EXPECT_EQ(lv.item[0].grid, (size_t{1} << 17) / pl::kThreads);
  EXPECT_EQ(lv.item[1].body, pl::Body::kOne);
  EXPECT_EQ(lv.item[1].first, size_t{1} << 20);
  EXPECT_EQ(lv.item[1].grid, 1u);
  const pl::Plan e = pl::PlanQuantize(buf + 4, 4, (size_t{1} << 20) + 3, 256, buf, 1024);
  const pl::Launches le = pl::LaunchesOf(e);
  ASSERT_EQ(le.count, 1);
  EXPECT_EQ(le.item[0].grid, pl::kMaxGrid);
  EXPECT_GT(le.item[0].end, size_t{pl::kMaxGrid} * pl::kThreads);
  EXPECT_EQ(pl::LaunchesOf(pl::PlanQuantize(buf, 4, 0, 64, buf, 256)).count, 0);
  EXPECT_TRUE(pl::Fits32((size_t{1} << 31) - 1, 1 << 20, 64));
  EXPECT_FALSE(pl::Fits32(size_t{1} << 31, 256, 64));
  EXPECT_FALSE(pl::Fits32(1024, size_t{1} << 31, 64));
  EXPECT_EQ(pl::BlockExpGroup(2048, true), 32u);
  EXPECT_EQ(pl::BlockExpGroup(8, true), 2u);
  EXPECT_EQ(pl::BlockExpGroup(3, false), 4u);
}

}  // namespace
}  // namespace ina::gpu::testing
