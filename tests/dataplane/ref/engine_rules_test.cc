// Unit tests of every rule and counter in ina/dp/engine.h, run against each engine the binary
// links (the reference engine here; the fast engine reuses this file in tests/dataplane/fast).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "test_util.h"

namespace ina::dp::testing {
namespace {

using proto::Counter;

constexpr uint16_t kJob = 1;

class EngineRulesTest : public ::testing::TestWithParam<EngineFactory> {
 protected:
  void SetUp() override { engine_ = GetParam().make(limits_); }

  // Installs job kJob (or `id`) with the given shape.
  void Install(uint16_t world, uint16_t k = 64, uint16_t window = 4, uint32_t base = 0,
               uint16_t id = kJob) {
    ASSERT_TRUE(engine_->AddJob({id, world, k, base, window}).ok());
  }

  void Send(const DataSpec& d) { SendBytes(DataPacket(d)); }
  void SendBytes(const std::vector<uint8_t>& bytes) { engine_->Process(bytes, out_); }

  // Every counter must equal `want` (absent: 0).
  void ExpectCounters(const std::map<Counter, uint64_t>& want) {
    const CounterSnapshot c = engine_->counters();
    for (size_t i = 0; i < proto::kNumCounters; ++i) {
      auto it = want.find(static_cast<Counter>(i));
      EXPECT_EQ(c[i], it == want.end() ? 0 : it->second) << proto::kCounterNames[i];
    }
  }

  EngineLimits limits_{64, 8};
  std::unique_ptr<Engine> engine_;
  RecordingEmitter out_;
};

TEST_P(EngineRulesTest, StartsWithZeroCountersAndReportsPool) {
  ExpectCounters({});
  EXPECT_EQ(engine_->pool_slots(), 64u);
}

TEST_P(EngineRulesTest, ShortPacketsAreMalformed) {
  Install(2);
  const std::vector<uint8_t> full = DataPacket({.elems = {}});
  SendBytes(std::vector<uint8_t>{});
  SendBytes(std::vector<uint8_t>(full.begin(), full.end() - 1));
  // A short packet is malformed even when its first byte is a bad version (rule 2 before 3).
  SendBytes(std::vector<uint8_t>{9, 1, 0});
  ExpectCounters({{Counter::kRxPackets, 3}, {Counter::kDropMalformed, 3}});
  EXPECT_TRUE(out_.got.empty());
}

TEST_P(EngineRulesTest, BadVersionBeforeTypeAndLength) {
  Install(2);
  std::vector<uint8_t> p = DataPacket({.elems = {1}});
  p[proto::kVersionOffset] = 1;  // version 1 had no trailer: not checked against one
  SendBytes(p);
  proto::SetType(p.data(), proto::MsgType::kJoin);
  p.push_back(0);
  SendBytes(p);
  ExpectCounters({{Counter::kRxPackets, 2}, {Counter::kDropBadVersion, 2}});
}

TEST_P(EngineRulesTest, BadCrcIsDroppedAfterVersionBeforeEverythingElse) {
  Install(2);
  const std::vector<uint8_t> good = DataPacket({.rank = 0, .elems = {7, 8}});
  // Every single-bit error of every byte but the version's: drop_bad_crc, nothing else counted.
  uint64_t sent = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    if (i == proto::kVersionOffset) continue;
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<uint8_t> p = good;
      p[i] ^= static_cast<uint8_t>(1u << bit);
      SendBytes(p);
      ++sent;
    }
  }
  // A trailer of zeros, a packet of another job or slot with the original trailer, a truncated
  // packet with a trailer that fits: all bad CRC, none reaches the job table.
  std::vector<uint8_t> zero = good;
  proto::StoreCrc(zero.data() + zero.size() - proto::kCrcBytes, 0);
  std::vector<uint8_t> other_job = good;
  proto::SetJob(other_job.data(), 99);
  std::vector<uint8_t> cut(good.begin(), good.end() - 4);
  for (const auto& q : {zero, other_job, cut}) SendBytes(q);
  sent += 3;
  ExpectCounters({{Counter::kRxPackets, sent}, {Counter::kDropBadCrc, sent}});
  EXPECT_TRUE(out_.got.empty());
  // Nothing of the slot changed: the genuine packets still complete it with the right sum.
  SendBytes(good);
  Send({.rank = 1, .elems = {1, 1}});
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(Elements(out_.got[0].bytes), (std::vector<int32_t>{8, 9}));
  EXPECT_TRUE(proto::MessageCrcOk(out_.got[0].bytes));
}

TEST_P(EngineRulesTest, NonDataTypesAreMalformed) {
  Install(1);
  for (uint8_t type : {0, 2, 3, 4, 5, 6, 7, 255}) {
    std::vector<uint8_t> p = DataPacket({.elems = {1}});
    p[proto::kTypeOffset] = type;
    Reseal(p);
    SendBytes(p);
  }
  ExpectCounters({{Counter::kRxPackets, 8}, {Counter::kDropMalformed, 8}});
  EXPECT_TRUE(out_.got.empty());
}

TEST_P(EngineRulesTest, LengthMustMatchCount) {
  Install(1);
  std::vector<uint8_t> p = DataPacket({.elems = {1, 2}});
  std::vector<uint8_t> longer = p;  // one more byte before the trailer, sealed: only the length
  longer.insert(longer.end() - proto::kCrcBytes, 0);
  Reseal(longer);
  std::vector<uint8_t> shorter = p;
  shorter.erase(shorter.end() - proto::kCrcBytes - 1);
  Reseal(shorter);
  std::vector<uint8_t> count_high = p;
  proto::SetCount(count_high.data(), 3);
  Reseal(count_high);
  // Length is checked before the job (rule 5 before 6).
  std::vector<uint8_t> unknown_job = longer;
  proto::SetJob(unknown_job.data(), 99);
  Reseal(unknown_job);
  for (const auto& q : {longer, shorter, count_high, unknown_job}) SendBytes(q);
  ExpectCounters({{Counter::kRxPackets, 4}, {Counter::kDropMalformed, 4}});
}

TEST_P(EngineRulesTest, UnknownJob) {
  Install(1);
  Send({.job = 2, .elems = {1}});
  ExpectCounters({{Counter::kRxPackets, 1}, {Counter::kDropUnknownJob, 1}});
}

TEST_P(EngineRulesTest, CountAboveKIsMalformedAfterJobLookup) {
  Install(1, 64);
  Send({.elems = std::vector<int32_t>(65, 1)});
  Send({.elems = std::vector<int32_t>(64, 1)});  // exactly K is fine
  // Count > K of an unknown job: unknown job (rule 6 before 7).
  Send({.job = 3, .elems = std::vector<int32_t>(65, 1)});
  ExpectCounters({{Counter::kRxPackets, 3},
                  {Counter::kDropMalformed, 1},
                  {Counter::kDropUnknownJob, 1},
                  {Counter::kRxData, 1},
                  {Counter::kResults, 1}});
}

