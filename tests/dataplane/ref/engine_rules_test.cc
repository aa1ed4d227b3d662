// Unit tests of every rule and counter in ina/dp/engine.h, run against each engine the binary
// links (the reference engine here; the fast engine reuses this file in tests/dataplane/fast).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>
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
  p[proto::kTypeOffset] = static_cast<uint8_t>(proto::MsgType::kJoin);
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
  Install(3, 64, 4);
  Send({.rank = 0, .slot = 2, .offset = 512, .exp = 130, .next_exp = 1, .elems = {1, 2, 3}});
  Send({.rank = 2, .slot = 2, .offset = 512, .exp = 128, .next_exp = 7, .elems = {10, 20, 30}});
  EXPECT_TRUE(out_.got.empty());
  Send({.rank = 1, .slot = 2, .offset = 512, .exp = 129, .next_exp = 3, .elems = {100, 200, 300}});
  ASSERT_EQ(out_.got.size(), 1u);
  const Emitted& e = out_.got[0];
  EXPECT_EQ(e.job, kJob);
  EXPECT_EQ(e.dest, proto::kRankAll);
  ASSERT_EQ(e.bytes.size(), proto::MessageBytes(3));
  EXPECT_TRUE(proto::MessageCrcOk(e.bytes)) << "the result carries its CRC32C trailer";
  const proto::Header h = proto::DecodeHeader(e.bytes.data());
  proto::Header want;
  want.version = proto::kVersion;
  want.type = static_cast<uint8_t>(proto::MsgType::kResult);
  want.flags = 0;
  want.exp = 130;
  want.next_exp = 7;
  want.reserved = 0;
  want.job = kJob;
  want.rank = proto::kRankAll;
  want.slot = 2;
  want.gen = 0;
  want.count = 3;
  want.offset = 512;
  want.aux = 0;
  EXPECT_EQ(h, want);
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
  Send({.rank = 0, .slot = 1, .exp = 3, .elems = {5, 6}});
  Send({.rank = 1, .slot = 1, .exp = 4, .elems = {1, 1}});
  ASSERT_EQ(out_.got.size(), 1u);
  Send({.rank = 1, .slot = 1, .flags = proto::flags::kRetx, .elems = {1, 1}});
  // A duplicate without the retx flag gets the result too.
  Send({.rank = 0, .slot = 1, .elems = {9, 9}});
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
  Send({.rank = 0, .flags = 0, .exp = 200, .next_exp = 0, .elems = {1}});
  Send({.rank = 1,
        .flags = static_cast<uint8_t>(nf | rx | 0x80),
        .exp = 100,
        .next_exp = 5,
        .elems = {1}});
  Send({.rank = 2, .flags = rx, .exp = 255, .next_exp = 0, .elems = {1}});
  ASSERT_EQ(out_.got.size(), 1u);
  const proto::Header h = proto::DecodeHeader(out_.got[0].bytes.data());
  EXPECT_EQ(h.flags, nf | 0x80);
  EXPECT_EQ(h.exp, 255);
  EXPECT_EQ(h.next_exp, 5);
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

TEST_P(EngineRulesTest, MismatchOnOffsetCountOrInt32Flag) {
  Install(3);
  Send({.rank = 0, .offset = 64, .elems = {1, 2}});
  Send({.rank = 1, .offset = 128, .elems = {1, 2}});                                // offset
  Send({.rank = 1, .offset = 64, .elems = {1}});                                    // count
  Send({.rank = 1, .offset = 64, .flags = proto::flags::kInt32, .elems = {1, 2}});  // int32
  EXPECT_TRUE(out_.got.empty());
  // Nonfinite and retx differences are not mismatches; the mismatched ranks can still join.
  Send({.rank = 1, .offset = 64, .flags = proto::flags::kNonfinite, .elems = {1, 2}});
  Send({.rank = 2, .offset = 64, .flags = proto::flags::kRetx, .elems = {1, 2}});
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(Elements(out_.got[0].bytes), (std::vector<int32_t>{3, 6}));
  ExpectCounters({{Counter::kRxPackets, 6},
                  {Counter::kRxData, 3},
                  {Counter::kResults, 1},
                  {Counter::kRetransmissions, 1},
                  {Counter::kDropMismatch, 3}});
}

TEST_P(EngineRulesTest, MismatchIsPerGenerationNotAcrossReset) {
  Install(1);
  Send({.gen = 0, .offset = 0, .elems = {1, 2}});
  // Generation 2 resets copy 0: a different offset, count and flag are fine.
  Send({.gen = 1, .elems = {}});
  Send({.gen = 2, .offset = 99, .flags = proto::flags::kInt32, .elems = {4}});
  ASSERT_EQ(out_.got.size(), 3u);
  EXPECT_EQ(proto::GetOffset(out_.got[2].bytes.data()), 99u);
  EXPECT_EQ(Elements(out_.got[2].bytes), std::vector<int32_t>{4});
  ExpectCounters({{Counter::kRxPackets, 3}, {Counter::kRxData, 3}, {Counter::kResults, 3}});
}

TEST_P(EngineRulesTest, FirstUseAndStaleGenerations) {
  Install(2);
  // Fresh copies hold 0xFFFE / 0xFFFF: gens 0 and 1 are their next use; 2 and 3 are too far ahead.
  Send({.rank = 0, .gen = 2, .elems = {1}});
  Send({.rank = 0, .gen = 3, .elems = {1}});
  Send({.rank = 0, .gen = 0x8000, .elems = {1}});
  ExpectCounters({{Counter::kRxPackets, 3}, {Counter::kDropStale, 3}});
  Send({.rank = 0, .gen = 0, .elems = {1}});
  Send({.rank = 1, .gen = 1, .elems = {1}});
  ExpectCounters({{Counter::kRxPackets, 5}, {Counter::kDropStale, 3}, {Counter::kRxData, 2}});
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
  // Gen 0 is gone: stale. Gen 6 is two uses ahead of copy 0 (at 2): stale.
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
                  {Counter::kDropStale, 2}});
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
  Send({.rank = 0, .gen = 1, .elems = {100}});
  ASSERT_TRUE(engine_->RemoveJob(kJob).ok());
  Install(2, 64, 1, 5);
  // The old rank-0 contributions are gone: rank 1 alone does not complete, rank 0 is not a dup.
  Send({.rank = 1, .gen = 0, .elems = {1}});
  EXPECT_TRUE(out_.got.empty());
  Send({.rank = 0, .gen = 0, .elems = {2}});
  ASSERT_EQ(out_.got.size(), 1u);
  EXPECT_EQ(Elements(out_.got[0].bytes), std::vector<int32_t>{3});
  ExpectCounters({{Counter::kRxPackets, 4}, {Counter::kRxData, 4}, {Counter::kResults, 1}});
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

INSTANTIATE_TEST_SUITE_P(Engines, EngineRulesTest, ::testing::ValuesIn(EnginesUnderTest()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace ina::dp::testing
