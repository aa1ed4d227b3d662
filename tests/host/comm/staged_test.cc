// The staged all-reduce (ina/host/memory_domain.h, host/src/comm/staged_op.h) over host memory:
// HostDomain's real copy thread, communicators in threads against the in-process TestFabric
// (the real control plane and ina::dp_ref behind UDP on 127.0.0.1). Every staged result is
// compared bit for bit with the plain host-memory call on the same values, made on the same
// communicators just before. A wrapper domain (CountingDomain) counts and checks the copies, and
// injects copy failures and a slow copy engine; it forwards every copy to a real HostDomain.
// Seeds: INA_SEED replays a run.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "comm_util.h"
#include "expected.h"
#include "ina/host/communicator.h"
#include "ina/host/memory_domain.h"
#include "support/seed.h"
#include "test_fabric.h"

namespace ina::host {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using testing::AllCreated;
using testing::CreateAll;
using testing::ParallelFor;
using testing::TestFabric;
using testutil::RandomFloats;
using testutil::SameFloats;

uint64_t Seed() {
  static const uint64_t seed = ina::tests::Seed();
  return seed;
}

// Forwards to a HostDomain; records each copy; can fail the copy with fence >= fail_from (its
// Wait returns the error, as a CUDA domain reports a failed asynchronous copy), hold fences back
// (a slow copy engine) and reject pointers. Lazy: copies are not forwarded but run only when a
// Wait asks for their fence (in order), so a read of staging that did not wait for its chunk, or
// a copy back enqueued before the chunk's results, gives a wrong result.
class CountingDomain final : public MemoryDomain {
 public:
  struct CopyRec {
    bool in;
    size_t offset;  // bytes from the start of the user tensor
    size_t bytes;
  };

  // quantize: quantizes() and the quantization calls forwarded to the HostDomain (not lazy).
  explicit CountingDomain(size_t chunk_bytes, bool lazy = false, bool quantize = false)
      : lazy_(lazy), quantize_(quantize) {
    HostDomainOptions o;
    o.chunk_bytes = chunk_bytes;
    auto d = MakeHostDomain(o);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    inner_ = std::move(d).value();
  }

  MemoryKind kind() const override { return MemoryKind::kHost; }
  std::string name() const override { return "counting"; }
  size_t chunk_bytes() const override { return inner_->chunk_bytes(); }
  Status CheckPointer(const void* p, size_t bytes) const override {
    if (p == reject_) return InvalidArgument("counting: not this domain's memory");
    return inner_->CheckPointer(p, bytes);
  }
  // Counts allocations, and frees (the buffer's destruction) in frees().
  Result<std::unique_ptr<StagingBuffer>> AllocStaging(size_t bytes) override {
    allocs_.fetch_add(1);
    auto b = inner_->AllocStaging(bytes);
    if (!b.ok()) return b.status();
    return std::unique_ptr<StagingBuffer>(new CountedStaging(std::move(b).value(), &frees_));
  }
  bool quantizes() const override { return quantize_; }
  Result<Fence> BlockExps(const float* src, size_t n, size_t k, uint8_t* exps,
                          uint8_t* nonfinite) override {
    return inner_->BlockExps(src, n, k, exps, nonfinite);
  }
  Result<Fence> Quantize(const float* src, size_t n, size_t k, const uint8_t* exps, int precision,
                         uint8_t* wire) override {
    return inner_->Quantize(src, n, k, exps, precision, wire);
  }
  Result<Fence> Dequantize(float* dst, const uint8_t* wire, size_t n, size_t k, const uint8_t* exps,
                           int precision, int divisor) override {
    return inner_->Dequantize(dst, wire, n, k, exps, precision, divisor);
  }
  Status OrderAfter(void* stream) override { return inner_->OrderAfter(stream); }
  Result<Fence> CopyIn(uint8_t* staging, const void* src, size_t bytes) override {
    if (lazy_) return Record(true, src, bytes, Defer(staging, src, bytes));
    return Record(true, src, bytes, inner_->CopyIn(staging, src, bytes));
  }
  Result<Fence> CopyOut(void* dst, const uint8_t* staging, size_t bytes) override {
    if (lazy_) return Record(false, dst, bytes, Defer(dst, staging, bytes));
    return Record(false, dst, bytes, inner_->CopyOut(dst, staging, bytes));
  }
  Result<bool> Wait(Fence f, microseconds timeout) override {
    if (f >= fail_from_.load()) return Internal("counting: injected copy failure");
    if (held_.load()) {  // a copy engine that is not done: wait for it, at most 1 ms here
      std::unique_lock<std::mutex> lk(hold_mu_);
      ++held_waits_;
      hold_cv_.notify_all();
      hold_cv_.wait_for(lk, std::min(timeout, microseconds(1000)), [&] { return !held_.load(); });
      if (held_.load()) return false;
    }
    if (lazy_) {
      std::lock_guard<std::mutex> lk(lazy_mu_);
      for (; lazy_done_ < f && lazy_done_ < deferred_.size(); ++lazy_done_) {
        const Deferred& d = deferred_[lazy_done_];
        std::memcpy(d.dst, d.src, d.bytes);
      }
      return lazy_done_ >= f;
    }
    return inner_->Wait(f, timeout);
  }