TEST_P(EngineRulesTest, BadRankThenBadSlot) {
  Install(3, 64, 4);
  Send({.rank = 3, .elems = {1}});
  Send({.rank = 0xFFFF, .elems = {1}});
  Send({.rank = 3, .slot = 4, .elems = {1}});  // rank checked first (rule 8 before 9)
  Send({.rank = 2, .slot = 4, .elems = {1}});
  Send({.rank = 2, .slot = 0xFFFF, .elems = {1}});
  ExpectCounters(
      {{Counter::kRxPackets, 5}, {Counter::kDropBadRank, 3}, {Counter::kDropBadSlot, 2}});
  EXPECT_TRUE(out_.got.empty());
}

TEST_P(EngineRulesTest, AggregatesAndEmitsOneResultToAll) {
  Install(3, 256, 4);  // slot 2 starts a call at block 2: offset 512
  // The agreed exponent (the same on every rank), each rank's local exponent of the next block.
  Send({.rank = 0, .slot = 2, .offset = 512, .exp = 130, .next_exp = 1, .elems = {1, 2, 3}});
  Send({.rank = 2, .slot = 2, .offset = 512, .exp = 130, .next_exp = 7, .elems = {10, 20, 30}});
  EXPECT_TRUE(out_.got.empty());
  Send({.rank = 1, .slot = 2, .offset = 512, .exp = 130, .next_exp = 3, .elems = {100, 200, 300}});
  ASSERT_EQ(out_.got.size(), 1u);
  const Emitted& e = out_.got[0];
  EXPECT_EQ(e.job, kJob);
  EXPECT_EQ(e.dest, proto::kRankAll);
  ASSERT_EQ(e.bytes.size(), proto::MessageBytes(3));
  EXPECT_TRUE(proto::MessageCrcOk(e.bytes)) << "the result carries its CRC32C trailer";
  const proto::Header h = proto::DecodeHeader(e.bytes.data());
  const proto::ResultMsg want{.exp = 130,
                              .next_exp = 7,
                              .job = kJob,
                              .dest_rank = proto::kRankAll,
                              .slot = 2,
                              .count = 3,
                              .offset = 512};
  EXPECT_EQ(h, want.ToHeader());
  EXPECT_EQ(Elements(e.bytes), (std::vector<int32_t>{111, 222, 333}));
  ExpectCounters({{Counter::kRxPackets, 3}, {Counter::kRxData, 3}, {Counter::kResults, 1}});
}

TEST_P(EngineRulesTest, WorldOfOneCompletesOnFirstPacket) {
  Install(1, 256, 1);
  std::vector<int32_t> v(256);
  for (int i = 0; i < 256; ++i) v[i] = i * 1000 - 7;
  Send({.elems = v});
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(Elements(out_.got[0].bytes), v);
  ExpectCounters({{Counter::kRxPackets, 1}, {Counter::kRxData, 1}, {Counter::kResults, 1}});
}

TEST_P(EngineRulesTest, EmptyBlockForExponentRound) {
  Install(2);
  Send({.rank = 0, .next_exp = 140, .elems = {}});
  Send({.rank = 1, .next_exp = 120, .elems = {}});
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(out_.got[0].bytes.size(), proto::MessageBytes(0));
  EXPECT_TRUE(proto::MessageCrcOk(out_.got[0].bytes));
  EXPECT_EQ(proto::GetNextExp(out_.got[0].bytes.data()), 140);
  EXPECT_EQ(proto::GetCount(out_.got[0].bytes.data()), 0);
}

TEST_P(EngineRulesTest, DuplicateOfIncompleteCopyCountsOnce) {
  Install(2);
  Send({.rank = 0, .elems = {5}});
  Send({.rank = 0, .elems = {5}});
  Send({.rank = 0, .flags = proto::flags::kRetx, .elems = {5}});
  EXPECT_TRUE(out_.got.empty());
  Send({.rank = 1, .elems = {1}});
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(Elements(out_.got[0].bytes), std::vector<int32_t>{6});
  ExpectCounters({{Counter::kRxPackets, 4},
                  {Counter::kRxData, 2},
                  {Counter::kResults, 1},
                  {Counter::kDuplicates, 2},
                  {Counter::kRetransmissions, 1}});
}

TEST_P(EngineRulesTest, DuplicateOfCompleteCopyResendsToThatRank) {
  Install(2);
  Send({.rank = 0, .slot = 1, .offset = 64, .exp = 3, .elems = {5, 6}});
  Send({.rank = 1, .slot = 1, .offset = 64, .exp = 3, .elems = {1, 1}});
  ASSERT_EQ(out_.got.size(), 1u);
  // Copies of a rank that contributed are re-sends whatever they carry (here exp 0, not the
  // copy's 3): rule 11 comes before the ranks are compared.
  Send({.rank = 1, .slot = 1, .offset = 64, .flags = proto::flags::kRetx, .elems = {1, 1}});
  // A duplicate without the retx flag gets the result too.
  Send({.rank = 0, .slot = 1, .offset = 64, .elems = {9, 9}});
  ASSERT_EQ(out_.got.size(), 3u);
  for (int i : {1, 2}) {
    const Emitted& e = out_.got[i];
    const uint16_t rank = i == 1 ? 1 : 0;
    EXPECT_EQ(e.dest, rank);
    EXPECT_EQ(e.job, kJob);
    std::vector<uint8_t> want = out_.got[0].bytes;
    proto::SetRank(want.data(), rank);
    Reseal(want);  // a re-send is sealed for its own destination
    EXPECT_EQ(e.bytes, want);
  }
  ExpectCounters({{Counter::kRxPackets, 4},
                  {Counter::kRxData, 2},
                  {Counter::kResults, 1},
                  {Counter::kResultResends, 2},
                  {Counter::kRetransmissions, 1}});
}

TEST_P(EngineRulesTest, RetransmissionIsCountedAndGoesOn) {
  Install(2);
  Send({.rank = 0, .flags = proto::flags::kRetx, .elems = {1}});
  Send({.rank = 1, .flags = proto::flags::kRetx, .elems = {2}});
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(proto::GetFlags(out_.got[0].bytes.data()), 0) << "retx must not reach the result";
  // Retx is counted after the drops of rules 2-9 only.
  Send({.rank = 5, .flags = proto::flags::kRetx, .elems = {2}});
  ExpectCounters({{Counter::kRxPackets, 3},
                  {Counter::kRxData, 2},
                  {Counter::kResults, 1},
                  {Counter::kRetransmissions, 2},
                  {Counter::kDropBadRank, 1}});
}

TEST_P(EngineRulesTest, FlagsOrWithRetxClearedAndExponentsMax) {
  Install(3);
  const uint8_t nf = proto::flags::kNonfinite;
  const uint8_t rx = proto::flags::kRetx;
  const uint8_t i32 = proto::flags::kInt32;
  Send({.rank = 0, .flags = 0, .exp = 200, .next_exp = 0, .elems = {1}});
  Send(
      {.rank = 1, .flags = static_cast<uint8_t>(nf | rx), .exp = 200, .next_exp = 5, .elems = {1}});
  Send({.rank = 2, .flags = rx, .exp = 200, .next_exp = 0, .elems = {1}});
  ASSERT_EQ(out_.got.size(), 1u);
  proto::Header h = proto::DecodeHeader(out_.got[0].bytes.data());
  EXPECT_EQ(h.flags, nf);
  EXPECT_EQ(h.exp, 200);
  EXPECT_EQ(h.next_exp, 5);
  // int32 blocks carry no exponent: theirs are not compared, only max-reduced.
  Send({.rank = 0, .slot = 1, .offset = 64, .flags = i32, .exp = 100, .elems = {1}});
  Send({.rank = 1, .slot = 1, .offset = 64, .flags = i32, .exp = 255, .next_exp = 9, .elems = {2}});
  Send({.rank = 2, .slot = 1, .offset = 64, .flags = i32, .exp = 7, .elems = {3}});
  ASSERT_EQ(out_.got.size(), 2u);
  h = proto::DecodeHeader(out_.got[1].bytes.data());
  EXPECT_EQ(h.flags, i32);
  EXPECT_EQ(h.exp, 255);
  EXPECT_EQ(h.next_exp, 9);
  EXPECT_EQ(Elements(out_.got[1].bytes), std::vector<int32_t>{6});
  EXPECT_EQ(Get(engine_->counters(), Counter::kDropMismatch), 0u);
}

