// Quantizing in the memory domain (ina/host/memory_domain.h, "Quantization in the domain";
// host/src/comm/staged_op.h): HostDomain's quantization calls against the CPU kernels, and the
// whole device-quantizing pipeline (block exponents, agreed exponents, quantization chunks,
// parked slots, dequantization per chunk) through HostDomain's real copy thread and the
// in-process TestFabric (the real control plane and ina::dp_ref behind UDP on 127.0.0.1). Every
// result is compared bit for bit (NaN patterns included) with the plain host-memory call on the
// same values: the CPU path is the oracle. A lazy wrapper (LazyDomain) runs each call only when a
// Wait asks for its fence, so a block sent before its quantization, or a chunk dequantized before
// its results, gives a wrong result. Seeds: INA_SEED replays a run.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "comm_util.h"
#include "expected.h"
#include "ina/host/communicator.h"
#include "ina/host/memory_domain.h"
#include "ina/host/quant.h"
#include "support/seed.h"
#include "test_fabric.h"

namespace ina::host {
namespace {

using std::chrono::microseconds;
using testing::AllCreated;
using testing::CreateAll;
using testing::ParallelFor;
using testing::TestFabric;
using testutil::RandomFloats;
using testutil::SameBits;

constexpr microseconds kLong{30'000'000};

uint64_t Seed() {
  static const uint64_t seed = ina::tests::Seed();
  return seed;
}

std::unique_ptr<MemoryDomain> Host(size_t chunk_bytes, bool quantize = true) {
  HostDomainOptions o;
  o.chunk_bytes = chunk_bytes;
  o.quantize = quantize;
  auto d = MakeHostDomain(o);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? std::move(d).value() : nullptr;
}

// Forwards to a quantizing HostDomain, but runs nothing until a Wait asks for a fence: then every
// call up to it, in order. Counts the calls of each kind; `poll_misses` makes the first polls
// (timeout 0) of each fence answer "not yet" even when it could be run, so slots park.
class LazyDomain final : public MemoryDomain {
 public:
  // poll_misses: as above (INT_MAX: a poll never succeeds); fail_quantize: that Quantize call
  // (from 1) fails when it runs, as a CUDA error seen at its event would.
  explicit LazyDomain(size_t chunk_bytes, int poll_misses = 0, int fail_quantize = 0)
      : inner_(Host(chunk_bytes)), poll_misses_(poll_misses), fail_quantize_(fail_quantize) {}

  MemoryKind kind() const override { return MemoryKind::kHost; }
  std::string name() const override { return "lazy"; }
  size_t chunk_bytes() const override { return inner_->chunk_bytes(); }
  Status CheckPointer(const void* p, size_t bytes) const override {
    return inner_->CheckPointer(p, bytes);
  }
  Result<std::unique_ptr<StagingBuffer>> AllocStaging(size_t bytes) override {
    return inner_->AllocStaging(bytes);
  }
  Status OrderAfter(void* stream) override { return inner_->OrderAfter(stream); }
  Result<Fence> CopyIn(uint8_t* staging, const void* src, size_t bytes) override {
    return Defer(copies, [=, this] { return inner_->CopyIn(staging, src, bytes); });
  }
  Result<Fence> CopyOut(void* dst, const uint8_t* staging, size_t bytes) override {
    return Defer(copies, [=, this] { return inner_->CopyOut(dst, staging, bytes); });
  }
  bool quantizes() const override { return true; }
  Result<Fence> BlockExps(const float* src, size_t n, size_t k, uint8_t* exps,
                          uint8_t* nonfinite) override {
    return Defer(block_exps, [=, this] { return inner_->BlockExps(src, n, k, exps, nonfinite); });
  }
  Result<Fence> Quantize(const float* src, size_t n, size_t k, const uint8_t* exps, int precision,
                         uint8_t* wire) override {
    const bool fail = quantizes_.load() + 1 == fail_quantize_;
    return Defer(quantizes_, [=, this]() -> Result<Fence> {
      if (fail) return Internal("lazy: injected quantization failure");
      return inner_->Quantize(src, n, k, exps, precision, wire);
    });
  }
  Result<Fence> Dequantize(float* dst, const uint8_t* wire, size_t n, size_t k, const uint8_t* exps,
                           int precision, int divisor) override {
    return Defer(dequantizes, [=, this] {
      return inner_->Dequantize(dst, wire, n, k, exps, precision, divisor);
    });
  }
  Result<bool> Wait(Fence f, microseconds timeout) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (timeout.count() == 0 && f > done_ && misses_[f] < poll_misses_) {
      ++misses_[f];
      ++total_misses_;
      missed_.notify_all();
      return false;
    }
    for (; done_ < f && done_ < calls_.size(); ++done_) {
      auto r = calls_[done_]();
      if (!r.ok()) return r.status();
      auto w = inner_->Wait(*r, kLong);
      if (!w.ok()) return w.status();
      if (!*w) return Internal("lazy: inner call did not complete");
    }
    return done_ >= f;
  }