  void SetUser(const void* base) {
    std::lock_guard<std::mutex> lk(mu_);
    user_ = static_cast<const uint8_t*>(base);
    copies_.clear();
  }
  std::vector<CopyRec> copies() {
    std::lock_guard<std::mutex> lk(mu_);
    return copies_;
  }
  int allocs() const { return allocs_.load(); }
  int frees() const { return frees_.load(); }
  void FailFrom(Fence f) { fail_from_.store(f); }
  void Hold(bool h) {
    {
      std::lock_guard<std::mutex> lk(hold_mu_);
      held_.store(h);
    }
    hold_cv_.notify_all();
  }
  // Waits (up to 10 s) until Wait was called `n` times in all on a held copy.
  bool WaitForHeldWaits(uint64_t n) {
    std::unique_lock<std::mutex> lk(hold_mu_);
    return hold_cv_.wait_for(lk, std::chrono::seconds(10), [&] { return held_waits_ >= n; });
  }
  uint64_t held_waits() {
    std::lock_guard<std::mutex> lk(hold_mu_);
    return held_waits_;
  }
  void Reject(const void* p) { reject_ = p; }
  Fence last_fence() const { return last_.load(); }
  // Every copy enqueued so far has completed in the inner domain.
  bool Drained() {
    if (lazy_) {
      std::lock_guard<std::mutex> lk(lazy_mu_);
      return lazy_done_ >= last_.load();
    }
    auto r = inner_->Wait(last_.load(), microseconds(0));
    return r.ok() && *r;
  }

 private:
  class CountedStaging final : public StagingBuffer {
   public:
    CountedStaging(std::unique_ptr<StagingBuffer> inner, std::atomic<int>* frees)
        : inner_(std::move(inner)), frees_(frees) {}
    ~CountedStaging() override { frees_->fetch_add(1); }
    uint8_t* data() const override { return inner_->data(); }
    size_t size() const override { return inner_->size(); }

   private:
    std::unique_ptr<StagingBuffer> inner_;
    std::atomic<int>* frees_;
  };

  struct Deferred {
    void* dst;
    const void* src;
    size_t bytes;
  };

  Result<Fence> Defer(void* dst, const void* src, size_t bytes) {
    std::lock_guard<std::mutex> lk(lazy_mu_);
    deferred_.push_back({dst, src, bytes});
    return Fence{deferred_.size()};
  }

  Result<Fence> Record(bool in, const void* user_side, size_t bytes, Result<Fence> f) {
    if (f.ok()) {
      std::lock_guard<std::mutex> lk(mu_);
      copies_.push_back({in,
                         static_cast<size_t>(reinterpret_cast<uintptr_t>(user_side) -
                                             reinterpret_cast<uintptr_t>(user_)),
                         bytes});
      last_.store(std::max(last_.load(), *f));
    }
    return f;
  }