TEST_P(EngineRulesTest, FirstContributionFlagsLessRetx) {
  Install(1);
  Send({.flags = proto::flags::kRetx | proto::flags::kInt32, .elems = {1}});
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(proto::GetFlags(out_.got[0].bytes.data()), proto::flags::kInt32);
}

TEST_P(EngineRulesTest, Int32WrapAround) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  Install(3);
  Send({.rank = 0, .flags = proto::flags::kInt32, .elems = {kMax, kMin, -1, kMax}});
  Send({.rank = 1, .flags = proto::flags::kInt32, .elems = {1, -1, kMin, kMax}});
  Send({.rank = 2, .flags = proto::flags::kInt32, .elems = {0, 0, 0, 2}});
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(Elements(out_.got[0].bytes), (std::vector<int32_t>{kMin, kMax, kMax, 0}));
}

TEST_P(EngineRulesTest, DifferentCallsOnASlotAreNotMismatches) {
  Install(1);
  Send({.gen = 0, .offset = 0, .elems = {1, 2}});
  // Each generation is a new use: the exponent round of a float call, then an int32 call's block.
  Send({.gen = 1, .elems = {}});
  Send({.gen = 2, .offset = 0, .flags = proto::flags::kInt32, .elems = {4}});
  ASSERT_EQ(out_.got.size(), 3u);
  EXPECT_EQ(proto::GetFlags(out_.got[2].bytes.data()), proto::flags::kInt32);
  EXPECT_EQ(Elements(out_.got[2].bytes), std::vector<int32_t>{4});
  ExpectCounters({{Counter::kRxPackets, 3}, {Counter::kRxData, 3}, {Counter::kResults, 3}});
}

TEST_P(EngineRulesTest, FirstUseAndStaleGenerations) {
  Install(2);
  // Fresh copies hold 0xFFFE / 0xFFFF: gen 0 is the first use; 1 waits for 0 to complete, 2 and 3
  // are further ahead; 0x8000 and the initial generations themselves are behind.
  Send({.rank = 0, .gen = 1, .elems = {1}});
  Send({.rank = 0, .gen = 2, .elems = {1}});
  Send({.rank = 0, .gen = 3, .elems = {1}});
  Send({.rank = 0, .gen = 0x8000, .elems = {1}});
  Send({.rank = 0, .gen = 0xFFFF, .elems = {1}});
  Send({.rank = 0, .gen = 0xFFFE, .elems = {1}});
  ExpectCounters({{Counter::kRxPackets, 6}, {Counter::kDropEarly, 3}, {Counter::kDropStale, 3}});
  Send({.rank = 0, .gen = 0, .elems = {1}});
  Send({.rank = 1, .gen = 1, .elems = {1}});  // gen 0 still waits for rank 1
  Send({.rank = 1, .gen = 0, .elems = {1}});
  Send({.rank = 1, .gen = 1, .elems = {1}});
  ASSERT_EQ(out_.got.size(), 1u);
  ExpectCounters({{Counter::kRxPackets, 10},
                  {Counter::kDropEarly, 4},
                  {Counter::kDropStale, 3},
                  {Counter::kRxData, 3},
                  {Counter::kResults, 1}});
}

TEST_P(EngineRulesTest, NextGenerationResetsCopyAndOldOneGoesStale) {
  Install(2);
  for (uint16_t r : {0, 1}) Send({.rank = r, .gen = 0, .elems = {10}});
  for (uint16_t r : {0, 1}) Send({.rank = r, .gen = 1, .elems = {20}});
  ASSERT_EQ(out_.got.size(), 2u);
  // Rank 0 moves on to gen 2 (reset of copy 0); rank 1 still retransmits gen 1 (copy 1, kept).
  Send({.rank = 0, .gen = 2, .elems = {30}});
  Send({.rank = 1, .gen = 1, .flags = proto::flags::kRetx, .elems = {20}});
  ASSERT_EQ(out_.got.size(), 3u);
  EXPECT_EQ(out_.got[2].dest, 1);
  EXPECT_EQ(Elements(out_.got[2].bytes), std::vector<int32_t>{40});
  EXPECT_EQ(proto::GetGen(out_.got[2].bytes.data()), 1);
  // Gen 0 is gone: stale. Gen 6 is four uses ahead of the slot (at 2): early.
  Send({.rank = 1, .gen = 0, .elems = {10}});
  Send({.rank = 1, .gen = 6, .elems = {10}});
  Send({.rank = 1, .gen = 2, .elems = {5}});
  ASSERT_EQ(out_.got.size(), 4u);
  EXPECT_EQ(Elements(out_.got[3].bytes), std::vector<int32_t>{35});
  EXPECT_EQ(proto::GetGen(out_.got[3].bytes.data()), 2);
  ExpectCounters({{Counter::kRxPackets, 9},
                  {Counter::kRxData, 6},
                  {Counter::kResults, 3},
                  {Counter::kResultResends, 1},
                  {Counter::kRetransmissions, 1},
                  {Counter::kDropStale, 1},
                  {Counter::kDropEarly, 1}});
}

TEST_P(EngineRulesTest, GenerationsWrapAround) {
  Install(1, 64, 1);
  uint64_t n = 0;
  for (uint32_t g = 0; g < 70000; ++g, ++n) {
    Send({.gen = static_cast<uint16_t>(g), .elems = {static_cast<int32_t>(g)}});
  }
  ASSERT_EQ(out_.got.size(), n);
  EXPECT_EQ(proto::GetGen(out_.got.back().bytes.data()), static_cast<uint16_t>(69999));
  EXPECT_EQ(Elements(out_.got.back().bytes), std::vector<int32_t>{69999});
  ExpectCounters({{Counter::kRxPackets, n}, {Counter::kRxData, n}, {Counter::kResults, n}});
}

// ---- Rules 11-13: the generation window, the slot's history, disagreeing ranks. Each bad packet
// below is sealed (its CRC32C trailer is valid): only the rules can keep it from the slot.

