// Directed tests of the RTL core (ina_core: ingress, aggregation, slot memory, adder, registers)
// through the Verilator model, each under several mixes of input idle cycles and output
// backpressure. Expected values are computed here from the rules in ina/dp/engine.h.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "ina/drv/job_table.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/wire.h"
#include "ina/sim/core_sim.h"
#include "support/seed.h"

namespace ina::sim {
namespace {

namespace p = proto;

uint64_t Seed() { return ina::tests::Seed(); }

struct Pkt {
  p::Header h;
  std::vector<int32_t> elems;
};

std::vector<uint8_t> Encode(const Pkt& x) {
  std::vector<uint8_t> b(p::MessageBytes(x.elems.size()));
  p::EncodeHeader(x.h, b.data());
  for (size_t i = 0; i < x.elems.size(); ++i) {
    p::Store32(&b[p::kHeaderBytes + 4 * i], static_cast<uint32_t>(x.elems[i]));
  }
  p::SealMessage(b.data(), b.size() - p::kCrcBytes);
  return b;
}

Pkt Data(uint16_t job, uint16_t rank, uint16_t slot, uint16_t gen, std::vector<int32_t> e,
         uint8_t flags = 0, uint8_t exp = 127, uint8_t next_exp = 0, uint32_t offset = 0) {
  Pkt x;
  x.h.version = p::kVersion;
  x.h.type = p::MsgType::kData;
  x.h.flags = flags;
  x.h.exp = exp;
  x.h.next_exp = next_exp;
  x.h.job = job;
  x.h.rank = rank;
  x.h.slot = slot;
  x.h.gen = gen;
  x.h.count = static_cast<uint16_t>(e.size());
  x.h.offset = offset;
  x.elems = std::move(e);
  return x;
}

class CoreTest : public ::testing::TestWithParam<std::pair<double, double>> {
 protected:
  void SetUp() override {
    seed_ = Seed();
    CoreSim::Options o{GetParam().first, GetParam().second, seed_};
    // INA_TRACE=FILE.fst [INA_TRACE_FROM, INA_TRACE_CYCLES]: each test's model is traced (the
    // second one to FILE.1.fst, ...; docs/rtl/debugging.md).
    auto trace = TraceOptionsFromEnv();
    ASSERT_TRUE(trace.ok()) << trace.status().ToString();
    o.trace = *trace;
    sim_ = std::make_unique<CoreSim>(o);
  }
  void Send(const Pkt& x, bool mac_err = false) { sim_->SendFrame(MakeFrame(Encode(x)), mac_err); }
  void Install(uint32_t entry, uint16_t job, uint16_t world, uint16_t k, uint32_t base,
               uint16_t window, uint16_t group) {
    dp::JobConfig c{job, world, k, base, window};
    ASSERT_TRUE(drv::ProgramJob(*sim_, entry, c, group).ok());
  }
  std::vector<OutFrame> RunAndTake() {
    Status s = sim_->Run(200000);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return sim_->TakeOutput();
  }
  dp::CounterSnapshot Counters() {
    auto c = drv::ReadCounters(*sim_);
    EXPECT_TRUE(c.ok());
    return c.ok() ? *c : dp::CounterSnapshot{};
  }
  uint64_t seed_ = 0;
  std::unique_ptr<CoreSim> sim_;
};

void ExpectResult(const OutFrame& f, const p::Header& want, const std::vector<int32_t>& sum,
                  uint16_t group, uint16_t dest) {
  ASSERT_EQ(f.bytes.size(), p::kFramePrefixBytes + p::MessageBytes(sum.size()));
  EXPECT_EQ(f.group, group);
  EXPECT_EQ(f.dest_rank, dest);
  EXPECT_EQ(p::Load16(&f.bytes[38]), 8 + p::MessageBytes(sum.size()));  // UDP length
  EXPECT_TRUE(p::MessageCrcOk(std::span(f.bytes).subspan(p::kFramePrefixBytes)))
      << "the CRC32C trailer ina_egress appends";
  p::Header h = p::DecodeHeader(&f.bytes[p::kFramePrefixBytes]);
  EXPECT_EQ(h, want);
  for (size_t i = 0; i < sum.size(); ++i) {
    EXPECT_EQ(static_cast<int32_t>(p::Load32(&f.bytes[p::kPayloadOffset + 4 * i])), sum[i]) << i;
  }
}

TEST_P(CoreTest, RegistersIdentifyAndReadBack) {
  namespace r = p::reg;
  EXPECT_EQ(*sim_->Read32(r::kId), r::kIdReset);
  EXPECT_EQ(*sim_->Read32(r::kVersion), p::kVersion);
  uint32_t params = *sim_->Read32(r::kParams);
  EXPECT_EQ(1u << (params & 0xFF), kRtlPoolSlots);  // log2(PoolSlots)
  EXPECT_EQ((params >> 8) & 0xFF, p::kMaxWorkers);
  EXPECT_EQ((params >> 16) & 0xFF, kRtlMaxK / 64);  // k64: the model's MaxK (not the spec's)
  Install(3, 0x1234, 5, 256, 10, 7, 0xBEEF);
  EXPECT_EQ(*sim_->Read32(r::kJobSel), 3u);
  EXPECT_EQ(*sim_->Read32(r::kJobId), 0x80001234u);
  EXPECT_EQ(*sim_->Read32(r::kJobSlots), (7u << 16) | 10u);
  EXPECT_EQ(*sim_->Read32(r::kJobWorld), (0xBEEFu << 16) | (4u << 8) | 5u);
  ASSERT_TRUE(sim_->Write32(r::kJobSel, 99).ok());
  EXPECT_EQ(*sim_->Read32(r::kJobId), 0u);  // out of range entry reads 0
  EXPECT_FALSE(sim_->Read32(3).ok());
}

TEST_P(CoreTest, SumsAllRanksAndEmitsOnce) {
  Install(0, 7, 3, 64, 0, 4, 0x0042);
  std::mt19937 rng(static_cast<uint32_t>(seed_));
  // (count, slot, gen): first uses of both copies of both slots, then the reuse of a copy; each a
  // call's first use of the slot (offset slot * K; docs/protocol.md, "Slot history").
  struct Case {
    uint16_t count, slot, gen;
  };
  for (Case cs : {Case{64, 0, 0}, Case{17, 1, 0}, Case{16, 0, 1}, Case{1, 1, 1}, Case{0, 0, 2}}) {
    uint16_t count = cs.count, slot = cs.slot, gen = cs.gen;
    std::vector<int32_t> sum(count, 0);
    uint8_t flags = 0, exp = 0, nexp = 0;
    for (uint16_t r = 0; r < 3; ++r) {
      std::vector<int32_t> e(count);
      for (auto& v : e) v = static_cast<int32_t>(rng());
      for (size_t i = 0; i < count; ++i) {
        sum[i] = static_cast<int32_t>(static_cast<uint32_t>(sum[i]) + static_cast<uint32_t>(e[i]));
      }
      uint8_t f = r == 1 ? p::flags::kNonfinite : 0;
      // The agreed exponent (every rank's, else the ranks disagree), each rank's next one.
      uint8_t x = static_cast<uint8_t>(120 + gen * 3), nx = static_cast<uint8_t>(140 - r);
      flags |= f;
      exp = std::max(exp, x);
      nexp = std::max(nexp, nx);
      Send(Data(7, r, slot, gen, e, static_cast<uint8_t>(f | (r == 2 ? p::flags::kRetx : 0)), x, nx,
                slot * 64u));
    }
    auto out = RunAndTake();
    ASSERT_EQ(out.size(), 1u) << "count " << count;
    p::Header want = Data(7, p::kRankAll, slot, gen, {}, flags, exp, nexp, slot * 64u).h;
    want.type = p::MsgType::kResult;
    want.count = count;
    ExpectResult(out[0], want, sum, 0x0042, p::kRankAll);
  }
  auto c = Counters();
  EXPECT_EQ(dp::Get(c, p::Counter::kRxPackets), 15u);
  EXPECT_EQ(dp::Get(c, p::Counter::kRxData), 15u);
  EXPECT_EQ(dp::Get(c, p::Counter::kResults), 5u);
  EXPECT_EQ(dp::Get(c, p::Counter::kRetransmissions), 5u);
}

TEST_P(CoreTest, DuplicatesDropOrResend) {
  Install(1, 9, 2, 64, 8, 2, 5);
  Send(Data(9, 0, 1, 0, {1, 2, 3}, 0, 127, 0, 64));  // slot 1 starts a call at block 1
  Send(Data(9, 0, 1, 0, {1, 2, 3}, p::flags::kRetx, 127, 0, 64));  // duplicate, incomplete copy
  auto out = RunAndTake();
  EXPECT_TRUE(out.empty());
  Send(Data(9, 1, 1, 0, {10, 20, 30}, 0, 127, 0, 64));
  out = RunAndTake();
  ASSERT_EQ(out.size(), 1u);
  Send(Data(9, 1, 1, 0, {10, 20, 30}, p::flags::kRetx, 127, 0, 64));  // complete: re-send
  out = RunAndTake();
  ASSERT_EQ(out.size(), 1u);
  p::Header want = Data(9, 1, 1, 0, {}, 0, 127, 0, 64).h;
  want.type = p::MsgType::kResult;
  want.count = 3;
  ExpectResult(out[0], want, {11, 22, 33}, 5, 1);
  auto c = Counters();
  EXPECT_EQ(dp::Get(c, p::Counter::kDuplicates), 1u);
  EXPECT_EQ(dp::Get(c, p::Counter::kResultResends), 1u);
  EXPECT_EQ(dp::Get(c, p::Counter::kResults), 1u);
  EXPECT_EQ(dp::Get(c, p::Counter::kRetransmissions), 2u);
}

TEST_P(CoreTest, EveryDropCauseIsCounted) {
  Install(0, 1, 2, 64, 0, 2, 0);
  Pkt ok = Data(1, 0, 0, 0, {5});
  auto bytes = Encode(ok);
  sim_->SendFrame(MakeFrame(std::span(bytes).first(10)));  // short: malformed
  Pkt v = ok;
  v.h.version = 9;
  Send(v);  // bad version
  Pkt t = ok;
  t.h.type = p::MsgType::kJoin;
  Send(t);  // not data: malformed
  Pkt l = ok;
  l.h.count = 2;
  Send(l);  // length mismatch: malformed
  Pkt j = ok;
  j.h.job = 2;
  Send(j);                                              // unknown job
  Send(Data(1, 0, 0, 0, std::vector<int32_t>(65, 1)));  // count > K: malformed
  Pkt r = ok;
  r.h.rank = 2;
  Send(r);  // bad rank
  Pkt s = ok;
  s.h.slot = 2;
  Send(s);                     // bad slot
  Send(ok, /*mac_err=*/true);  // MAC error: malformed
  Send(ok);                    // accepted (gen 0)
  Pkt st = ok;
  st.h.gen = 4;
  st.h.rank = 1;
  Send(st);  // early (gen 0 waits for rank 1)
  Pkt sb = ok;
  sb.h.gen = 0xFFFE;
  sb.h.rank = 1;
  Send(sb);  // stale (behind the window)
  Pkt mm = ok;
  mm.h.rank = 1;
  mm.h.offset = 64;
  Send(mm);  // not slot 0's history (offset)
  Pkt mi = ok;
  mi.h.rank = 1;
  mi.h.flags = p::flags::kInt32;
  Send(mi);  // fits the history, differs (int32): the ranks disagree, the job ends
  // Damaged in flight (rank 1's completing packet, one bit of each part): bad CRC, no result.
  const auto good1 = Encode(Data(1, 1, 0, 0, {5}));
  for (size_t at : {size_t{p::kRankOffset + 1}, p::kHeaderBytes + 2, good1.size() - 1}) {
    auto d = good1;
    d[at] ^= 0x10;
    sim_->SendFrame(MakeFrame(d));
  }
  auto out = RunAndTake();
  EXPECT_TRUE(out.empty());
  auto c = Counters();
  EXPECT_EQ(dp::Get(c, p::Counter::kRxPackets), 17u);
  EXPECT_EQ(dp::Get(c, p::Counter::kDropBadCrc), 3u);
  EXPECT_EQ(dp::Get(c, p::Counter::kDropMalformed), 5u);
  EXPECT_EQ(dp::Get(c, p::Counter::kDropBadVersion), 1u);
  EXPECT_EQ(dp::Get(c, p::Counter::kDropUnknownJob), 1u);
  EXPECT_EQ(dp::Get(c, p::Counter::kDropBadRank), 1u);
  EXPECT_EQ(dp::Get(c, p::Counter::kDropBadSlot), 1u);
  EXPECT_EQ(dp::Get(c, p::Counter::kDropStale), 1u);
  EXPECT_EQ(dp::Get(c, p::Counter::kDropEarly), 1u);
  EXPECT_EQ(dp::Get(c, p::Counter::kDropHistory), 1u);
  EXPECT_EQ(dp::Get(c, p::Counter::kDropMismatch), 1u);
  EXPECT_EQ(dp::Get(c, p::Counter::kRxData), 1u);
  // The job's entry is failed (its packets unknown_job) until it is committed again.
  EXPECT_EQ(*sim_->Read32(p::reg::kJobSel), 0u);
  EXPECT_EQ(*sim_->Read32(p::reg::kJobId), 0x80000001u | (1u << p::reg::job_id::kFailedLsb));
  const uint32_t who = *sim_->Read32(p::reg::kFailWho);
  EXPECT_EQ(p::reg::fail_who::GetValid(who), 1u);
  EXPECT_EQ(p::reg::fail_who::GetEntry(who), 0u);
  EXPECT_EQ(p::reg::fail_who::GetRank(who), 1u);
  EXPECT_EQ(*sim_->Read32(p::reg::kFailWhere), 0u);  // slot 0, gen 0
  Send(Data(1, 1, 0, 0, {5}));
  RunAndTake();
  EXPECT_EQ(dp::Get(Counters(), p::Counter::kDropUnknownJob), 2u);
  Install(0, 1, 2, 64, 0, 2, 0);
  EXPECT_EQ(*sim_->Read32(p::reg::kJobId), 0x80000001u);
  Send(Data(1, 0, 0, 0, {5}));
  Send(Data(1, 1, 0, 0, {6}));
  auto again = RunAndTake();
  ASSERT_EQ(again.size(), 1u);
}

// Back-to-back packets to the same slot: the read-modify-write forwarding must make each add see
// the previous one, whatever the spacing; generations advance through both copies. At K 256 and
// at the model's MaxK (2048: 128 payload beats, every beat address bit of the slot memory).
TEST_P(CoreTest, BackToBackSameSlotForwarding) {
  const uint16_t kWorld = 8;
  std::mt19937 rng(static_cast<uint32_t>(seed_));
  for (uint32_t k : {256u, kRtlMaxK}) {
    SCOPED_TRACE("K " + std::to_string(k));
    Install(2, 3, kWorld, static_cast<uint16_t>(k), 32, 1, 77);  // commits: the slot starts afresh
    for (uint16_t gen = 0; gen < 6; ++gen) {
      uint16_t count = static_cast<uint16_t>(1 + rng() % k);
      std::vector<int32_t> sum(count, 0);
      for (uint16_t r = 0; r < kWorld; ++r) {
        std::vector<int32_t> e(count);
        for (auto& v : e) v = static_cast<int32_t>(rng() % 2000) - 1000;
        for (size_t i = 0; i < count; ++i) sum[i] += e[i];
        Send(Data(3, r, 0, gen, e));
      }
      auto out = RunAndTake();
      ASSERT_EQ(out.size(), 1u) << "gen " << gen;
      p::Header want = Data(3, p::kRankAll, 0, gen, {}).h;
      want.type = p::MsgType::kResult;
      want.count = count;
      ExpectResult(out[0], want, sum, 77, p::kRankAll);
    }
  }
}

// ClearJob: the entry stops matching (its packets are unknown_job), reads back invalid, and
// another job's half-aggregated slot is untouched (a clear resets no slots).
TEST_P(CoreTest, ClearJobRemovesOnlyThatJob) {
  namespace r = p::reg;
  Install(0, 10, 2, 64, 0, 2, 1);
  Install(1, 11, 2, 64, 2, 2, 2);
  Send(Data(11, 0, 1, 0, {4, 5, 6}, 0, 127, 0, 64));  // job 11: rank 0 of 2, slot 1
  Send(Data(10, 0, 0, 0, {1}));                       // job 10: rank 0 of 2, slot 0
  EXPECT_TRUE(RunAndTake().empty());
  ASSERT_TRUE(drv::ClearJob(*sim_, 0).ok());
  ASSERT_TRUE(sim_->Write32(r::kJobSel, 0).ok());
  EXPECT_EQ(*sim_->Read32(r::kJobId) >> 31, 0u);         // entry 0 invalid
  Send(Data(10, 1, 0, 0, {2}));                          // job 10 is gone: unknown job, no result
  Send(Data(11, 1, 1, 0, {40, 50, 60}, 0, 127, 0, 64));  // job 11 completes
  auto out = RunAndTake();
  ASSERT_EQ(out.size(), 1u);
  p::Header want = Data(11, p::kRankAll, 1, 0, {}, 0, 127, 0, 64).h;
  want.type = p::MsgType::kResult;
  want.count = 3;
  ExpectResult(out[0], want, {44, 55, 66}, 2, p::kRankAll);
  auto c = Counters();
  EXPECT_EQ(dp::Get(c, p::Counter::kDropUnknownJob), 1u);
  EXPECT_EQ(dp::Get(c, p::Counter::kResults), 1u);
  EXPECT_EQ(dp::Get(c, p::Counter::kRxData), 3u);
}

// A commit resets the committed entry's slots (both copies, whatever they held: a partial sum, a
// completed result) and only those: a neighbouring job's partial sum survives.
TEST_P(CoreTest, CommitResetsTheJobsSlotsOnly) {
  Install(0, 20, 2, 64, 0, 2, 1);
  Install(1, 21, 2, 64, 2, 2, 2);
  Send(Data(20, 0, 0, 0, {100}));  // job 20 slot 0 copy 0: partial
  // Job 20 slot 1 (block 1: offset 64) copy 0: complete below.
  Send(Data(20, 0, 1, 0, {7}, 0, 127, 0, 64));
  Send(Data(20, 1, 1, 0, {8}, 0, 127, 0, 64));
  Send(Data(21, 0, 0, 0, {3}));  // job 21: partial
  auto out = RunAndTake();
  ASSERT_EQ(out.size(), 1u);                    // job 20 slot 1 gen 0
  Install(0, 20, 2, 64, 0, 2, 1);               // re-commit job 20 over the same slots
  Send(Data(20, 1, 1, 0, {8}, 0, 127, 0, 64));  // was a duplicate of a complete copy; now first
  Send(Data(20, 1, 0, 0, {5}));  // the partial 100 is gone: this is the first contribution
  EXPECT_TRUE(RunAndTake().empty());
  Send(Data(20, 0, 0, 0, {6}));   // completes slot 0 gen 0 with 5 + 6
  Send(Data(21, 1, 0, 0, {30}));  // job 21 completes with 3 + 30
  out = RunAndTake();
  ASSERT_EQ(out.size(), 2u);
  p::Header want = Data(20, p::kRankAll, 0, 0, {}).h;
  want.type = p::MsgType::kResult;
  want.count = 1;
  ExpectResult(out[0], want, {11}, 1, p::kRankAll);
  want.job = 21;
  ExpectResult(out[1], want, {33}, 2, p::kRankAll);
  auto c = Counters();
  EXPECT_EQ(dp::Get(c, p::Counter::kResultResends), 0u);
  EXPECT_EQ(dp::Get(c, p::Counter::kDuplicates), 0u);
  EXPECT_EQ(dp::Get(c, p::Counter::kResults), 3u);
}

INSTANTIATE_TEST_SUITE_P(Traffic, CoreTest,
                         ::testing::Values(std::pair{0.0, 0.0}, std::pair{0.3, 0.0},
                                           std::pair{0.0, 0.5}, std::pair{0.4, 0.7}));

}  // namespace
}  // namespace ina::sim