  const bool lazy_;
  const bool quantize_;
  std::unique_ptr<MemoryDomain> inner_;
  std::mutex lazy_mu_;
  std::vector<Deferred> deferred_;  // guarded by lazy_mu_
  Fence lazy_done_ = 0;             // guarded by lazy_mu_: copies run so far
  std::mutex mu_;
  const uint8_t* user_ = nullptr;  // guarded by mu_
  std::vector<CopyRec> copies_;    // guarded by mu_
  std::atomic<int> allocs_{0};
  std::atomic<int> frees_{0};
  std::atomic<Fence> fail_from_{UINT64_MAX};
  std::atomic<bool> held_{false};
  std::mutex hold_mu_;
  std::condition_variable hold_cv_;  // Hold, and each Wait on a held copy
  uint64_t held_waits_ = 0;          // guarded by hold_mu_
  std::atomic<Fence> last_{0};
  const void* reject_ = nullptr;
};

std::unique_ptr<TestFabric> StartFabric(double drop = 0) {
  return testing::StartFabric(Seed() ^ 0x57a6ed, drop);
}

CommConfig BaseConfig(const TestFabric& f, uint16_t world, uint16_t k, uint16_t window,
                      int lanes = 1) {
  CommConfig c = testing::FabricConfig(f, /*job=*/11, world, k, window);
  c.progress_threads = lanes;
  return c;
}

TEST(HostDomain, CopiesCompleteInFenceOrder) {
  auto d = MakeHostDomain();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  MemoryDomain& dom = **d;
  EXPECT_EQ(dom.kind(), MemoryKind::kHost);
  auto st = dom.AllocStaging(4096);
  ASSERT_TRUE(st.ok());
  ASSERT_GE((*st)->size(), 4096u);
  std::vector<uint8_t> src(4096), back(4096, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
  std::vector<MemoryDomain::Fence> fences;
  for (size_t off = 0; off < src.size(); off += 1024) {
    auto f = dom.CopyIn((*st)->data() + off, src.data() + off, 1024);
    ASSERT_TRUE(f.ok());
    fences.push_back(*f);
  }
  for (size_t i = 1; i < fences.size(); ++i) EXPECT_GT(fences[i], fences[i - 1]);
  auto out = dom.CopyOut(back.data(), (*st)->data(), back.size());
  ASSERT_TRUE(out.ok());
  auto w = dom.Wait(*out, microseconds(10'000'000));
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(*w);
  for (auto f : fences) {  // in order: all earlier fences are complete too
    auto p = dom.Wait(f, microseconds(0));
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE(*p);
  }
  EXPECT_EQ(back, src);
  auto never = dom.Wait(*out + 1, microseconds(0));  // nothing enqueued for it
  ASSERT_TRUE(never.ok());
  EXPECT_FALSE(*never);
  int stream_dummy = 0;
  EXPECT_EQ(dom.OrderAfter(&stream_dummy).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(dom.OrderAfter(nullptr).ok());
  HostDomainOptions bad;
  bad.chunk_bytes = 2;
  EXPECT_EQ(MakeHostDomain(bad).status().code(), StatusCode::kInvalidArgument);
}

struct Params {
  uint16_t world, k, window;
  int lanes;
  size_t chunk_bytes;
  double drop;
  bool lazy = false;  // CountingDomain's lazy copies
};

void PrintTo(const Params& p, std::ostream* os) {
  *os << "world=" << p.world << " k=" << p.k << " window=" << p.window << " lanes=" << p.lanes
      << " chunk_bytes=" << p.chunk_bytes << " drop=" << p.drop << " lazy=" << p.lazy;
}

class StagedTest : public ::testing::TestWithParam<Params> {};

// Host call, then the same values staged, on every rank: bit for bit the same results, the
// expected copies (one in and one out per chunk, each covering its chunk exactly), and one
// staging allocation for calls that fit.
TEST_P(StagedTest, BitIdenticalToHostPathWithChunkCopies) {
  const Params prm = GetParam();
  auto fabric = StartFabric(prm.drop);
  ASSERT_NE(fabric, nullptr);
  // The domains first: they outlive the communicators, whose staging they made (and count).
  std::vector<std::unique_ptr<CountingDomain>> doms;
  for (int r = 0; r < prm.world; ++r) {
    doms.push_back(std::make_unique<CountingDomain>(prm.chunk_bytes, prm.lazy));
  }
  auto comms = CreateAll(BaseConfig(*fabric, prm.world, prm.k, prm.window, prm.lanes));
  ASSERT_TRUE(AllCreated(comms));
  const size_t k = prm.k;
  const size_t blocks_per_chunk = std::max<size_t>(1, prm.chunk_bytes / (4 * k));
  const size_t chunk = blocks_per_chunk * k;
  // Largest first: later calls reuse the staging.
  const std::vector<size_t> sizes = {
      5 * chunk + 3 * k + 7, 1, k - 1, k, k + 1, chunk, chunk + 1, 3 * chunk};
  for (size_t n : sizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<std::vector<float>> fh(prm.world), fs(prm.world);
    std::vector<std::vector<int32_t>> ih(prm.world), is(prm.world);
    for (int r = 0; r < prm.world; ++r) {
      std::mt19937_64 rng(Seed() * 1000003 + n * 31 + r);
      fh[r] = RandomFloats(rng, n, prm.k);
      fs[r] = fh[r];
      ih[r].resize(n);
      for (auto& x : ih[r]) x = static_cast<int32_t>(rng());
      is[r] = ih[r];
    }
    std::vector<Status> errs(prm.world * 4);
    std::vector<std::vector<CountingDomain::CopyRec>> fcopies(prm.world), icopies(prm.world);
    ParallelFor(prm.world, [&](int r) {
      errs[r * 4 + 0] = comms[r]->AllReduce(std::span<float>(fh[r]));
      doms[r]->SetUser(fs[r].data());
      errs[r * 4 + 1] = comms[r]->AllReduce(std::span<float>(fs[r]), *doms[r]);
      fcopies[r] = doms[r]->copies();
      errs[r * 4 + 2] = comms[r]->AllReduce(std::span<int32_t>(ih[r]));
      doms[r]->SetUser(is[r].data());
      errs[r * 4 + 3] = comms[r]->AllReduce(std::span<int32_t>(is[r]), *doms[r]);
      icopies[r] = doms[r]->copies();
    });
    for (size_t e = 0; e < errs.size(); ++e) ASSERT_TRUE(errs[e].ok()) << errs[e].ToString();
    const size_t chunks = (n + chunk - 1) / chunk;
    for (int r = 0; r < prm.world; ++r) {
      EXPECT_TRUE(SameFloats(fs[r], fh[r])) << "rank " << r;
      EXPECT_EQ(is[r], ih[r]) << "rank " << r;
      EXPECT_TRUE(SameFloats(fs[r], fs[0])) << "rank " << r << " differs from rank 0";
      for (const auto* copies : {&fcopies[r], &icopies[r]}) {
        std::vector<int> in(chunks, 0), out(chunks, 0);
        ASSERT_EQ(copies->size(), 2 * chunks);
        for (const auto& c : *copies) {
          ASSERT_EQ(c.offset % (chunk * 4), 0u);
          const size_t ci = c.offset / (chunk * 4);
          ASSERT_LT(ci, chunks);
          EXPECT_EQ(c.bytes, std::min(chunk, n - ci * chunk) * 4);
          (c.in ? in : out)[ci]++;
          if (!c.in) {
            EXPECT_EQ(in[ci], 1) << "chunk " << ci << " copied back before in";
          }
        }
        for (size_t ci = 0; ci < chunks; ++ci) {
          EXPECT_EQ(in[ci], 1) << "chunk " << ci;
          EXPECT_EQ(out[ci], 1) << "chunk " << ci;
        }
        // Copies in are enqueued at the start, in chunk order.
        for (size_t ci = 0; ci < chunks; ++ci) {
          EXPECT_TRUE((*copies)[ci].in);
          EXPECT_EQ((*copies)[ci].offset, ci * chunk * 4);
        }
      }
    }
  }
  for (int r = 0; r < prm.world; ++r) EXPECT_EQ(doms[r]->allocs(), 1) << "rank " << r;
  const CommStats st = comms[0]->stats();
  EXPECT_EQ(st.ops_completed, 4 * sizes.size());
  EXPECT_EQ(st.ops_failed, 0u);
  if (prm.drop > 0) {
    EXPECT_GT(st.retransmissions, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, StagedTest,
    ::testing::Values(Params{2, 64, 8, 1, 64 * 4 * 3, 0.0},           // 3 blocks a chunk
                      Params{3, 64, 4, 1, 100, 0.0},                  // chunk < a block: one block
                      Params{2, 256, 32, 2, 256 * 4 * 5, 0.0},        // two lanes
                      Params{2, 64, 16, 1, 64 * 4 * 2, 0.05},         // loss: retransmissions
                      Params{2, 64, 8, 1, 64 * 4 * 3, 0.0, true},     // lazy copies
                      Params{3, 64, 16, 2, 64 * 4 * 2, 0.05, true}),  // lazy, lanes, loss
    [](const ::testing::TestParamInfo<Params>& i) { return "case" + std::to_string(i.index); });

// A larger call than the cached staging gets a new one; each domain keeps its own. Staging is
// never freed while the communicator lives (for CUDA, cudaFreeHost may wait for the device, where
// a framework's kernel may wait for this very op): the outgrown buffer goes at destruction.
TEST(Staged, StagingGrowsPerDomainAndIsFreedOnlyAtDestruction) {
  auto fabric = StartFabric();
  ASSERT_NE(fabric, nullptr);
  auto comms = CreateAll(BaseConfig(*fabric, 2, 64, 8));
  ASSERT_TRUE(AllCreated(comms));
  std::vector<std::unique_ptr<CountingDomain>> a, b;
  for (int r = 0; r < 2; ++r) {
    a.push_back(std::make_unique<CountingDomain>(1024));
    b.push_back(std::make_unique<CountingDomain>(1024));
  }
  ParallelFor(2, [&](int r) {
    std::vector<float> x(100, 1.0f), y(1000, 2.0f), z(10, 3.0f);
    EXPECT_TRUE(comms[r]->AllReduce(std::span<float>(x), *a[r]).ok());
    EXPECT_TRUE(comms[r]->AllReduce(std::span<float>(x), *a[r]).ok());
    EXPECT_TRUE(comms[r]->AllReduce(std::span<float>(y), *a[r]).ok());  // larger: new staging
    EXPECT_TRUE(comms[r]->AllReduce(std::span<float>(z), *b[r]).ok());  // other domain
    EXPECT_TRUE(comms[r]->AllReduce(std::span<float>(x), *a[r]).ok());  // a's staging kept
    EXPECT_TRUE(comms[r]->AllReduce(std::span<float>(z), *b[r]).ok());
    EXPECT_EQ(x[0], 8.0f);
    EXPECT_EQ(y[999], 4.0f);
    EXPECT_EQ(z[9], 12.0f);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(a[r]->allocs(), 2) << "rank " << r;
    EXPECT_EQ(b[r]->allocs(), 1) << "rank " << r;
    EXPECT_EQ(a[r]->frees(), 0) << "rank " << r << ": staging freed while the communicator lives";
    EXPECT_EQ(b[r]->frees(), 0) << "rank " << r;
  }
  comms.clear();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(a[r]->frees(), 2) << "rank " << r;
    EXPECT_EQ(b[r]->frees(), 1) << "rank " << r;
  }
}

// config.staging_bytes (INA_STAGING_BYTES) sizes a domain's staging at its first use, and
// ReserveStaging allocates it before any call: calls up to that size (float quantized in the
// domain or copied, int32) then never allocate; a larger one allocates once and frees nothing.
TEST(Staged, PreSizedStagingNeverAllocatesInACall) {
  auto fabric = StartFabric();
  ASSERT_NE(fabric, nullptr);
  constexpr size_t kMax = 5000;  // elements
  for (const bool quantize : {false, true}) {
    SCOPED_TRACE(quantize ? "quantizing domain" : "copying domain");
    CommConfig base = BaseConfig(*fabric, 2, 64, 8);
    base.job_id = quantize ? 21 : 22;
    base.staging_bytes = kMax * 4;
    auto comms = CreateAll(base);
    ASSERT_TRUE(AllCreated(comms));
    std::vector<std::unique_ptr<CountingDomain>> d;
    for (int r = 0; r < 2; ++r) {
      d.push_back(std::make_unique<CountingDomain>(1024, /*lazy=*/false, quantize));
    }
    // Rank 0 reserves up front; rank 1 gets the configured size at its first call.
    ASSERT_TRUE(comms[0]->ReserveStaging(*d[0]).ok());
    EXPECT_EQ(d[0]->allocs(), 1);
    ASSERT_TRUE(comms[0]->ReserveStaging(*d[0], 100).ok());  // fits: no-op
    EXPECT_EQ(d[0]->allocs(), 1);
    EXPECT_EQ(d[1]->allocs(), 0);
    ParallelFor(2, [&](int r) {
      for (const size_t n : {size_t{10}, kMax, size_t{1}, kMax - 1, size_t{700}}) {
        std::vector<float> f(n, 1.5f);
        std::vector<int32_t> i(n, -3);
        EXPECT_TRUE(comms[r]->AllReduce(std::span<float>(f), *d[r]).ok()) << n;
        EXPECT_TRUE(comms[r]->AllReduce(std::span<int32_t>(i), *d[r]).ok()) << n;
        EXPECT_EQ(f[n - 1], 3.0f);
        EXPECT_EQ(i[n - 1], -6);
      }
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(d[r]->allocs(), 1) << "rank " << r << ": a call allocated";
      EXPECT_EQ(d[r]->frees(), 0) << "rank " << r;
    }
    ParallelFor(2, [&](int r) {
      std::vector<float> big(kMax + 1, 1.0f);
      EXPECT_TRUE(comms[r]->AllReduce(std::span<float>(big), *d[r]).ok());
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(d[r]->allocs(), 2) << "rank " << r;
      EXPECT_EQ(d[r]->frees(), 0) << "rank " << r << ": the outgrown staging freed during a call";
    }
    comms.clear();
    for (int r = 0; r < 2; ++r) EXPECT_EQ(d[r]->frees(), 2) << "rank " << r;
  }
}

// A copy that fails (seen at its fence) fails the op with the copy's error, the other rank
// promptly with Aborted (not at the progress timeout), and later calls with FailedPrecondition.
TEST(Staged, CopyFailureFailsTheOpAndAbortsTheOthers) {
  auto fabric = StartFabric();
  ASSERT_NE(fabric, nullptr);
  CommConfig base = BaseConfig(*fabric, 2, 64, 8);
  base.progress_timeout_ms = 60000;  // a failure must come from the copy, not from the timeout
  auto comms = CreateAll(base);
  ASSERT_TRUE(AllCreated(comms));
  CountingDomain bad(64 * 4 * 2), good(64 * 4 * 2);
  bad.FailFrom(3);  // the third chunk's copy into staging
  std::vector<float> x0(64 * 20, 1.0f), x1(64 * 20, 1.0f);
  Status s0, s1;
  ParallelFor(2, [&](int r) {
    if (r == 0) {
      s0 = comms[0]->AllReduce(std::span<float>(x0), bad);
    } else {
      s1 = comms[1]->AllReduce(std::span<float>(x1), good);
    }
  });
  EXPECT_EQ(s0.code(), StatusCode::kInternal) << s0.ToString();
  EXPECT_NE(s0.ToString().find("injected copy failure"), std::string::npos) << s0.ToString();
  EXPECT_NE(s0.ToString().find("chunk 2"), std::string::npos) << s0.ToString();
  // Aborted by rank 0's LEAVE (the progress timeout would be DeadlineExceeded). When rank 0 failed
  // before rank 1 made its call, rank 1's idle poll saw the abort first and the call is refused.
  const bool aborted =
      s1.code() == StatusCode::kAborted || (s1.code() == StatusCode::kFailedPrecondition &&
                                            s1.ToString().find("ABORTED") != std::string::npos);
  EXPECT_TRUE(aborted) << s1.ToString();
  std::vector<float> y(10, 1.0f);
  EXPECT_EQ(comms[0]->AllReduce(std::span<float>(y), good).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(comms[0]->stats().ops_failed, 1u);
}

// CheckPointer and OrderAfter are checked in the caller's thread: nothing is queued, the
// communicator keeps working (the ranks still agree: the rejected call never happened).
TEST(Staged, RejectedPointerIsAnErrorAtTheCall) {
  auto fabric = StartFabric();
  ASSERT_NE(fabric, nullptr);
  auto comms = CreateAll(BaseConfig(*fabric, 2, 64, 8));
  ASSERT_TRUE(AllCreated(comms));
  CountingDomain d0(1024), d1(1024);
  std::vector<float> x(100, 1.0f);
  d0.Reject(x.data());
  EXPECT_EQ(comms[0]->AllReduce(std::span<float>(x), d0).code(), StatusCode::kInvalidArgument);
  int not_a_stream = 0;
  EXPECT_EQ(comms[0]->AllReduceAsync(std::span<float>(x), d1, &not_a_stream).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(d0.allocs() + d1.allocs(), 0);
  std::vector<float> a(100, 1.0f), b(100, 2.0f);
  ParallelFor(2, [&](int r) {
    EXPECT_TRUE(comms[r]->AllReduce(std::span<float>(r == 0 ? a : b), r == 0 ? d1 : d0).ok());
  });
  EXPECT_EQ(a[0], 3.0f);
  EXPECT_EQ(b[99], 3.0f);
  // Empty tensors complete at once, without copies or staging.
  EXPECT_TRUE(comms[0]->AllReduce(std::span<float>(), d1).ok());
  EXPECT_EQ(d1.allocs(), 1);
}

// Destroying the communicator while its staged op waits for a slow copy engine: the request
// fails with Aborted, and by the time the destructor returns every copy the op enqueued has
// completed (nothing writes the tensor or the staging afterwards).
TEST(Staged, DestroyWhileWaitingForCopiesDrainsThem) {
  auto fabric = StartFabric();
  ASSERT_NE(fabric, nullptr);
  auto comms = CreateAll(BaseConfig(*fabric, 2, 64, 8));
  ASSERT_TRUE(AllCreated(comms));
  CountingDomain d(64 * 4);
  d.Hold(true);
  std::vector<float> x(64 * 50, 1.0f);
  auto req = comms[0]->AllReduceAsync(std::span<float>(x), d);
  ASSERT_TRUE(req.ok()) << req.status().ToString();
  ASSERT_TRUE(d.WaitForHeldWaits(1));  // the op started and waits for its first copy
  // Release the engine only after destruction began, so the op is surely interrupted mid-wait:
  // after 50 more waits of 1 ms on the held copy (the destructor stops the op within one).
  std::thread releaser([&] {
    d.WaitForHeldWaits(d.held_waits() + 50);
    d.Hold(false);
  });
  comms[0].reset();
  releaser.join();
  EXPECT_TRUE(d.Drained());
  const Status s = req->Wait();
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
  comms[1].reset();
}

// The other rank never makes its call: the staged op waits on the network (not on copies) and is
// cancelled by the progress timeout; the chunks copied in are drained and the next call is
// refused.
TEST(Staged, ProgressTimeoutCancelsAStagedOp) {
  auto fabric = StartFabric();
  ASSERT_NE(fabric, nullptr);
  CommConfig base = BaseConfig(*fabric, 2, 64, 8);
  base.progress_timeout_ms = 300;
  auto comms = CreateAll(base);
  ASSERT_TRUE(AllCreated(comms));
  CountingDomain d(64 * 4 * 4);
  std::vector<float> x(64 * 40, 1.0f);
  const Status s = comms[0]->AllReduce(std::span<float>(x), d);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_TRUE(d.Drained());
  EXPECT_EQ(comms[0]->AllReduce(std::span<float>(x), d).code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ina::host