// Sends `world` ranks' genuine blocks of (slot, gen) and expects their exact sum as one result.
// Elements: rank r contributes base + r at each position.
#define EXPECT_SLOT_COMPLETES(world, spec, base)                           \
  do {                                                                     \
    const size_t before = out_.got.size();                                 \
    for (uint16_t r = 0; r < (world); ++r) {                               \
      DataSpec d = (spec);                                                 \
      d.rank = r;                                                          \
      for (auto& e : d.elems) e = (base) + r;                              \
      Send(d);                                                             \
    }                                                                      \
    ASSERT_EQ(out_.got.size(), before + 1) << "the slot did not complete"; \
    const Emitted& got = out_.got.back();                                  \
    EXPECT_EQ(got.dest, proto::kRankAll);                                  \
    EXPECT_EQ(proto::GetGen(got.bytes.data()), (spec).gen);                \
    EXPECT_EQ(proto::GetOffset(got.bytes.data()), (spec).offset);          \
    std::vector<int32_t> want((spec).elems.size(), 0);                     \
    for (uint16_t r = 0; r < (world); ++r) {                               \
      for (auto& e : want) e += (base) + r;                                \
    }                                                                      \
    EXPECT_EQ(Elements(got.bytes), want);                                  \
  } while (0)

TEST_P(EngineRulesTest, GenerationAheadOfTheWindowNeverWedgesTheSlot) {
  Install(2, 64, 4);
  const std::vector<int32_t> four(4, 0);
  // Before the first use: gen 1 and 2 are ahead (gen 0 has not even started).
  Send({.rank = 0, .slot = 1, .gen = 1, .offset = 64, .elems = four});
  Send({.rank = 1, .slot = 1, .gen = 2, .offset = 64, .elems = four});
  EXPECT_SLOT_COMPLETES(2, (DataSpec{.slot = 1, .gen = 0, .offset = 64, .elems = four}), 10);
  // Gen 1 in progress (rank 0 in): gen 2 (its next use) and gen 3 are ahead, gen 0 is re-sent.
  Send({.rank = 0, .slot = 1, .gen = 1, .offset = 64, .elems = {1, 1, 1, 1}});
  Send({.rank = 1, .slot = 1, .gen = 2, .offset = 64, .elems = four});
  Send({.rank = 0, .slot = 1, .gen = 3, .offset = 64, .elems = four});
  Send({.rank = 1, .slot = 1, .gen = 0x7FF0, .offset = 64, .elems = four});
  Send({.rank = 1, .slot = 1, .gen = 1, .offset = 64, .elems = {2, 2, 2, 2}});
  ASSERT_EQ(out_.got.size(), 2u);
  EXPECT_EQ(Elements(out_.got.back().bytes), (std::vector<int32_t>{3, 3, 3, 3}));
  EXPECT_EQ(proto::GetGen(out_.got.back().bytes.data()), 1);
  // The slot carries on, and a retransmission of the last generation is still answered.
  EXPECT_SLOT_COMPLETES(2, (DataSpec{.slot = 1, .gen = 2, .offset = 64, .elems = four}), 7);
  Send({.rank = 1, .slot = 1, .gen = 2, .offset = 64, .flags = proto::flags::kRetx, .elems = four});
  ASSERT_EQ(out_.got.size(), 4u);
  EXPECT_EQ(out_.got.back().dest, 1);
  const CounterSnapshot c = engine_->counters();
  EXPECT_EQ(Get(c, Counter::kDropEarly), 5u);
  EXPECT_EQ(Get(c, Counter::kDropStale), 0u);
  EXPECT_EQ(Get(c, Counter::kRxData), 6u);
  EXPECT_EQ(Get(c, Counter::kResults), 3u);
  EXPECT_EQ(Get(c, Counter::kResultResends), 1u);
}

TEST_P(EngineRulesTest, WrongOffsetCountOrFlagsFirstNeverWedgeTheSlot) {
  Install(3, 64, 4);  // slot 2 starts a call at offset 128 (block 2) and goes on by 256
  const std::vector<int32_t> full(64, 0);
  const uint8_t i32 = proto::flags::kInt32;
  // First packets to reach the slot, each impossible for it: the wrong block, an offset inside a
  // block, an exponent round (count 0) away from block 2 or flagged int32, a flag bit no sender
  // uses, a block of the next call step while the previous generation is no full block.
  Send({.rank = 0, .slot = 2, .offset = 0, .elems = full});
  Send({.rank = 1, .slot = 2, .offset = 129, .elems = full});
  Send({.rank = 2, .slot = 2, .offset = 384, .elems = full});
  Send({.rank = 0, .slot = 2, .offset = 0, .elems = {}});
  Send({.rank = 0, .slot = 2, .offset = 128, .flags = i32, .elems = {}});
  Send({.rank = 1, .slot = 2, .offset = 128, .flags = 0x10, .elems = full});
  EXPECT_EQ(Get(engine_->counters(), Counter::kDropHistory), 6u);
  EXPECT_TRUE(out_.got.empty());
  // The genuine exponent round and blocks 2 and 6 (one call), then block 2 of an int32 call.
  EXPECT_SLOT_COMPLETES(3, (DataSpec{.slot = 2, .gen = 0, .offset = 128, .elems = {}}), 0);
  // After an exponent round only block 2 itself can follow.
  Send({.rank = 0, .slot = 2, .gen = 1, .offset = 384, .elems = full});
  EXPECT_SLOT_COMPLETES(3, (DataSpec{.slot = 2, .gen = 1, .offset = 128, .elems = full}), 5);
  // After a full block 2: block 6 (offset 384) of the same type, or a new call at block 2.
  Send({.rank = 0, .slot = 2, .gen = 2, .offset = 384, .flags = i32, .elems = full});  // type
  Send({.rank = 0, .slot = 2, .gen = 2, .offset = 640, .elems = full});  // skips block 6
  Send({.rank = 0, .slot = 2, .gen = 2, .offset = 384, .elems = {}});    // count 0 mid-call
  EXPECT_SLOT_COMPLETES(3, (DataSpec{.slot = 2, .gen = 2, .offset = 384, .elems = {1, 2, 3}}), 9);
  // After a short block (the call's last): only a new call at block 2.
  Send({.rank = 1, .slot = 2, .gen = 3, .offset = 640, .elems = full});
  EXPECT_SLOT_COMPLETES(
      3, (DataSpec{.slot = 2, .gen = 3, .offset = 128, .flags = i32, .elems = full}), -4);
  const CounterSnapshot c = engine_->counters();
  EXPECT_EQ(Get(c, Counter::kDropHistory), 11u);
  EXPECT_EQ(Get(c, Counter::kDropMismatch), 0u);
  EXPECT_EQ(Get(c, Counter::kResults), 4u);
  JobFailure f[1];
  EXPECT_EQ(engine_->PollFailures(f), 0u);
}

TEST_P(EngineRulesTest, BadPacketAmongGenuineOnesIsDroppedNotAMismatch) {
  Install(2, 256, 2);
  const std::vector<int32_t> full(256, 1);
  Send({.rank = 0, .slot = 1, .offset = 256, .elems = full});
  // Rank 1's packet with a wrong offset / count-0 offset arrives before its genuine one.
  Send({.rank = 1, .slot = 1, .offset = 257, .elems = full});
  Send({.rank = 1, .slot = 1, .offset = 768, .elems = full});
  Send({.rank = 1, .slot = 1, .offset = 256, .elems = full});
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(Elements(out_.got[0].bytes), std::vector<int32_t>(256, 2));
  ExpectCounters({{Counter::kRxPackets, 4},
                  {Counter::kRxData, 2},
                  {Counter::kResults, 1},
                  {Counter::kDropHistory, 2}});
}

