// The progress engine without sockets, threads or sleeps: SlotWindow driven packet by packet with
// hand-made results, and Progress for several ranks over a fake transport into the in-process
// fabric (the real control plane and the reference engine), all on a fake clock. Each test runs
// in microseconds of real time; the fake clock says exactly when timers fire.
//
// Seeds: INA_SEED (printed) picks the tensors; the default is fixed.
#include "slot_window.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "expected.h"
#include "fake_net.h"
#include "ina/host/quant.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/sec.h"
#include "ina/proto/wire.h"
#include "progress.h"

namespace ina::host::internal {
namespace {

using ::ina::testing::FakeClock;
using ::ina::testing::FakeNet;
using ::ina::testing::FakeTransport;
using ::ina::testing::NetPacket;
using ::ina::testing::Verdict;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testutil::ExpectedFloat;
using testutil::ExpectedInt;
using testutil::RandomFloats;
using testutil::SameFloats;

constexpr proto::MsgType kData = proto::MsgType::kData;
constexpr proto::MsgType kResult = proto::MsgType::kResult;

uint64_t Seed() {
  static const uint64_t seed = [] {
    const char* e = std::getenv("INA_SEED");
    const uint64_t s = e ? std::strtoull(e, nullptr, 10) : 1;
    std::printf("INA_SEED=%llu\n", static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

WindowConfig Config(uint16_t world, uint16_t k, uint16_t window) {
  WindowConfig c;
  c.job_id = 7;
  c.rank = 0;
  c.world_size = world;
  c.k = k;
  c.window = window;
  c.progress_timeout = milliseconds(200);
  c.rto = RtoConfig{500, 5000, 200000};
  return c;
}

// The membership of the rank and lane of `c`: what its LEAVE needs (the Sim joins by hand).
JoinConfig JoinFor(const WindowConfig& c) {
  JoinConfig j;
  j.job_id = c.job_id;
  j.rank = c.rank;
  j.lane = c.lane;
  j.lanes = c.lanes;
  return j;
}

// ---- SlotWindow alone (world 1: a result is the packet itself, as type result) ----

// A packet's bytes as the fabric sees them (a packet with a body: header, body, trailer, as the
// verbs transport's gather list).
std::vector<uint8_t> Linear(const TxMessage& p) {
  std::vector<uint8_t> out(p.data, p.data + p.split * (p.body != nullptr));
  if (p.body == nullptr) return {p.data, p.data + p.len};
  out.insert(out.end(), p.body, p.body + p.body_len);
  out.insert(out.end(), p.data + p.split, p.data + p.len);
  return out;
}

// The packets the window queued, as bytes (and marks them sent at `now`).
std::vector<std::vector<uint8_t>> SendAll(SlotWindow& w, TimePoint now) {
  std::vector<std::vector<uint8_t>> out;
  TxMessage tx[64];
  while (w.tx_queued() > 0) {
    const size_t n = w.PeekTx(tx);
    for (size_t i = 0; i < n; ++i) out.push_back(Linear(tx[i]));
    w.OnSent(n, now);
  }
  return out;
}

// Seals a packet again after a test changed it (its last kCrcBytes are the trailer).
void Reseal(std::vector<uint8_t>& p) { proto::SealMessage(p.data(), p.size() - proto::kCrcBytes); }

// World 1's result for `pkt`: the same header as type result to all ranks, the same payload.
std::vector<uint8_t> ResultOf(std::vector<uint8_t> pkt) {
  proto::Header h = proto::DecodeHeader(pkt.data());
  h.type = kResult;
  h.rank = proto::kRankAll;
  h.flags &= static_cast<uint8_t>(~proto::flags::kRetx);
  proto::EncodeHeader(h, pkt.data());
  Reseal(pkt);
  return pkt;
}

class SlotWindowTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  TimePoint t0_ = clock_.Now();
};

TEST_F(SlotWindowTest, FloatOpStartsWithExponentRounds) {
  SlotWindow w(Config(1, 64, 4), quant::ActiveKernels());
  std::vector<float> x(64 * 6 + 10);
  for (size_t j = 0; j < x.size(); ++j) x[j] = std::ldexp(1.0f, static_cast<int>(j / 64));
  ASSERT_TRUE(w.Begin(OpDesc{true, x.data(), nullptr, x.size(), 0}, t0_).ok());
  const auto pkts = SendAll(w, t0_);
  ASSERT_EQ(pkts.size(), 4u);  // min(W = 4, B = 7) slots
  for (uint16_t s = 0; s < 4; ++s) {
    const proto::Header h = proto::DecodeHeader(pkts[s].data());
    EXPECT_EQ(h.type, kData);
    EXPECT_EQ(h.slot, s);
    EXPECT_EQ(h.gen, 0);
    EXPECT_EQ(h.count, 0);
    EXPECT_EQ(h.offset, s * 64u);
    EXPECT_EQ(h.exp, proto::kExpNone);
    bool nf = false;
    EXPECT_EQ(h.next_exp, quant::ActiveKernels().block_exp(x.data() + s * 64, 64, &nf));
    EXPECT_EQ(pkts[s].size(), proto::MessageBytes(0));
    EXPECT_TRUE(proto::MessageCrcOk(pkts[s]));
  }
  // Exponent result for slot 1 with an agreed exponent above the local one: block 1 goes out
  // with it, announcing block 5's local exponent.
  const uint8_t agreed = proto::DecodeHeader(pkts[1].data()).next_exp + 3;
  auto r = ResultOf(pkts[1]);
  proto::SetNextExp(r.data(), agreed);
  Reseal(r);
  ASSERT_TRUE(w.OnPacket(r, t0_).ok());
  const auto b1 = SendAll(w, t0_);
  ASSERT_EQ(b1.size(), 1u);
  const proto::Header h = proto::DecodeHeader(b1[0].data());
  EXPECT_EQ(h.slot, 1);
  EXPECT_EQ(h.gen, 1);
  EXPECT_EQ(h.count, 64);
  EXPECT_EQ(h.offset, 64u);
  EXPECT_EQ(h.exp, agreed);
  bool nf = false;
  EXPECT_EQ(h.next_exp, quant::ActiveKernels().block_exp(x.data() + 5 * 64, 64, &nf));
  // An agreed exponent below the local one is a fabric bug, reported as Internal.
  auto bad = ResultOf(pkts[2]);
  proto::SetNextExp(bad.data(), 1);
  Reseal(bad);
  EXPECT_EQ(w.OnPacket(bad, t0_).code(), StatusCode::kInternal);
}

TEST_F(SlotWindowTest, GenerationsCarryOnAcrossOpsAndSlotReuse) {
  SlotWindow w(Config(1, 64, 3), quant::ActiveKernels());
  std::vector<int32_t> a(64 * 7), b(64 * 2);
  for (int op = 0; op < 2; ++op) {
    std::vector<int32_t>& v = op == 0 ? a : b;
    ASSERT_TRUE(w.Begin(OpDesc{false, nullptr, v.data(), v.size(), uint64_t(op)}, t0_).ok());
    while (!w.done()) {
      for (auto& p : SendAll(w, t0_)) ASSERT_TRUE(w.OnPacket(ResultOf(p), t0_).ok());
    }
    w.End();
  }
  // Op 0: 7 blocks on 3 slots: slot 0 carries 0, 3, 6; slots 1, 2 two each. Op 1: slots 0, 1.
  EXPECT_EQ(w.slot(0).next_gen, 4);
  EXPECT_EQ(w.slot(1).next_gen, 3);
  EXPECT_EQ(w.slot(2).next_gen, 2);
  EXPECT_EQ(w.counters().results.Get(), 9u);
  EXPECT_EQ(w.counters().packets_sent.Get(), 9u);
}

// A new grant between ops (a lease's re-join): the window takes the new size within the buffers
// sized for the window asked, and every slot starts again from generation 0, as the fabric's new
// grant does; the counters carry on.
TEST_F(SlotWindowTest, RegrantResizesAndRestartsGenerations) {
  WindowConfig c = Config(1, 64, 2);
  c.capacity = 4;
  SlotWindow w(c, quant::ActiveKernels());
  EXPECT_EQ(w.capacity(), 4);
  std::vector<int32_t> v(64 * 6);
  auto run = [&](uint64_t seq) {
    ASSERT_TRUE(w.Begin(OpDesc{false, nullptr, v.data(), v.size(), seq}, t0_).ok());
    while (!w.done()) {
      for (auto& p : SendAll(w, t0_)) {
        const proto::Header h = proto::DecodeHeader(p.data());
        ASSERT_LT(h.slot, w.window());
        ASSERT_TRUE(w.OnPacket(ResultOf(p), t0_).ok());
      }
    }
    w.End();
  };
  run(0);
  EXPECT_EQ(w.slot(0).next_gen, 3);  // 6 blocks on 2 slots
  w.Regrant(4);
  EXPECT_EQ(w.window(), 4);
  EXPECT_EQ(w.slot(0).next_gen, 0);
  run(1);
  EXPECT_EQ(w.slot(0).next_gen, 2);  // 6 blocks on 4 slots: 0 and 1 twice, 2 and 3 once
  EXPECT_EQ(w.slot(3).next_gen, 1);
  w.Regrant(1);
  run(2);
  EXPECT_EQ(w.slot(0).next_gen, 6);
  EXPECT_EQ(w.counters().results.Get(), 18u);
}

TEST_F(SlotWindowTest, MismatchedResultsAreStaleAndIgnored) {
  SlotWindow w(Config(1, 64, 2), quant::ActiveKernels());
  std::vector<int32_t> v(64 * 2, 5);
  ASSERT_TRUE(w.Begin(OpDesc{false, nullptr, v.data(), v.size(), 0}, t0_).ok());
  const auto pkts = SendAll(w, t0_);
  ASSERT_EQ(pkts.size(), 2u);
  const auto good = ResultOf(pkts[0]);
  std::vector<std::vector<uint8_t>> bad;
  auto mutate = [&](auto fn) {  // well-formed, sealed, but not this slot's result
    auto p = good;
    fn(p);
    if (p.size() >= proto::MessageBytes(0)) Reseal(p);
    bad.push_back(p);
  };
  mutate([](auto& p) { proto::SetGen(p.data(), 1); });
  mutate([](auto& p) { proto::SetRank(p.data(), 3); });
  mutate([](auto& p) { proto::SetJob(p.data(), 8); });
  mutate([](auto& p) { proto::SetSlot(p.data(), 2); });
  mutate([](auto& p) { proto::SetCount(p.data(), 63); });
  mutate([](auto& p) { proto::SetOffset(p.data(), 64); });
  mutate([](auto& p) { p.erase(p.end() - proto::kCrcBytes - 1); });
  mutate([](auto& p) { proto::SetVersion(p.data(), proto::kVersion + 1); });
  mutate([](auto& p) { p.resize(10); });
  for (const auto& p : bad) ASSERT_TRUE(w.OnPacket(p, t0_).ok());
  EXPECT_EQ(w.counters().stale.Get(), bad.size());
  EXPECT_EQ(w.counters().results.Get(), 0u);
  EXPECT_EQ(w.blocks_remaining(), 2);
  ASSERT_TRUE(w.OnPacket(good, t0_).ok());
  ASSERT_TRUE(w.OnPacket(good, t0_).ok());  // a duplicate: the slot is no longer waiting
  EXPECT_EQ(w.counters().results.Get(), 1u);
  EXPECT_EQ(w.counters().stale.Get(), bad.size() + 1);
  EXPECT_EQ(w.blocks_remaining(), 1);
  EXPECT_EQ(w.counters().bad_crc.Get(), 0u);
}

// A float result's exp must be the exp this rank sent (the fabric sums a float block only when
// every rank sent the same one): a result with another exp (changed on the way, its CRC32C
// recomputed) is stale, never dequantized; the genuine one is taken after it. int32 results carry
// no exponent: theirs is not compared.
TEST_F(SlotWindowTest, FloatResultWithAnotherExpIsStale) {
  SlotWindow w(Config(1, 64, 1), quant::ActiveKernels());
  std::vector<float> x(64 * 2, 3.0f);
  ASSERT_TRUE(w.Begin(OpDesc{true, x.data(), nullptr, x.size(), 0}, t0_).ok());
  auto pkts = SendAll(w, t0_);
  ASSERT_EQ(pkts.size(), 1u);  // the exponent round (exp 0)
  auto round = ResultOf(pkts[0]);
  auto changed = round;
  proto::SetExp(changed.data(), 130);
  Reseal(changed);
  ASSERT_TRUE(w.OnPacket(changed, t0_).ok());
  EXPECT_EQ(w.counters().stale.Get(), 1u);
  ASSERT_TRUE(w.OnPacket(round, t0_).ok());
  pkts = SendAll(w, t0_);
  ASSERT_EQ(pkts.size(), 1u);  // block 0 at the agreed exponent
  const uint8_t e = proto::GetExp(pkts[0].data());
  ASSERT_NE(e, proto::kExpNone);
  for (uint8_t other : {static_cast<uint8_t>(e + 1), static_cast<uint8_t>(e - 1), uint8_t{0}}) {
    auto r = ResultOf(pkts[0]);
    proto::SetExp(r.data(), other);
    Reseal(r);
    ASSERT_TRUE(w.OnPacket(r, t0_).ok());
  }
  EXPECT_EQ(w.counters().stale.Get(), 4u);
  EXPECT_EQ(w.counters().results.Get(), 1u);
  ASSERT_TRUE(w.OnPacket(ResultOf(pkts[0]), t0_).ok());
  EXPECT_EQ(w.counters().results.Get(), 2u);
  EXPECT_EQ(x[0], 3.0f) << "block 0 dequantized at its own exponent";

  SlotWindow wi(Config(1, 64, 1), quant::ActiveKernels());
  std::vector<int32_t> v(64, 7);
  ASSERT_TRUE(wi.Begin(OpDesc{false, nullptr, v.data(), v.size(), 0}, t0_).ok());
  pkts = SendAll(wi, t0_);
  ASSERT_EQ(pkts.size(), 1u);
  auto r = ResultOf(pkts[0]);
  proto::SetExp(r.data(), 99);
  Reseal(r);
  ASSERT_TRUE(wi.OnPacket(r, t0_).ok());
  EXPECT_EQ(wi.counters().results.Get(), 1u);
  EXPECT_EQ(wi.counters().stale.Get(), 0u);
}

// Transport::RegisterTxMemory gets tx_memory(): every packet must be sent from inside it (the
// verbs transport posts those without a copy), quantized there, exponent rounds and blocks alike.
TEST_F(SlotWindowTest, EveryPacketIsSentFromTheTxMemory) {
  SlotWindow w(Config(1, 64, 4), quant::ActiveKernels());
  const std::span<const uint8_t> mem = w.tx_memory();
  ASSERT_GE(mem.size(), size_t{4} * proto::MessageBytes(64));
  std::vector<float> x(64 * 6, 0.25f);
  ASSERT_TRUE(w.Begin(OpDesc{true, x.data(), nullptr, x.size(), 0}, t0_).ok());
  size_t packets = 0;
  for (int round = 0; round < 10 && w.blocks_remaining() > 0; ++round) {
    TxMessage tx[64];
    std::vector<std::vector<uint8_t>> sent;
    while (w.tx_queued() > 0) {
      const size_t n = w.PeekTx(tx);
      for (size_t i = 0; i < n; ++i) {
        EXPECT_GE(tx[i].data, mem.data());
        EXPECT_LE(tx[i].data + tx[i].len, mem.data() + mem.size());
        sent.emplace_back(tx[i].data, tx[i].data + tx[i].len);
      }
      w.OnSent(n, t0_);
      packets += n;
    }
    for (const auto& p : sent) ASSERT_TRUE(w.OnPacket(ResultOf(p), t0_).ok());
  }
  EXPECT_EQ(w.blocks_remaining(), 0);
  EXPECT_GE(packets, 6u + 4u);  // 6 blocks and at least one exponent round per slot used
}

TEST_F(SlotWindowTest, EveryPacketSentIsSealedAndARetransmissionResealed) {
  SlotWindow w(Config(1, 64, 2), quant::ActiveKernels());
  std::vector<float> x(64 * 2, 1.5f);
  ASSERT_TRUE(w.Begin(OpDesc{true, x.data(), nullptr, x.size(), 0}, t0_).ok());
  auto exp_round = SendAll(w, t0_);
  ASSERT_EQ(exp_round.size(), 2u);
  for (const auto& p : exp_round) EXPECT_TRUE(proto::MessageCrcOk(p));
  // The blocks, quantized into the buffers: sealed after the payload was written.
  for (const auto& p : exp_round) ASSERT_TRUE(w.OnPacket(ResultOf(p), t0_).ok());
  const auto blocks = SendAll(w, t0_);
  ASSERT_EQ(blocks.size(), 2u);
  for (const auto& p : blocks) {
    EXPECT_EQ(p.size(), proto::MessageBytes(64));
    EXPECT_TRUE(proto::MessageCrcOk(p));
  }
  // Retransmissions carry the retx flag under a trailer that covers it.
  w.OnTimers(t0_ + seconds(10));
  const auto again = SendAll(w, t0_ + seconds(10));
  ASSERT_EQ(again.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(proto::GetFlags(again[i].data()) & proto::flags::kRetx);
    EXPECT_TRUE(proto::MessageCrcOk(again[i]));
    EXPECT_TRUE(std::equal(again[i].begin() + proto::kHeaderBytes,
                           again[i].end() - proto::kCrcBytes,
                           blocks[i].begin() + proto::kHeaderBytes))
        << "a retransmission resends the stored payload";
  }
}

TEST_F(SlotWindowTest, DamagedResultsAreDroppedAndTheTimerFetchesThemAgain) {
  SlotWindow w(Config(1, 64, 1), quant::ActiveKernels());
  std::vector<int32_t> v(64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i * 3 + 1);
  const std::vector<int32_t> want = v;
  ASSERT_TRUE(w.Begin(OpDesc{false, nullptr, v.data(), v.size(), 0}, t0_).ok());
  const auto sent = SendAll(w, t0_);
  ASSERT_EQ(sent.size(), 1u);
  const auto good = ResultOf(sent[0]);
  // Every single-bit error, header, payload or trailer (the version byte aside, which makes it
  // another protocol's packet): dropped, counted, nothing written into the tensor.
  uint64_t damaged = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    if (i == proto::kVersionOffset) continue;
    for (int bit = 0; bit < 8; ++bit) {
      auto b = good;
      b[i] ^= static_cast<uint8_t>(1u << bit);
      // A damaged payload would change the sum: make v show it if it got through.
      ASSERT_TRUE(w.OnPacket(b, t0_).ok());
      ++damaged;
    }
  }
  EXPECT_EQ(w.counters().bad_crc.Get(), damaged);
  EXPECT_EQ(w.counters().results.Get(), 0u);
  EXPECT_EQ(w.counters().stale.Get(), 0u);
  EXPECT_FALSE(w.done());
  // Loss recovery: the slot's timer resends the block; the fabric's answer is accepted.
  ASSERT_LT(w.NextDeadline(), TimePoint::max());
  const TimePoint later = w.NextDeadline();
  w.OnTimers(later);
  const auto retx = SendAll(w, later);
  ASSERT_EQ(retx.size(), 1u);
  EXPECT_TRUE(proto::GetFlags(retx[0].data()) & proto::flags::kRetx);
  ASSERT_TRUE(w.OnPacket(ResultOf(retx[0]), later).ok());
  EXPECT_TRUE(w.done());
  EXPECT_EQ(v, want);  // world 1: the result is the rank's own block
  EXPECT_EQ(w.counters().results.Get(), 1u);
}

// ---- Keyed jobs (docs/security.md) ----

std::vector<uint8_t> TestSecret(uint8_t seed) {
  std::vector<uint8_t> s(32);
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(seed * 29 + i);
  return s;
}

proto::TrafficKey KeyOf(const std::vector<uint8_t>& secret, proto::KeyDirection d, uint64_t grant) {
  return proto::DeriveTrafficKey(secret, d, 7, grant, proto::Session{}).value();
}

// The fabric's side of a keyed data packet for world 1: opens it under the grant's up key with
// nonce (rank, slot, use) (false: it does not open) and answers the result as the fabric would,
// sealed under the down key for all ranks.
bool KeyedResultOf(std::vector<uint8_t> pkt, const std::vector<uint8_t>& secret,
                   proto::SecMode mode, uint64_t grant, uint64_t use, std::vector<uint8_t>* out) {
  const proto::Header h = proto::DecodeHeader(pkt.data());
  std::vector<uint8_t> plain(size_t{h.count} * proto::kElemBytes + 16);
  if (!proto::OpenOnce(KeyOf(secret, proto::KeyDirection::kUp, grant), mode, pkt,
                       proto::MakeNonce(h.rank, h.slot, use), plain.data())) {
    return false;
  }
  if (mode == proto::SecMode::kMacEncrypt) {
    std::memcpy(pkt.data() + proto::kHeaderBytes, plain.data(),
                size_t{h.count} * proto::kElemBytes);
  }
  proto::Header r = h;
  r.type = kResult;
  r.rank = proto::kRankAll;
  r.flags &= static_cast<uint8_t>(~proto::flags::kRetx);
  proto::EncodeHeader(r, pkt.data());
  EXPECT_TRUE(proto::SealOnce(KeyOf(secret, proto::KeyDirection::kDown, grant), mode, pkt.data(),
                              pkt.size() - proto::kTagBytes,
                              proto::MakeNonce(proto::kRankAll, h.slot, use)));
  *out = std::move(pkt);
  return true;
}

class KeyedWindowTest : public SlotWindowTest,
                        public ::testing::WithParamInterface<proto::SecMode> {};

// Data packets carry the tag under the grant's up key, nonce (rank, slot, use); in mac_encrypt
// the payload on the wire is not the plaintext. A retransmission is the same bytes but the retx
// bit. Results are verified before use: a forged, rewritten or CRC-only one is counted and
// dropped, the timer asks again, and the real one completes the op exact. A new grant takes new
// keys and starts the uses again.
TEST_P(KeyedWindowTest, DataTaggedResultsVerifiedRetransmissionsTheSameBytes) {
  const proto::SecMode mode = GetParam();
  const auto secret = TestSecret(1);
  WindowConfig c = Config(1, 64, 2);
  c.sec = mode;
  c.secret = JobSecret(secret);
  c.capacity = 2;
  SlotWindow w(c, quant::ActiveKernels());
  std::vector<int32_t> v(64 * 3);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i * 7 - 100);
  const std::vector<int32_t> want = v;
  std::vector<uint8_t> wire(64 * proto::kElemBytes);
  quant::ActiveKernels().to_wire(v.data(), 64, wire.data());
  ASSERT_TRUE(w.Begin(OpDesc{false, nullptr, v.data(), v.size(), 0}, t0_).ok());
  auto sent = SendAll(w, t0_);
  ASSERT_EQ(sent.size(), 2u);
  for (const auto& pk : sent) {
    EXPECT_EQ(pk.size(), proto::MessageBytes(64, static_cast<uint8_t>(mode)));
    EXPECT_EQ(proto::GetSec(pk.data()), static_cast<uint8_t>(mode));
    EXPECT_FALSE(proto::MessageCrcOk(pk));
  }
  EXPECT_EQ(std::memcmp(sent[0].data() + proto::kHeaderBytes, wire.data(), wire.size()) == 0,
            mode == proto::SecMode::kMac);
  std::vector<uint8_t> r0;
  EXPECT_FALSE(KeyedResultOf(sent[0], TestSecret(2), mode, 1, 0, &r0)) << "another secret";
  EXPECT_FALSE(KeyedResultOf(sent[0], secret, mode, 2, 0, &r0)) << "another grant";
  EXPECT_FALSE(KeyedResultOf(sent[0], secret, mode, 1, 1, &r0)) << "another use";
  ASSERT_TRUE(KeyedResultOf(sent[0], secret, mode, 1, 0, &r0));

  // Forgeries of slot 0's result: every single-bit change of header, payload or tag (the
  // version and sec bytes aside: the former is another protocol, the latter another mode; and the
  // retx flag, which the tag does not cover), and the result CRC-sealed. None is used.
  uint64_t forged = 0;
  for (size_t i = 0; i < r0.size(); ++i) {
    if (i == proto::kVersionOffset || i == proto::kSecOffset) continue;
    for (int bit = 0; bit < 8; ++bit) {
      if (i == proto::kFlagsOffset && (1u << bit) == proto::flags::kRetx) continue;
      auto b = r0;
      b[i] ^= static_cast<uint8_t>(1u << bit);
      ASSERT_TRUE(w.OnPacket(b, t0_).ok());
      ++forged;
    }
  }
  auto crc_only = r0;
  crc_only.resize(proto::MessageBytes(64));
  proto::SetSec(crc_only.data(), 0);
  Reseal(crc_only);
  ASSERT_TRUE(w.OnPacket(crc_only, t0_).ok());
  EXPECT_EQ(w.counters().results.Get(), 0u);
  EXPECT_EQ(w.counters().forged.Get() + w.counters().stale.Get(), forged + 1);
  EXPECT_GE(w.counters().forged.Get(), 8u * (r0.size() - proto::kHeaderBytes));  // payload, tag
  EXPECT_FALSE(w.done());

  // The timer resends both slots: the same bytes but retx.
  const TimePoint later = w.NextDeadline();
  w.OnTimers(later);
  const auto retx = SendAll(w, later);
  ASSERT_EQ(retx.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    auto a = retx[i];
    EXPECT_TRUE(proto::GetFlags(a.data()) & proto::flags::kRetx);
    proto::SetFlags(a.data(), proto::GetFlags(a.data()) & ~proto::flags::kRetx);
    EXPECT_EQ(a, sent[proto::GetSlot(a.data())]);
  }
  ASSERT_TRUE(w.OnPacket(r0, later).ok());
  std::vector<uint8_t> r1;
  ASSERT_TRUE(KeyedResultOf(retx[1], secret, mode, 1, 0, &r1));
  ASSERT_TRUE(w.OnPacket(r1, later).ok());
  // Block 2 on slot 0, use 1.
  const auto b2 = SendAll(w, later);
  ASSERT_EQ(b2.size(), 1u);
  EXPECT_EQ(w.slot(0).use, 1u);
  std::vector<uint8_t> r2;
  ASSERT_TRUE(KeyedResultOf(b2[0], secret, mode, 1, 1, &r2));
  ASSERT_TRUE(w.OnPacket(r2, later).ok());
  ASSERT_TRUE(w.done());
  EXPECT_EQ(v, want);  // world 1: the result is the rank's own block
  EXPECT_EQ(w.counters().results.Get(), 3u);
  w.End();

  // Grant 2: its own keys, uses from 0 again.
  w.Regrant(2);
  EXPECT_EQ(w.grant(), 2u);
  ASSERT_TRUE(w.Begin(OpDesc{false, nullptr, v.data(), 64, 1}, later).ok());
  const auto g2 = SendAll(w, later);
  ASSERT_EQ(g2.size(), 1u);
  EXPECT_FALSE(KeyedResultOf(g2[0], secret, mode, 1, 0, &r0));
  ASSERT_TRUE(KeyedResultOf(g2[0], secret, mode, 2, 0, &r0));
  ASSERT_TRUE(w.OnPacket(r0, later).ok());
  EXPECT_TRUE(w.done());
  EXPECT_TRUE(w.CheckProgress(later).ok());
}

// A keyed window whose secret has a bad length (CommConfig::Validate refuses it first; a window
// built by hand gets the error at Begin, and never sends an unsealed packet).
TEST_F(SlotWindowTest, KeyedWindowWithABadSecretFailsAtBegin) {
  WindowConfig c = Config(1, 64, 1);
  c.sec = proto::SecMode::kMac;
  c.secret = JobSecret(std::vector<uint8_t>(8, 1));
  SlotWindow w(c, quant::ActiveKernels());
  std::vector<int32_t> v(64);
  const Status s = w.Begin(OpDesc{false, nullptr, v.data(), v.size(), 0}, t0_);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(w.tx_queued(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Modes, KeyedWindowTest,
                         ::testing::Values(proto::SecMode::kMac, proto::SecMode::kMacEncrypt),
                         [](const ::testing::TestParamInfo<proto::SecMode>& info) {
                           return std::string(info.param == proto::SecMode::kMac ? "mac"
                                                                                 : "mac_encrypt");
                         });

TEST_F(SlotWindowTest, TailLossRetransmitsWithBackoffAndKarnSkipsTheSample) {
  WindowConfig c = Config(1, 64, 1);
  c.progress_timeout = milliseconds(10000);
  SlotWindow w(c, quant::ActiveKernels());
  std::vector<int32_t> v(64, 1);
  ASSERT_TRUE(w.Begin(OpDesc{false, nullptr, v.data(), v.size(), 0}, t0_).ok());
  auto first = SendAll(w, t0_);
  ASSERT_EQ(first.size(), 1u);
  // Nothing comes back: retries at 5, 15, 35, 75 ms (RTO 5 ms, doubling each try).
  const int64_t expect_at_ms[] = {5, 15, 35, 75};
  for (int i = 0; i < 4; ++i) {
    const TimePoint due = t0_ + milliseconds(expect_at_ms[i]);
    EXPECT_EQ(w.NextDeadline(), due) << "try " << i + 1;
    w.OnTimers(due - microseconds(1));
    EXPECT_EQ(w.tx_queued(), 0u) << "early at try " << i + 1;
    w.OnTimers(due);
    auto re = SendAll(w, due);
    ASSERT_EQ(re.size(), 1u) << "try " << i + 1;
    EXPECT_TRUE(proto::GetFlags(re[0].data()) & proto::flags::kRetx);
    EXPECT_EQ(w.slot(0).retries, uint32_t(i + 1));
    EXPECT_EQ(w.slot(0).rto_us, 5000 << (i + 1));
  }
  EXPECT_EQ(w.counters().retransmissions.Get(), 4u);
  EXPECT_EQ(w.counters().packets_sent.Get(), 5u);
  // The result of a retransmitted packet: accepted, but no RTT sample (Karn).
  ASSERT_TRUE(w.OnPacket(ResultOf(first[0]), t0_ + milliseconds(76)).ok());
  EXPECT_TRUE(w.done());
  EXPECT_FALSE(w.rto().has_sample());
  EXPECT_EQ(w.rto().rto_us(), 5000);
}

TEST_F(SlotWindowTest, FirstTransmissionResultUpdatesTheEstimate) {
  SlotWindow w(Config(1, 64, 1), quant::ActiveKernels());
  std::vector<int32_t> v(64 * 2, 1);
  ASSERT_TRUE(w.Begin(OpDesc{false, nullptr, v.data(), v.size(), 0}, t0_).ok());
  auto p = SendAll(w, t0_);
  ASSERT_TRUE(w.OnPacket(ResultOf(p[0]), t0_ + microseconds(1000)).ok());
  EXPECT_TRUE(w.rto().has_sample());
  EXPECT_EQ(w.rto().rto_us(), 3000);  // 1000 + 4 * 500
  SendAll(w, t0_ + microseconds(1000));
  EXPECT_EQ(w.slot(0).rto_us, 3000);  // the next packet starts with the new estimate
}

// RACK-like evidence: a slot past its own timer is not retransmitted while results keep coming for
// packets sent at about the same time (the fabric is a queue); it is once a packet sent at least
// one RTO after it got its result.
TEST_F(SlotWindowTest, LossIsDeclaredOnlyOnTimeOrderedEvidence) {
  WindowConfig c = Config(1, 64, 2);
  c.rto = RtoConfig{1000, 1000, 1000};  // pinned, so the times below are exact
  c.progress_timeout = milliseconds(10000);
  SlotWindow w(c, quant::ActiveKernels());
  std::vector<int32_t> v(64 * 6, 1);  // slot 0: blocks 0, 2, 4; slot 1: blocks 1, 3, 5
  ASSERT_TRUE(w.Begin(OpDesc{false, nullptr, v.data(), v.size(), 0}, t0_).ok());
  auto p = SendAll(w, t0_);  // block 0 (lost), block 1
  ASSERT_EQ(p.size(), 2u);
  auto at = [&](int us) { return t0_ + microseconds(us); };
  ASSERT_TRUE(w.OnPacket(ResultOf(p[1]), at(600)).ok());
  auto b3 = SendAll(w, at(600));
  ASSERT_EQ(b3.size(), 1u);
  w.OnTimers(at(1000));  // slot 0's own timer expired, but results are flowing: not lost yet
  EXPECT_EQ(w.tx_queued(), 0u);
  ASSERT_TRUE(w.OnPacket(ResultOf(b3[0]), at(1200)).ok());  // sent at 600: < one RTO after 0
  auto b5 = SendAll(w, at(1200));
  ASSERT_EQ(b5.size(), 1u);
  w.OnTimers(at(1250));
  EXPECT_EQ(w.tx_queued(), 0u);
  EXPECT_EQ(w.NextDeadline(), at(2200));                    // last progress + RTO, without evidence
  ASSERT_TRUE(w.OnPacket(ResultOf(b5[0]), at(1300)).ok());  // sent at 1200 >= 0 + RTO: evidence
  EXPECT_EQ(w.NextDeadline(), at(1000));
  w.OnTimers(at(1300));
  auto re = SendAll(w, at(1300));
  ASSERT_EQ(re.size(), 1u);
  EXPECT_EQ(proto::GetSlot(re[0].data()), 0);
  EXPECT_TRUE(proto::GetFlags(re[0].data()) & proto::flags::kRetx);
}

TEST_F(SlotWindowTest, ProgressTimeoutAtExactlyTheConfiguredTime) {
  SlotWindow w(Config(1, 64, 2), quant::ActiveKernels());
  std::vector<int32_t> v(64 * 4, 1);
  ASSERT_TRUE(w.Begin(OpDesc{false, nullptr, v.data(), v.size(), 0}, t0_).ok());
  auto p = SendAll(w, t0_);
  ASSERT_TRUE(w.OnPacket(ResultOf(p[0]), t0_ + milliseconds(50)).ok());  // progress at 50 ms
  SendAll(w, t0_ + milliseconds(50));  // block 2 on slot 0; slot 1 (block 1) waits longest
  EXPECT_TRUE(w.CheckProgress(t0_ + milliseconds(250) - microseconds(1)).ok());
  const Status s = w.CheckProgress(t0_ + milliseconds(250));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("no result for 200 ms"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("slot 1 gen 0 (block 1)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("3 of 4 blocks pending"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("queued for sending"), std::string::npos) << s.message();
}

// A transport that stopped taking packets (a full TX queue nobody drains): the stall says so, as
// the slots waiting in the queue are not retransmitted (and not counted) again meanwhile.
TEST_F(SlotWindowTest, AStallSaysWhenTheTransportStoppedTakingPackets) {
  SlotWindow w(Config(1, 64, 2), quant::ActiveKernels());
  std::vector<int32_t> v(64 * 4, 1);
  ASSERT_TRUE(w.Begin(OpDesc{false, nullptr, v.data(), v.size(), 0}, t0_).ok());
  auto p = SendAll(w, t0_ + milliseconds(10));
  ASSERT_TRUE(w.OnPacket(ResultOf(p[0]), t0_ + milliseconds(20)).ok());  // block 2 queued...
  EXPECT_EQ(w.tx_queued(), 1u);                                          // ...and never taken
  const Status s = w.CheckProgress(t0_ + milliseconds(220));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("1 packets queued for sending, the transport took none for 210 ms"),
            std::string::npos)
      << s.message();
}

TEST_F(SlotWindowTest, JobAbortedAndRankLeft) {
  auto control = [](proto::ErrorCode code, uint16_t leaver, uint32_t calls) {
    std::vector<uint8_t> b(proto::MessageBytes(0));
    // count and offset as rank_left names them (left_rank, calls); job_aborted ignores them.
    proto::ErrorMsg{.job = 7, .count = leaver, .offset = calls, .code = code}.Encode(b.data());
    Reseal(b);
    return b;
  };
  SlotWindow w(Config(2, 64, 2), quant::ActiveKernels());
  std::vector<int32_t> v(64, 1);
  // Idle: rank_left is recorded; call #3 and later cannot start, #2 can.
  ASSERT_TRUE(w.OnPacket(control(proto::ErrorCode::kRankLeft, 1, 3), t0_).ok());
  EXPECT_EQ(w.peer_left_after(), 3u);
  ASSERT_TRUE(w.Begin(OpDesc{false, nullptr, v.data(), v.size(), 2}, t0_).ok());
  // A later, larger count changes nothing; a smaller one during call #2 aborts it.
  EXPECT_TRUE(w.OnPacket(control(proto::ErrorCode::kRankLeft, 1, 5), t0_).ok());
  const Status left = w.OnPacket(control(proto::ErrorCode::kRankLeft, 1, 2), t0_);
  EXPECT_EQ(left.code(), StatusCode::kAborted);
  EXPECT_NE(left.message().find("rank 1 left the job after 2 calls; call #2"), std::string::npos)
      << left.message();
  w.End();
  EXPECT_EQ(w.Begin(OpDesc{false, nullptr, v.data(), v.size(), 3}, t0_).code(),
            StatusCode::kAborted);
  // job_aborted fails at once, in an op or not; another job's error is stale.
  SlotWindow x(Config(2, 64, 2), quant::ActiveKernels());
  auto other = control(proto::ErrorCode::kJobAborted, 0, 0);
  proto::SetJob(other.data(), 8);
  Reseal(other);
  EXPECT_TRUE(x.OnPacket(other, t0_).ok());
  EXPECT_EQ(x.counters().stale.Get(), 1u);
  EXPECT_EQ(x.OnPacket(control(proto::ErrorCode::kJobAborted, 0, 0), t0_).code(),
            StatusCode::kAborted);
}

// error(rank_mismatch): the fabric ended the job because two ranks' blocks disagree; the op fails
// at once (idle too) with Aborted naming the slot, generation and rank the fabric reported.
TEST_F(SlotWindowTest, RankMismatchFailsAtOnceNamingWhere) {
  std::vector<uint8_t> b(proto::MessageBytes(0));
  proto::ErrorMsg{.job = 7, .rank = 0, .code = proto::ErrorCode::kRankMismatch}
      .set_mismatch_slot(3)
      .set_mismatch_gen(12)
      .set_proving_rank(2)
      .Encode(b.data());
  Reseal(b);
  SlotWindow w(Config(2, 64, 4), quant::ActiveKernels());
  std::vector<int32_t> v(1000, 1);
  ASSERT_TRUE(w.Begin(OpDesc{false, nullptr, v.data(), v.size(), 0}, t0_).ok());
  const Status s = w.OnPacket(b, t0_);
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_NE(s.message().find("ranks disagree (rank 2's block for slot 3 generation 12"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("same all-reduce calls"), std::string::npos) << s.message();
  w.End();
  EXPECT_EQ(w.OnPacket(b, t0_).code(), StatusCode::kAborted);
}

// error(unknown_job) (the switch holds no such job) and error(peer_refused) (a tree's leaf refused
// another rank's JOIN after this rank's leaf granted it the job) fail the op at once, saying why;
// the refusal is worded as at the join, with this rank's own value.
TEST_F(SlotWindowTest, UnknownJobAndALeafsRefusalFailAtOnceSayingWhy) {
  auto error = [](const proto::ErrorMsg& e) {
    std::vector<uint8_t> b(proto::MessageBytes(0));
    e.Encode(b.data());
    Reseal(b);
    return b;
  };
  std::vector<int32_t> v(1000, 1);
  SlotWindow w(Config(4, 64, 4), quant::ActiveKernels());
  ASSERT_TRUE(w.Begin(OpDesc{false, nullptr, v.data(), v.size(), 0}, t0_).ok());
  const Status refused =
      w.OnPacket(error(proto::ErrorMsg{.job = 7, .rank = 0, .code = proto::ErrorCode::kPeerRefused}
                           .set_join_param(proto::JoinParam::kWorldSize)
                           .set_refused_rank(3)
                           .set_refused_value(16)
                           .set_tree_rank(1)),
                 t0_);
  EXPECT_EQ(refused.code(), StatusCode::kAborted);
  EXPECT_NE(refused.message().find("rank 3's JOIN was refused, so the job cannot start: its world "
                                   "size 16 differs from 4, this rank's"),
            std::string::npos)
      << refused.message();
  SlotWindow x(Config(4, 64, 4), quant::ActiveKernels());
  const Status gone = x.OnPacket(
      error(proto::ErrorMsg{.job = 7, .rank = 0, .code = proto::ErrorCode::kUnknownJob}), t0_);
  EXPECT_EQ(gone.code(), StatusCode::kAborted);
  EXPECT_NE(gone.message().find("not held by the fabric any more"), std::string::npos)
      << gone.message();
}

// A quantizing stager run by the test (staged_op.h's contract, synchronous): the CPU kernels for
// the local exponents, and a block is quantized into wire() at its agreed exponent only when the
// test says so (MakeReady), as a domain whose Quantize completes late.
// With `body` it quantizes into a body region of its own instead (GPUDirect RDMA: tx_body(),
// PayloadCrc), and results still come back into wire().
class ScriptedStager final : public BlockStager {
 public:
  ScriptedStager(const std::vector<float>& x, size_t k, int precision, bool body = false)
      : x_(x), k_(k), precision_(precision), wire_(4 * x.size()), body_(body ? 4 * x.size() : 0) {
    const size_t blocks = (x.size() + k - 1) / k;
    agreed.assign(blocks, 0);
    ready.assign(blocks, false);
    crcs_.assign(blocks, 0);
  }
  Status Acquire(int64_t) override { return Internal("Acquire on a quantizing stager"); }
  Status Release(int64_t b) override {
    released.push_back(b);
    return Status::Ok();
  }
  bool quantizes() const override { return true; }
  uint8_t* wire() const override { return const_cast<uint8_t*>(wire_.data()); }
  Status LocalExp(int64_t b, uint8_t* exp, bool* nonfinite) override {
    *exp = quant::ScalarKernels().block_exp(x_.data() + b * k_, Count(b), nonfinite);
    return Status::Ok();
  }
  Status Agree(int64_t b, uint8_t exp) override {
    agreed[b] = exp;
    return Status::Ok();
  }
  Result<bool> Quantized(int64_t b) override { return static_cast<bool>(ready[b]); }
  const uint8_t* tx_body() const override { return body_.empty() ? nullptr : body_.data(); }
  uint32_t PayloadCrc(int64_t b) const override { return crcs_.at(b); }
  void MakeReady(int64_t b) {
    uint8_t* out = (body_.empty() ? wire_.data() : body_.data()) + 4 * b * k_;
    bool nonfinite = false;
    (void)quant::ScalarKernels().block_exp(x_.data() + b * k_, Count(b), &nonfinite);
    if (nonfinite) {
      std::memset(out, 0, 4 * Count(b));  // as HostDomain: never sent
    } else {
      quant::ScalarKernels().quantize(x_.data() + b * k_, Count(b), agreed[b], precision_, out);
    }
    crcs_[b] = proto::Crc32c(0, out, 4 * Count(b));
    ready[b] = true;
  }
  std::span<const uint8_t> body() const { return body_; }

  std::vector<uint8_t> agreed;
  std::vector<bool> ready;
  std::vector<int64_t> released;

 private:
  size_t Count(int64_t b) const { return std::min(k_, x_.size() - b * k_); }
  const std::vector<float>& x_;
  const size_t k_;
  const int precision_;
  std::vector<uint8_t> wire_;
  std::vector<uint8_t> body_;
  std::vector<uint32_t> crcs_;
};

// With a quantizing stager the window sends the same bytes as the plain window; a slot whose block
// is not quantized yet is parked (nothing queued, no timer) until OnReady finds it ready; results
// go to the stager's wire() and Release (the op has no tensor pointer: the stager owns it).
TEST_F(SlotWindowTest, QuantizingStagerParksSlotsAndSendsTheSameBytes) {
  SlotWindow plain(Config(1, 64, 4), quant::ScalarKernels());
  SlotWindow qw(Config(1, 64, 4), quant::ScalarKernels());
  std::vector<float> x(64 * 6 + 10), y;
  for (size_t j = 0; j < x.size(); ++j) x[j] = std::ldexp(1.0f + j % 7, static_cast<int>(j / 64));
  y = x;
  ScriptedStager st(x, 64, quant::Precision(1));
  ASSERT_TRUE(plain.Begin(OpDesc{true, y.data(), nullptr, y.size(), 0}, t0_).ok());
  OpDesc qd{true, nullptr, nullptr, x.size(), 0};
  qd.stager = &st;
  ASSERT_TRUE(qw.Begin(qd, t0_).ok());
  const auto rounds_p = SendAll(plain, t0_);
  const auto rounds_q = SendAll(qw, t0_);
  ASSERT_EQ(rounds_q, rounds_p);  // the exponent rounds, byte for byte
  // Slot 1's exponent result: block 1's exponent is agreed; not quantized yet: parked.
  ASSERT_TRUE(plain.OnPacket(ResultOf(rounds_p[1]), t0_).ok());
  ASSERT_TRUE(qw.OnPacket(ResultOf(rounds_q[1]), t0_).ok());
  EXPECT_EQ(st.agreed[1], proto::DecodeHeader(rounds_p[1].data()).next_exp);
  EXPECT_EQ(qw.tx_queued(), 0u);
  EXPECT_EQ(qw.parked(), 1);
  EXPECT_TRUE(qw.slot(1).parked);
  EXPECT_FALSE(qw.slot(1).busy);
  ASSERT_TRUE(qw.OnReady().ok());  // still not ready
  EXPECT_EQ(qw.tx_queued(), 0u);
  st.MakeReady(1);
  ASSERT_TRUE(qw.OnReady().ok());
  EXPECT_EQ(qw.parked(), 0);
  const auto b1p = SendAll(plain, t0_);
  const auto b1q = SendAll(qw, t0_);
  ASSERT_EQ(b1q.size(), 1u);
  EXPECT_EQ(b1q, b1p);  // block 1, byte for byte (header, payload, trailer)
  // Block 5 (1 + W) is ready before block 1's result brings its exponent: sent at once.
  st.agreed[5] = proto::DecodeHeader(b1p[0].data()).next_exp;
  st.MakeReady(5);
  ASSERT_TRUE(plain.OnPacket(ResultOf(b1p[0]), t0_).ok());
  ASSERT_TRUE(qw.OnPacket(ResultOf(b1q[0]), t0_).ok());
  EXPECT_EQ(st.released, std::vector<int64_t>{1});
  EXPECT_EQ(std::memcmp(st.wire() + 4 * 64, b1q[0].data() + proto::kHeaderBytes, 4 * 64), 0);
  EXPECT_EQ(qw.parked(), 0);
  const auto b5p = SendAll(plain, t0_);
  const auto b5q = SendAll(qw, t0_);
  ASSERT_EQ(b5q.size(), 1u);
  EXPECT_EQ(b5q, b5p);
}

// GPUDirect RDMA: with a stager whose blocks lie in a body region (tx_body), a block's packet is
// the slot's header and trailer in the TX buffer around a body pointing into that region, sealed
// from the header's CRC combined with the block's payload CRC; the fabric sees the same bytes as
// from the plain window, first sends and retransmissions alike. A nonfinite block (zeros) and the
// exponent rounds have no body.
TEST_F(SlotWindowTest, BlocksFromABodyRegionAreTheSameBytesSealedByCombiningCrcs) {
  constexpr size_t kK = 64;
  SlotWindow plain(Config(1, kK, 4), quant::ScalarKernels());
  SlotWindow bw(Config(1, kK, 4), quant::ScalarKernels());
  std::vector<float> x(kK * 6 + 10);
  for (size_t j = 0; j < x.size(); ++j) x[j] = std::ldexp(1.0f + j % 5, static_cast<int>(j % 9));
  x[2 * kK + 3] = std::numeric_limits<float>::infinity();  // block 2: nonfinite
  std::vector<float> y = x;
  ScriptedStager st(x, kK, quant::Precision(1), /*body=*/true);
  ASSERT_TRUE(plain.Begin(OpDesc{true, y.data(), nullptr, y.size(), 0}, t0_).ok());
  OpDesc bd{true, nullptr, nullptr, x.size(), 0};
  bd.stager = &st;
  ASSERT_TRUE(bw.Begin(bd, t0_).ok());
  auto pp = SendAll(plain, t0_);
  auto pb = SendAll(bw, t0_);
  ASSERT_EQ(pb, pp);  // exponent rounds
  const std::span<const uint8_t> body = st.body(), mem = bw.tx_memory();
  uint64_t with_body = 0;
  for (int round = 0; round < 20 && plain.blocks_remaining() > 0; ++round) {
    for (size_t i = 0; i < pp.size(); ++i) {
      ASSERT_TRUE(plain.OnPacket(ResultOf(pp[i]), t0_).ok());
      ASSERT_TRUE(bw.OnPacket(ResultOf(pb[i]), t0_).ok());
    }
    for (size_t b = 0; b < st.ready.size(); ++b) {
      if (!st.ready[b] && st.agreed[b] != 0) st.MakeReady(static_cast<int64_t>(b));
    }
    ASSERT_TRUE(bw.OnReady().ok());
    // Look at the queued packets before sending them.
    TxMessage tx[16];
    const size_t n = bw.PeekTx(tx);
    for (size_t i = 0; i < n; ++i) {
      if (tx[i].body == nullptr) continue;
      ++with_body;
      EXPECT_EQ(tx[i].len, proto::kHeaderBytes + proto::kCrcBytes);
      EXPECT_EQ(tx[i].split, proto::kHeaderBytes);
      EXPECT_GE(tx[i].body, body.data());
      EXPECT_LE(tx[i].body + tx[i].body_len, body.data() + body.size());
      EXPECT_GE(tx[i].data, mem.data());
      EXPECT_LE(tx[i].data + tx[i].len, mem.data() + mem.size());
      EXPECT_FALSE(proto::GetFlags(tx[i].data) & proto::flags::kNonfinite);
    }
    pp = SendAll(plain, t0_);
    pb = SendAll(bw, t0_);
    ASSERT_EQ(pb, pp) << "round " << round;
    for (const auto& p : pb) EXPECT_TRUE(proto::MessageCrcOk(p));
    if (round == 1) {  // retransmissions: the retx flag, resealed by combining again
      plain.OnTimers(t0_ + seconds(10));
      bw.OnTimers(t0_ + seconds(10));
      const auto rp = SendAll(plain, t0_ + seconds(10));
      const auto rb = SendAll(bw, t0_ + seconds(10));
      ASSERT_FALSE(rb.empty());
      ASSERT_EQ(rb, rp);
      for (const auto& p : rb) {
        EXPECT_TRUE(proto::GetFlags(p.data()) & proto::flags::kRetx);
        EXPECT_TRUE(proto::MessageCrcOk(p));
      }
    }
  }
  EXPECT_EQ(bw.blocks_remaining(), 0);
  EXPECT_EQ(with_body, 6u);  // 7 blocks, block 2 nonfinite
  EXPECT_GE(bw.counters().sent_from_body.Get(), 6u);
  EXPECT_EQ(plain.counters().sent_from_body.Get(), 0u);
}

// Lanes: two windows, lane 0 and lane 1 of 2, split one op's slots (even / odd) between them.
TEST_F(SlotWindowTest, TwoLanesSplitTheSlotsAndEachIsDoneWithItsOwnBlocks) {
  constexpr uint16_t kW = 5;
  WindowConfig c0 = Config(1, 64, kW), c1 = Config(1, 64, kW);
  c0.lanes = c1.lanes = 2;
  c1.lane = 1;
  SlotWindow w0(c0, quant::ActiveKernels()), w1(c1, quant::ActiveKernels());
  // B = 12 blocks over W = 5 slots: slots 0, 2, 4 carry 3 + 2 + 2 = 7 blocks, slots 1, 3 carry 5.
  std::vector<int32_t> a(64 * 11 + 9), b;
  for (size_t j = 0; j < a.size(); ++j) a[j] = static_cast<int32_t>(j * 2654435761u);
  const std::vector<int32_t> want = a;  // world 1: the sum is the input
  b = a;
  ASSERT_TRUE(w0.Begin(OpDesc{false, nullptr, a.data(), a.size(), 0}, t0_).ok());
  ASSERT_TRUE(w1.Begin(OpDesc{false, nullptr, b.data(), b.size(), 0}, t0_).ok());
  EXPECT_EQ(w0.blocks_remaining(), 7);
  EXPECT_EQ(w1.blocks_remaining(), 5);
  auto p0 = SendAll(w0, t0_), p1 = SendAll(w1, t0_);
  ASSERT_EQ(p0.size(), 3u);
  ASSERT_EQ(p1.size(), 2u);
  for (size_t i = 0; i < p0.size(); ++i) EXPECT_EQ(proto::DecodeHeader(p0[i].data()).slot, 2 * i);
  for (size_t i = 0; i < p1.size(); ++i) {
    EXPECT_EQ(proto::DecodeHeader(p1[i].data()).slot, 2 * i + 1);
  }
  // The other lane's results are not this window's: stale, nothing changes.
  ASSERT_TRUE(w0.OnPacket(ResultOf(p1[0]), t0_).ok());
  EXPECT_EQ(w0.counters().stale.Get(), 1u);
  EXPECT_EQ(w0.blocks_remaining(), 7);
  // Each lane gets its own results back until done; every packet it sends stays on its slots.
  uint64_t rounds = 0;
  while (!(w0.done() && w1.done()) && rounds++ < 100) {
    std::vector<std::vector<uint8_t>> next0, next1;
    for (auto& p : p0) ASSERT_TRUE(w0.OnPacket(ResultOf(p), t0_).ok());
    for (auto& p : p1) ASSERT_TRUE(w1.OnPacket(ResultOf(p), t0_).ok());
    p0 = SendAll(w0, t0_);
    p1 = SendAll(w1, t0_);
    for (auto& p : p0) EXPECT_EQ(proto::DecodeHeader(p.data()).slot % 2, 0);
    for (auto& p : p1) EXPECT_EQ(proto::DecodeHeader(p.data()).slot % 2, 1);
  }
  ASSERT_TRUE(w0.done() && w1.done());
  EXPECT_EQ(w0.counters().results.Get(), 7u);
  EXPECT_EQ(w1.counters().results.Get(), 5u);
  // Lane 0 wrote the blocks of even slots, lane 1 those of odd slots; together: the whole sum.
  for (size_t blk = 0; blk < 12; ++blk) {
    const std::vector<int32_t>& got = (blk % kW) % 2 == 0 ? a : b;
    for (size_t j = blk * 64; j < std::min(a.size(), (blk + 1) * 64); ++j) {
      ASSERT_EQ(got[j], want[j]) << "block " << blk;
    }
  }
  w0.End();
  w1.End();
  // A lane that owns no slot of the op (W = 5, op of 1 block: lane 1 has none) is done at once.
  std::vector<int32_t> one(10, 3);
  ASSERT_TRUE(w1.Begin(OpDesc{false, nullptr, one.data(), one.size(), 1}, t0_).ok());
  EXPECT_TRUE(w1.done());
  EXPECT_EQ(w1.tx_queued(), 0u);
  EXPECT_EQ(w1.NextDeadline(), TimePoint::max());
  EXPECT_TRUE(w1.CheckProgress(t0_ + std::chrono::seconds(100)).ok());
}

// ---- Several ranks: Progress over FakeTransport into the in-process fabric ----

class Sim {
 public:
  struct Rank {
    FakeTransport* t = nullptr;
    std::unique_ptr<Progress> p;
    uint64_t calls = 0;  // ops begun
    bool running = false;
    bool silent = false;  // does not even poll when idle
    Status status;
    TimePoint ended{};
  };

  // With lanes > 1, entry e (endpoint e) is lane e % lanes of rank e / lanes: one Progress per
  // lane, as the communicator's progress threads.
  // `setup` runs before the JOINs (a job key for the fabric); with `join_secret` the JOINs answer
  // the fabric's join_challenge with their proof (a keyed job).
  Sim(uint16_t world, uint16_t k, uint16_t window,
      const std::function<void(WindowConfig&)>& per_rank = nullptr, uint16_t lanes = 1,
      const std::function<void(FakeNet&)>& setup = nullptr,
      std::span<const uint8_t> join_secret = {})
      : net_(clock_) {
    if (setup) setup(net_);
    const int entries = world * lanes;
    ranks_.resize(entries);
    for (int e = 0; e < entries; ++e) ranks_[e].t = &net_.Endpoint(e);
    for (int e = 0; e < entries; ++e) SendJoin(e, world, k, window, lanes);
    net_.Pump();
    std::vector<proto::Session> salts(static_cast<size_t>(entries));  // zero: not challenged
    if (!join_secret.empty()) {
      for (int e = 0; e < entries; ++e) {
        for (const NetPacket& p : net_.down(e)) {
          if (p.type() != proto::MsgType::kJoinChallenge) continue;
          const auto nonce = proto::JoinChallenge::From(p.bytes.data() + proto::kHeaderBytes);
          salts[static_cast<size_t>(e)] = nonce.salt;
          SendJoin(e, world, k, window, lanes, join_secret, &nonce);
        }
        net_.down(e).clear();
      }
      net_.Pump();
    }
    for (int e = 0; e < entries; ++e) {
      uint16_t granted = 0;
      for (const NetPacket& p : net_.down(e)) {
        if (p.type() == proto::MsgType::kJoinAck) granted = p.header().offset;
      }
      net_.down(e).clear();
      EXPECT_GE(granted, 1) << "entry " << e << " got no join_ack";
      WindowConfig c = Config(world, k, granted);
      c.rank = static_cast<uint16_t>(e / lanes);
      c.lane = static_cast<uint16_t>(e % lanes);
      c.lanes = lanes;
      if (per_rank) per_rank(c);
      ranks_[e].p =
          std::make_unique<Progress>(c, JoinFor(c), quant::ActiveKernels(), *ranks_[e].t, clock_);
      // A keyed job: the grant's traffic keys under the salt of the key at the fabric, as the
      // communicator takes them after the join.
      if (!join_secret.empty())
        ranks_[e].p->window().FirstGrant(granted, salts[static_cast<size_t>(e)]);
    }
  }

  FakeClock& clock() { return clock_; }
  FakeNet& net() { return net_; }
  Rank& rank(int r) { return ranks_[r]; }
  SlotWindow& window(int r) { return ranks_[r].p->window(); }

  void Begin(int r, bool is_float, void* data, size_t n) {
    Rank& rk = ranks_[r];
    OpDesc op{is_float, is_float ? static_cast<float*>(data) : nullptr,
              is_float ? nullptr : static_cast<int32_t*>(data), n, rk.calls++};
    rk.status = rk.p->Begin(op);
    rk.running = rk.status.ok();
    if (!rk.running) rk.ended = clock_.Now();
  }

  // Turns every running rank (and polls the idle ones) until no rank runs or `limit` of fake time
  // passed (false). When a round moves no packet, the clock jumps by the shortest wait asked.
  bool Run(microseconds limit = std::chrono::seconds(60),
           const std::function<void()>& each_round = nullptr) {
    const TimePoint stop_at = clock_.Now() + limit;
    for (int round = 0; round < 1000000; ++round) {
      const uint64_t before = net_.moved();
      bool any = false;
      microseconds wait = microseconds::max();
      for (Rank& rk : ranks_) {
        if (!rk.running) {
          if (!rk.silent) {
            const Status s = rk.p->PollIdle();
            if (!s.ok() && rk.status.ok()) rk.status = s;
          }
          continue;
        }
        any = true;
        const Status s = rk.p->Turn(microseconds(0));
        if (!s.ok() || rk.p->window().done()) {
          rk.status = s;
          rk.running = false;
          rk.ended = clock_.Now();
          rk.p->window().End();
          continue;
        }
        wait = std::min(wait, rk.p->last_wait());
      }
      if (!any) return true;
      net_.Pump();
      if (each_round) each_round();
      if (net_.moved() == before && net_.up.empty()) {
        if (wait == microseconds::max()) continue;  // a rank just ended: turn the others again
        wait = std::max(wait, microseconds(1));
        if (clock_.Now() + wait > stop_at) {
          clock_.Set(stop_at);
          return false;
        }
        clock_.Advance(wait);
      }
    }
    return false;
  }

 private:
  // The JOIN of entry e; with `nonce`, the proven JOIN answering it under `secret`.
  void SendJoin(int e, uint16_t world, uint16_t k, uint16_t window, uint16_t lanes,
                std::span<const uint8_t> secret = {}, const proto::JoinChallenge* nonce = nullptr) {
    uint8_t b[proto::kHeaderBytes + proto::kTagBytes] = {};
    proto::JoinMsg join{.job = 7,
                        .rank = static_cast<uint16_t>(e / lanes),
                        .k = k,
                        .window = window,
                        .world_size = world};
    if (lanes > 1) {
      join.lane = static_cast<uint16_t>(e % lanes);
      join.lanes = lanes;
    }
    size_t len = 0;
    if (nonce != nullptr) {
      join.sec = static_cast<uint8_t>(proto::SecMode::kMac);
      join.Encode(b);
      ASSERT_TRUE(proto::SealJoinProof(secret, *nonce, b).ok());
      len = proto::kHeaderBytes + proto::kTagBytes;
    } else {
      join.Encode(b);
      len = proto::SealMessage(b, proto::kHeaderBytes);
    }
    const TxMessage tx{b, len};
    ASSERT_TRUE(ranks_[e].t->SendBurst(std::span(&tx, 1)).ok());
  }

  FakeClock clock_;
  FakeNet net_;
  std::vector<Rank> ranks_;
};

struct Inputs {
  std::vector<std::vector<float>> f;
  std::vector<std::vector<int32_t>> i;
};

Inputs MakeInputs(int world, size_t n, int k, uint64_t salt) {
  std::mt19937_64 rng(Seed() * 1000003 + salt);
  Inputs in;
  in.f.resize(world);
  in.i.assign(world, std::vector<int32_t>(n));
  for (auto& x : in.f) x = RandomFloats(rng, n, k);
  for (auto& x : in.i) {
    for (auto& v : x) v = static_cast<int32_t>(rng());
  }
  return in;
}

// Runs one float and one int32 op of n elements on every rank; checks the results.
void RunAndCheck(Sim& sim, int world, size_t n, int k, uint64_t salt) {
  SCOPED_TRACE("n=" + std::to_string(n));
  Inputs in = MakeInputs(world, n, k, salt);
  const auto want_f = ExpectedFloat(in.f, k);
  const auto want_i = ExpectedInt(in.i);
  auto f = in.f;
  auto i = in.i;
  for (int r = 0; r < world; ++r) sim.Begin(r, true, f[r].data(), n);
  ASSERT_TRUE(sim.Run());
  for (int r = 0; r < world; ++r) sim.Begin(r, false, i[r].data(), n);
  ASSERT_TRUE(sim.Run());
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(sim.rank(r).status.ok()) << "rank " << r << ": " << sim.rank(r).status.ToString();
    EXPECT_TRUE(SameFloats(f[r], want_f)) << "rank " << r;
    EXPECT_EQ(i[r], want_i) << "rank " << r;
  }
}

TEST(ProgressSim, FloatAndInt32MatchTheIndependentSumWithAWindowSmallerThanTheOp) {
  constexpr int kWorld = 3, kK = 64, kW = 4;
  Sim sim(kWorld, kK, kW);
  uint64_t ops_blocks = 0, ops_slots = 0;
  for (size_t n : {size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{1000}}) {
    RunAndCheck(sim, kWorld, n, kK, n);
    const uint64_t b = (n + kK - 1) / kK;
    ops_blocks += 2 * b;                     // float + int32
    ops_slots += std::min<uint64_t>(b, kW);  // float exponent rounds
  }
  for (int r = 0; r < kWorld; ++r) {
    const WindowCounters& c = sim.window(r).counters();
    // No loss, no latency: every packet sent once, every result accepted once.
    EXPECT_EQ(c.packets_sent.Get(), ops_blocks + ops_slots) << "rank " << r;
    EXPECT_EQ(c.results.Get(), ops_blocks + ops_slots) << "rank " << r;
    EXPECT_EQ(c.retransmissions.Get(), 0u);
    EXPECT_EQ(c.stale.Get(), 0u);
  }
  EXPECT_EQ(dp::Get(sim.net().fabric().counters(), proto::Counter::kDuplicates), 0u);
}

// 1, 2 and 3 lanes per rank over the real control plane, with loss both ways: every lane sends
// only its own slots, from its own endpoint, and the results are bit-identical to one lane's.
TEST(ProgressSim, LanesGiveTheOneLaneResultBitForBitUnderLoss) {
  constexpr int kWorld = 3, kK = 64, kW = 7;
  constexpr size_t kN = 64 * 40 + 17;
  Inputs in = MakeInputs(kWorld, kN, kK, 77);
  std::vector<std::vector<float>> f1;
  std::vector<std::vector<int32_t>> i1;
  for (uint16_t lanes : {1, 2, 3}) {
    SCOPED_TRACE("lanes=" + std::to_string(lanes));
    Sim sim(kWorld, kK, kW, nullptr, lanes);
    uint64_t seen = 0, wrong_lane = 0, dropped = 0;
    sim.net().filter = [&](const NetPacket& p) {
      if (p.type() != kData && p.type() != kResult) return Verdict{};
      if (p.up && p.type() == kData && p.header().slot % lanes != p.endpoint % lanes) ++wrong_lane;
      if (!p.up && p.type() == kResult && p.header().slot % lanes != p.endpoint % lanes) {
        ++wrong_lane;
      }
      if (++seen % 13 == 0) {  // every 13th data or result packet is lost
        ++dropped;
        return Verdict{0};
      }
      return Verdict{};
    };
    auto f = in.f;
    auto i = in.i;
    for (int e = 0; e < kWorld * lanes; ++e) sim.Begin(e, true, f[e / lanes].data(), kN);
    ASSERT_TRUE(sim.Run());
    for (int e = 0; e < kWorld * lanes; ++e) sim.Begin(e, false, i[e / lanes].data(), kN);
    ASSERT_TRUE(sim.Run());
    uint64_t retx = 0;
    for (int e = 0; e < kWorld * lanes; ++e) {
      ASSERT_TRUE(sim.rank(e).status.ok())
          << "entry " << e << ": " << sim.rank(e).status.ToString();
      retx += sim.window(e).counters().retransmissions.Get();
    }
    EXPECT_EQ(wrong_lane, 0u);
    EXPECT_GT(dropped, 10u);
    EXPECT_GT(retx, 0u);
    EXPECT_EQ(sim.net().fabric().foreign_dropped(), 0u);
    if (lanes == 1) {
      EXPECT_TRUE(SameFloats(f[0], ExpectedFloat(in.f, kK)));
      EXPECT_EQ(i[0], ExpectedInt(in.i));
      f1 = f;
      i1 = i;
    }
    for (int r = 0; r < kWorld; ++r) {
      ASSERT_EQ(std::memcmp(f[r].data(), f1[r].data(), kN * sizeof(float)), 0) << "rank " << r;
      EXPECT_EQ(i[r], i1[r]) << "rank " << r;
    }
  }
}

TEST(ProgressSim, NonFiniteBlocksAreNanOnEveryRank) {
  Sim sim(2, 64, 4);
  Inputs in = MakeInputs(2, 64 * 10, 64, 99);
  in.f[1][64 * 1 + 5] = std::numeric_limits<float>::infinity();
  in.f[0][64 * 6 + 63] = std::numeric_limits<float>::quiet_NaN();
  in.f[1][64 * 9] = -std::numeric_limits<float>::infinity();
  const auto want = ExpectedFloat(in.f, 64);
  auto f = in.f;
  for (int r = 0; r < 2; ++r) sim.Begin(r, true, f[r].data(), f[r].size());
  ASSERT_TRUE(sim.Run());
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(sim.rank(r).status.ok()) << sim.rank(r).status.ToString();
    EXPECT_TRUE(SameFloats(f[r], want));
    for (size_t b = 0; b < 10; ++b) {
      const bool nan_block = b == 1 || b == 6 || b == 9;
      for (size_t j = b * 64; j < (b + 1) * 64; ++j) {
        ASSERT_EQ(std::isnan(f[r][j]), nan_block) << "rank " << r << " element " << j;
      }
    }
  }
}

TEST(ProgressSim, LostDataPacketIsResentAtItsRto) {
  Sim sim(2, 64, 4);
  const TimePoint t0 = sim.clock().Now();
  bool dropped = false;
  TimePoint resent_at{};
  sim.net().filter = [&](const NetPacket& p) {
    if (p.up && p.endpoint == 1 && p.type() == kData && p.header().slot == 2 &&
        p.header().count > 0) {
      if (!dropped) {
        dropped = true;
        return Verdict{0};
      }
      if (resent_at == TimePoint{}) resent_at = sim.clock().Now();
    }
    return Verdict{};
  };
  RunAndCheck(sim, 2, 64 * 9, 64, 1);
  EXPECT_TRUE(dropped);
  // The block went out after the exponent results, whose zero-latency samples had taken the RTO
  // down to its 500 us floor: the resend is 500 us after the loss, exactly. Rank 0's copy of the
  // same slot waits for rank 1's, so it times out at the same moment and is resent too (the
  // fabric counts it as a duplicate).
  EXPECT_EQ(resent_at - t0, microseconds(500));
  EXPECT_EQ(sim.window(1).counters().retransmissions.Get(), 1u);
  EXPECT_EQ(sim.window(0).counters().retransmissions.Get(), 1u);
  const auto fc = sim.net().fabric().counters();
  EXPECT_EQ(dp::Get(fc, proto::Counter::kRetransmissions), 2u);
  EXPECT_EQ(dp::Get(fc, proto::Counter::kDuplicates), 1u);
  EXPECT_EQ(dp::Get(fc, proto::Counter::kResultResends), 0u);
}

// Keyed jobs through the real control plane and reference engine: the results are bit-identical
// to the CRC-only job's; a result rewritten on its way to a rank (the payload's first byte, or the
// header's next_exp, with any checksum recomputed: it cannot be resealed without the key) is
// dropped by that rank and fetched again, and the op still completes exact.
class KeyedSim : public ::testing::TestWithParam<proto::SecMode> {};

TEST_P(KeyedSim, BitIdenticalToCrcAndRewrittenResultsAreRetried) {
  constexpr int kWorld = 3, kK = 64, kW = 4;
  const auto secret = TestSecret(5);
  const proto::SecMode mode = GetParam();
  Sim sim(
      kWorld, kK, kW,
      [&](WindowConfig& c) {
        c.sec = mode;
        c.secret = JobSecret(secret);
      },
      1, [&](FakeNet& net) { ASSERT_TRUE(net.fabric().InstallJobKey(7, mode, secret).ok()); },
      secret);
  int rewritten = 0;
  auto rewrite = [&] {
    std::deque<NetPacket>& q = sim.net().down(1);
    for (NetPacket& p : q) {
      if (rewritten >= 6 || p.type() != kResult || p.bytes.size() <= proto::kHeaderBytes + 16) {
        continue;
      }
      if (rewritten % 2 == 0) {
        p.bytes[proto::kHeaderBytes] ^= 0x40;
      } else {
        proto::SetNextExp(p.bytes.data(), proto::GetNextExp(p.bytes.data()) + 1);
      }
      ++rewritten;
    }
  };
  Inputs in = MakeInputs(kWorld, 64 * 20 + 5, kK, 77);
  const auto want_f = ExpectedFloat(in.f, kK);
  const auto want_i = ExpectedInt(in.i);
  auto f = in.f;
  auto i = in.i;
  for (int r = 0; r < kWorld; ++r) sim.Begin(r, true, f[r].data(), f[r].size());
  ASSERT_TRUE(sim.Run(std::chrono::seconds(60), rewrite));
  for (int r = 0; r < kWorld; ++r) sim.Begin(r, false, i[r].data(), i[r].size());
  ASSERT_TRUE(sim.Run(std::chrono::seconds(60), rewrite));
  EXPECT_EQ(rewritten, 6);
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(sim.rank(r).status.ok()) << "rank " << r << ": " << sim.rank(r).status.ToString();
    EXPECT_TRUE(SameFloats(f[r], want_f)) << "rank " << r;
    EXPECT_EQ(i[r], want_i) << "rank " << r;
  }
  EXPECT_EQ(sim.window(1).counters().forged.Get(), 6u);
  EXPECT_GE(sim.window(1).counters().retransmissions.Get(), 1u);
  EXPECT_EQ(sim.window(0).counters().forged.Get(), 0u);
  const auto fc = sim.net().fabric().counters();
  EXPECT_EQ(dp::Get(fc, proto::Counter::kDropForged), 0u);
  EXPECT_EQ(dp::Get(fc, proto::Counter::kDropCrossJob), 0u);
  EXPECT_EQ(dp::Get(fc, proto::Counter::kDropMismatch), 0u);
}

INSTANTIATE_TEST_SUITE_P(Modes, KeyedSim,
                         ::testing::Values(proto::SecMode::kMac, proto::SecMode::kMacEncrypt),
                         [](const ::testing::TestParamInfo<proto::SecMode>& info) {
                           return std::string(info.param == proto::SecMode::kMac ? "mac"
                                                                                 : "mac_encrypt");
                         });

TEST(ProgressSim, LostResultIsResentByTheFabricToTheRankThatAsked) {
  Sim sim(2, 64, 4);
  bool dropped = false;
  sim.net().filter = [&](const NetPacket& p) {
    if (!p.up && p.endpoint == 0 && p.type() == kResult && p.header().slot == 1 &&
        p.header().count > 0 && !dropped) {
      dropped = true;
      return Verdict{0};
    }
    return Verdict{};
  };
  RunAndCheck(sim, 2, 64 * 8, 64, 2);
  EXPECT_TRUE(dropped);
  // Rank 0 resends the packet whose result it lost and gets the result again from the fabric's
  // copy; rank 1's next use of the slot waits for rank 0 meanwhile and is resent once too.
  EXPECT_EQ(sim.window(0).counters().retransmissions.Get(), 1u);
  EXPECT_EQ(sim.window(1).counters().retransmissions.Get(), 1u);
  EXPECT_EQ(dp::Get(sim.net().fabric().counters(), proto::Counter::kResultResends), 1u);
}

TEST(ProgressSim, DuplicatesBothWaysCountOnce) {
  Sim sim(3, 64, 4);
  sim.net().filter = [](const NetPacket& p) {
    return Verdict{(p.type() == kData || p.type() == kResult) ? 2 : 1};
  };
  RunAndCheck(sim, 3, 64 * 11 + 3, 64, 3);
  const uint64_t blocks = 12, slots = 4;
  const auto fc = sim.net().fabric().counters();
  EXPECT_GT(dp::Get(fc, proto::Counter::kDuplicates), 0u);
  for (int r = 0; r < 3; ++r) {
    const WindowCounters& c = sim.window(r).counters();
    EXPECT_EQ(c.results.Get(), 2 * blocks + slots) << "rank " << r;
    EXPECT_GT(c.stale.Get(), 0u) << "rank " << r;  // the second copies
    EXPECT_EQ(c.retransmissions.Get(), 0u);
  }
}

TEST(ProgressSim, LateResultAfterTheRetransmissionIsAcceptedOnce) {
  Sim sim(2, 64, 2);
  bool held = false, retx_seen = false;
  sim.net().filter = [&](const NetPacket& p) {
    if (!p.up && p.endpoint == 0 && p.type() == kResult && p.header().slot == 1 &&
        p.header().count > 0 && !held) {
      held = true;
      return Verdict{1, true};
    }
    if (p.up && p.endpoint == 0 && (proto::GetFlags(p.bytes.data()) & proto::flags::kRetx)) {
      retx_seen = true;
    }
    return Verdict{};
  };
  auto release_after_retx = [&] {
    if (retx_seen && !sim.net().held.empty()) sim.net().Release();
  };
  Inputs in = MakeInputs(2, 64 * 6, 64, 4);
  auto want = ExpectedInt(in.i);
  for (int r = 0; r < 2; ++r) sim.Begin(r, false, in.i[r].data(), in.i[r].size());
  ASSERT_TRUE(sim.Run(std::chrono::seconds(60), release_after_retx));
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(sim.rank(r).status.ok()) << sim.rank(r).status.ToString();
    EXPECT_EQ(in.i[r], want);
  }
  EXPECT_TRUE(held && retx_seen);
  // The late original and the fabric's resend both reach rank 0: one accepted, one stale.
  EXPECT_EQ(sim.window(0).counters().retransmissions.Get(), 1u);
  EXPECT_EQ(sim.window(0).counters().results.Get(), 6u);
  EXPECT_EQ(sim.window(0).counters().stale.Get(), 1u);
}

TEST(ProgressSim, ReorderedPacketsGiveTheSameResult) {
  Sim sim(3, 64, 8);
  sim.net().filter = [](const NetPacket&) { return Verdict{1, true}; };  // hold everything...
  auto reverse = [&] { sim.net().Release(/*reversed=*/true); };          // ...release reversed
  Inputs in = MakeInputs(3, 64 * 20 + 17, 64, 5);
  const auto want = ExpectedFloat(in.f, 64);
  auto f = in.f;
  for (int r = 0; r < 3; ++r) sim.Begin(r, true, f[r].data(), f[r].size());
  ASSERT_TRUE(sim.Run(std::chrono::seconds(60), reverse));
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(sim.rank(r).status.ok()) << sim.rank(r).status.ToString();
    EXPECT_TRUE(SameFloats(f[r], want)) << "rank " << r;
  }
}

TEST(ProgressSim, SilentRankTimesOutAtExactlyTheConfiguredTimeAndLeaveAbortsTheOthers) {
  Sim sim(3, 64, 4, [](WindowConfig& c) {
    c.progress_timeout = c.rank == 0 ? milliseconds(200) : milliseconds(20000);
  });
  sim.rank(2).silent = true;  // never calls
  const TimePoint t0 = sim.clock().Now();
  std::vector<float> a(64 * 10, 1.0f), b(64 * 10, 1.0f);
  sim.Begin(0, true, a.data(), a.size());
  sim.Begin(1, true, b.data(), b.size());
  ASSERT_FALSE(sim.Run(milliseconds(200) - microseconds(1)));  // nobody fails early
  ASSERT_TRUE(sim.rank(0).running && sim.rank(1).running);
  sim.Run(milliseconds(1));
  ASSERT_FALSE(sim.rank(0).running);
  const Status s0 = sim.rank(0).status;
  EXPECT_EQ(s0.code(), StatusCode::kDeadlineExceeded) << s0.ToString();
  EXPECT_EQ(sim.rank(0).ended - t0, milliseconds(200));
  EXPECT_NE(s0.message().find("(exponent round) waited, 5 retransmissions"), std::string::npos)
      << s0.message();  // tries at 5, 15, 35, 75, 155 ms
  EXPECT_EQ(sim.window(0).counters().retransmissions.Get(), 4u * 5);
  // As the communicator does after a timeout: LEAVE (abort). Rank 1 fails at once, not after 20 s.
  const TimePoint leave_at = sim.clock().Now();
  sim.rank(0).p->SendLeave(proto::ErrorCode::kJobAborted, 0);
  sim.rank(0).silent = true;
  ASSERT_TRUE(sim.Run(milliseconds(1)));
  EXPECT_EQ(sim.rank(1).status.code(), StatusCode::kAborted) << sim.rank(1).status.ToString();
  EXPECT_EQ(sim.rank(1).ended, leave_at);
  EXPECT_EQ(sim.net().fabric().leaves().size(), 3u);  // sent three times
  EXPECT_EQ(sim.net().fabric().control().num_jobs(), 0u);
}

TEST(ProgressSim, RankLeftFailsLaterCallsOnlyAndEarlierOnesFinish) {
  Sim sim(2, 64, 2);
  // Rank 0 loses the last result of call #0; rank 1 finishes call #0 and leaves gracefully after
  // 1 call while rank 0 still waits: rank 0's call #0 completes (the job stays, the fabric
  // resends), its call #1 fails with Aborted.
  bool dropped = false;
  sim.net().filter = [&](const NetPacket& p) {
    if (!p.up && p.endpoint == 0 && p.type() == kResult && p.header().offset == 64 * 3 &&
        !dropped) {
      dropped = true;
      return Verdict{0};
    }
    return Verdict{};
  };
  std::vector<int32_t> a(64 * 4, 1), b(64 * 4, 2);
  sim.Begin(0, false, a.data(), a.size());
  sim.Begin(1, false, b.data(), b.size());
  ASSERT_FALSE(sim.Run(microseconds(100)));  // rank 1 is done, rank 0 waits for its timer
  ASSERT_FALSE(sim.rank(1).running);
  ASSERT_TRUE(sim.rank(1).status.ok()) << sim.rank(1).status.ToString();
  ASSERT_TRUE(sim.rank(0).running);
  sim.rank(1).p->SendLeave(proto::ErrorCode::kNone, 1);
  sim.rank(1).silent = true;
  ASSERT_TRUE(sim.Run());
  ASSERT_TRUE(sim.rank(0).status.ok()) << sim.rank(0).status.ToString();
  EXPECT_EQ(a, std::vector<int32_t>(64 * 4, 3));
  EXPECT_EQ(sim.window(0).peer_left_after(), 1u);
  std::vector<int32_t> c(64, 1);
  sim.Begin(0, false, c.data(), c.size());
  EXPECT_FALSE(sim.rank(0).running);
  EXPECT_EQ(sim.rank(0).status.code(), StatusCode::kAborted) << sim.rank(0).status.ToString();
  EXPECT_EQ(dp::Get(sim.net().fabric().control().counters(), dp::ControlCounter::kErrRankLeft), 1u);
}

TEST(ProgressSim, RankLeftDuringALaterCallAbortsItAtOnce) {
  Sim sim(2, 64, 2);
  std::vector<int32_t> a(64 * 3, 1), b(64 * 3, 1);
  for (int r = 0; r < 2; ++r) sim.Begin(r, false, r == 0 ? a.data() : b.data(), a.size());
  ASSERT_TRUE(sim.Run());
  sim.Begin(0, false, a.data(), a.size());  // call #1 on rank 0 only
  ASSERT_FALSE(sim.Run(milliseconds(3)));
  const TimePoint left_at = sim.clock().Now();
  sim.rank(1).p->SendLeave(proto::ErrorCode::kNone, 1);  // rank 1 done after call #0
  sim.rank(1).silent = true;
  ASSERT_TRUE(sim.Run(milliseconds(1)));
  EXPECT_EQ(sim.rank(0).status.code(), StatusCode::kAborted) << sim.rank(0).status.ToString();
  EXPECT_EQ(sim.rank(0).ended, left_at);
}

TEST(ProgressSim, PartialSendsAreRetried) {
  Sim sim(2, 64, 16);
  sim.rank(0).t->send_capacity = 3;  // the socket queue takes 3 packets per call
  RunAndCheck(sim, 2, 64 * 40, 64, 6);
  EXPECT_EQ(sim.window(0).counters().retransmissions.Get(), 0u);
  EXPECT_EQ(sim.window(0).counters().packets_sent.Get(), 2u * 40 + 16);
}

TEST(ProgressSim, UnavailableFabricIsNamedInTheTimeout) {
  Sim sim(1, 64, 4);
  sim.rank(0).t->send_error = Unavailable("udp: send: Connection refused");
  std::vector<int32_t> a(64 * 3, 1);
  const TimePoint t0 = sim.clock().Now();
  sim.Begin(0, false, a.data(), a.size());
  ASSERT_TRUE(sim.Run());
  const Status s = sim.rank(0).status;
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_EQ(sim.rank(0).ended - t0, milliseconds(200));
  EXPECT_NE(s.message().find("last transport error: UNAVAILABLE: udp: send: Connection refused"),
            std::string::npos)
      << s.message();
  EXPECT_GT(sim.window(0).counters().retransmissions.Get(), 0u);  // counted as sent, lost
}

TEST(ProgressSim, OtherTransportErrorsFailTheOp) {
  Sim sim(1, 64, 4);
  sim.rank(0).t->recv_error = Internal("fake: receive failed");
  std::vector<int32_t> a(64, 1);
  sim.Begin(0, false, a.data(), a.size());
  ASSERT_TRUE(sim.Run());
  EXPECT_EQ(sim.rank(0).status.code(), StatusCode::kInternal) << sim.rank(0).status.ToString();
}

TEST(ProgressSim, RunOpStopsWhenAsked) {
  FakeClock clock;
  FakeNet net(clock);
  const WindowConfig c = Config(2, 64, 4);
  Progress p(c, JoinFor(c), quant::ActiveKernels(), net.Endpoint(0), clock);
  std::vector<int32_t> a(64, 1);
  std::atomic<bool> stop{true};
  const Status s = p.RunOp(OpDesc{false, nullptr, a.data(), a.size(), 0}, stop);
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
  EXPECT_FALSE(p.window().active());
}

}  // namespace
}  // namespace ina::host::internal