  // Waits (up to 10 s) until `n` polls were answered "not yet": slots are parked and polled.
  bool WaitForPollMisses(uint64_t n) {
    std::unique_lock<std::mutex> lk(mu_);
    return missed_.wait_for(lk, std::chrono::seconds(10), [&] { return total_misses_ >= n; });
  }

  std::atomic<int> copies{0}, block_exps{0}, quantizes_{0}, dequantizes{0};

 private:
  Result<Fence> Defer(std::atomic<int>& counter, std::function<Result<Fence>()> call) {
    std::lock_guard<std::mutex> lk(mu_);
    counter.fetch_add(1);
    calls_.push_back(std::move(call));
    return Fence{calls_.size()};
  }

  std::unique_ptr<MemoryDomain> inner_;
  const int poll_misses_;
  const int fail_quantize_;
  std::mutex mu_;
  std::vector<std::function<Result<Fence>()>> calls_;  // guarded by mu_
  std::map<Fence, int> misses_;                        // guarded by mu_
  uint64_t total_misses_ = 0;                          // guarded by mu_
  std::condition_variable missed_;                     // a poll was answered "not yet"
  Fence done_ = 0;                                     // guarded by mu_
};

// HostDomain's quantization calls are the CPU kernels block by block, in fence order with the
// copies; a non-quantizing HostDomain and bad arguments are refused before anything is queued.
TEST(HostDomainQuant, CallsMatchTheCpuKernels) {
  const quant::Kernels& kern = quant::ScalarKernels();
  auto dom = Host(4096);
  ASSERT_NE(dom, nullptr);
  EXPECT_TRUE(dom->quantizes());
  std::mt19937_64 rng(Seed());
  for (size_t k : {1, 7, 64, 256}) {
    for (size_t n : {size_t{1}, k - 1 + (k == 1), k, 3 * k + 2, 40 * k + 5}) {
      SCOPED_TRACE("k=" + std::to_string(k) + " n=" + std::to_string(n));
      std::vector<float> x = RandomFloats(rng, n, static_cast<int>(k));
      const size_t blocks = (n + k - 1) / k;
      if (blocks > 2) x[k + 1 < n ? k + 1 : 0] = std::numeric_limits<float>::infinity();
      std::vector<uint8_t> exps(blocks), nf(blocks), agreed(blocks);
      auto fe = dom->BlockExps(x.data(), n, k, exps.data(), nf.data());
      ASSERT_TRUE(fe.ok()) << fe.status().ToString();
      ASSERT_TRUE(*dom->Wait(*fe, kLong));
      for (size_t b = 0; b < blocks; ++b) {
        bool want_nf = false;
        const size_t cnt = std::min(k, n - b * k);
        EXPECT_EQ(exps[b], kern.block_exp(x.data() + b * k, cnt, &want_nf)) << "block " << b;
        EXPECT_EQ(nf[b], want_nf ? 1 : 0) << "block " << b;
        agreed[b] = static_cast<uint8_t>(std::min(255, exps[b] + static_cast<int>(rng() % 3)));
      }
      const int precision = quant::Precision(3);
      std::vector<uint8_t> wire(4 * n, 0xAA), want_wire(4 * n, 0);
      auto fq = dom->Quantize(x.data(), n, k, agreed.data(), precision, wire.data());
      ASSERT_TRUE(fq.ok()) << fq.status().ToString();
      std::vector<float> out(n), want(n), avg(n);
      auto fd = dom->Dequantize(out.data(), wire.data(), n, k, agreed.data(), precision, 1);
      ASSERT_TRUE(fd.ok());
      auto fa = dom->Dequantize(avg.data(), wire.data(), n, k, agreed.data(), precision, 3);
      ASSERT_TRUE(fa.ok());
      EXPECT_LT(*fe, *fq);
      EXPECT_LT(*fq, *fd);
      ASSERT_TRUE(*dom->Wait(*fa, kLong));
      for (size_t b = 0; b < blocks; ++b) {
        const size_t cnt = std::min(k, n - b * k);
        if (nf[b] == 0) {
          kern.quantize(x.data() + b * k, cnt, agreed[b], precision, want_wire.data() + 4 * b * k);
        }  // a nonfinite block: zeros (the communicator sends zeros and ignores them)
        kern.dequantize(want_wire.data() + 4 * b * k, cnt, agreed[b], precision,
                        want.data() + b * k);
      }
      EXPECT_EQ(wire, want_wire);
      EXPECT_TRUE(SameBits(out, want));
      std::vector<float> want_avg(n);
      for (size_t i = 0; i < n; ++i) want_avg[i] = want[i] / 3.0f;
      EXPECT_TRUE(SameBits(avg, want_avg));
    }
  }
  std::vector<uint8_t> e(4), nf(4), w(64);
  std::vector<float> x(16, 1.0f);
  EXPECT_EQ(dom->Quantize(x.data(), 16, 0, e.data(), 28, w.data()).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(dom->Quantize(x.data(), 16, 4, e.data(), 31, w.data()).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(dom->Dequantize(x.data(), w.data(), 16, 4, e.data(), 28, 0).status().code(),
            StatusCode::kInvalidArgument);
  auto plain = Host(4096, /*quantize=*/false);
  ASSERT_NE(plain, nullptr);
  EXPECT_FALSE(plain->quantizes());
  EXPECT_EQ(plain->BlockExps(x.data(), 16, 4, e.data(), nf.data()).status().code(),
            StatusCode::kUnimplemented);
}

std::unique_ptr<TestFabric> StartFabric(double drop = 0) {
  return testing::StartFabric(Seed() ^ 0x9a4a7, drop);
}

CommConfig BaseConfig(const TestFabric& f, uint16_t world, uint16_t k, uint16_t window,
                      int lanes = 1) {
  CommConfig c = testing::FabricConfig(f, /*job=*/12, world, k, window);
  c.progress_threads = lanes;
  return c;
}

// How rank r runs the staged call.
enum class Path { kQuantizing, kLazy, kLazyParking, kCopying, kPlainHost };

struct Params {
  uint16_t world, k, window;
  int lanes;
  size_t chunk_bytes;
  double drop;
  std::vector<Path> paths;  // one per rank
};

void PrintTo(const Params& p, std::ostream* os) {
  *os << "world=" << p.world << " k=" << p.k << " window=" << p.window << " lanes=" << p.lanes
      << " chunk_bytes=" << p.chunk_bytes << " drop=" << p.drop << " paths=";
  for (Path x : p.paths) *os << static_cast<int>(x);
}

class StagedQuantTest : public ::testing::TestWithParam<Params> {};

// The plain host call, then the same values through each rank's path: bit for bit the same
// results (NaN blocks included), for float and int32, over sizes around the quantization chunk
// (window/2 blocks) and the domain's chunk.
TEST_P(StagedQuantTest, BitIdenticalToHostPath) {
  const Params prm = GetParam();
  ASSERT_EQ(prm.paths.size(), prm.world);
  auto fabric = StartFabric(prm.drop);
  ASSERT_NE(fabric, nullptr);
  auto comms = CreateAll(BaseConfig(*fabric, prm.world, prm.k, prm.window, prm.lanes));
  ASSERT_TRUE(AllCreated(comms));
  std::vector<std::unique_ptr<MemoryDomain>> doms;
  std::vector<LazyDomain*> lazy(prm.world, nullptr);
  for (int r = 0; r < prm.world; ++r) {
    switch (prm.paths[r]) {
      case Path::kQuantizing:
        doms.push_back(Host(prm.chunk_bytes));
        break;
      case Path::kCopying:
        doms.push_back(Host(prm.chunk_bytes, /*quantize=*/false));
        break;
      case Path::kLazy:
      case Path::kLazyParking: {
        auto d = std::make_unique<LazyDomain>(prm.chunk_bytes,
                                              prm.paths[r] == Path::kLazyParking ? 3 : 0);
        lazy[r] = d.get();
        doms.push_back(std::move(d));
        break;
      }
      case Path::kPlainHost:
        doms.push_back(nullptr);
        break;
    }
  }
  const size_t k = prm.k;
  const size_t qchunk = std::max<size_t>(1, prm.window / 2) * k;
  const size_t chunk = std::max<size_t>(1, prm.chunk_bytes / (4 * k)) * k;
  const std::vector<size_t> sizes = {
      7 * chunk + 3 * k + 7, 1,     k - 1 + (k == 1), k, k + 1, qchunk, qchunk + 1,
      2 * qchunk + k,        chunk, 3 * chunk + 5};
  int calls = 0;
  for (size_t n : sizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<std::vector<float>> fh(prm.world), fs(prm.world);
    std::vector<std::vector<int32_t>> ih(prm.world), is(prm.world);
    for (int r = 0; r < prm.world; ++r) {
      std::mt19937_64 rng(Seed() * 1000003 + n * 31 + r);
      fh[r] = RandomFloats(rng, n, prm.k);
      // A nonfinite element in one rank's block: the block's result is NaN everywhere.
      if (n > 3 * k && r == 1) fh[r][2 * k + 1] = std::numeric_limits<float>::infinity();
      fs[r] = fh[r];
      ih[r].resize(n);
      for (auto& x : ih[r]) x = static_cast<int32_t>(rng());
      is[r] = ih[r];
    }
    std::vector<Status> errs(prm.world * 4);
    ParallelFor(prm.world, [&](int r) {
      errs[r * 4 + 0] = comms[r]->AllReduce(std::span<float>(fh[r]));
      errs[r * 4 + 1] = doms[r] ? comms[r]->AllReduce(std::span<float>(fs[r]), *doms[r])
                                : comms[r]->AllReduce(std::span<float>(fs[r]));
      errs[r * 4 + 2] = comms[r]->AllReduce(std::span<int32_t>(ih[r]));
      errs[r * 4 + 3] = doms[r] ? comms[r]->AllReduce(std::span<int32_t>(is[r]), *doms[r])
                                : comms[r]->AllReduce(std::span<int32_t>(is[r]));
    });
    calls += 4;
    for (size_t e = 0; e < errs.size(); ++e) ASSERT_TRUE(errs[e].ok()) << errs[e].ToString();
    for (int r = 0; r < prm.world; ++r) {
      EXPECT_TRUE(SameBits(fs[r], fh[r])) << "rank " << r;
      EXPECT_TRUE(SameBits(fs[r], fs[0])) << "rank " << r << " differs from rank 0";
      EXPECT_EQ(is[r], ih[r]) << "rank " << r;
    }
    if (n > 3 * k) {
      EXPECT_TRUE(std::isnan(fs[0][2 * k])) << "the nonfinite block";
    }
  }
  for (int r = 0; r < prm.world; ++r) {
    if (lazy[r] == nullptr) continue;
    // Every float call quantized in the domain: one BlockExps per domain chunk, one Quantize and
    // one Dequantize per quantization chunk (at least one per call); int32 calls copied.
    EXPECT_GE(lazy[r]->quantizes_.load(), static_cast<int>(sizes.size())) << "rank " << r;
    EXPECT_EQ(lazy[r]->quantizes_.load(), lazy[r]->dequantizes.load()) << "rank " << r;
    EXPECT_GE(lazy[r]->block_exps.load(), static_cast<int>(sizes.size())) << "rank " << r;
    EXPECT_GE(lazy[r]->copies.load(), 2 * static_cast<int>(sizes.size())) << "rank " << r;
  }
  const CommStats st = comms[0]->stats();
  EXPECT_EQ(st.ops_completed, static_cast<uint64_t>(calls));
  EXPECT_EQ(st.ops_failed, 0u);
  if (prm.drop > 0) {
    EXPECT_GT(st.retransmissions, 0u);
  }
}

using P = Path;
INSTANTIATE_TEST_SUITE_P(
    Shapes, StagedQuantTest,
    ::testing::Values(
        Params{2, 64, 8, 1, 64 * 4 * 3, 0.0, {P::kQuantizing, P::kQuantizing}},
        Params{2, 64, 8, 1, 64 * 4 * 3, 0.0, {P::kLazy, P::kLazyParking}},
        Params{3, 64, 4, 1, 100, 0.0, {P::kLazy, P::kQuantizing, P::kLazy}},  // chunk < a block
        Params{2, 256, 32, 2, 256 * 4 * 5, 0.0, {P::kQuantizing, P::kLazyParking}},  // lanes
        Params{2, 64, 16, 1, 64 * 4 * 20, 0.05, {P::kLazyParking, P::kQuantizing}},  // loss
        Params{3, 64, 16, 2, 64 * 4 * 2, 0.05, {P::kLazy, P::kLazyParking, P::kLazy}},
        Params{2, 64, 1, 1, 64 * 4 * 3, 0.0, {P::kLazyParking, P::kLazy}},  // window 1
        // Mixed ranks: quantizing in the domain, copying to the CPU kernels, plain host memory.
        Params{3, 64, 8, 1, 64 * 4 * 3, 0.0, {P::kQuantizing, P::kCopying, P::kPlainHost}},
        Params{3, 64, 16, 2, 64 * 4 * 4, 0.05, {P::kPlainHost, P::kLazyParking, P::kCopying}}),
    [](const ::testing::TestParamInfo<Params>& i) { return "case" + std::to_string(i.index); });

// Averaging (AllReduceOptions::average), one definition on every path: for worlds 1, 2, 3 and 5
// (3 and 5: the divisor is no power of two, so the division rounds), the averaged call in host
// memory, in a quantizing domain (fused into Dequantize; lazy and parking too), in a copying
// domain and mixed across ranks gives, bit for bit, the sum call's result divided by
// float(world) (NaN blocks stay NaN), and for int32 the wrapped sum divided truncating toward zero.
TEST(StagedQuant, AverageIsTheSumOverWorldOnEveryPath) {
  auto fabric = StartFabric();
  ASSERT_NE(fabric, nullptr);
  uint16_t job = 40;
  for (const uint16_t world : {1, 2, 3, 5}) {
    SCOPED_TRACE("world=" + std::to_string(world));
    constexpr uint16_t kK = 64;
    constexpr size_t kChunk = kK * 4 * 3;
    auto comms = CreateAll(testing::FabricConfig(*fabric, job++, world, kK, 8));
    ASSERT_TRUE(AllCreated(comms));
    std::vector<std::unique_ptr<MemoryDomain>> doms;
    for (int r = 0; r < world; ++r) {
      switch ((r + world) % 4) {
        case 0:
          doms.push_back(Host(kChunk));
          break;
        case 1:
          doms.push_back(std::make_unique<LazyDomain>(kChunk, /*poll_misses=*/3));
          break;
        case 2:
          doms.push_back(Host(kChunk, /*quantize=*/false));
          break;
        default:
          doms.push_back(std::make_unique<LazyDomain>(kChunk));
          break;
      }
    }
    for (const size_t n : {size_t{1}, size_t{kK + 1}, size_t{17 * kK + 5}}) {
      SCOPED_TRACE("n=" + std::to_string(n));
      // Per rank: the sum (host), the average in host memory, in the rank's domain.
      std::vector<std::vector<float>> fsum(world), fhost(world), fdom(world);
      std::vector<std::vector<int32_t>> isum(world), ihost(world), idom(world);
      for (int r = 0; r < world; ++r) {
        std::mt19937_64 rng(Seed() * 7919 + n * 131 + world * 17 + r);
        fsum[r] = RandomFloats(rng, n, kK);
        if (n > 3 * kK && r == world - 1) fsum[r][kK + 2] = std::numeric_limits<float>::quiet_NaN();
        fhost[r] = fdom[r] = fsum[r];
        isum[r].resize(n);
        for (auto& x : isum[r]) x = static_cast<int32_t>(rng());
        ihost[r] = idom[r] = isum[r];
      }
      AllReduceOptions avg;
      avg.average = true;
      std::vector<Status> errs(world * 6);
      ParallelFor(world, [&](int r) {
        errs[r * 6 + 0] = comms[r]->AllReduce(std::span<float>(fsum[r]));
        errs[r * 6 + 1] = comms[r]->AllReduce(std::span<float>(fhost[r]), avg);
        errs[r * 6 + 2] = comms[r]->AllReduce(std::span<float>(fdom[r]), *doms[r], nullptr, avg);
        errs[r * 6 + 3] = comms[r]->AllReduce(std::span<int32_t>(isum[r]));
        errs[r * 6 + 4] = comms[r]->AllReduce(std::span<int32_t>(ihost[r]), avg);
        errs[r * 6 + 5] = comms[r]->AllReduce(std::span<int32_t>(idom[r]), *doms[r], nullptr, avg);
      });
      for (const Status& e : errs) ASSERT_TRUE(e.ok()) << e.ToString();
      std::vector<float> fwant(fsum[0]);
      for (float& x : fwant) x = x / static_cast<float>(world);
      std::vector<int32_t> iwant(isum[0]);
      for (int32_t& x : iwant) x = x / static_cast<int32_t>(world);
      for (int r = 0; r < world; ++r) {
        EXPECT_TRUE(SameBits(fsum[r], fsum[0])) << "rank " << r;
        EXPECT_TRUE(SameBits(fhost[r], fwant)) << "rank " << r << " host memory";
        EXPECT_TRUE(SameBits(fdom[r], fwant)) << "rank " << r << " domain " << doms[r]->name();
        EXPECT_EQ(ihost[r], iwant) << "rank " << r << " host memory";
        EXPECT_EQ(idom[r], iwant) << "rank " << r << " domain " << doms[r]->name();
      }
      if (n > 3 * kK) {
        EXPECT_TRUE(std::isnan(fdom[0][kK])) << "the nonfinite block";
      }
      if (world > 1) {  // the average is not the sum (some element is not 0 for these inputs)
        EXPECT_NE(ihost[0], isum[0]);
      }
    }
  }
}

// A quantization that fails (seen when its fence is polled) fails the op with its error, the
// other rank promptly with Aborted (not at the progress timeout); every call enqueued is drained.
TEST(StagedQuant, QuantizationFailureFailsTheOp) {
  auto fabric = StartFabric();
  ASSERT_NE(fabric, nullptr);
  CommConfig base = BaseConfig(*fabric, 2, 64, 8);
  base.progress_timeout_ms = 60000;  // a failure must come from the domain, not from the timeout
  auto comms = CreateAll(base);
  ASSERT_TRUE(AllCreated(comms));
  LazyDomain bad(64 * 4 * 2, 0, /*fail_quantize=*/3), good(64 * 4 * 2);
  std::vector<float> x0(64 * 40, 1.0f), x1(64 * 40, 1.0f);
  Status st[2];
  ParallelFor(2, [&](int r) {
    st[r] = r == 0 ? comms[0]->AllReduce(std::span<float>(x0), bad)
                   : comms[1]->AllReduce(std::span<float>(x1), good);
  });
  const Status& s0 = st[0];
  const Status& s1 = st[1];
  EXPECT_EQ(s0.code(), StatusCode::kInternal) << s0.ToString();
  EXPECT_NE(s0.ToString().find("injected quantization failure"), std::string::npos)
      << s0.ToString();
  const bool aborted =
      s1.code() == StatusCode::kAborted || (s1.code() == StatusCode::kFailedPrecondition &&
                                            s1.ToString().find("ABORTED") != std::string::npos);
  EXPECT_TRUE(aborted) << s1.ToString();
  EXPECT_EQ(comms[0]->stats().ops_failed, 1u);
}

// The domain never reports a quantization done (a stuck device): the slots stay parked, nothing
// is sent for them, and the progress timeout fails the op naming the parked slots; the calls the
// op enqueued are drained before the request completes.
TEST(StagedQuant, StuckQuantizationHitsTheProgressTimeout) {
  auto fabric = StartFabric();
  ASSERT_NE(fabric, nullptr);
  CommConfig base = BaseConfig(*fabric, 2, 64, 8);
  base.progress_timeout_ms = 300;
  auto comms = CreateAll(base);
  ASSERT_TRUE(AllCreated(comms));
  LazyDomain stuck0(64 * 4 * 4, std::numeric_limits<int>::max()),
      stuck1(64 * 4 * 4, std::numeric_limits<int>::max());
  std::vector<float> x0(64 * 40, 1.0f), x1(64 * 40, 1.0f);
  Status s[2];
  ParallelFor(2, [&](int r) {
    s[r] = comms[r]->AllReduce(std::span<float>(r == 0 ? x0 : x1), r == 0 ? stuck0 : stuck1);
  });
  // The first rank to time out leaves (aborting the job), so the other may see Aborted first.
  int timed_out = 0;
  for (int r = 0; r < 2; ++r) {
    if (s[r].code() == StatusCode::kDeadlineExceeded) {
      ++timed_out;
      EXPECT_NE(s[r].ToString().find("waiting for their quantization"), std::string::npos)
          << s[r].ToString();
    } else {
      EXPECT_EQ(s[r].code(), StatusCode::kAborted) << s[r].ToString();
    }
  }
  EXPECT_GE(timed_out, 1);
  EXPECT_EQ(x0[0], 1.0f);  // never dequantized: the op failed
}

// Destroying the communicator while its slots are parked: the request fails with Aborted and
// every call the op enqueued has run by the time the destructor returns.
TEST(StagedQuant, DestroyWhileParked) {
  auto fabric = StartFabric();
  ASSERT_NE(fabric, nullptr);
  auto comms = CreateAll(BaseConfig(*fabric, 2, 64, 8));
  ASSERT_TRUE(AllCreated(comms));
  LazyDomain d0(64 * 4 * 4, std::numeric_limits<int>::max()), d1(64 * 4 * 4);
  std::vector<float> x0(64 * 40, 1.0f), x1(64 * 40, 1.0f);
  auto r0 = comms[0]->AllReduceAsync(std::span<float>(x0), d0);
  auto r1 = comms[1]->AllReduceAsync(std::span<float>(x1), d1);
  ASSERT_TRUE(r0.ok() && r1.ok());
  ASSERT_TRUE(d0.WaitForPollMisses(10));  // rank 0's slots are parked, polled in vain
  comms[0].reset();
  EXPECT_EQ(r0->Wait().code(), StatusCode::kAborted);
  comms[1].reset();
  EXPECT_FALSE(r1->Wait().ok());
}

}  // namespace
}  // namespace ina::host