TEST_P(EngineRulesTest, RanksThatDisagreeEndTheJob) {
  Install(3, 64, 4, 0, /*id=*/1);
  Install(2, 64, 4, 8, /*id=*/2);
  JobFailure f[4];
  EXPECT_EQ(engine_->PollFailures(f), 0u);
  // Slot 3: rank 0 sends a full block 3, rank 2 a short block 3 (a different tensor size): both fit
  // the slot's history, so the ranks disagree.
  Send({.job = 1, .rank = 0, .slot = 3, .offset = 192, .elems = std::vector<int32_t>(64, 1)});
  Send({.job = 2, .rank = 0, .elems = {5}});
  Send({.job = 1, .rank = 2, .slot = 3, .offset = 192, .elems = {1, 2}});
  ASSERT_EQ(engine_->PollFailures(f), 1u);
  EXPECT_EQ(f[0], (JobFailure{1, proto::ErrorCode::kRankMismatch, 3, 0, 2}));
  EXPECT_EQ(engine_->PollFailures(f), 0u) << "reported once";
  // The job is gone: its packets are unknown, RemoveJob finds nothing, its slots are free.
  Send({.job = 1, .rank = 1, .slot = 3, .offset = 192, .elems = std::vector<int32_t>(64, 1)});
  EXPECT_EQ(engine_->RemoveJob(1).code(), StatusCode::kNotFound);
  EXPECT_TRUE(out_.got.empty());
  // The other job goes on.
  Send({.job = 2, .rank = 1, .elems = {6}});
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(Elements(out_.got[0].bytes), std::vector<int32_t>{11});
  ExpectCounters({{Counter::kRxPackets, 5},
                  {Counter::kRxData, 3},
                  {Counter::kResults, 1},
                  {Counter::kDropMismatch, 1},
                  {Counter::kDropUnknownJob, 1}});
  // A reinstalled job (job id reuse) starts afresh at generation 0.
  Install(3, 64, 4, 0, /*id=*/1);
  EXPECT_SLOT_COMPLETES(3, (DataSpec{.job = 1, .slot = 3, .offset = 192, .elems = {0, 0}}), 1);
}

TEST_P(EngineRulesTest, DisagreementOnTypeOrCallEndsTheJob) {
  // One float rank (exponent round) and one int32 rank (block 0) at the start of a call.
  Install(2, 64, 2);
  Send({.rank = 0, .elems = {}});
  Send({.rank = 1, .flags = proto::flags::kInt32, .elems = {1}});
  JobFailure f[2];
  ASSERT_EQ(engine_->PollFailures(f), 1u);
  EXPECT_EQ(f[0], (JobFailure{kJob, proto::ErrorCode::kRankMismatch, 0, 0, 1}));
  // A rank that goes on to block 2 while another starts a new call (one more block than it).
  Install(2, 64, 2);
  const std::vector<int32_t> full(64, 0);
  const uint8_t i32 = proto::flags::kInt32;
  EXPECT_SLOT_COMPLETES(2, (DataSpec{.gen = 0, .flags = i32, .elems = full}), 1);
  Send({.rank = 0, .gen = 1, .offset = 128, .flags = i32, .elems = full});
  Send({.rank = 1, .gen = 1, .offset = 0, .flags = i32, .elems = full});
  ASSERT_EQ(engine_->PollFailures(f), 1u);
  EXPECT_EQ(f[0], (JobFailure{kJob, proto::ErrorCode::kRankMismatch, 0, 1, 1}));
  EXPECT_EQ(Get(engine_->counters(), Counter::kDropMismatch), 2u);
}

// A float block (or an exponent round) whose exp differs from the copy's, which the first
// contribution fixed: the ranks quantized with different exponents, and their sum would be wrong
// on every rank, so the job ends as for any disagreement. The neighbour job goes on.
TEST_P(EngineRulesTest, DisagreementOnTheExponentEndsTheJob) {
  Install(3, 64, 4, 0, /*id=*/1);
  Install(2, 64, 4, 8, /*id=*/2);
  const std::vector<int32_t> full(64, 1);
  JobFailure f[2];
  // Slot 1 block 1 (offset 64): ranks 0 and 1 at the agreed 130 (rank 0 twice, a retransmission),
  // rank 2 at 131.
  Send({.job = 1, .rank = 0, .slot = 1, .offset = 64, .exp = 130, .next_exp = 4, .elems = full});
  Send({.job = 1, .rank = 1, .slot = 1, .offset = 64, .exp = 130, .next_exp = 9, .elems = full});
  Send({.job = 1,
        .rank = 0,
        .slot = 1,
        .offset = 64,
        .flags = proto::flags::kRetx,
        .exp = 130,
        .next_exp = 4,
        .elems = full});
  Send({.job = 2, .rank = 0, .exp = 128, .elems = {5}});
  EXPECT_EQ(engine_->PollFailures(f), 0u);
  Send({.job = 1, .rank = 2, .slot = 1, .offset = 64, .exp = 131, .next_exp = 4, .elems = full});
  ASSERT_EQ(engine_->PollFailures(f), 1u);
  EXPECT_EQ(f[0], (JobFailure{1, proto::ErrorCode::kRankMismatch, 1, 0, 2}));
  Send({.job = 1, .rank = 2, .slot = 1, .offset = 64, .exp = 130, .next_exp = 4, .elems = full});
  EXPECT_TRUE(out_.got.empty()) << "nothing of the ended job is summed";
  Send({.job = 2, .rank = 1, .exp = 128, .elems = {6}});
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(Elements(out_.got[0].bytes), std::vector<int32_t>{11});
  ExpectCounters({{Counter::kRxPackets, 7},
                  {Counter::kRxData, 4},
                  {Counter::kResults, 1},
                  {Counter::kDuplicates, 1},
                  {Counter::kRetransmissions, 1},
                  {Counter::kDropMismatch, 1},
                  {Counter::kDropUnknownJob, 1}});
  // The exponent round too: every rank sends exp 0 there.
  Install(2, 64, 4, 0, /*id=*/1);
  Send({.job = 1, .rank = 1, .slot = 3, .offset = 192, .next_exp = 140, .elems = {}});
  Send({.job = 1, .rank = 0, .slot = 3, .offset = 192, .exp = 1, .next_exp = 120, .elems = {}});
  ASSERT_EQ(engine_->PollFailures(f), 1u);
  EXPECT_EQ(f[0], (JobFailure{1, proto::ErrorCode::kRankMismatch, 3, 0, 0}));
  EXPECT_EQ(Get(engine_->counters(), Counter::kDropMismatch), 2u);
}

// A worker's traffic (host/src/comm/slot_window.cc) in many calls of random size and type, with
// duplicates, retransmissions and per-slot interleaving, on windows and K that leave short and
// unused slots: every packet fits the rules, every block completes exactly once.
TEST_P(EngineRulesTest, EveryGenuineWorkerPacketIsAccepted) {
  const uint64_t seed = TestSeed("EveryGenuineWorkerPacketIsAccepted");
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 20 && !HasFailure(); ++iter) {
    SetUp();
    out_.got.clear();
    const uint16_t world = static_cast<uint16_t>(1 + rng() % 5);
    const uint16_t k = rng() % 2 ? 64 : 256;
    const uint16_t window = static_cast<uint16_t>(1 + rng() % 6);
    Install(world, k, window);
    std::vector<uint16_t> next_gen(window, static_cast<uint16_t>(0));
    uint64_t uses = 0, sent = 0, extra = 0;
    for (int call = 0; call < 12; ++call) {
      const bool is_float = rng() % 2;
      const size_t n = 1 + rng() % (size_t{k} * window * 3);
      const size_t blocks = (n + k - 1) / k;
      // Per slot, the list of (offset, count, flags) uses of this call.
      // exp: the exponent every rank sends (a float block's agreed one; 0 in the exponent round
      // and for int32); each float rank's next_exp is its own.
      struct Use {
        uint32_t offset;
        uint16_t count;
        uint8_t flags;
        uint8_t exp;
      };
      std::vector<std::vector<Use>> per_slot(window);
      for (size_t s = 0; s < std::min<size_t>(window, blocks); ++s) {
        if (is_float) per_slot[s].push_back({static_cast<uint32_t>(s * k), 0, 0, 0});
        for (size_t b = s; b < blocks; b += window) {
          per_slot[s].push_back({static_cast<uint32_t>(b * k),
                                 static_cast<uint16_t>(std::min<size_t>(k, n - b * k)),
                                 is_float ? uint8_t{0} : proto::flags::kInt32,
                                 is_float ? static_cast<uint8_t>(1 + rng() % 255) : uint8_t{0}});
        }
      }
      // Run the slots' uses interleaved: each step, a random slot with work left runs one use.
      std::vector<size_t> at(window, 0);
      while (true) {
        std::vector<uint16_t> ready;
        for (uint16_t s = 0; s < window; ++s) {
          if (at[s] < per_slot[s].size()) ready.push_back(s);
        }
        if (ready.empty()) break;
        const uint16_t s = ready[rng() % ready.size()];
        const Use u = per_slot[s][at[s]++];
        const uint16_t gen = next_gen[s]++;
        std::vector<std::vector<uint8_t>> pkts;
        std::vector<int32_t> want(u.count, 0);
        for (uint16_t r = 0; r < world; ++r) {
          DataSpec d{.job = kJob,
                     .rank = r,
                     .slot = s,
                     .gen = gen,
                     .offset = u.offset,
                     .flags = u.flags,
                     .exp = u.exp,
                     .next_exp = is_float ? static_cast<uint8_t>(rng()) : uint8_t{0},
                     .elems = {}};
          d.elems.resize(u.count);
          for (size_t i = 0; i < u.count; ++i) {
            d.elems[i] = static_cast<int32_t>(rng() % 1000) - 500;
            want[i] += d.elems[i];
          }
          pkts.push_back(DataPacket(d));
          if (rng() % 4 == 0) {  // a retransmission too
            d.flags |= proto::flags::kRetx;
            pkts.push_back(DataPacket(d));
          }
        }
        std::shuffle(pkts.begin(), pkts.end(), rng);
        const size_t before = out_.got.size();
        for (const auto& p : pkts) SendBytes(p);
        sent += pkts.size();
        extra += pkts.size() - world;
        ++uses;
        ASSERT_GE(out_.got.size(), before + 1) << "slot " << s << " gen " << gen;
        const auto all =
            std::find_if(out_.got.begin() + static_cast<ptrdiff_t>(before), out_.got.end(),
                         [](const Emitted& e) { return e.dest == proto::kRankAll; });
        ASSERT_NE(all, out_.got.end());
        EXPECT_EQ(proto::GetOffset(all->bytes.data()), u.offset);
        EXPECT_EQ(Elements(all->bytes), want);
        // A retransmission after the result (lost on its way) is answered with a re-send.
        if (gen > 0 && rng() % 8 == 0) {
          const size_t before2 = out_.got.size();
          Send({.job = kJob,
                .rank = 0,
                .slot = s,
                .gen = gen,
                .offset = u.offset,
                .flags = static_cast<uint8_t>(u.flags | proto::flags::kRetx),
                .exp = u.exp,
                .elems = std::vector<int32_t>(u.count, 0)});
          ++sent;
          ++extra;
          ASSERT_EQ(out_.got.size(), before2 + 1);
        }
      }
    }
    const CounterSnapshot c = engine_->counters();
    EXPECT_EQ(Get(c, Counter::kRxPackets), sent);
    EXPECT_EQ(Get(c, Counter::kResults), uses);
    EXPECT_EQ(Get(c, Counter::kRxData), uses * world);
    EXPECT_EQ(Get(c, Counter::kDuplicates) + Get(c, Counter::kResultResends), extra);
    JobFailure f[1];
    EXPECT_EQ(engine_->PollFailures(f), 0u);
  }
}

TEST_P(EngineRulesTest, AddJobRejectsBadShapes) {
  auto code = [&](JobConfig j) { return engine_->AddJob(j).code(); };
  EXPECT_EQ(code({1, 2, 128, 0, 4}), StatusCode::kInvalidArgument);  // K
  EXPECT_EQ(code({1, 2, 0, 0, 4}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({1, 0, 64, 0, 4}), StatusCode::kInvalidArgument);  // world
  EXPECT_EQ(code({1, 65, 64, 0, 4}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({1, 2, 64, 0, 0}), StatusCode::kInvalidArgument);   // window
  EXPECT_EQ(code({1, 2, 64, 60, 5}), StatusCode::kInvalidArgument);  // past the pool of 64
  EXPECT_EQ(code({1, 2, 64, 0xFFFFFFFF, 2}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({1, 2, 64, 0, 65}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({1, 64, 256, 60, 4}), StatusCode::kOk);  // exactly fits
  EXPECT_EQ(code({2, 1, 64, 0, 60}), StatusCode::kOk);
}

// An engine standing in for hardware built for smaller frames (EngineLimits::max_k) says so, and
// refuses a larger K as out of range, as the RTL with its MaxK does.
TEST_P(EngineRulesTest, AddJobRefusesKAboveTheEnginesMaxK) {
  EXPECT_EQ(engine_->max_k(), proto::kMaxK);
  EXPECT_TRUE(engine_->RunsSecMode(proto::SecMode::kMacEncrypt));
  auto small = GetParam().make({.pool_slots = 64, .max_jobs = 8, .max_k = 256});
  EXPECT_EQ(small->max_k(), 256);
  const Status refused = small->AddJob({1, 2, 1024, 0, 4});
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("K 1024 is above this engine's 256"), std::string::npos)
      << refused.ToString();
  EXPECT_TRUE(small->AddJob({1, 2, 256, 0, 4}).ok());
}

TEST_P(EngineRulesTest, AddJobRejectsDuplicatesOverlapsAndFullTable) {
  auto code = [&](JobConfig j) { return engine_->AddJob(j).code(); };
  EXPECT_EQ(code({7, 2, 64, 10, 4}), StatusCode::kOk);
  EXPECT_EQ(code({7, 2, 64, 20, 4}), StatusCode::kAlreadyExists);  // same id
  EXPECT_EQ(code({8, 2, 64, 13, 4}), StatusCode::kAlreadyExists);  // overlaps [10, 14)
  EXPECT_EQ(code({8, 2, 64, 7, 4}), StatusCode::kAlreadyExists);
  EXPECT_EQ(code({8, 2, 64, 0, 64}), StatusCode::kAlreadyExists);
  EXPECT_EQ(code({8, 2, 64, 14, 1}), StatusCode::kOk);  // adjacent
  EXPECT_EQ(code({9, 2, 64, 9, 1}), StatusCode::kOk);
  // Limits: 8 jobs.
  for (uint16_t id = 100; id < 105; ++id)
    EXPECT_EQ(code({id, 1, 64, id - 80u, 1}), StatusCode::kOk);
  EXPECT_EQ(code({200, 1, 64, 40, 1}), StatusCode::kResourceExhausted);
  EXPECT_EQ(engine_->RemoveJob(100).code(), StatusCode::kOk);
  EXPECT_EQ(code({200, 1, 64, 40, 1}), StatusCode::kOk);
}

TEST_P(EngineRulesTest, RemoveJob) {
  EXPECT_EQ(engine_->RemoveJob(kJob).code(), StatusCode::kNotFound);
  Install(2, 64, 4, 0);
  EXPECT_TRUE(engine_->RemoveJob(kJob).ok());
  EXPECT_EQ(engine_->RemoveJob(kJob).code(), StatusCode::kNotFound);
  Send({.elems = {1}});
  ExpectCounters({{Counter::kRxPackets, 1}, {Counter::kDropUnknownJob, 1}});
  // Slots are free again: another job can take them.
  EXPECT_TRUE(engine_->AddJob({2, 1, 64, 0, 64}).ok());
}

TEST_P(EngineRulesTest, ReinstalledJobStartsEmpty) {
  Install(2, 64, 1, 5);
  Send({.rank = 0, .gen = 0, .elems = {100}});
  Send({.rank = 0, .gen = 1, .elems = {100}});  // early: gen 0 waits for rank 1
  ASSERT_TRUE(engine_->RemoveJob(kJob).ok());
  Install(2, 64, 1, 5);
  // The old rank-0 contributions are gone: rank 1 alone does not complete, rank 0 is not a dup.
  Send({.rank = 1, .gen = 0, .elems = {1}});
  EXPECT_TRUE(out_.got.empty());
  Send({.rank = 0, .gen = 0, .elems = {2}});
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(Elements(out_.got[0].bytes), std::vector<int32_t>{3});
  ExpectCounters({{Counter::kRxPackets, 4},
                  {Counter::kRxData, 3},
                  {Counter::kDropEarly, 1},
                  {Counter::kResults, 1}});
}

TEST_P(EngineRulesTest, JobsAreIsolated) {
  Install(2, 64, 2, 0, /*id=*/1);
  Install(2, 256, 2, 2, /*id=*/2);  // the pool slots right after job 1's
  Send({.job = 2, .rank = 0, .elems = {1000}});
  // Job 1 traffic, including a slot past its window (which would be job 2's pool slot).
  Send({.job = 1, .rank = 0, .slot = 2, .elems = {7}});
  Send({.job = 1, .rank = 1, .slot = 0, .elems = {7}});
  Send({.job = 1, .rank = 0, .slot = 0, .elems = {7}});
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(out_.got[0].job, 1);
  Send({.job = 2, .rank = 1, .elems = {1}});
  ASSERT_EQ(out_.got.size(), 2u);
  EXPECT_EQ(out_.got[1].job, 2);
  EXPECT_EQ(proto::GetJob(out_.got[1].bytes.data()), 2);
  EXPECT_EQ(Elements(out_.got[1].bytes), std::vector<int32_t>{1001});
  // Removing job 1 leaves job 2 alone.
  ASSERT_TRUE(engine_->RemoveJob(1).ok());
  Send({.job = 2, .rank = 0, .gen = 1, .elems = {1}});
  Send({.job = 2, .rank = 1, .gen = 1, .elems = {1}});
  ASSERT_EQ(out_.got.size(), 3u);
  EXPECT_EQ(Elements(out_.got[2].bytes), std::vector<int32_t>{2});
}

TEST_P(EngineRulesTest, BurstIsTheSameAsOneByOne) {
  Install(2);
  std::vector<std::vector<uint8_t>> pkts = {DataPacket({.rank = 0, .elems = {1}}),
                                            DataPacket({.rank = 0, .elems = {1}}),
                                            DataPacket({.rank = 1, .elems = {2}}),
                                            DataPacket({.rank = 1, .elems = {2}}),
                                            {1, 2, 3}};
  std::vector<std::span<const uint8_t>> spans(pkts.begin(), pkts.end());
  engine_->ProcessBurst(spans, out_);
  ASSERT_EQ(out_.got.size(), 2u);
  EXPECT_EQ(out_.got[1].dest, 1);
  ExpectCounters({{Counter::kRxPackets, 5},
                  {Counter::kRxData, 2},
                  {Counter::kResults, 1},
                  {Counter::kDuplicates, 1},
                  {Counter::kResultResends, 1},
                  {Counter::kDropMalformed, 1}});
}

// ---- Keyed jobs (rules K1-K4, docs/security.md) ------------------------------------------------

class KeyedRulesTest : public EngineRulesTest {
 protected:
  void InstallKeyed(proto::SecMode mode, uint16_t world, uint16_t window = 4, uint16_t id = kJob,
                    uint32_t base = 0) {
    JobConfig j{id, world, 64, base, window};
    j.security = TestSecurity(mode, static_cast<uint8_t>(id));
    ASSERT_TRUE(engine_->AddJob(j).ok());
    sec_[id] = j.security;
  }
  // d as its job's worker sends it (use = gen unless given).
  std::vector<uint8_t> Sealed(const DataSpec& d, int64_t use = -1) {
    const JobSecurity& s = sec_.at(d.job);
    return SealKeyed(DataPacket(d), s.mode, s.up, use < 0 ? d.gen : static_cast<uint64_t>(use));
  }
  // The result the engine must emit: elems summed, to `dest`, sealed with the down key.
  std::vector<uint8_t> Result(DataSpec sum, uint16_t dest, uint64_t use) {
    std::vector<uint8_t> b = DataPacket(sum);
    proto::SetType(b.data(), proto::MsgType::kResult);
    proto::SetRank(b.data(), dest);
    Reseal(b);
    const JobSecurity& s = sec_.at(sum.job);
    return SealKeyed(b, s.mode, s.down, use);
  }
  std::map<uint16_t, JobSecurity> sec_;
};

TEST_P(KeyedRulesTest, TagsVerifyAndResultsAreSealedInBothModes) {
  for (proto::SecMode mode : {proto::SecMode::kMac, proto::SecMode::kMacEncrypt}) {
    SCOPED_TRACE(proto::SecModeName(static_cast<uint8_t>(mode)));
    SetUp();
    out_.got.clear();
    sec_.clear();
    InstallKeyed(mode, 2);
    SendBytes(Sealed({.rank = 0, .slot = 1, .offset = 64, .elems = {1, -2, 3}}));
    SendBytes(Sealed({.rank = 1, .slot = 1, .offset = 64, .elems = {10, 20, -30}}));
    ASSERT_EQ(out_.got.size(), 1u);
    EXPECT_EQ(out_.got[0].bytes,
              Result({.slot = 1, .offset = 64, .elems = {11, 18, -27}}, proto::kRankAll, 0));
    EXPECT_EQ(proto::GetSec(out_.got[0].bytes.data()), static_cast<uint8_t>(mode));
    // The worker's view: the tag opens under the down key; in mac_encrypt only then is the sum
    // readable.
    std::vector<uint8_t> plain(12);
    EXPECT_TRUE(proto::OpenOnce(sec_[kJob].down, mode, out_.got[0].bytes,
                                proto::MakeNonce(proto::kRankAll, 1, 0), plain.data()));
    if (mode == proto::SecMode::kMacEncrypt) {
      EXPECT_EQ(proto::Load32(plain.data() + 4), 18u);
      EXPECT_NE(proto::Load32(out_.got[0].bytes.data() + proto::kHeaderBytes + 4), 18u);
    }
    // A retransmission (retx set, same tag) after the result: a re-send to that rank alone.
    std::vector<uint8_t> again =
        Sealed({.rank = 1, .slot = 1, .offset = 64, .elems = {10, 20, -30}});
    again[proto::kFlagsOffset] |= proto::flags::kRetx;
    SendBytes(again);
    ASSERT_EQ(out_.got.size(), 2u);
    EXPECT_EQ(out_.got[1].bytes, Result({.slot = 1, .offset = 64, .elems = {11, 18, -27}}, 1, 0));
    ExpectCounters({{Counter::kRxPackets, 3},
                    {Counter::kRxData, 2},
                    {Counter::kResults, 1},
                    {Counter::kRetransmissions, 1},
                    {Counter::kResultResends, 1}});
  }
}

TEST_P(KeyedRulesTest, ForgedPacketsAreDroppedWithoutTouchingTheSlot) {
  InstallKeyed(proto::SecMode::kMac, 2);
  const DataSpec d{.rank = 0, .elems = {5, 6}};
  const std::vector<uint8_t> good = Sealed(d);
  uint64_t forged = 0, other = 0;
  // Every bit of the message but retx: the tag fails, or an earlier rule drops it (sec: cross
  // job; version; job id: unknown; type, count: malformed; rank, slot: out of range; gen: stale
  // or early). Nothing is added: afterwards the real packets still make the right sum.
  for (size_t bit = 8; bit < good.size() * 8; ++bit) {
    if (bit / 8 == proto::kFlagsOffset && (1u << (bit % 8)) == proto::flags::kRetx) continue;
    std::vector<uint8_t> bad(good);
    bad[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    const CounterSnapshot before = engine_->counters();
    SendBytes(bad);
    const CounterSnapshot after = engine_->counters();
    if (Get(after, Counter::kDropForged) > Get(before, Counter::kDropForged)) {
      ++forged;
    } else {
      ++other;
    }
    EXPECT_EQ(Get(after, Counter::kRxData), 0u) << "bit " << bit;
  }
  EXPECT_GT(forged, 100u);  // every payload and tag bit, most header bits
  // Another key, the right fields: forged. A CRC-only packet naming the job: cross job.
  std::vector<uint8_t> wrong_key =
      SealKeyed(DataPacket(d), proto::SecMode::kMac, TestSecurity(proto::SecMode::kMac, 99).up, 0);
  SendBytes(wrong_key);
  SendBytes(DataPacket(d));
  std::vector<uint8_t> crc_with_sec = DataPacket(d);
  proto::SetSec(crc_with_sec.data(), static_cast<uint8_t>(proto::SecMode::kMacEncrypt));
  Reseal(crc_with_sec);
  SendBytes(crc_with_sec);
  const CounterSnapshot c = engine_->counters();
  EXPECT_EQ(Get(c, Counter::kDropForged), forged + 1);
  EXPECT_EQ(Get(c, Counter::kDropCrossJob) >= 2, true);
  SendBytes(good);
  SendBytes(Sealed({.rank = 1, .elems = {1, 1}}));
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(out_.got[0].bytes, Result({.elems = {6, 7}}, proto::kRankAll, 0));
}

TEST_P(KeyedRulesTest, CrossJobAndModesNeverMix) {
  InstallKeyed(proto::SecMode::kMac, 1, 4, /*id=*/1, 0);
  Install(1, 64, 4, 8, /*id=*/2);  // CRC only
  // A keyed job's packet renamed to the CRC job (its trailer is a tag, not a CRC): bad CRC.
  std::vector<uint8_t> p = Sealed({.job = 1, .elems = {1}});
  proto::SetJob(p.data(), 2);
  SendBytes(p);
  // A CRC packet (sec 0) of job 2 renamed to job 1: cross job. With a good CRC and sec 1 naming
  // the CRC job: cross job too.
  std::vector<uint8_t> q = DataPacket({.job = 2, .elems = {1}});
  proto::SetJob(q.data(), 1);
  Reseal(q);
  SendBytes(q);
  std::vector<uint8_t> r = DataPacket({.job = 2, .elems = {1}});
  proto::SetSec(r.data(), 1);
  Reseal(r);
  SendBytes(r);
  // Job 1's packet sealed for job 1 but naming job 1 under mac_encrypt: cross job (mode).
  std::vector<uint8_t> m = Sealed({.job = 1, .elems = {1}});
  proto::SetSec(m.data(), 2);
  SendBytes(m);
  ExpectCounters(
      {{Counter::kRxPackets, 4}, {Counter::kDropBadCrc, 1}, {Counter::kDropCrossJob, 3}});
  EXPECT_TRUE(out_.got.empty());
}

TEST_P(KeyedRulesTest, ReplayAfterTheGenerationWrapsIsCaught) {
  InstallKeyed(proto::SecMode::kMac, 1, 1);
  const std::vector<uint8_t> first = Sealed({.gen = 0, .elems = {42}});
  // 65536 uses of slot 0 (world 1: each completes at once), each under its own nonce.
  for (uint32_t use = 0; use < 65536; ++use) {
    SendBytes(Sealed({.gen = static_cast<uint16_t>(use), .elems = {1}}, use));
  }
  ASSERT_EQ(out_.got.size(), 65536u);
  // gen 0 again is the slot's next use (65536): the old packet's tag is for use 0.
  SendBytes(first);
  EXPECT_EQ(Get(engine_->counters(), Counter::kDropReplayed), 1u);
  EXPECT_EQ(Get(engine_->counters(), Counter::kDropForged), 0u);
  // The real next use carries use 65536, and its result does too.
  SendBytes(Sealed({.gen = 0, .elems = {7}}, 65536));
  ASSERT_EQ(out_.got.size(), 65537u);
  EXPECT_EQ(out_.got.back().bytes, Result({.gen = 0, .elems = {7}}, proto::kRankAll, 65536));
}

TEST_P(KeyedRulesTest, BadModeIsRefusedAtAddJob) {
  JobConfig j{kJob, 2, 64, 0, 4};
  j.security.mode = static_cast<proto::SecMode>(3);
  EXPECT_EQ(engine_->AddJob(j).code(), StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Engines, KeyedRulesTest, ::testing::ValuesIn(EnginesUnderTest()),
                         [](const auto& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(Engines, EngineRulesTest, ::testing::ValuesIn(EnginesUnderTest()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace ina::dp::testing
