// Unit tests of the control plane (ina/dp/control.h) over the reference engine.
#include "ina/dp/control.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ina/dp/ref_engine.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/wire.h"
#include "support/seed.h"

namespace ina::dp {
namespace {

namespace p = ::ina::proto;
using TimePoint = ControlPlane::TimePoint;
using std::chrono::milliseconds;

Peer MakePeer(uint16_t port, const char* ip = "127.0.0.1") {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  inet_pton(AF_INET, ip, &sa.sin_addr);
  return Peer::From(reinterpret_cast<const sockaddr*>(&sa), sizeof(sa));
}

struct Reply {
  Peer to;
  p::Header h;
  p::JoinChallenge nonce{};  // join_challenge: its payload (the nonce and the key's salt)
};

class Collector : public ReplySink {
 public:
  void Send(const Peer& to, std::span<const uint8_t> packet) override {
    ASSERT_GE(packet.size(), p::kHeaderBytes);
    const bool challenge = p::IsType(packet.data(), p::MsgType::kJoinChallenge);
    ASSERT_EQ(packet.size(),
              p::MessageBytes(challenge ? p::kJoinChallengeBytes / p::kElemBytes : 0));
    ASSERT_TRUE(p::MessageCrcOk(packet)) << "every reply carries its CRC32C trailer";
    Reply r{to, p::DecodeHeader(packet.data())};
    if (challenge) r.nonce = p::JoinChallenge::From(packet.data() + p::kHeaderBytes);
    replies.push_back(r);
  }
  std::vector<Reply> replies;
};

// The proven JOIN a worker holding `secret` sends to answer a join_challenge for `join`.
std::vector<uint8_t> ProvenJoin(const std::vector<uint8_t>& join,
                                const std::vector<uint8_t>& secret, const p::JoinChallenge& nonce) {
  std::vector<uint8_t> b(join.begin(), join.begin() + p::kHeaderBytes);
  b.resize(p::kHeaderBytes + p::kTagBytes);
  p::SetSec(b.data(), static_cast<uint8_t>(p::SecMode::kMac));
  EXPECT_TRUE(p::SealJoinProof(secret, nonce, b.data()).ok());
  return b;
}

class ResultCollector : public Emitter {
 public:
  struct Item {
    uint16_t job, dest;
    std::vector<uint8_t> bytes;
  };
  void OnResult(uint16_t job_id, uint16_t dest_rank, std::span<const uint8_t> packet) override {
    items.push_back({job_id, dest_rank, {packet.begin(), packet.end()}});
  }
  std::vector<Item> items;
};

// A typed control message (p::JoinMsg{...}), sealed.
template <class Msg>
std::vector<uint8_t> Control(const Msg& m) {
  const ControlMessage c = MakeControl(m);
  return {c.begin(), c.end()};
}

std::vector<uint8_t> Join(uint16_t job, uint16_t rank, uint16_t world, uint16_t k,
                          uint32_t window) {
  return Control(
      p::JoinMsg{.job = job, .rank = rank, .k = k, .window = window, .world_size = world});
}

// JOIN as lane `lane` of `lanes` (slot = lane, gen = lanes).
std::vector<uint8_t> LaneJoin(uint16_t job, uint16_t rank, uint16_t world, uint16_t k,
                              uint32_t window, uint16_t lane, uint16_t lanes) {
  return Control(p::JoinMsg{.job = job,
                            .rank = rank,
                            .lane = lane,
                            .lanes = lanes,
                            .k = k,
                            .window = window,
                            .world_size = world});
}

// The port lane l of rank r joins from in the lane tests.
uint16_t LanePort(uint16_t r, uint16_t l) { return static_cast<uint16_t>(6000 + 100 * l + r); }

// LEAVE with an abort reason (aux != 0): the job is torn down for everyone.
std::vector<uint8_t> AbortLeave(uint16_t job, uint16_t rank) {
  return Control(p::LeaveMsg{
      .job = job, .rank = rank, .reason = static_cast<uint16_t>(p::ErrorCode::kJobAborted)});
}

// LEAVE with aux 0: this rank is done, after `calls` all-reduce calls.
std::vector<uint8_t> DoneLeave(uint16_t job, uint16_t rank, uint32_t calls) {
  return Control(p::LeaveMsg{.job = job, .rank = rank, .calls = calls});
}

std::vector<uint8_t> Data(uint16_t job, uint16_t rank, uint16_t slot, uint16_t gen,
                          const std::vector<int32_t>& elems) {
  std::vector<uint8_t> b(p::MessageBytes(elems.size()));
  p::DataMsg{.flags = p::flags::kInt32,
             .job = job,
             .rank = rank,
             .slot = slot,
             .gen = gen,
             .count = static_cast<uint16_t>(elems.size())}
      .Encode(b.data());
  for (size_t i = 0; i < elems.size(); ++i) {
    p::Store32(b.data() + p::kHeaderBytes + 4 * i, static_cast<uint32_t>(elems[i]));
  }
  p::SealMessage(b.data(), b.size() - p::kCrcBytes);
  return b;
}

// An engine that does not run mode mac_encrypt (say an FPGA built without the CTR keystream): the
// reference engine, but RunsSecMode says so, and AddJob refuses such a job as a fabric's driver
// that cannot program it would.
class WithoutMacEncrypt : public Engine {
 public:
  explicit WithoutMacEncrypt(std::unique_ptr<Engine> inner) : inner_(std::move(inner)) {}
  Status AddJob(const JobConfig& job) override {
    if (job.security.mode == p::SecMode::kMacEncrypt) {
      return Unimplemented("program job: this engine runs no mac_encrypt");
    }
    return inner_->AddJob(job);
  }
  Status RemoveJob(uint16_t job_id) override { return inner_->RemoveJob(job_id); }
  void Process(std::span<const uint8_t> packet, Emitter& out) override {
    inner_->Process(packet, out);
  }
  size_t PollFailures(std::span<JobFailure> out) override { return inner_->PollFailures(out); }
  CounterSnapshot counters() const override { return inner_->counters(); }
  uint32_t pool_slots() const override { return inner_->pool_slots(); }
  uint16_t max_k() const override { return inner_->max_k(); }
  bool RunsSecMode(p::SecMode mode) const override { return mode != p::SecMode::kMacEncrypt; }

 private:
  std::unique_ptr<Engine> inner_;
};

class ControlTest : public ::testing::Test {
 protected:
  // min_window 1 and no lease: a job takes what is free (the tests before sharing); the sharing
  // tests set both.
  void Make(uint32_t pool_slots = 64, uint16_t max_jobs = 8,
            milliseconds timeout = milliseconds(1000), uint16_t engine_jobs = 0,
            uint16_t min_window = 1, uint32_t lease_calls = 0, uint16_t max_k = p::kMaxK) {
    EngineLimits lim;
    lim.pool_slots = pool_slots;
    lim.max_jobs = engine_jobs ? engine_jobs : max_jobs;
    lim.max_k = engine_max_k_;
    engine_ = MakeReferenceEngine(lim);
    if (without_mac_encrypt_) engine_ = std::make_unique<WithoutMacEncrypt>(std::move(engine_));
    ControlConfig cfg = base_cfg_;
    cfg.max_jobs = max_jobs;
    cfg.job_timeout = timeout;
    cfg.min_window = min_window;
    cfg.lease_calls = lease_calls;
    cfg.max_k = max_k;
    auto cp = ControlPlane::Create(*engine_, cfg);
    ASSERT_TRUE(cp.ok()) << cp.status().ToString();
    cp_ = std::move(cp).value();
  }
  // Handles `pkt` from `from`. A JOIN of a job in prove_ that gets a join_challenge is answered
  // at once with its proof, as a worker holding the secret does; the challenge is not kept.
  void Send(const std::vector<uint8_t>& pkt, const Peer& from, TimePoint now = TimePoint{}) {
    const size_t before = out_.replies.size();
    cp_->HandleControl(pkt, from, now, out_);
    const auto secret = prove_.find(p::GetJob(pkt.data()));
    if (secret == prove_.end() || !p::IsType(pkt.data(), p::MsgType::kJoin) ||
        out_.replies.size() != before + 1 ||
        out_.replies.back().h.type != p::MsgType::kJoinChallenge) {
      return;
    }
    const p::JoinChallenge nonce = out_.replies.back().nonce;
    salt_[p::GetJob(pkt.data())] = nonce.salt;
    out_.replies.pop_back();
    cp_->HandleControl(ProvenJoin(pkt, secret->second, nonce), from, now, out_);
  }
  // Joins ranks 0..world-1 from ports base..base+world-1; returns the replies it produced.
  std::vector<Reply> JoinAll(uint16_t job, uint16_t world, uint16_t k, uint32_t window,
                             uint16_t port_base, TimePoint now = TimePoint{}) {
    out_.replies.clear();
    for (uint16_t r = 0; r < world; ++r) {
      Send(Join(job, r, world, k, window), MakePeer(static_cast<uint16_t>(port_base + r)), now);
    }
    auto v = out_.replies;
    out_.replies.clear();
    return v;
  }
  uint64_t Ctr(ControlCounter c) const { return Get(cp_->counters(), c); }
  uint64_t ECtr(p::Counter c) const { return Get(engine_->counters(), c); }
  // The only job, `job`, is still held at `held` and freed by the job timeout at `freed`; then a
  // job of 2 ranks joins under its id at once.
  void ExpectTimeoutFreesTheId(uint16_t job, TimePoint held, TimePoint freed) {
    out_.replies.clear();
    EXPECT_EQ(cp_->Tick(held, out_), 0u);
    EXPECT_EQ(cp_->Tick(freed, out_), 1u);
    EXPECT_EQ(cp_->num_jobs(), 0u);
    auto again = JoinAll(job, 2, 64, 4, 7000, freed);
    ASSERT_EQ(again.size(), 2u);
    EXPECT_EQ(again[0].h.type, p::MsgType::kJoinAck);
  }

  std::unique_ptr<Engine> engine_;
  bool without_mac_encrypt_ = false;  // Make wraps the engine in WithoutMacEncrypt
  std::unique_ptr<ControlPlane> cp_;
  Collector out_;
  ControlConfig base_cfg_;  // what Make starts from (the key tests set require_keys, admin, log)
  uint16_t engine_max_k_ = p::kMaxK;                // the engine Make makes: the largest K it takes
  std::map<uint16_t, std::vector<uint8_t>> prove_;  // job -> the secret Send proves JOINs with
  std::map<uint16_t, p::Session> salt_;  // job -> the salt of the last challenge Send answered
};

void ExpectError(const Reply& r, const Peer& to, uint16_t job, p::ErrorCode code) {
  EXPECT_EQ(r.to, to);
  EXPECT_EQ(r.h.version, p::kVersion);
  EXPECT_EQ(r.h.type, p::MsgType::kError);
  EXPECT_EQ(r.h.job, job);
  EXPECT_EQ(r.h.aux, static_cast<uint16_t>(code)) << p::ErrorCodeName(r.h.aux);
}

// An error that names a JoinParam (slot) and a value (offset); `count` is the refused rank for
// peer_refused, else 0.
void ExpectParamError(const Reply& r, const Peer& to, uint16_t job, uint16_t rank,
                      p::ErrorCode code, p::JoinParam param, uint32_t value, uint16_t count = 0) {
  ExpectError(r, to, job, code);
  EXPECT_EQ(r.h.rank, rank);
  EXPECT_EQ(r.h.slot, static_cast<uint16_t>(param)) << p::JoinParamName(r.h.slot);
  EXPECT_EQ(r.h.offset, value);
  EXPECT_EQ(r.h.count, count);
}

TEST(PeerTest, EqualityIgnoresPaddingAndComparesPortAndAddress) {
  EXPECT_EQ(MakePeer(1000), MakePeer(1000));
  EXPECT_FALSE(MakePeer(1000) == MakePeer(1001));
  EXPECT_FALSE(MakePeer(1000) == MakePeer(1000, "127.0.0.2"));
  Peer a = MakePeer(1000);
  reinterpret_cast<sockaddr_in&>(a.addr).sin_zero[3] = 7;  // padding garbage
  EXPECT_EQ(a, MakePeer(1000));
  EXPECT_EQ(PeerToString(MakePeer(47000)), "127.0.0.1:47000");
}

TEST_F(ControlTest, CreateRejectsBadConfig) {
  Make();
  ControlConfig cfg;
  cfg.max_jobs = 0;
  EXPECT_FALSE(ControlPlane::Create(*engine_, cfg).ok());
  cfg.max_jobs = 1;
  cfg.job_timeout = milliseconds(0);
  EXPECT_FALSE(ControlPlane::Create(*engine_, cfg).ok());
}

TEST_F(ControlTest, JoinAcksEveryRankOnceAllJoined) {
  Make(64);
  Send(Join(7, 0, 3, 256, 16), MakePeer(5000));
  Send(Join(7, 2, 3, 256, 16), MakePeer(5002));
  EXPECT_TRUE(out_.replies.empty());
  ASSERT_EQ(cp_->Jobs().size(), 1u);
  EXPECT_FALSE(cp_->Jobs()[0].active);
  EXPECT_EQ(cp_->Jobs()[0].joined, 2);
  // Pending: the engine does not know the job, data is not checked by the control plane.
  EXPECT_EQ(cp_->CheckDataSource(7, 0, 0, MakePeer(5000), {}), SourceCheck::kPass);
  Send(Join(7, 1, 3, 256, 16), MakePeer(5001));
  ASSERT_EQ(out_.replies.size(), 3u);
  for (uint16_t r = 0; r < 3; ++r) {
    const Reply& rep = out_.replies[r];
    EXPECT_EQ(rep.to, MakePeer(static_cast<uint16_t>(5000 + r)));
    EXPECT_EQ(rep.h.type, p::MsgType::kJoinAck);
    EXPECT_EQ(rep.h.version, p::kVersion);
    EXPECT_EQ(rep.h.job, 7);
    EXPECT_EQ(rep.h.rank, r);
    EXPECT_EQ(rep.h.count, 256);
    EXPECT_EQ(rep.h.offset, 16u);
    EXPECT_EQ(rep.h.aux, 0);
  }
  auto jobs = cp_->Jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_TRUE(jobs[0].active);
  EXPECT_EQ(jobs[0].slot_base, 0u);
  EXPECT_EQ(jobs[0].window, 16);
  EXPECT_EQ(cp_->LargestFreeExtent(), 48u);
  EXPECT_EQ(Ctr(ControlCounter::kJobsAdmitted), 1u);
  EXPECT_EQ(Ctr(ControlCounter::kJoinAcks), 3u);
  EXPECT_EQ(Ctr(ControlCounter::kJoins), 3u);
}

// A JOIN resent while the job waits for ranks is answered with join_pending: how many joined and
// the lowest rank that has not (what the worker's join timeout then names); the first JOIN is not.
TEST_F(ControlTest, RepeatedJoinIsToldWhoIsMissingWhilePendingAndReAckedWhenActive) {
  Make();
  Send(Join(1, 0, 3, 64, 4), MakePeer(5000));
  EXPECT_TRUE(out_.replies.empty());
  Send(Join(1, 2, 3, 64, 4), MakePeer(5002));
  EXPECT_TRUE(out_.replies.empty());
  Send(Join(1, 0, 3, 64, 4), MakePeer(5000));
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(out_.replies[0].to, MakePeer(5000));
  ASSERT_EQ(out_.replies[0].h.type, p::MsgType::kJoinPending);
  const auto pending = p::JoinPendingMsg::From(out_.replies[0].h);
  EXPECT_EQ(pending.job, 1);
  EXPECT_EQ(pending.rank, 0);
  EXPECT_EQ(pending.joined, 2);
  EXPECT_EQ(pending.world_size, 3);
  EXPECT_EQ(pending.missing_rank, 1u);
  EXPECT_EQ(pending.scope, 0);
  EXPECT_EQ(Ctr(ControlCounter::kJoinPendings), 1u);
  EXPECT_EQ(cp_->Jobs()[0].joined, 2);
  out_.replies.clear();
  Send(Join(1, 1, 3, 64, 4), MakePeer(5001));
  ASSERT_EQ(out_.replies.size(), 3u);
  out_.replies.clear();
  Send(Join(1, 1, 3, 64, 4), MakePeer(5001));
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(out_.replies[0].to, MakePeer(5001));
  EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kJoinAck);
  EXPECT_EQ(out_.replies[0].h.rank, 1);
  EXPECT_EQ(out_.replies[0].h.offset, 4u);
  EXPECT_EQ(Ctr(ControlCounter::kJobsAdmitted), 1u);
  EXPECT_EQ(Ctr(ControlCounter::kJoinPendings), 1u);
  // At a spine, a job of leaves (JOIN tree_world): the ranks are leaves (scope 1).
  out_.replies.clear();
  const auto leaf_join = Control(
      p::JoinMsg{.tree_world = 8, .job = 2, .rank = 1, .k = 64, .window = 4, .world_size = 2});
  Send(leaf_join, MakePeer(5100));
  Send(leaf_join, MakePeer(5100));
  ASSERT_EQ(out_.replies.size(), 1u);
  const auto leaves = p::JoinPendingMsg::From(out_.replies[0].h);
  EXPECT_EQ(leaves.scope, 1);
  EXPECT_EQ(leaves.joined, 1);
  EXPECT_EQ(leaves.world_size, 2);
  EXPECT_EQ(leaves.missing_rank, 0u);
}

TEST_F(ControlTest, OutOfRangeParamsAreBadParams) {
  Make();
  const Peer a = MakePeer(5000);
  struct Case {
    uint16_t rank, world, k;
    uint32_t window;
    p::JoinParam param;  // the first parameter at fault
  } cases[] = {
      {0, 2, 100, 4, p::JoinParam::kK},          // K not in kKValues
      {0, 2, 0, 4, p::JoinParam::kK},            // K = 0
      {0, 0, 64, 4, p::JoinParam::kWorldSize},   // world 0
      {0, 65, 64, 4, p::JoinParam::kWorldSize},  // world > kMaxWorkers
      {0, 2, 64, 0, p::JoinParam::kWindow},      // window 0
      {2, 2, 64, 4, p::JoinParam::kRank},        // rank >= world
      {3, 2, 100, 0, p::JoinParam::kK},          // all wrong: K is named first
  };
  for (const Case& c : cases) {
    out_.replies.clear();
    Send(Join(3, c.rank, c.world, c.k, c.window), a);
    ASSERT_EQ(out_.replies.size(), 1u);
    ExpectParamError(out_.replies[0], a, 3, c.rank, p::ErrorCode::kBadParams, c.param,
                     p::kJoinValueNone);
  }
  // Job 3 was born doomed by its first JOIN (K 100); the later ones are refused alone.
  EXPECT_EQ(cp_->num_jobs(), 1u);
  const auto refusal = cp_->RefusalOf(3);
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->param, p::JoinParam::kK);
  EXPECT_EQ(refusal->value, 100u);
  EXPECT_EQ(Ctr(ControlCounter::kErrBadParams), 7u);
  // The extremes that are allowed.
  out_.replies.clear();
  Send(Join(4, 0, 1, 64, 1), a);
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kJoinAck);
  out_.replies.clear();
  Send(Join(5, 63, 64, 256, 2), a);
  EXPECT_TRUE(out_.replies.empty());  // pending, 1 of 64
}

TEST_F(ControlTest, EveryKOfTheSpecJoinsAndAKAboveTheFabricsFramesIsBadParams) {
  Make(64, 8, milliseconds(1000), 0, 1, 0, /*max_k=*/256);  // e.g. a DPDK port of 1500-byte frames
  const Peer a = MakePeer(5000);
  uint16_t job = 10;
  for (uint16_t k : p::kKValues) {
    out_.replies.clear();
    Send(Join(job, 0, 1, k, 2), a);
    ASSERT_EQ(out_.replies.size(), 1u) << "K " << k;
    if (k <= 256) {
      EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kJoinAck) << "K " << k;
      EXPECT_EQ(out_.replies[0].h.count, k);
    } else {
      ExpectParamError(out_.replies[0], a, job, 0, p::ErrorCode::kBadParams, p::JoinParam::kK,
                       p::kJoinValueNone);
    }
    ++job;
  }
  EXPECT_EQ(Ctr(ControlCounter::kErrBadParams), 3u);  // 512, 1024, 2048
  // The default fabric takes every K of the spec, up to 8 KiB payloads.
  Make();
  out_.replies.clear();
  Send(Join(30, 0, 1, p::kMaxK, 2), a);
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kJoinAck);
  EXPECT_EQ(p::kMaxK, 2048);
}

TEST_F(ControlTest, DifferingParamsNameTheParamAndTheJobsValue) {
  Make();
  // Each JOIN differs from the job (K 64, world 3, window 8) in one parameter; a pending job would
  // be doomed by the first refusal, so every case gets a job of its own.
  struct Case {
    std::vector<uint8_t> join;
    p::JoinParam param;
    uint32_t job_value, its_value;
  } cases[] = {
      {Join(9, 1, 3, 256, 8), p::JoinParam::kK, 64, 256},
      {Join(9, 1, 2, 64, 8), p::JoinParam::kWorldSize, 3, 2},
      {LaneJoin(9, 1, 3, 64, 8, 0, 2), p::JoinParam::kLanes, 1, 2},
      {Join(9, 1, 2, 256, 9), p::JoinParam::kK, 64, 256},  // several differ: K is named first
  };
  uint16_t job = 30;
  for (auto& c : cases) {
    SCOPED_TRACE(p::JoinParamName(static_cast<uint16_t>(c.param)));
    p::Header h = p::DecodeHeader(c.join.data());
    h.job = ++job;
    p::EncodeHeader(h, c.join.data());
    p::SealMessage(c.join.data(), p::kHeaderBytes);
    Send(Join(job, 0, 3, 64, 8), MakePeer(5000));
    out_.replies.clear();
    Send(c.join, MakePeer(5001));
    ASSERT_EQ(out_.replies.size(), 2u);
    ExpectParamError(out_.replies[0], MakePeer(5001), job, 1, p::ErrorCode::kBadParams, c.param,
                     c.job_value);
    // Rank 0, pending, hears at once who was refused and what it sent.
    ExpectParamError(out_.replies[1], MakePeer(5000), job, 0, p::ErrorCode::kPeerRefused, c.param,
                     c.its_value, 1);
  }
  EXPECT_EQ(Ctr(ControlCounter::kErrPeerRefused), 4u);
}

// Ranks asking different windows (each what its socket holds) are not refused: the job asks the
// least, and every rank gets that grant.
TEST_F(ControlTest, RanksAskingDifferentWindowsShareTheLeast) {
  Make();
  Send(Join(12, 0, 3, 64, 16), MakePeer(5000));
  Send(Join(12, 1, 3, 64, 8), MakePeer(5001));
  Send(Join(12, 2, 3, 64, 12), MakePeer(5002));
  ASSERT_EQ(out_.replies.size(), 3u);
  for (const Reply& r : out_.replies) {
    EXPECT_EQ(r.h.type, p::MsgType::kJoinAck);
    EXPECT_EQ(r.h.offset, 8u);
  }
  EXPECT_EQ(Ctr(ControlCounter::kErrBadParams), 0u);
  // A resend that asks more, once granted, is answered with the grant.
  out_.replies.clear();
  Send(Join(12, 0, 3, 64, 16), MakePeer(5000));
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kJoinAck);
  EXPECT_EQ(out_.replies[0].h.offset, 8u);
}

// A refused JOIN for an active job answers the refused peer only: the job runs on.
// A spine's job of leaves (docs/hierarchy.md): each leaf says the tree's world size, the one its
// workers sent (JOIN tree_world). The leaves must agree on it as a flat switch's ranks agree on
// the world size: a leaf of another tree world is refused and dooms the pending job, out-of-range
// values are refused alone, and a worker's 0 is a job of its own kind.
TEST_F(ControlTest, LeavesThatDisagreeOnTheTreesWorldSizeAreRefusedAsWorldSizes) {
  Make(64, 8, milliseconds(1000));
  auto leaf_join = [](uint16_t job, uint16_t rank, uint8_t tree_world) {
    return Control(p::JoinMsg{.tree_world = tree_world,
                              .job = job,
                              .rank = rank,
                              .k = 256,
                              .window = 16,
                              .world_size = 2});
  };
  // Out of range, each alone: above kMaxWorkers, below the job's own world (2 leaves).
  Send(leaf_join(50, 0, p::kMaxWorkers + 1), MakePeer(5000));
  Send(leaf_join(50, 0, 1), MakePeer(5000));
  ASSERT_EQ(out_.replies.size(), 2u);
  ExpectParamError(out_.replies[0], MakePeer(5000), 50, 0, p::ErrorCode::kBadParams,
                   p::JoinParam::kWorldSize, p::kJoinValueNone);
  ExpectParamError(out_.replies[1], MakePeer(5000), 50, 0, p::ErrorCode::kBadParams,
                   p::JoinParam::kWorldSize, p::kJoinValueNone);
  EXPECT_EQ(cp_->num_jobs(), 1u);  // job 50, born doomed by the first
  // Leaf 0's workers said 4, leaf 1's 8: leaf 1 is refused (the job's value, 4) and leaf 0 hears
  // that its peer was refused (what leaf 1 sent, 8).
  out_.replies.clear();
  Send(leaf_join(51, 0, 4), MakePeer(5000));
  EXPECT_TRUE(out_.replies.empty());
  Send(leaf_join(51, 1, 8), MakePeer(5001));
  ASSERT_EQ(out_.replies.size(), 2u);
  ExpectParamError(out_.replies[0], MakePeer(5001), 51, 1, p::ErrorCode::kBadParams,
                   p::JoinParam::kWorldSize, 4);
  ExpectParamError(out_.replies[1], MakePeer(5000), 51, 0, p::ErrorCode::kPeerRefused,
                   p::JoinParam::kWorldSize, 8, 1);
  EXPECT_EQ(Ctr(ControlCounter::kJobsAdmitted), 0u);
  // A worker (tree_world 0) cannot join a job of leaves either, nor a leaf one of workers.
  out_.replies.clear();
  Send(Join(52, 0, 2, 256, 16), MakePeer(5002));
  Send(leaf_join(52, 1, 2), MakePeer(5003));
  ASSERT_EQ(out_.replies.size(), 2u);
  ExpectParamError(out_.replies[0], MakePeer(5003), 52, 1, p::ErrorCode::kBadParams,
                   p::JoinParam::kWorldSize, 0);
  // Leaves that agree are admitted, whatever the tree's world size (from 2, one worker each, up).
  out_.replies.clear();
  Send(leaf_join(53, 0, 2), MakePeer(5004));
  Send(leaf_join(53, 1, 2), MakePeer(5005));
  Send(leaf_join(54, 0, p::kMaxWorkers), MakePeer(5006));
  Send(leaf_join(54, 1, p::kMaxWorkers), MakePeer(5007));
  ASSERT_EQ(out_.replies.size(), 4u);
  for (const auto& r : out_.replies) EXPECT_EQ(r.h.type, p::MsgType::kJoinAck);
  EXPECT_EQ(Ctr(ControlCounter::kJobsAdmitted), 2u);
}

// A leaf of a tree refused one of its workers' JOINs while its part of the job was joining (its
// LEAVE peer_refused, docs/hierarchy.md). The spine grants a job of leaves as soon as every leaf
// has one worker, so the refusal mostly finds the job active: it is doomed all the same, its
// slots given back (to a queued job here), and every leaf hears the refusal with the worker's
// rank in the tree (tree_rank 1, passed on unmapped), at once and at every later JOIN.
TEST_F(ControlTest, ALeafsRefusalDoomsTheJobForEveryLeafWhateverItsState) {
  std::vector<std::string> logs;
  base_cfg_.log = [&](const std::string& line) { logs.push_back(line); };
  Make(16, 8, milliseconds(1000));
  auto leaf_join = [](uint16_t job, uint16_t rank, uint32_t window) {
    return Control(p::JoinMsg{
        .tree_world = 8, .job = job, .rank = rank, .k = 256, .window = window, .world_size = 2});
  };
  auto refusal = [](uint16_t job, uint16_t leaf, uint16_t worker, p::JoinParam param,
                    uint32_t value) {
    return Control(p::LeaveMsg{.job = job,
                               .rank = leaf,
                               .join_param = param,
                               .refused_rank = worker,
                               .calls = value,
                               .reason = static_cast<uint16_t>(p::ErrorCode::kPeerRefused)});
  };
  auto expect_refused = [](const Reply& r, const Peer& to, uint16_t job, uint16_t leaf,
                           uint16_t worker, p::JoinParam param, uint32_t value) {
    ExpectParamError(r, to, job, leaf, p::ErrorCode::kPeerRefused, param, value, worker);
    EXPECT_EQ(p::ErrorMsg::From(r.h).tree_rank(), 1) << "the rank is the tree's";
  };
  // Job 60 holds the whole pool; job 61 waits for it.
  Send(leaf_join(60, 0, 16), MakePeer(5000));
  Send(leaf_join(60, 1, 16), MakePeer(5001));
  Send(leaf_join(61, 0, 16), MakePeer(5002));
  Send(leaf_join(61, 1, 16), MakePeer(5003));
  ASSERT_EQ(out_.replies.size(), 3u);
  EXPECT_EQ(out_.replies[1].h.type, p::MsgType::kJoinAck);
  EXPECT_EQ(out_.replies[2].h.type, p::MsgType::kJoinWait) << "to the last leaf in";
  out_.replies.clear();

  // Only a joined leaf speaks for the job.
  Send(refusal(60, 1, 6, p::JoinParam::kWorldSize, 4), MakePeer(5999));
  EXPECT_TRUE(out_.replies.empty());
  EXPECT_EQ(Ctr(ControlCounter::kLeaveIgnored), 1u);

  // Leaf 1 refused worker 6 (world size 4, where the job's is 8).
  Send(refusal(60, 1, 6, p::JoinParam::kWorldSize, 4), MakePeer(5001));
  ASSERT_EQ(out_.replies.size(), 4u) << "both leaves, then job 61's grant";
  expect_refused(out_.replies[0], MakePeer(5000), 60, 0, 6, p::JoinParam::kWorldSize, 4);
  expect_refused(out_.replies[1], MakePeer(5001), 60, 1, 6, p::JoinParam::kWorldSize, 4);
  EXPECT_EQ(out_.replies[2].h.type, p::MsgType::kJoinAck) << "the freed slots: job 61's";
  ASSERT_FALSE(logs.empty());
  EXPECT_EQ(logs[0],
            "control: job 60 cannot start: a leaf refused the JOIN of the tree's rank 6 (its "
            "world_size 4); its ranks hear error(peer_refused) until the job timeout frees it");
  EXPECT_EQ(out_.replies[2].h.job, 61);
  EXPECT_EQ(Ctr(ControlCounter::kRefusedBelow), 1u);
  for (const JobInfo& j : cp_->Jobs()) EXPECT_EQ(j.active, j.job_id == 61) << j.job_id;
  out_.replies.clear();
  // The other copies change nothing; data of the job is not aggregated any more; a JOIN (a
  // leaf's keep-alive, or a leaf whose copy was lost) hears the refusal again.
  Send(refusal(60, 1, 6, p::JoinParam::kWorldSize, 4), MakePeer(5001));
  EXPECT_TRUE(out_.replies.empty());
  EXPECT_EQ(Ctr(ControlCounter::kRefusedBelow), 1u);
  EXPECT_EQ(cp_->CheckDataSource(60, 0, 0, MakePeer(5000), TimePoint{}), SourceCheck::kPass);
  Send(leaf_join(60, 0, 16), MakePeer(5000));
  ASSERT_EQ(out_.replies.size(), 1u);
  expect_refused(out_.replies[0], MakePeer(5000), 60, 0, 6, p::JoinParam::kWorldSize, 4);
  out_.replies.clear();

  // Pending (leaf 1 has not joined): doomed as well; the late leaf hears it when it joins. A
  // join_param no table knows is passed on as none.
  Send(leaf_join(62, 0, 4), MakePeer(5004));
  Send(refusal(62, 0, 2, static_cast<p::JoinParam>(99), 7), MakePeer(5004));
  ASSERT_EQ(out_.replies.size(), 1u);
  expect_refused(out_.replies[0], MakePeer(5004), 62, 0, 2, p::JoinParam::kNone, 7);
  Send(leaf_join(62, 1, 4), MakePeer(5005));
  ASSERT_EQ(out_.replies.size(), 2u);
  expect_refused(out_.replies[1], MakePeer(5005), 62, 1, 2, p::JoinParam::kNone, 7);
  EXPECT_EQ(Ctr(ControlCounter::kJobsAdmitted), 2u) << "60 and 61; 62 never";
  // A refusal of the spine's own keeps tree_rank 0 (its rank is a leaf).
  out_.replies.clear();
  Send(leaf_join(63, 0, 4), MakePeer(5006));
  Send(Control(p::JoinMsg{
           .tree_world = 8, .job = 63, .rank = 1, .k = 64, .window = 4, .world_size = 2}),
       MakePeer(5007));
  ASSERT_EQ(out_.replies.size(), 2u);
  ExpectParamError(out_.replies[1], MakePeer(5006), 63, 0, p::ErrorCode::kPeerRefused,
                   p::JoinParam::kK, 64, 1);
  EXPECT_EQ(p::ErrorMsg::From(out_.replies[1].h).tree_rank(), 0);
  // From a worker (a job of workers, tree_world 0), that reason is an abort like any other.
  out_.replies.clear();
  Send(Join(64, 0, 2, 256, 4), MakePeer(5008));
  Send(Join(64, 1, 2, 256, 4), MakePeer(5009));
  out_.replies.clear();
  Send(refusal(64, 1, 0, p::JoinParam::kK, 64), MakePeer(5009));
  ASSERT_EQ(out_.replies.size(), 1u);
  ExpectError(out_.replies[0], MakePeer(5008), 64, p::ErrorCode::kJobAborted);
  EXPECT_EQ(Ctr(ControlCounter::kRefusedBelow), 2u) << "jobs 60 and 62 only";
  // The doomed jobs go at the job timeout, as any idle job (61 with them: idle too).
  EXPECT_EQ(cp_->Tick(TimePoint{} + milliseconds(1500), out_), 4u);  // 64 was freed
  EXPECT_EQ(cp_->num_jobs(), 0u);
}

TEST_F(ControlTest, RefusalsOfAnActiveJobLeaveItAlone) {
  Make();
  auto r = JoinAll(9, 3, 64, 8, 5000);
  ASSERT_EQ(r.size(), 3u);
  for (const auto& x : r) EXPECT_EQ(x.h.type, p::MsgType::kJoinAck);
  Send(Join(9, 0, 3, 256, 8), MakePeer(5000));
  Send(Join(9, 2, 3, 64, 8), MakePeer(6002));
  ASSERT_EQ(out_.replies.size(), 2u);
  ExpectParamError(out_.replies[0], MakePeer(5000), 9, 0, p::ErrorCode::kBadParams,
                   p::JoinParam::kK, 64);
  ExpectParamError(out_.replies[1], MakePeer(6002), 9, 2, p::ErrorCode::kRankTaken,
                   p::JoinParam::kRankTaken, p::kJoinValueNone);
  EXPECT_TRUE(cp_->Jobs()[0].active);
  EXPECT_EQ(Ctr(ControlCounter::kErrPeerRefused), 0u);
  out_.replies.clear();
  Send(Join(9, 1, 3, 64, 8), MakePeer(5001));  // a resend still gets join_ack
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kJoinAck);
}

// Ranks 0, 1 and 3 of 5 joined; rank 2's JOIN with another K is refused: every joined rank hears
// peer_refused naming rank 2, K and its value at once; a resend of a joined rank's JOIN hears it
// again (a lost copy is made good), and so does a rank joining later. The job never becomes active
// and goes at the job timeout.
TEST_F(ControlTest, RefusedRankIsToldToEveryJoinedRankAndToLaterJoins) {
  Make(64, 8, milliseconds(1000));
  const TimePoint t0{};
  Send(Join(40, 0, 5, 256, 16), MakePeer(5000), t0);
  Send(Join(40, 1, 5, 256, 16), MakePeer(5001), t0);
  Send(Join(40, 3, 5, 256, 16), MakePeer(5003), t0);
  EXPECT_TRUE(out_.replies.empty());
  Send(Join(40, 2, 5, 64, 16), MakePeer(5002), t0 + milliseconds(10));
  ASSERT_EQ(out_.replies.size(), 4u);
  ExpectParamError(out_.replies[0], MakePeer(5002), 40, 2, p::ErrorCode::kBadParams,
                   p::JoinParam::kK, 256);
  const uint16_t joined[] = {0, 1, 3};
  for (size_t i = 0; i < 3; ++i) {
    const uint16_t r = joined[i];
    ExpectParamError(out_.replies[1 + i], MakePeer(static_cast<uint16_t>(5000 + r)), 40, r,
                     p::ErrorCode::kPeerRefused, p::JoinParam::kK, 64, 2);
  }
  // A resend from rank 1, rank 4 joining late, and rank 2's own resend.
  out_.replies.clear();
  Send(Join(40, 1, 5, 256, 16), MakePeer(5001), t0 + milliseconds(100));
  Send(Join(40, 4, 5, 256, 16), MakePeer(5004), t0 + milliseconds(900));
  Send(Join(40, 2, 5, 64, 16), MakePeer(5002), t0 + milliseconds(900));
  ASSERT_EQ(out_.replies.size(), 3u);
  ExpectParamError(out_.replies[0], MakePeer(5001), 40, 1, p::ErrorCode::kPeerRefused,
                   p::JoinParam::kK, 64, 2);
  ExpectParamError(out_.replies[1], MakePeer(5004), 40, 4, p::ErrorCode::kPeerRefused,
                   p::JoinParam::kK, 64, 2);
  ExpectParamError(out_.replies[2], MakePeer(5002), 40, 2, p::ErrorCode::kBadParams,
                   p::JoinParam::kK, 256);
  // Rank 4 was not recorded: the job is still pending with 3 ranks, never admitted.
  ASSERT_EQ(cp_->Jobs().size(), 1u);
  EXPECT_FALSE(cp_->Jobs()[0].active);
  EXPECT_EQ(cp_->Jobs()[0].joined, 3);
  EXPECT_EQ(Ctr(ControlCounter::kErrPeerRefused), 5u);
  EXPECT_EQ(Ctr(ControlCounter::kJobsAdmitted), 0u);
  // The job timeout frees it (counted from the last JOIN), and the id is free again.
  ExpectTimeoutFreesTheId(40, t0 + milliseconds(1800), t0 + milliseconds(1901));
}

// The refused rank joined first: its out-of-range JOIN creates the job, born doomed and knowing
// no parameters, so the ranks that follow hear at once why it cannot start (whatever they send
// in range), a later out-of-range JOIN gets its own refusal, and the job timeout frees the id.
// With doom_unknown off (a leaf's control plane) nothing is created; with the table full, the
// refusal is only the refused rank's.
TEST_F(ControlTest, AJobWhoseFirstJoinIsOutOfRangeIsBornDoomedForTheRanksThatFollow) {
  std::vector<std::string> logs;
  base_cfg_.log = [&](const std::string& line) { logs.push_back(line); };
  Make(64, 2, milliseconds(1000));
  const TimePoint t0{};
  Send(Join(42, 3, 2, 256, 16), MakePeer(5003), t0);  // rank 3 of a world of 2
  ASSERT_EQ(out_.replies.size(), 1u);
  ExpectParamError(out_.replies[0], MakePeer(5003), 42, 3, p::ErrorCode::kBadParams,
                   p::JoinParam::kRank, p::kJoinValueNone);
  ASSERT_EQ(cp_->num_jobs(), 1u);
  EXPECT_FALSE(cp_->IsPending(42));
  out_.replies.clear();
  Send(Join(42, 0, 2, 256, 16), MakePeer(5000), t0 + milliseconds(10));
  Send(Join(42, 1, 2, 64, 8), MakePeer(5001), t0 + milliseconds(20));     // other K and window
  Send(Join(42, 0, 2, 256, 16), MakePeer(5000), t0 + milliseconds(110));  // rank 0's resend
  Send(Join(42, 1, 2, 0, 16), MakePeer(5001), t0 + milliseconds(120));    // its own refusal
  ASSERT_EQ(out_.replies.size(), 4u);
  ExpectParamError(out_.replies[0], MakePeer(5000), 42, 0, p::ErrorCode::kPeerRefused,
                   p::JoinParam::kRank, 3, 3);
  ExpectParamError(out_.replies[1], MakePeer(5001), 42, 1, p::ErrorCode::kPeerRefused,
                   p::JoinParam::kRank, 3, 3);
  ExpectParamError(out_.replies[2], MakePeer(5000), 42, 0, p::ErrorCode::kPeerRefused,
                   p::JoinParam::kRank, 3, 3);
  ExpectParamError(out_.replies[3], MakePeer(5001), 42, 1, p::ErrorCode::kBadParams,
                   p::JoinParam::kK, p::kJoinValueNone);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(out_.replies[i].h.next_exp, 0) << "tree_rank 0";
  // Nothing recorded, nothing admitted, no LEAVE taken from a stranger.
  ASSERT_EQ(cp_->Jobs().size(), 1u);
  EXPECT_EQ(cp_->Jobs()[0].joined, 0);
  EXPECT_FALSE(cp_->Jobs()[0].active);
  Send(Control(p::LeaveMsg{.job = 42, .rank = 0, .reason = 0}), MakePeer(5000),
       t0 + milliseconds(130));
  EXPECT_EQ(Ctr(ControlCounter::kLeaveIgnored), 1u);
  EXPECT_EQ(Ctr(ControlCounter::kJobsAdmitted), 0u);
  EXPECT_EQ(Ctr(ControlCounter::kErrPeerRefused), 3u);
  // The switch's log says it once.
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0],
            "control: job 42 cannot start: the JOIN of rank 3 was refused (its rank 3); its ranks "
            "hear error(peer_refused) until the job timeout frees it");
  // Freed by the job timeout from the last JOIN; the id is joinable again.
  ExpectTimeoutFreesTheId(42, t0 + milliseconds(1100), t0 + milliseconds(1121));

  // The table full (job 42 and one more): the refusal answers the refused rank only.
  out_.replies.clear();
  Send(Join(43, 0, 2, 64, 4), MakePeer(7100), t0 + milliseconds(1300));
  Send(Join(44, 5, 2, 64, 4), MakePeer(7101), t0 + milliseconds(1300));
  ASSERT_EQ(out_.replies.size(), 1u);
  ExpectParamError(out_.replies[0], MakePeer(7101), 44, 5, p::ErrorCode::kBadParams,
                   p::JoinParam::kRank, p::kJoinValueNone);
  EXPECT_EQ(cp_->num_jobs(), 2u);

  // doom_unknown off: nothing is created.
  base_cfg_.doom_unknown = false;
  Make(64, 2, milliseconds(1000));
  Send(Join(45, 3, 2, 256, 16), MakePeer(5003), t0);
  EXPECT_EQ(cp_->num_jobs(), 0u);
  out_.replies.clear();
  Send(Join(45, 0, 2, 256, 16), MakePeer(5000), t0);
  EXPECT_TRUE(out_.replies.empty()) << "pending, waiting for rank 1";
  EXPECT_TRUE(cp_->IsPending(45));
}

// A second peer claiming a joined (rank, lane) of a pending job: rank_taken to it, peer_refused
// (rank_taken, its lane) to every joined lane, the first claimant's included; with lanes.
TEST_F(ControlTest, RankTakenOfAPendingJobIsToldToEveryJoinedLane) {
  Make(64);
  Send(LaneJoin(41, 0, 2, 64, 8, 0, 2), MakePeer(LanePort(0, 0)));
  Send(LaneJoin(41, 0, 2, 64, 8, 1, 2), MakePeer(LanePort(0, 1)));
  Send(LaneJoin(41, 1, 2, 64, 8, 0, 2), MakePeer(LanePort(1, 0)));
  EXPECT_TRUE(out_.replies.empty());
  Send(LaneJoin(41, 0, 2, 64, 8, 1, 2), MakePeer(9999));
  ASSERT_EQ(out_.replies.size(), 4u);
  ExpectParamError(out_.replies[0], MakePeer(9999), 41, 0, p::ErrorCode::kRankTaken,
                   p::JoinParam::kRankTaken, p::kJoinValueNone);
  std::vector<Peer> want = {MakePeer(LanePort(0, 0)), MakePeer(LanePort(1, 0)),
                            MakePeer(LanePort(0, 1))};
  std::vector<Peer> got;
  for (size_t i = 1; i < 4; ++i) {
    const Reply& r = out_.replies[i];
    got.push_back(r.to);
    ExpectError(r, r.to, 41, p::ErrorCode::kPeerRefused);
    EXPECT_EQ(r.h.count, 0);  // the refused rank
    EXPECT_EQ(r.h.slot, static_cast<uint16_t>(p::JoinParam::kRankTaken));
    EXPECT_EQ(r.h.offset, 1u);  // its lane
  }
  for (const Peer& w : want) EXPECT_NE(std::find(got.begin(), got.end(), w), got.end());
  // The lane still missing (rank 1 lane 1) joining now hears it too.
  out_.replies.clear();
  Send(LaneJoin(41, 1, 2, 64, 8, 1, 2), MakePeer(LanePort(1, 1)));
  ASSERT_EQ(out_.replies.size(), 1u);
  ExpectParamError(out_.replies[0], MakePeer(LanePort(1, 1)), 41, 1, p::ErrorCode::kPeerRefused,
                   p::JoinParam::kRankTaken, 1, 0);
  EXPECT_FALSE(cp_->Jobs()[0].active);
}

// An out-of-range JOIN (a lane >= L here) for a pending job dooms it like a mismatch.
TEST_F(ControlTest, OutOfRangeJoinForAPendingJobIsToldToThePeers) {
  Make(64);
  Send(Join(42, 0, 2, 64, 8), MakePeer(5000));
  Send(LaneJoin(42, 1, 2, 64, 8, 3, 2), MakePeer(5001));
  ASSERT_EQ(out_.replies.size(), 2u);
  ExpectParamError(out_.replies[0], MakePeer(5001), 42, 1, p::ErrorCode::kBadParams,
                   p::JoinParam::kLane, p::kJoinValueNone);
  ExpectParamError(out_.replies[1], MakePeer(5000), 42, 0, p::ErrorCode::kPeerRefused,
                   p::JoinParam::kLane, 3, 1);
}

TEST_F(ControlTest, RankTakenByAnotherPeer) {
  Make();
  Send(Join(2, 0, 2, 64, 4), MakePeer(5000));
  Send(Join(2, 0, 2, 64, 4), MakePeer(6000));
  ASSERT_EQ(out_.replies.size(), 2u);  // and peer_refused to rank 0 (the job is pending)
  ExpectError(out_.replies[0], MakePeer(6000), 2, p::ErrorCode::kRankTaken);
  EXPECT_EQ(out_.replies[0].h.rank, 0);
  ExpectError(out_.replies[1], MakePeer(5000), 2, p::ErrorCode::kPeerRefused);
  // Same port on another address is another peer too.
  out_.replies.clear();
  Send(Join(2, 0, 2, 64, 4), MakePeer(5000, "127.0.0.2"));
  ASSERT_EQ(out_.replies.size(), 1u);  // the job heard of a refusal already
  ExpectError(out_.replies[0], MakePeer(5000, "127.0.0.2"), 2, p::ErrorCode::kRankTaken);
  // After activation as well (another job: job 2 cannot start now).
  auto r = JoinAll(3, 2, 64, 4, 5000);
  ASSERT_EQ(r.size(), 2u);
  Send(Join(3, 1, 2, 64, 4), MakePeer(6001));
  ASSERT_EQ(out_.replies.size(), 1u);
  ExpectError(out_.replies[0], MakePeer(6001), 3, p::ErrorCode::kRankTaken);
  EXPECT_EQ(Ctr(ControlCounter::kErrRankTaken), 3u);
}

TEST_F(ControlTest, JobTableFull) {
  Make(64, 2);
  Send(Join(1, 0, 2, 64, 1), MakePeer(5000));  // pending jobs count too
  Send(Join(2, 0, 2, 64, 1), MakePeer(5010));
  out_.replies.clear();
  Send(Join(3, 0, 2, 64, 1), MakePeer(5020));
  ASSERT_EQ(out_.replies.size(), 1u);
  ExpectError(out_.replies[0], MakePeer(5020), 3, p::ErrorCode::kTooManyJobs);
  // Free one; job 3 now fits.
  out_.replies.clear();
  Send(AbortLeave(1, 0), MakePeer(5000));
  EXPECT_EQ(cp_->num_jobs(), 1u);
  auto r = JoinAll(3, 2, 64, 1, 5020);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].h.type, p::MsgType::kJoinAck);
  EXPECT_EQ(Ctr(ControlCounter::kErrTooManyJobs), 1u);
}

TEST_F(ControlTest, WindowShrinksToWhatFitsAndNoSlotsWhenPoolFull) {
  Make(8);
  auto a = JoinAll(1, 2, 64, 5, 5000);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].h.offset, 5u);
  auto b = JoinAll(2, 2, 64, 5, 5100);  // only 3 left
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].h.type, p::MsgType::kJoinAck);
  EXPECT_EQ(b[0].h.offset, 3u);
  EXPECT_EQ(b[1].h.offset, 3u);
  auto jobs = cp_->Jobs();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[1].slot_base, 5u);
  auto c = JoinAll(3, 3, 64, 1, 5200);  // nothing left: job 3 waits (the last JOIN hears it)
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].h.type, p::MsgType::kJoinWait);
  EXPECT_EQ(c[0].to, MakePeer(5202));
  EXPECT_EQ(cp_->num_jobs(), 3u);
  EXPECT_EQ(cp_->queued_jobs(), 1u);
  // A huge window is clamped to the engine's 16-bit window and then to the pool.
  Send(AbortLeave(1, 0), MakePeer(5000));  // job 3 gets 1 of the freed slots
  Send(AbortLeave(2, 0), MakePeer(5100));
  Send(AbortLeave(3, 0), MakePeer(5200));
  auto d = JoinAll(4, 1, 64, 0xFFFFFFFF, 5300);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].h.type, p::MsgType::kJoinAck);
  EXPECT_EQ(d[0].h.offset, 8u);
}

// The receive queue caps a grant: all ranks of a job may send their whole window at once, so
// world x window messages must fit what the socket holds (ina-switchd: its UDP port's estimate).
TEST_F(ControlTest, GrantFitsTheReceiveQueueForEveryRankAtOnce) {
  std::vector<size_t> asked_for;  // the message sizes the plane asked about
  std::vector<std::string> logs;
  base_cfg_.rx_queue = [&](size_t bytes) -> size_t {
    asked_for.push_back(bytes);
    return bytes > 2000 ? 100 : 0;  // 100 large messages; small ones: no limit known
  };
  base_cfg_.log = [&](const std::string& line) { logs.push_back(line); };
  Make(4096);
  auto a = JoinAll(1, 4, 2048, 256, 5000);  // 4 ranks x 25 = 100 messages of K=2048
  ASSERT_EQ(a.size(), 4u);
  for (const Reply& r : a) {
    EXPECT_EQ(r.h.type, p::MsgType::kJoinAck);
    EXPECT_EQ(r.h.offset, 25u);
  }
  ASSERT_FALSE(asked_for.empty());
  EXPECT_EQ(asked_for.back(), p::MessageBytes(2048));
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_NE(logs[0].find("job 1: window 256 asked, at most 25 granted"), std::string::npos)
      << logs[0];
  EXPECT_NE(logs[0].find("--socket-buffer-bytes"), std::string::npos) << logs[0];
  // A size with no limit known is not capped, and not logged.
  auto c = JoinAll(3, 4, 256, 256, 5200);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].h.offset, 256u);
  EXPECT_EQ(logs.size(), 1u);
  // 64 ranks beside job 1 get half of 100 messages: one slot, never none.
  auto d = JoinAll(4, 64, 2048, 8, 6000);
  ASSERT_EQ(d.size(), 64u);
  EXPECT_EQ(d[0].h.type, p::MsgType::kJoinAck);
  EXPECT_EQ(d[0].h.offset, 1u);
  EXPECT_EQ(logs.size(), 2u);
  EXPECT_NE(logs[1].find("shared with 1 other job(s)"), std::string::npos) << logs[1];
}

// join_ack says the job timeout (ms, at most 65535), which idle workers keep their jobs within;
// a JOIN of a joined rank of an active job (an idle worker's keep-alive) is answered with the
// same grant and is the job's activity.
TEST_F(ControlTest, JoinAckSaysTheJobTimeoutAndAKeepAliveKeepsTheJob) {
  Make(64, 8, milliseconds(1000));
  auto a = JoinAll(1, 2, 256, 16, 5000);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(p::JoinAckMsg::From(a[0].h).job_timeout_ms, 1000);
  // Rank 0 keeps the job alive at 0.8 s and 1.6 s; at 2.2 s it is still there.
  for (int t : {800, 1600}) {
    out_.replies.clear();
    const TimePoint now = TimePoint{} + milliseconds(t);
    Send(Control(p::JoinMsg{.job = 1, .rank = 0, .k = 256, .window = 16, .world_size = 2}),
         MakePeer(5000), now);
    ASSERT_EQ(out_.replies.size(), 1u);
    const auto ack = p::JoinAckMsg::From(out_.replies[0].h);
    EXPECT_EQ(ack.window, 16u);
    EXPECT_EQ(ack.epoch, p::JoinAckMsg::From(a[0].h).epoch);
    (void)cp_->Tick(now, out_);
  }
  (void)cp_->Tick(TimePoint{} + milliseconds(2200), out_);
  EXPECT_EQ(cp_->num_jobs(), 1u);
  EXPECT_EQ(Ctr(ControlCounter::kJobsTimedOut), 0u);
  (void)cp_->Tick(TimePoint{} + milliseconds(2700), out_);
  EXPECT_EQ(Ctr(ControlCounter::kJobsTimedOut), 1u) << "silent past the timeout: freed";
  // A timeout past 65535 ms says 65535.
  Make(64, 8, milliseconds(100000));
  auto b = JoinAll(2, 1, 256, 16, 6000);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(p::JoinAckMsg::From(b[0].h).job_timeout_ms, 0xFFFF);
}

// An idle job holding the pool while another waits is asked to release its grant (join_ack,
// release 1): once every rank re-joined, its slots go back and both jobs get their fair shares.
// A rank that calls again first calls the release off: the lanes that re-joined hear that the
// grant stands (release 2), at once and at every resend, until their rank sends data.
TEST_F(ControlTest, AnIdleJobIsAskedToReleaseItsGrantWhileAnotherWaits) {
  base_cfg_.idle_release = milliseconds(500);
  Make(16, 8, milliseconds(30000));
  const TimePoint t0{};
  auto at = [&](int ms) { return t0 + milliseconds(ms); };
  // release: a re-join for a release (JOIN release 1), else at a lease's end.
  auto join = [](uint16_t job, uint16_t rank, uint16_t world, uint8_t rejoin = 0,
                 bool release = false) {
    return Control(p::JoinMsg{.release = static_cast<uint8_t>(release ? 1 : 0),
                              .rejoin_epoch = rejoin,
                              .job = job,
                              .rank = rank,
                              .k = 256,
                              .window = 16,
                              .world_size = world});
  };
  auto expect_release = [](const Reply& r, const Peer& to, uint16_t rank, uint8_t epoch,
                           uint8_t release, uint32_t window = 16) {
    EXPECT_EQ(r.to, to);
    EXPECT_EQ(r.h.type, p::MsgType::kJoinAck);
    const auto ack = p::JoinAckMsg::From(r.h);
    EXPECT_EQ(ack.rank, rank);
    EXPECT_EQ(ack.epoch, epoch);
    EXPECT_EQ(ack.window, window) << "the grant it holds";
    EXPECT_EQ(ack.release, release);
  };
  ASSERT_EQ(JoinAll(1, 2, 256, 16, 5000).size(), 2u);  // the whole pool, epoch 1
  EXPECT_EQ(cp_->CheckDataSource(1, 0, 0, MakePeer(5000), at(100)), SourceCheck::kOk);
  // Alone, an idle job keeps its grant.
  EXPECT_EQ(cp_->Tick(at(1000), out_), 0u);
  EXPECT_TRUE(out_.replies.empty());
  Send(join(2, 0, 1), MakePeer(6000), at(1000));
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kJoinWait);
  out_.replies.clear();
  ASSERT_EQ(cp_->CheckDataSource(1, 1, 0, MakePeer(5001), at(1100)), SourceCheck::kOk);
  (void)cp_->Tick(at(1500), out_);
  EXPECT_TRUE(out_.replies.empty()) << "data 0.4 s ago: not idle yet";
  (void)cp_->Tick(at(1700), out_);
  ASSERT_EQ(out_.replies.size(), 2u);
  expect_release(out_.replies[0], MakePeer(5000), 0, 1, 1);
  expect_release(out_.replies[1], MakePeer(5001), 1, 1, 1);
  EXPECT_EQ(Ctr(ControlCounter::kReleasesAsked), 1u);
  out_.replies.clear();
  (void)cp_->Tick(at(1800), out_);
  EXPECT_TRUE(out_.replies.empty()) << "asked once";
  // A keep-alive JOIN is asked again (the first may have been lost).
  Send(join(1, 1, 2), MakePeer(5001), at(1900));
  ASSERT_EQ(out_.replies.size(), 1u);
  expect_release(out_.replies[0], MakePeer(5001), 1, 1, 1);
  out_.replies.clear();
  // Both ranks re-join: the grant goes back; the waiting job, then this one, get 8 slots each.
  Send(join(1, 0, 2, 1, true), MakePeer(5000), at(2000));
  EXPECT_TRUE(out_.replies.empty());
  Send(join(1, 1, 2, 1, true), MakePeer(5001), at(2000));
  ASSERT_EQ(out_.replies.size(), 3u);
  EXPECT_EQ(out_.replies[0].h.job, 2);
  EXPECT_EQ(p::JoinAckMsg::From(out_.replies[0].h).window, 8u);
  for (int i : {1, 2}) {
    const auto ack = p::JoinAckMsg::From(out_.replies[i].h);
    EXPECT_EQ(ack.job, 1);
    EXPECT_EQ(ack.epoch, 2);
    EXPECT_EQ(ack.window, 8u);
    EXPECT_EQ(ack.release, 0);
  }
  EXPECT_EQ(Ctr(ControlCounter::kReleases), 1u);
  out_.replies.clear();

  // Job 3 waits; job 1 (epoch 2, 8 slots) is idle again and asked to release. Rank 0 re-joins,
  // but rank 1 calls again first: the release is off, and rank 0 hears the grant stands.
  Send(join(3, 0, 1), MakePeer(6001), at(2100));
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kJoinWait);
  out_.replies.clear();
  (void)cp_->Tick(at(2600), out_);
  std::vector<Reply> asked;
  for (const Reply& r : out_.replies) {
    if (r.h.job == 1) asked.push_back(r);
  }
  ASSERT_EQ(asked.size(), 2u) << "job 2 is idle too: asked as well";
  expect_release(asked[0], MakePeer(5000), 0, 2, 1, 8);
  out_.replies.clear();
  Send(join(1, 0, 2, 2, true), MakePeer(5000), at(2700));
  EXPECT_TRUE(out_.replies.empty());
  EXPECT_EQ(cp_->CheckDataSource(1, 1, 1, MakePeer(5001), at(2750)), SourceCheck::kOk);
  (void)cp_->Tick(at(2760), out_);
  std::vector<Reply> stands;
  for (const Reply& r : out_.replies) {
    if (r.h.job == 1) stands.push_back(r);
  }
  ASSERT_EQ(stands.size(), 1u);
  expect_release(stands[0], MakePeer(5000), 0, 2, 2, 8);
  EXPECT_EQ(Ctr(ControlCounter::kReleasesCancelled), 1u);
  out_.replies.clear();
  Send(join(1, 0, 2, 2, true), MakePeer(5000), at(2800));  // its resend: the answer was lost
  ASSERT_EQ(out_.replies.size(), 1u);
  expect_release(out_.replies[0], MakePeer(5000), 0, 2, 2, 8);
  out_.replies.clear();
  // Rank 1 heard the release late, after it was called off: its re-join for it gets the same.
  Send(join(1, 1, 2, 2, true), MakePeer(5001), at(2850));
  ASSERT_EQ(out_.replies.size(), 1u);
  expect_release(out_.replies[0], MakePeer(5001), 1, 2, 2, 8);
  out_.replies.clear();
  // A re-join at a lease's end is recorded (no answer until every rank re-joined).
  Send(join(1, 0, 2, 2), MakePeer(5000), at(2950));
  EXPECT_TRUE(out_.replies.empty());
  bool active = false;
  for (const JobInfo& j : cp_->Jobs()) active = active || (j.job_id == 1 && j.active);
  EXPECT_TRUE(active) << "the grant stood";
  EXPECT_EQ(Ctr(ControlCounter::kReleases), 1u) << "job 2, asked too, did not re-join";
}

// A job queued again by its release, whose JOINs still say its ranks are idle, is no job waiting
// for slots: the idle job now holding the pool is not asked for it (no ping-pong between idle
// jobs), until a JOIN of it says a call waits.
TEST_F(ControlTest, AJobQueuedAgainByAReleaseAsksNothingUntilACallWaits) {
  base_cfg_.idle_release = milliseconds(500);
  Make(16, 8, milliseconds(30000), 0, 16);  // min_window 16: one job at a time
  auto join = [](uint16_t job, uint8_t rejoin, bool release) {
    return Control(p::JoinMsg{.release = static_cast<uint8_t>(release ? 1 : 0),
                              .rejoin_epoch = rejoin,
                              .job = job,
                              .rank = 0,
                              .k = 256,
                              .window = 16,
                              .world_size = 1});
  };
  auto at = [](int ms) { return TimePoint{} + milliseconds(ms); };
  Send(join(1, 0, false), MakePeer(5000), at(0));
  Send(join(2, 0, false), MakePeer(6000), at(0));
  ASSERT_EQ(cp_->queued_jobs(), 1u);
  (void)cp_->Tick(at(600), out_);
  EXPECT_EQ(Ctr(ControlCounter::kReleasesAsked), 1u);
  Send(join(1, 1, true), MakePeer(5000), at(700));  // job 1 releases: job 2 gets the pool
  EXPECT_EQ(Ctr(ControlCounter::kReleases), 1u);
  ASSERT_EQ(cp_->queued_jobs(), 1u) << "job 1 waits";
  Send(join(1, 1, true), MakePeer(5000), at(800));  // its resends: idle still
  (void)cp_->Tick(at(2000), out_);
  EXPECT_EQ(Ctr(ControlCounter::kReleasesAsked), 1u) << "job 2 is idle, but nobody wants slots";
  Send(join(1, 1, false), MakePeer(5000), at(2100));  // a call waits
  (void)cp_->Tick(at(2110), out_);
  EXPECT_EQ(Ctr(ControlCounter::kReleasesAsked), 2u) << "job 2 asked for it";
}

// A spine's job of leaves is never asked (a leaf's grant is its spine's); nor is any job with
// idle_release 0.
TEST_F(ControlTest, NoReleaseForAJobOfLeavesOrWhenItIsOff) {
  for (const bool leaves : {true, false}) {
    base_cfg_.idle_release = leaves ? milliseconds(500) : milliseconds(0);
    Make(16, 8, milliseconds(30000));
    Send(Control(p::JoinMsg{.tree_world = static_cast<uint8_t>(leaves ? 4 : 0),
                            .job = 1,
                            .rank = 0,
                            .k = 256,
                            .window = 16,
                            .world_size = 1}),
         MakePeer(5000));
    Send(Control(p::JoinMsg{.job = 2, .rank = 0, .k = 256, .window = 16, .world_size = 1}),
         MakePeer(6000));
    ASSERT_EQ(cp_->queued_jobs(), 1u);
    out_.replies.clear();
    (void)cp_->Tick(TimePoint{} + milliseconds(5000), out_);
    EXPECT_TRUE(out_.replies.empty()) << leaves;
    EXPECT_EQ(Ctr(ControlCounter::kReleasesAsked), 0u) << leaves;
  }
}

// The jobs that hold or wait for slots share the receive queue: max-min fairly by what their
// ranks' windows need (world x window messages), so together they fit it too. Alone, a window
// within the queue is granted whole.
TEST_F(ControlTest, JobsShareTheReceiveQueueFairly) {
  std::vector<std::string> logs;
  base_cfg_.rx_queue = [](size_t bytes) -> size_t { return bytes > 2000 ? 200 : 0; };
  base_cfg_.log = [&](const std::string& line) { logs.push_back(line); };
  Make(4096);
  auto a = JoinAll(1, 2, 2048, 40, 5000);  // 80 of 200 messages: whole
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].h.offset, 40u);
  EXPECT_TRUE(logs.empty());
  // 4 ranks asking 256 beside it: job 1 needs 40% (no more than half), job 2 the other 60%:
  // 120 messages, 30 a rank.
  auto b = JoinAll(2, 4, 2048, 256, 5100);
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0].h.offset, 30u);
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_NE(logs[0].find("job 2: window 256 asked, at most 30 granted"), std::string::npos)
      << logs[0];
  // A third asking as much: now a third each is less than job 1 needs, so all three split the
  // queue equally: 66 messages, 16 a rank. Jobs 1 and 2 keep their grants until they re-join
  // (and are not logged before).
  auto c = JoinAll(3, 4, 2048, 256, 5200);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].h.offset, 16u);
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_NE(logs[1].find("shared with 2 other job(s)"), std::string::npos) << logs[1];
}

// An engine built for smaller frames (an RTL core of MaxK 512, say) bounds K as the fabric's frames
// do: the lesser of the two is what hello_ack says and what a JOIN is held to, so a K above it is
// refused as out of range (bad_params), not installed and refused by the engine (no_slots).
TEST_F(ControlTest, TheEnginesMaxKBoundsKAsTheFabricsFramesDo) {
  engine_max_k_ = 512;
  Make(64, 8, milliseconds(1000), 0, 1, 0, /*max_k=*/1024);
  const Peer a = MakePeer(5000);
  Send(Control(p::HelloMsg{.job = 7}), a);
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(p::HelloAckMsg::From(out_.replies[0].h).max_k, 512);
  out_.replies.clear();
  Send(Join(8, 0, 1, 1024, 2), a);
  ASSERT_EQ(out_.replies.size(), 1u);
  ExpectParamError(out_.replies[0], a, 8, 0, p::ErrorCode::kBadParams, p::JoinParam::kK,
                   p::kJoinValueNone);
  EXPECT_EQ(Ctr(ControlCounter::kErrNoSlots), 0u);
  out_.replies.clear();
  Send(Join(9, 0, 1, 512, 2), a);
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kJoinAck);
  // The frames' bound, when it is the lesser.
  engine_max_k_ = 2048;
  Make(64, 8, milliseconds(1000), 0, 1, 0, /*max_k=*/256);
  out_.replies.clear();
  Send(Control(p::HelloMsg{.job = 7}), a);
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(p::HelloAckMsg::From(out_.replies[0].h).max_k, 256);
}

// hello (switch_cores auto): answered with the cores that take a job's lanes and the largest K,
// the job echoed; nothing is created or changed.
TEST_F(ControlTest, HelloSaysTheCoresAndKAndCreatesNothing) {
  base_cfg_.core_ports = 4;
  Make(64, 8, milliseconds(1000), 0, 1, 0, /*max_k=*/1024);
  const std::vector<uint8_t> hello = Control(p::HelloMsg{.job = 7});
  Send(hello, MakePeer(5000));
  ASSERT_EQ(out_.replies.size(), 1u);
  const Reply& r = out_.replies[0];
  EXPECT_EQ(r.to, MakePeer(5000));
  EXPECT_EQ(r.h.type, p::MsgType::kHelloAck);
  EXPECT_EQ(r.h.job, 7);
  const auto ack = p::HelloAckMsg::From(r.h);
  EXPECT_EQ(ack.core_ports, 4);
  EXPECT_EQ(ack.max_k, 1024);
  EXPECT_EQ(cp_->num_jobs(), 0u);
  EXPECT_EQ(Ctr(ControlCounter::kHellos), 1u);
  // A damaged one is dropped like any control message.
  std::vector<uint8_t> bad = hello;
  bad[3] ^= 1;
  out_.replies.clear();
  Send(bad, MakePeer(5000));
  EXPECT_TRUE(out_.replies.empty());
  EXPECT_EQ(Ctr(ControlCounter::kHellos), 1u);
  EXPECT_EQ(Ctr(ControlCounter::kControlBadCrc), 1u);
  // A plane of zero cores is a bad config.
  base_cfg_.core_ports = 0;
  EngineLimits lim;
  lim.pool_slots = 8;
  auto engine = MakeReferenceEngine(lim);
  EXPECT_FALSE(ControlPlane::Create(*engine, base_cfg_).ok());
}

TEST_F(ControlTest, EngineRefusalIsNoSlots) {
  Make(64, 4, milliseconds(1000), /*engine_jobs=*/1);
  ASSERT_EQ(JoinAll(1, 1, 64, 4, 5000).size(), 1u);
  auto r = JoinAll(2, 2, 64, 4, 5100);
  ASSERT_EQ(r.size(), 2u);
  ExpectError(r[0], MakePeer(5100), 2, p::ErrorCode::kNoSlots);
  EXPECT_EQ(cp_->num_jobs(), 1u);
  EXPECT_EQ(cp_->LargestFreeExtent(), 60u);  // the refused job's slots went back
}

TEST_F(ControlTest, FirstFitAndCoalescing) {
  Make(10);
  ASSERT_EQ(JoinAll(1, 1, 64, 3, 5000)[0].h.offset, 3u);  // [0,3)
  ASSERT_EQ(JoinAll(2, 1, 64, 3, 5001)[0].h.offset, 3u);  // [3,6)
  ASSERT_EQ(JoinAll(3, 1, 64, 4, 5002)[0].h.offset, 4u);  // [6,10)
  EXPECT_EQ(cp_->LargestFreeExtent(), 0u);
  Send(AbortLeave(2, 0), MakePeer(5001));
  EXPECT_EQ(cp_->LargestFreeExtent(), 3u);
  ASSERT_EQ(JoinAll(4, 1, 64, 2, 5003)[0].h.offset, 2u);  // first fit: [3,5)
  auto base_of = [&](uint16_t job) {
    for (const auto& j : cp_->Jobs()) {
      if (j.job_id == job) return j.slot_base;
    }
    return ~0u;
  };
  EXPECT_EQ(base_of(4), 3u);
  Send(AbortLeave(1, 0), MakePeer(5000));  // free [0,3) and [5,6)
  EXPECT_EQ(cp_->LargestFreeExtent(), 3u);
  ASSERT_EQ(JoinAll(5, 1, 64, 1, 5004)[0].h.offset, 1u);  // first fit: slot 0
  EXPECT_EQ(base_of(5), 0u);
  Send(AbortLeave(4, 0), MakePeer(5003));  // [1,6) coalesces
  EXPECT_EQ(cp_->LargestFreeExtent(), 5u);
  Send(AbortLeave(5, 0), MakePeer(5004));
  Send(AbortLeave(3, 0), MakePeer(5002));
  EXPECT_EQ(cp_->LargestFreeExtent(), 10u);
  ASSERT_EQ(JoinAll(6, 1, 64, 10, 5005)[0].h.offset, 10u);
}

TEST_F(ControlTest, LeaveAbortsTheOthersAndRemovesTheJob) {
  Make(16);
  ASSERT_EQ(JoinAll(5, 3, 64, 16, 5000).size(), 3u);
  // LEAVE from a peer that is not that rank, or for another job: ignored.
  Send(AbortLeave(5, 1), MakePeer(5000));
  Send(AbortLeave(6, 0), MakePeer(5000));
  Send(AbortLeave(5, 9), MakePeer(5000));
  EXPECT_TRUE(out_.replies.empty());
  EXPECT_EQ(Ctr(ControlCounter::kLeaveIgnored), 3u);
  EXPECT_TRUE(cp_->Jobs()[0].active);

  Send(AbortLeave(5, 1), MakePeer(5001));
  ASSERT_EQ(out_.replies.size(), 2u);
  ExpectError(out_.replies[0], MakePeer(5000), 5, p::ErrorCode::kJobAborted);
  EXPECT_EQ(out_.replies[0].h.rank, 0);
  ExpectError(out_.replies[1], MakePeer(5002), 5, p::ErrorCode::kJobAborted);
  EXPECT_EQ(out_.replies[1].h.rank, 2);
  EXPECT_EQ(cp_->num_jobs(), 0u);
  EXPECT_EQ(cp_->LargestFreeExtent(), 16u);
  EXPECT_EQ(Ctr(ControlCounter::kJobsLeft), 1u);
  // The engine forgot it: data for the job is now unknown.
  ResultCollector rc;
  engine_->Process(Data(5, 0, 0, 0, {1}), rc);
  EXPECT_EQ(ECtr(p::Counter::kDropUnknownJob), 1u);
  EXPECT_EQ(cp_->CheckDataSource(5, 0, 0, MakePeer(5000), {}), SourceCheck::kUnknownJob);
  // The job id can be reused.
  EXPECT_EQ(JoinAll(5, 1, 64, 1, 7000).size(), 1u);
}

// Ranks that finish leave gracefully; the job (and its stored results, which a rank that lost its
// last result re-fetches by retransmitting) stays until every rank is done. No errors are sent.
TEST_F(ControlTest, GracefulLeavesFreeTheJobOnlyWhenEveryRankIsDone) {
  Make(16);
  ASSERT_EQ(JoinAll(5, 3, 64, 16, 5000).size(), 3u);
  ResultCollector rc;
  for (uint16_t r = 0; r < 3; ++r) engine_->Process(Data(5, r, 0, 0, {r + 1}), rc);
  ASSERT_EQ(ECtr(p::Counter::kResults), 1u);

  Send(DoneLeave(5, 0, 7), MakePeer(5000));
  // The ranks still in hear how many calls rank 0 completed (rank_left), nobody is aborted.
  ASSERT_EQ(out_.replies.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    ExpectError(out_.replies[i], MakePeer(static_cast<uint16_t>(5001 + i)), 5,
                p::ErrorCode::kRankLeft);
    EXPECT_EQ(out_.replies[i].h.count, 0u) << "the rank that left";
    EXPECT_EQ(out_.replies[i].h.offset, 7u) << "its completed calls";
  }
  out_.replies.clear();
  Send(DoneLeave(5, 0, 7), MakePeer(5000));  // a copy changes nothing
  EXPECT_TRUE(out_.replies.empty());
  EXPECT_EQ(Ctr(ControlCounter::kLeavesDone), 1u);
  Send(DoneLeave(5, 2, 7), MakePeer(5002));
  ASSERT_EQ(out_.replies.size(), 1u);  // only rank 1 is still in
  ExpectError(out_.replies[0], MakePeer(5001), 5, p::ErrorCode::kRankLeft);
  out_.replies.clear();
  EXPECT_EQ(cp_->num_jobs(), 1u);
  EXPECT_EQ(Ctr(ControlCounter::kLeavesDone), 2u);
  // Rank 1 lost the result and retransmits: the engine still answers it.
  engine_->Process(Data(5, 1, 0, 0, {2}), rc);
  EXPECT_EQ(ECtr(p::Counter::kResultResends), 1u);

  Send(DoneLeave(5, 1, 7), MakePeer(5001));
  EXPECT_TRUE(out_.replies.empty()) << "the last rank out frees the job silently";
  EXPECT_EQ(cp_->num_jobs(), 0u);
  EXPECT_EQ(Ctr(ControlCounter::kJobsDone), 1u);
  EXPECT_EQ(Ctr(ControlCounter::kJobsLeft), 0u);
  EXPECT_EQ(cp_->LargestFreeExtent(), 16u);
}

// An abort after some ranks finished only tells the ranks still there.
TEST_F(ControlTest, AbortAfterGracefulLeavesSkipsTheRanksThatLeft) {
  Make(16);
  ASSERT_EQ(JoinAll(5, 3, 64, 16, 5000).size(), 3u);
  Send(DoneLeave(5, 0, 3), MakePeer(5000));
  out_.replies.clear();
  Send(AbortLeave(5, 1), MakePeer(5001));
  ASSERT_EQ(out_.replies.size(), 1u);
  ExpectError(out_.replies[0], MakePeer(5002), 5, p::ErrorCode::kJobAborted);
  EXPECT_EQ(cp_->num_jobs(), 0u);
}

TEST_F(ControlTest, LeaveOfPendingJobAbortsTheJoinedRanks) {
  Make();
  Send(Join(8, 0, 4, 64, 2), MakePeer(5000));
  Send(Join(8, 2, 4, 64, 2), MakePeer(5002));
  Send(Join(8, 3, 4, 64, 2), MakePeer(5003));
  Send(AbortLeave(8, 2), MakePeer(5002));
  ASSERT_EQ(out_.replies.size(), 2u);
  ExpectError(out_.replies[0], MakePeer(5000), 8, p::ErrorCode::kJobAborted);
  ExpectError(out_.replies[1], MakePeer(5003), 8, p::ErrorCode::kJobAborted);
  EXPECT_EQ(cp_->num_jobs(), 0u);
}

TEST_F(ControlTest, TimeoutFreesIdleJobsAndDataKeepsThemAlive) {
  Make(32, 8, milliseconds(100));
  const TimePoint t0{};
  ASSERT_EQ(JoinAll(1, 2, 64, 16, 5000, t0).size(), 2u);
  ASSERT_EQ(JoinAll(2, 2, 64, 16, 5100, t0).size(), 2u);
  Send(Join(3, 0, 2, 64, 4), MakePeer(5200), t0);          // pending
  EXPECT_EQ(cp_->Tick(t0 + milliseconds(100), out_), 0u);  // not idle for *longer* yet
  // Job 1 gets data from rank 1 at 80 ms; a foreign packet for job 2 does not count.
  EXPECT_EQ(cp_->CheckDataSource(1, 1, 0, MakePeer(5001), t0 + milliseconds(80)), SourceCheck::kOk);
  EXPECT_EQ(cp_->CheckDataSource(2, 1, 0, MakePeer(9999), t0 + milliseconds(80)),
            SourceCheck::kForeign);
  EXPECT_EQ(cp_->Tick(t0 + milliseconds(150), out_), 2u);  // jobs 2 and 3
  ASSERT_EQ(out_.replies.size(), 3u);
  ExpectError(out_.replies[0], MakePeer(5100), 2, p::ErrorCode::kJobAborted);
  ExpectError(out_.replies[1], MakePeer(5101), 2, p::ErrorCode::kJobAborted);
  ExpectError(out_.replies[2], MakePeer(5200), 3, p::ErrorCode::kJobAborted);
  ASSERT_EQ(cp_->Jobs().size(), 1u);
  EXPECT_EQ(cp_->Jobs()[0].job_id, 1);
  EXPECT_EQ(Ctr(ControlCounter::kJobsTimedOut), 2u);
  out_.replies.clear();
  EXPECT_EQ(cp_->Tick(t0 + milliseconds(181), out_), 1u);
  EXPECT_EQ(out_.replies.size(), 2u);
  EXPECT_EQ(cp_->num_jobs(), 0u);
  // The whole pool is free again.
  EXPECT_EQ(cp_->LargestFreeExtent(), 32u);
  EXPECT_EQ(JoinAll(4, 1, 64, 32, 5300, t0 + milliseconds(200))[0].h.offset, 32u);
}

TEST_F(ControlTest, SourceCheckAndDestinations) {
  Make();
  ASSERT_EQ(JoinAll(10, 3, 64, 4, 5000).size(), 3u);
  EXPECT_EQ(cp_->CheckDataSource(10, 0, 0, MakePeer(5000), {}), SourceCheck::kOk);
  EXPECT_EQ(cp_->CheckDataSource(10, 2, 0, MakePeer(5002), {}), SourceCheck::kOk);
  EXPECT_EQ(cp_->CheckDataSource(10, 2, 0, MakePeer(5001), {}), SourceCheck::kForeign);
  EXPECT_EQ(cp_->CheckDataSource(10, 3, 0, MakePeer(5000), {}), SourceCheck::kPass);  // bad rank
  EXPECT_EQ(cp_->CheckDataSource(11, 0, 0, MakePeer(5000), {}), SourceCheck::kUnknownJob);
  auto all = cp_->Destinations(10, p::kRankAll, 0);
  ASSERT_EQ(all.size(), 3u);
  for (uint16_t r = 0; r < 3; ++r) EXPECT_EQ(all[r], MakePeer(static_cast<uint16_t>(5000 + r)));
  auto one = cp_->Destinations(10, 1, 0);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], MakePeer(5001));
  EXPECT_TRUE(cp_->Destinations(10, 3, 0).empty());
  EXPECT_TRUE(cp_->Destinations(11, p::kRankAll, 0).empty());
}

// Lanes: a rank with L lanes joins from L peers; lane l owns the slots s with s mod L == l.
TEST_F(ControlTest, LanesAdmitOnlyWhenEveryLaneOfEveryRankJoined) {
  Make(64);
  constexpr uint16_t kLanes = 3;
  // Rank 0 all lanes, rank 1 lanes 0 and 2: pending, nothing sent.
  for (uint16_t l = 0; l < kLanes; ++l) {
    Send(LaneJoin(20, 0, 2, 64, 8, l, kLanes), MakePeer(LanePort(0, l)));
  }
  Send(LaneJoin(20, 1, 2, 64, 8, 0, kLanes), MakePeer(LanePort(1, 0)));
  Send(LaneJoin(20, 1, 2, 64, 8, 2, kLanes), MakePeer(LanePort(1, 2)));
  EXPECT_TRUE(out_.replies.empty());
  ASSERT_EQ(cp_->Jobs().size(), 1u);
  EXPECT_FALSE(cp_->Jobs()[0].active);
  EXPECT_EQ(cp_->Jobs()[0].joined, 1);  // ranks with every lane
  EXPECT_EQ(cp_->Jobs()[0].lanes, kLanes);
  // A repeat from a joined lane while pending: join_pending, rank 1 the lowest without every lane.
  Send(LaneJoin(20, 1, 2, 64, 8, 2, kLanes), MakePeer(LanePort(1, 2)));
  ASSERT_EQ(out_.replies.size(), 1u);
  ASSERT_EQ(out_.replies[0].h.type, p::MsgType::kJoinPending);
  EXPECT_EQ(p::JoinPendingMsg::From(out_.replies[0].h).joined, 1);
  EXPECT_EQ(p::JoinPendingMsg::From(out_.replies[0].h).missing_rank, 1u);
  out_.replies.clear();
  // The last lane: every lane of every rank gets join_ack with its rank and the window.
  Send(LaneJoin(20, 1, 2, 64, 8, 1, kLanes), MakePeer(LanePort(1, 1)));
  ASSERT_EQ(out_.replies.size(), 6u);
  for (uint16_t r = 0; r < 2; ++r) {
    for (uint16_t l = 0; l < kLanes; ++l) {
      const auto it = std::find_if(out_.replies.begin(), out_.replies.end(), [&](const Reply& x) {
        return x.to == MakePeer(LanePort(r, l));
      });
      ASSERT_NE(it, out_.replies.end()) << "rank " << r << " lane " << l;
      EXPECT_EQ(it->h.type, p::MsgType::kJoinAck);
      EXPECT_EQ(it->h.rank, r);
      EXPECT_EQ(it->h.offset, 8u);
    }
  }
  EXPECT_EQ(Ctr(ControlCounter::kJoinAcks), 6u);
  EXPECT_TRUE(cp_->Jobs()[0].active);
  // A repeated JOIN from an active lane: join_ack to that lane only.
  out_.replies.clear();
  Send(LaneJoin(20, 0, 2, 64, 8, 1, kLanes), MakePeer(LanePort(0, 1)));
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(out_.replies[0].to, MakePeer(LanePort(0, 1)));
  EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kJoinAck);
}

TEST_F(ControlTest, LanesBadParamsAndRankTaken) {
  Make(64);
  // lane >= lanes, lanes > kMaxLanes: bad_params (job 121 born doomed by the first).
  Send(LaneJoin(121, 0, 2, 64, 8, 2, 2), MakePeer(7000));
  Send(LaneJoin(121, 0, 2, 64, 8, 0, p::kMaxLanes + 1), MakePeer(7001));
  ASSERT_EQ(out_.replies.size(), 2u);
  ExpectParamError(out_.replies[0], MakePeer(7000), 121, 0, p::ErrorCode::kBadParams,
                   p::JoinParam::kLane, p::kJoinValueNone);
  ExpectParamError(out_.replies[1], MakePeer(7001), 121, 0, p::ErrorCode::kBadParams,
                   p::JoinParam::kLanes, p::kJoinValueNone);
  EXPECT_EQ(cp_->num_jobs(), 1u);
  // The first JOIN fixes L = 2; a rank with another L (1 or 3, also the old 0 = 1) is refused
  // (and rank 0, pending, hears of the first refusal).
  out_.replies.clear();
  Send(LaneJoin(21, 0, 2, 64, 8, 0, 2), MakePeer(7010));
  Send(LaneJoin(21, 1, 2, 64, 8, 0, 3), MakePeer(7011));
  Send(Join(21, 1, 2, 64, 8), MakePeer(7012));
  ASSERT_EQ(out_.replies.size(), 3u);
  ExpectParamError(out_.replies[0], MakePeer(7011), 21, 1, p::ErrorCode::kBadParams,
                   p::JoinParam::kLanes, 2);
  ExpectParamError(out_.replies[1], MakePeer(7010), 21, 0, p::ErrorCode::kPeerRefused,
                   p::JoinParam::kLanes, 3, 1);
  ExpectParamError(out_.replies[2], MakePeer(7012), 21, 1, p::ErrorCode::kBadParams,
                   p::JoinParam::kLanes, 2);
  // The same (rank, lane) from another peer: rank_taken; another lane of that rank is fine.
  Send(LaneJoin(23, 0, 2, 64, 8, 0, 2), MakePeer(7010));
  out_.replies.clear();
  Send(LaneJoin(23, 0, 2, 64, 8, 1, 2), MakePeer(7020));
  EXPECT_TRUE(out_.replies.empty());
  auto r = JoinAll(24, 1, 64, 1, 7040);  // an active job: no peer_refused, only rank_taken
  ASSERT_EQ(r.size(), 1u);
  Send(Join(24, 0, 1, 64, 1), MakePeer(7041));
  ASSERT_EQ(out_.replies.size(), 1u);
  ExpectError(out_.replies[0], MakePeer(7041), 24, p::ErrorCode::kRankTaken);
  out_.replies.clear();
  // gen 1 and gen 0 both mean one lane: they agree.
  Send(LaneJoin(22, 0, 2, 64, 8, 0, 1), MakePeer(7030));
  Send(Join(22, 1, 2, 64, 8), MakePeer(7031));
  ASSERT_EQ(out_.replies.size(), 2u);
  EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kJoinAck);
  EXPECT_EQ(out_.replies[1].h.type, p::MsgType::kJoinAck);
}

TEST_F(ControlTest, LanesSourceCheckAndDestinationsFollowTheSlot) {
  Make(64);
  constexpr uint16_t kLanes = 3, kWorld = 2;
  for (uint16_t r = 0; r < kWorld; ++r) {
    for (uint16_t l = 0; l < kLanes; ++l) {
      Send(LaneJoin(23, r, kWorld, 64, 10, l, kLanes), MakePeer(LanePort(r, l)));
    }
  }
  ASSERT_TRUE(cp_->Jobs()[0].active);
  for (uint16_t slot = 0; slot < 10; ++slot) {
    const uint16_t lane = slot % kLanes;
    for (uint16_t r = 0; r < kWorld; ++r) {
      EXPECT_EQ(cp_->CheckDataSource(23, r, slot, MakePeer(LanePort(r, lane)), {}),
                SourceCheck::kOk)
          << "slot " << slot << " rank " << r;
      // Another lane's peer of the same rank, or another rank's peer of the same lane: foreign.
      EXPECT_EQ(cp_->CheckDataSource(23, r, slot, MakePeer(LanePort(r, (lane + 1) % kLanes)), {}),
                SourceCheck::kForeign);
      EXPECT_EQ(cp_->CheckDataSource(23, r, slot, MakePeer(LanePort(1 - r, lane)), {}),
                SourceCheck::kForeign);
      const auto one = cp_->Destinations(23, r, slot);
      ASSERT_EQ(one.size(), 1u);
      EXPECT_EQ(one[0], MakePeer(LanePort(r, lane)));
    }
    const auto all = cp_->Destinations(23, p::kRankAll, slot);
    ASSERT_EQ(all.size(), kWorld);
    for (uint16_t r = 0; r < kWorld; ++r) EXPECT_EQ(all[r], MakePeer(LanePort(r, lane)));
  }
  EXPECT_TRUE(cp_->Destinations(23, kWorld, 0).empty());
}

TEST_F(ControlTest, LanesErrorsGoToEveryLaneAndLeaveFromAnyLaneCounts) {
  Make(64);
  constexpr uint16_t kLanes = 2, kWorld = 3;
  auto join_all = [&](uint16_t job) {
    for (uint16_t r = 0; r < kWorld; ++r) {
      for (uint16_t l = 0; l < kLanes; ++l) {
        Send(LaneJoin(job, r, kWorld, 64, 8, l, kLanes), MakePeer(LanePort(r, l)));
      }
    }
    ASSERT_EQ(out_.replies.size(), size_t{kWorld} * kLanes);
    out_.replies.clear();
  };
  join_all(24);
  // A graceful LEAVE from rank 1's lane 1 is rank 1's: rank_left to both lanes of ranks 0 and 2.
  Send(DoneLeave(24, 1, 5), MakePeer(LanePort(1, 1)));
  ASSERT_EQ(out_.replies.size(), 4u);
  for (const Reply& r : out_.replies) {
    ExpectError(r, r.to, 24, p::ErrorCode::kRankLeft);
    EXPECT_EQ(r.h.count, 1);
    EXPECT_EQ(r.h.offset, 5u);
    EXPECT_NE(r.h.rank, 1);
    EXPECT_TRUE(r.to == MakePeer(LanePort(r.h.rank, 0)) || r.to == MakePeer(LanePort(r.h.rank, 1)));
  }
  EXPECT_EQ(Ctr(ControlCounter::kErrRankLeft), 4u);
  // Its copy from lane 0 changes nothing; a LEAVE from a peer that is no lane of rank 2: ignored.
  out_.replies.clear();
  Send(DoneLeave(24, 1, 5), MakePeer(LanePort(1, 0)));
  Send(AbortLeave(24, 2), MakePeer(LanePort(0, 1)));
  EXPECT_TRUE(out_.replies.empty());
  EXPECT_EQ(Ctr(ControlCounter::kLeaveIgnored), 1u);
  // Ranks 0 and 2 leave (from lane 0 and lane 1): the job is done and freed.
  Send(DoneLeave(24, 0, 5), MakePeer(LanePort(0, 0)));
  out_.replies.clear();
  Send(DoneLeave(24, 2, 5), MakePeer(LanePort(2, 1)));
  EXPECT_TRUE(out_.replies.empty());
  EXPECT_EQ(Ctr(ControlCounter::kJobsDone), 1u);
  EXPECT_EQ(cp_->num_jobs(), 0u);
  // An aborting LEAVE from rank 0's lane 1: job_aborted to both lanes of ranks 1 and 2.
  join_all(25);
  Send(AbortLeave(25, 0), MakePeer(LanePort(0, 1)));
  ASSERT_EQ(out_.replies.size(), 4u);
  for (uint16_t r = 1; r < kWorld; ++r) {
    for (uint16_t l = 0; l < kLanes; ++l) {
      EXPECT_EQ(std::count_if(out_.replies.begin(), out_.replies.end(),
                              [&](const Reply& x) {
                                return x.to == MakePeer(LanePort(r, l)) &&
                                       x.h.aux == static_cast<uint16_t>(p::ErrorCode::kJobAborted);
                              }),
                1)
          << "rank " << r << " lane " << l;
    }
  }
  EXPECT_EQ(cp_->num_jobs(), 0u);
}

// The engine ends a job whose ranks disagree: HandleEngineFailures sends error(rank_mismatch)
// (slot, gen, count = the rank whose block proved it) to every lane of every rank still in the
// job, not to one that left gracefully, frees its slots and forgets it.
TEST_F(ControlTest, LanesRankMismatchGoesToEveryLaneAndFreesTheJob) {
  Make(64);
  constexpr uint16_t kLanes = 2, kWorld = 3;
  for (uint16_t r = 0; r < kWorld; ++r) {
    for (uint16_t l = 0; l < kLanes; ++l) {
      Send(LaneJoin(26, r, kWorld, 64, 8, l, kLanes), MakePeer(LanePort(r, l)));
    }
  }
  ASSERT_EQ(out_.replies.size(), size_t{kWorld} * kLanes);
  Send(DoneLeave(26, 1, 0), MakePeer(LanePort(1, 0)));
  out_.replies.clear();
  EXPECT_EQ(cp_->HandleEngineFailures(out_), 0u);
  ResultCollector rc;
  engine_->Process(Data(26, 0, 0, 0, {1, 2, 3}), rc);
  engine_->Process(Data(26, 2, 0, 0, {1, 2}), rc);  // block 0 too, but shorter: the ranks disagree
  EXPECT_TRUE(rc.items.empty());
  EXPECT_EQ(cp_->HandleEngineFailures(out_), 1u);
  ASSERT_EQ(out_.replies.size(), 4u);
  for (const Reply& r : out_.replies) {
    ExpectError(r, r.to, 26, p::ErrorCode::kRankMismatch);
    EXPECT_NE(r.h.rank, 1) << "rank 1 left gracefully";
    EXPECT_TRUE(r.to == MakePeer(LanePort(r.h.rank, 0)) || r.to == MakePeer(LanePort(r.h.rank, 1)));
    EXPECT_EQ(r.h.slot, 0);
    EXPECT_EQ(r.h.gen, 0);
    EXPECT_EQ(r.h.count, 2);
  }
  EXPECT_EQ(Ctr(ControlCounter::kErrRankMismatch), 4u);
  EXPECT_EQ(Ctr(ControlCounter::kJobsFailed), 1u);
  EXPECT_EQ(cp_->num_jobs(), 0u);
  EXPECT_EQ(cp_->LargestFreeExtent(), 64u);
  out_.replies.clear();
  EXPECT_EQ(cp_->HandleEngineFailures(out_), 0u);
  EXPECT_TRUE(out_.replies.empty());
}

TEST_F(ControlTest, LanesTimeoutCountsActivityOnAnyLaneAndAbortsEveryLane) {
  Make(64, 8, milliseconds(100));
  const TimePoint t0{};
  for (uint16_t r = 0; r < 2; ++r) {
    for (uint16_t l = 0; l < 2; ++l) {
      Send(LaneJoin(26, r, 2, 64, 4, l, 2), MakePeer(LanePort(r, l)), t0);
    }
  }
  out_.replies.clear();
  // Only lane 1's slots (odd) see data, from rank 0: that keeps the job alive.
  for (int i = 1; i <= 3; ++i) {
    const TimePoint t = t0 + milliseconds(80 * i);
    ASSERT_EQ(cp_->CheckDataSource(26, 0, 3, MakePeer(LanePort(0, 1)), t), SourceCheck::kOk);
    EXPECT_EQ(cp_->Tick(t + milliseconds(10), out_), 0u);
  }
  EXPECT_EQ(cp_->Tick(t0 + milliseconds(240 + 101), out_), 1u);
  EXPECT_EQ(out_.replies.size(), 4u);  // every lane of every rank
  for (const Reply& r : out_.replies) ExpectError(r, r.to, 26, p::ErrorCode::kJobAborted);
}

TEST_F(ControlTest, LanesNoSlotsGoesToEveryLane) {
  Make(8, 8, milliseconds(1000), 1);
  for (uint16_t l = 0; l < 2; ++l) Send(LaneJoin(27, 0, 1, 64, 4, l, 2), MakePeer(LanePort(0, l)));
  ASSERT_EQ(out_.replies.size(), 2u);
  out_.replies.clear();
  // The engine's one job entry is taken: the next job gets no_slots on both lanes.
  for (uint16_t l = 0; l < 2; ++l) Send(LaneJoin(28, 0, 1, 64, 4, l, 2), MakePeer(LanePort(1, l)));
  ASSERT_EQ(out_.replies.size(), 2u);
  ExpectError(out_.replies[0], MakePeer(LanePort(1, 0)), 28, p::ErrorCode::kNoSlots);
  ExpectError(out_.replies[1], MakePeer(LanePort(1, 1)), 28, p::ErrorCode::kNoSlots);
}

TEST_F(ControlTest, MalformedControlIsCountedAndIgnored) {
  Make();
  auto j = Join(1, 0, 1, 64, 1);
  j.insert(j.end() - p::kCrcBytes, 0);  // a body, sealed with it
  p::SealMessage(j.data(), j.size() - p::kCrcBytes);
  Send(j, MakePeer(5000));
  Send(Control(p::JoinAckMsg{.job = 1}), MakePeer(5000));
  const auto whole = Join(1, 0, 1, 64, 1);
  Send(std::vector<uint8_t>(whole.begin(), whole.end() - 1), MakePeer(5000));  // too short
  EXPECT_TRUE(out_.replies.empty());
  EXPECT_EQ(Ctr(ControlCounter::kControlMalformed), 3u);
  EXPECT_EQ(Ctr(ControlCounter::kControlBadCrc), 0u);
  EXPECT_EQ(cp_->num_jobs(), 0u);
}

TEST_F(ControlTest, DamagedControlIsDroppedBeforeItsFieldsAreRead) {
  Make();
  // A JOIN with any single bit flipped (but the version's) would otherwise be a JOIN of another
  // job, rank, world size, K or window, or another type (a LEAVE that aborts): dropped, counted.
  const auto good = Join(7, 0, 2, 64, 4);
  uint64_t n = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    if (i == p::kVersionOffset) continue;
    for (int bit = 0; bit < 8; ++bit) {
      auto b = good;
      b[i] ^= static_cast<uint8_t>(1u << bit);
      Send(b, MakePeer(5000));
      ++n;
    }
  }
  EXPECT_TRUE(out_.replies.empty());
  EXPECT_EQ(cp_->num_jobs(), 0u);
  EXPECT_EQ(Ctr(ControlCounter::kControlBadCrc), n);
  EXPECT_EQ(Ctr(ControlCounter::kJoins), 0u);
  // The genuine JOINs still make the job; a damaged LEAVE of an active job does not abort it.
  ASSERT_EQ(JoinAll(7, 2, 64, 4, 5000).size(), 2u);
  auto leave = AbortLeave(7, 1);
  leave[p::kAuxOffset] ^= 0x80;  // damaged in flight: an abort reason that is not the one sent
  Send(leave, MakePeer(5001));
  EXPECT_EQ(cp_->num_jobs(), 1u);
  EXPECT_TRUE(cp_->Jobs()[0].active);
  EXPECT_EQ(Ctr(ControlCounter::kControlBadCrc), n + 1);
}

TEST_F(ControlTest, AdmittedJobAggregatesThroughTheEngine) {
  Make(16);
  ASSERT_EQ(JoinAll(42, 3, 64, 2, 5000).size(), 3u);
  ResultCollector rc;
  for (uint16_t r = 0; r < 3; ++r) {
    ASSERT_EQ(cp_->CheckDataSource(42, r, 0, MakePeer(static_cast<uint16_t>(5000 + r)), {}),
              SourceCheck::kOk);
    engine_->Process(Data(42, r, 0, 0, {r + 1, -10 * r, 1 << 30}), rc);
  }
  ASSERT_EQ(rc.items.size(), 1u);
  EXPECT_EQ(rc.items[0].dest, p::kRankAll);
  EXPECT_EQ(cp_->Destinations(42, rc.items[0].dest, 0).size(), 3u);
  const uint8_t* b = rc.items[0].bytes.data();
  ASSERT_EQ(rc.items[0].bytes.size(), p::MessageBytes(3));
  EXPECT_EQ(p::GetType(b), p::MsgType::kResult);
  EXPECT_EQ(static_cast<int32_t>(p::Load32(b + p::kHeaderBytes)), 6);
  EXPECT_EQ(static_cast<int32_t>(p::Load32(b + p::kHeaderBytes + 4)), -30);
  EXPECT_EQ(static_cast<int32_t>(p::Load32(b + p::kHeaderBytes + 8)),
            static_cast<int32_t>(3u << 30));  // wraps
}

// Random joins, leaves and timeouts: the granted ranges of active jobs never overlap, stay inside
// the pool, the largest free extent never exceeds the pool less the granted windows, and with
// no job the whole pool is one free extent again.
std::vector<uint8_t> Alloc(uint16_t nonce) { return Control(p::AllocJobMsg{.nonce = nonce}); }

TEST_F(ControlTest, AllocHandsOutDistinctFreeIdsAndRepeatsForAResend) {
  Make(64, 8);
  ASSERT_EQ(JoinAll(p::kAllocJobMin, 1, 64, 4, 4000).size(), 1u);
  // Job kAllocJobMin is in use, so the first id handed out is the next one.
  Send(Alloc(1), MakePeer(5000));
  ASSERT_EQ(out_.replies.size(), 1u);
  const Reply a = out_.replies[0];
  EXPECT_EQ(a.to, MakePeer(5000));
  EXPECT_EQ(a.h.type, p::MsgType::kAllocAck);
  EXPECT_EQ(a.h.gen, 1u);
  EXPECT_EQ(a.h.job, p::kAllocJobMin + 1);
  // The same request again (same peer, same nonce): the same id.
  out_.replies.clear();
  Send(Alloc(1), MakePeer(5000));
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(out_.replies[0].h.job, a.h.job);
  // Another nonce or another peer: another id.
  out_.replies.clear();
  Send(Alloc(2), MakePeer(5000));
  Send(Alloc(1), MakePeer(5001));
  ASSERT_EQ(out_.replies.size(), 2u);
  EXPECT_NE(out_.replies[0].h.job, a.h.job);
  EXPECT_NE(out_.replies[1].h.job, a.h.job);
  EXPECT_NE(out_.replies[0].h.job, out_.replies[1].h.job);
  EXPECT_EQ(cp_->num_reserved(), 3u);
  EXPECT_EQ(Ctr(ControlCounter::kAllocs), 4u);
  EXPECT_EQ(Ctr(ControlCounter::kAllocAcks), 4u);
  // Joining a reserved id ends its reservation.
  ASSERT_EQ(JoinAll(a.h.job, 2, 64, 4, 6000).size(), 2u);
  EXPECT_EQ(cp_->num_reserved(), 2u);
}

TEST_F(ControlTest, AllocReservationsExpireAndAreLimited) {
  Make(64, 2, milliseconds(100));
  const TimePoint t0{};
  Send(Alloc(1), MakePeer(5000), t0);
  Send(Alloc(2), MakePeer(5000), t0 + milliseconds(50));
  out_.replies.clear();
  Send(Alloc(3), MakePeer(5000), t0 + milliseconds(60));  // max_jobs (2) reservations out
  ASSERT_EQ(out_.replies.size(), 1u);
  ExpectError(out_.replies[0], MakePeer(5000), 0, p::ErrorCode::kTooManyJobs);
  EXPECT_EQ(out_.replies[0].h.gen, 3u);
  EXPECT_EQ(cp_->Tick(t0 + milliseconds(120), out_), 0u);  // frees no job
  EXPECT_EQ(cp_->num_reserved(), 1u);                      // the first one expired
  EXPECT_EQ(Ctr(ControlCounter::kAllocsExpired), 1u);
  out_.replies.clear();
  Send(Alloc(3), MakePeer(5000), t0 + milliseconds(120));
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kAllocAck);
  // Round robin: not the expired id again, but the next one.
  EXPECT_EQ(out_.replies[0].h.job, p::kAllocJobMin + 2);
}

TEST_F(ControlTest, AllocWithAStrideHandsOutOnlyItsResidue) {
  EngineLimits lim;
  lim.pool_slots = 64;
  lim.max_jobs = 8;
  auto engine = MakeReferenceEngine(lim);
  ControlConfig cfg;
  cfg.max_jobs = 8;
  cfg.alloc_stride = 3;
  cfg.alloc_residue = 2;
  auto cp = ControlPlane::Create(*engine, cfg);
  ASSERT_TRUE(cp.ok()) << cp.status().ToString();
  for (uint16_t n = 0; n < 8; ++n) {
    out_.replies.clear();
    (*cp)->HandleControl(Alloc(n), MakePeer(5000), TimePoint{}, out_);
    ASSERT_EQ(out_.replies.size(), 1u);
    EXPECT_EQ(out_.replies[0].h.job % 3, 2) << out_.replies[0].h.job;
    EXPECT_GE(out_.replies[0].h.job, p::kAllocJobMin);
  }
  cfg.alloc_residue = 3;  // not below the stride
  EXPECT_FALSE(ControlPlane::Create(*engine, cfg).ok());
}

TEST_F(ControlTest, AllocSkipsEveryIdInUseOrReserved) {
  Make(64, 8);
  std::vector<uint16_t> seen;
  for (uint16_t n = 0; n < 6; ++n) {
    out_.replies.clear();
    Send(Alloc(n), MakePeer(5000));
    ASSERT_EQ(out_.replies.size(), 1u);
    const uint16_t id = out_.replies[0].h.job;
    EXPECT_GE(id, p::kAllocJobMin);
    EXPECT_EQ(std::count(seen.begin(), seen.end(), id), 0) << id;
    seen.push_back(id);
  }
}

TEST_F(ControlTest, RandomChurnKeepsThePoolConsistent) {
  const uint64_t seed = tests::Seed(tests::kDefaultSeed, "RandomChurnKeepsThePoolConsistent");
  SCOPED_TRACE("INA_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Make(100, 16, milliseconds(50));
  TimePoint now{};
  for (int step = 0; step < 3000; ++step) {
    now += milliseconds(rng() % 5);
    const uint16_t job = static_cast<uint16_t>(rng() % 24);
    const uint16_t world = static_cast<uint16_t>(1 + job % 3);
    switch (rng() % 4) {
      case 0:
      case 1:
        Send(Join(job, static_cast<uint16_t>(rng() % world), world, 64,
                  static_cast<uint32_t>(1 + (job * 7) % 40)),
             MakePeer(static_cast<uint16_t>(1000 + job * 4 + rng() % world)), now);
        break;
      case 2:
        Send(AbortLeave(job, static_cast<uint16_t>(rng() % world)),
             MakePeer(static_cast<uint16_t>(1000 + job * 4 + rng() % world)), now);
        break;
      default:
        cp_->Tick(now, out_);
    }
    out_.replies.clear();
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    uint32_t used = 0;
    for (const auto& j : cp_->Jobs()) {
      if (!j.active) continue;
      ASSERT_GE(j.window, 1);
      ASSERT_LE(j.window, j.window_asked);
      ASSERT_LE(j.slot_base + j.window, 100u);
      ranges.push_back({j.slot_base, j.slot_base + j.window});
      used += j.window;
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i) ASSERT_LE(ranges[i - 1].second, ranges[i].first);
    if (ranges.empty()) {
      ASSERT_EQ(cp_->LargestFreeExtent(), 100u);
    }
    ASSERT_LE(cp_->LargestFreeExtent(), 100u - used);
  }
  EXPECT_GT(Ctr(ControlCounter::kJobsAdmitted), 10u);
}

// ---- Sharing the slot pool (docs/protocol.md, "Sharing the slot pool") ----

TEST(FairSharesTest, MaxMinFair) {
  using V = std::vector<uint32_t>;
  EXPECT_EQ(FairShares(V{}, 64), V{});
  EXPECT_EQ(FairShares(V{100}, 64), V{64});
  EXPECT_EQ(FairShares(V{10}, 64), V{10});
  EXPECT_EQ(FairShares(V{64, 64}, 64), (V{32, 32}));
  EXPECT_EQ(FairShares(V{64, 64, 64, 64}, 64), (V{16, 16, 16, 16}));
  EXPECT_EQ(FairShares(V{64, 64, 64}, 64), (V{21, 21, 22}));  // the last takes the remainder
  // A small demand gets what it asks, the others split the rest.
  EXPECT_EQ(FairShares(V{100, 4, 100}, 64), (V{30, 4, 30}));
  EXPECT_EQ(FairShares(V{8, 100, 20}, 64), (V{8, 36, 20}));
  EXPECT_EQ(FairShares(V{5, 5}, 3), (V{1, 2}));
}

TEST(FairSharesTest, NeverAboveDemandOrPoolRandom) {
  const uint64_t seed = tests::Seed(tests::kDefaultSeed, "FairSharesRandom");
  std::mt19937 rng(seed);
  for (int iter = 0; iter < 2000; ++iter) {
    const size_t n = rng() % 12;
    std::vector<uint32_t> d(n);
    for (auto& x : d) x = rng() % 300;
    const uint32_t pool = rng() % 1000;
    const std::vector<uint32_t> s = FairShares(d, pool);
    ASSERT_EQ(s.size(), n);
    uint64_t sum = 0;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_LE(s[i], d[i]) << "seed " << seed;
      sum += s[i];
    }
    ASSERT_LE(sum, pool) << "seed " << seed;
    // Max-min: a job below its demand gets at least as much as any other job (less one for the
    // rounding), and the pool is used up to the rounding.
    for (size_t i = 0; i < n; ++i) {
      if (s[i] == d[i]) continue;
      for (size_t j = 0; j < n; ++j) ASSERT_LE(s[j], s[i] + 1) << "seed " << seed;
      ASSERT_GE(sum + n, pool) << "seed " << seed;
    }
  }
}

// A JOIN with exp = epoch: the re-JOIN at the end of a grant's lease.
std::vector<uint8_t> ReJoin(uint16_t job, uint16_t rank, uint16_t world, uint16_t k,
                            uint32_t window, uint8_t epoch) {
  std::vector<uint8_t> b = Join(job, rank, world, k, window);
  p::Header h = p::DecodeHeader(b.data());
  h.exp = epoch;
  p::EncodeHeader(h, b.data());
  p::SealMessage(b.data(), p::kHeaderBytes);
  return b;
}

void ExpectAck(const Reply& r, uint16_t job, uint16_t window, uint8_t epoch, uint16_t lease) {
  EXPECT_EQ(r.h.type, p::MsgType::kJoinAck) << p::MsgTypeName(r.h.type);
  EXPECT_EQ(r.h.job, job);
  EXPECT_EQ(r.h.offset, window);
  EXPECT_EQ(r.h.gen, epoch);
  EXPECT_EQ(r.h.aux, lease);
}

TEST_F(ControlTest, SecondJobWaitsForSlotsAndIsAdmittedWhenTheFirstLeaves) {
  Make(16, 8, milliseconds(1000), 0, /*min_window=*/8);
  auto a = JoinAll(1, 2, 64, 16, 5000);
  ASSERT_EQ(a.size(), 2u);
  ExpectAck(a[0], 1, 16, 1, 0);
  auto b = JoinAll(2, 2, 64, 16, 5100);
  ASSERT_EQ(b.size(), 1u);  // the JOIN that completed the job hears join_wait
  EXPECT_EQ(b[0].h.type, p::MsgType::kJoinWait);
  EXPECT_EQ(b[0].h.aux, 0);  // nobody ahead
  EXPECT_EQ(Ctr(ControlCounter::kJobsQueued), 1u);
  EXPECT_EQ(Ctr(ControlCounter::kErrNoSlots), 0u);
  // Each resend is answered with join_wait; data of a queued job is the engine's unknown job.
  Send(Join(2, 0, 2, 64, 16), MakePeer(5100));
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kJoinWait);
  EXPECT_EQ(out_.replies[0].to, MakePeer(5100));
  EXPECT_EQ(cp_->CheckDataSource(2, 0, 0, MakePeer(5100), {}), SourceCheck::kPass);
  // A third job queues behind it.
  auto c = JoinAll(3, 1, 64, 16, 5200);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].h.type, p::MsgType::kJoinWait);
  EXPECT_EQ(c[0].h.aux, 1);
  out_.replies.clear();
  // Job 1 ends: the oldest waiting job gets its fair share (16 / 2) and the next one the rest.
  Send(DoneLeave(1, 0, 5), MakePeer(5000));
  out_.replies.clear();
  Send(DoneLeave(1, 1, 5), MakePeer(5001));
  ASSERT_EQ(out_.replies.size(), 3u);
  ExpectAck(out_.replies[0], 2, 8, 1, 0);
  EXPECT_EQ(out_.replies[0].to, MakePeer(5100));
  ExpectAck(out_.replies[1], 2, 8, 1, 0);
  ExpectAck(out_.replies[2], 3, 8, 1, 0);
  EXPECT_EQ(cp_->queued_jobs(), 0u);
  EXPECT_EQ(cp_->CheckDataSource(2, 0, 0, MakePeer(5100), {}), SourceCheck::kOk);
}

TEST_F(ControlTest, NotAdmittedBelowTheMinimumWindow) {
  Make(12, 8, milliseconds(1000), 0, /*min_window=*/8);
  ExpectAck(JoinAll(1, 1, 64, 6, 5000)[0], 1, 6, 1, 0);
  // Fair share 6, but at least 8: the 6 free slots are not enough.
  auto b = JoinAll(2, 1, 64, 12, 5100);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].h.type, p::MsgType::kJoinWait);
  // A job asking fewer than the minimum needs only what it asks: admitted ahead of job 2.
  ExpectAck(JoinAll(3, 1, 64, 4, 5200)[0], 3, 4, 1, 0);
  EXPECT_EQ(cp_->queued_jobs(), 1u);
}

TEST_F(ControlTest, APoolSmallerThanTheMinimumWindowStillAdmits) {
  Make(5, 8, milliseconds(1000), 0, /*min_window=*/8);
  ExpectAck(JoinAll(1, 2, 64, 100, 5000)[0], 1, 5, 1, 0);
}

TEST_F(ControlTest, RefusedJoinToAQueuedJobAnswersOnlyTheRefusedPeer) {
  Make(8, 8, milliseconds(1000), 0, /*min_window=*/8);
  ExpectAck(JoinAll(1, 1, 64, 8, 5000)[0], 1, 8, 1, 0);
  ASSERT_EQ(JoinAll(2, 2, 64, 8, 5100).size(), 1u);  // every rank in, queued
  out_.replies.clear();
  Send(Join(2, 0, 2, 64, 8), MakePeer(5999));  // rank 0 from another address
  ASSERT_EQ(out_.replies.size(), 1u);
  ExpectError(out_.replies[0], MakePeer(5999), 2, p::ErrorCode::kRankTaken);
  Send(Join(2, 1, 2, 256, 8), MakePeer(5998));  // another K
  ASSERT_EQ(out_.replies.size(), 2u);
  ExpectError(out_.replies[1], MakePeer(5998), 2, p::ErrorCode::kBadParams);
  EXPECT_EQ(Ctr(ControlCounter::kErrPeerRefused), 0u);
  out_.replies.clear();
  Send(AbortLeave(1, 0), MakePeer(5000));  // the job still starts when slots free up
  ASSERT_EQ(out_.replies.size(), 2u);
  ExpectAck(out_.replies[0], 2, 8, 1, 0);
}

TEST_F(ControlTest, QueuedJobIdleIsFreedByTheTimeoutAndOneResendingIsNot) {
  Make(8, 8, milliseconds(1000), 0, /*min_window=*/8);
  const TimePoint t0{};
  ExpectAck(JoinAll(1, 1, 64, 8, 5000, t0)[0], 1, 8, 1, 0);
  ASSERT_EQ(JoinAll(2, 1, 64, 8, 5100, t0).size(), 1u);
  ASSERT_EQ(JoinAll(3, 1, 64, 8, 5200, t0).size(), 1u);
  // Job 1 and job 3 keep sending; job 2 went silent.
  const TimePoint t1 = t0 + milliseconds(800);
  ASSERT_EQ(cp_->CheckDataSource(1, 0, 0, MakePeer(5000), t1), SourceCheck::kOk);
  Send(Join(3, 0, 1, 64, 8), MakePeer(5200), t1);
  out_.replies.clear();
  EXPECT_EQ(cp_->Tick(t0 + milliseconds(1500), out_), 1u);
  ASSERT_EQ(out_.replies.size(), 1u);
  ExpectError(out_.replies[0], MakePeer(5100), 2, p::ErrorCode::kJobAborted);
  EXPECT_EQ(cp_->queued_jobs(), 1u);  // job 3 still waits
}

// Two jobs of two ranks each, lease 4: the first takes the pool, the second waits until the first
// re-joins at the end of its lease, then both hold half.
TEST_F(ControlTest, LeaseRejoinGivesAWaitingJobItsFairShare) {
  Make(16, 8, milliseconds(1000), 0, /*min_window=*/4, /*lease_calls=*/4);
  auto a = JoinAll(1, 2, 64, 16, 5000);
  ASSERT_EQ(a.size(), 2u);
  ExpectAck(a[0], 1, 16, 1, 4);
  ASSERT_EQ(JoinAll(2, 2, 64, 16, 5100).size(), 1u);  // waits
  // Rank 0 of job 1 re-joins after its 4 calls: nothing yet (rank 1 is still in its last call).
  Send(ReJoin(1, 0, 2, 64, 16, 1), MakePeer(5000));
  EXPECT_TRUE(out_.replies.empty());
  EXPECT_EQ(cp_->CheckDataSource(1, 1, 0, MakePeer(5001), {}), SourceCheck::kOk);
  Send(ReJoin(1, 0, 2, 64, 16, 1), MakePeer(5000));  // a resend changes nothing
  EXPECT_TRUE(out_.replies.empty());
  // Rank 1 re-joins: job 1's slots are taken back, job 2 (queued first) gets 8, job 1 gets 8
  // with epoch 2.
  Send(ReJoin(1, 1, 2, 64, 16, 1), MakePeer(5001));
  ASSERT_EQ(out_.replies.size(), 4u);
  ExpectAck(out_.replies[0], 2, 8, 1, 4);
  ExpectAck(out_.replies[1], 2, 8, 1, 4);
  ExpectAck(out_.replies[2], 1, 8, 2, 4);
  EXPECT_EQ(out_.replies[2].to, MakePeer(5000));
  ExpectAck(out_.replies[3], 1, 8, 2, 4);
  EXPECT_EQ(Ctr(ControlCounter::kRejoins), 2u);
  EXPECT_EQ(Ctr(ControlCounter::kRegrants), 1u);
  EXPECT_EQ(Ctr(ControlCounter::kJobsAdmitted), 2u);
  auto jobs = cp_->Jobs();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].epoch, 2);
  EXPECT_EQ(jobs[0].slot_base, 8u);
  EXPECT_EQ(jobs[1].slot_base, 0u);
  // A lost join_ack: the re-JOIN of epoch 1 resent is answered with the new grant again.
  out_.replies.clear();
  Send(ReJoin(1, 0, 2, 64, 16, 1), MakePeer(5000));
  ASSERT_EQ(out_.replies.size(), 1u);
  ExpectAck(out_.replies[0], 1, 8, 2, 4);
  // The new grant is installed afresh: generation 0 of its slot 0 aggregates.
  ResultCollector res;
  engine_->Process(Data(1, 0, 0, 0, {1, 2}), res);
  engine_->Process(Data(1, 1, 0, 0, {3, 4}), res);
  ASSERT_EQ(res.items.size(), 1u);
  EXPECT_EQ(res.items[0].job, 1);
}

// Rebalancing as jobs go: when one of two jobs ends, the other gets the whole pool at its next
// lease end.
TEST_F(ControlTest, SlotsGoBackToTheOthersAtTheirNextLeaseAfterAJobLeaves) {
  Make(16, 8, milliseconds(1000), 0, /*min_window=*/4, /*lease_calls=*/2);
  ExpectAck(JoinAll(1, 1, 64, 16, 5000)[0], 1, 16, 1, 2);
  ASSERT_EQ(JoinAll(2, 1, 64, 16, 5100).size(), 1u);  // waits
  Send(ReJoin(1, 0, 1, 64, 16, 1), MakePeer(5000));
  ASSERT_EQ(out_.replies.size(), 2u);
  ExpectAck(out_.replies[0], 2, 8, 1, 2);
  ExpectAck(out_.replies[1], 1, 8, 2, 2);
  out_.replies.clear();
  Send(DoneLeave(2, 0, 2), MakePeer(5100));  // job 2 ends
  EXPECT_TRUE(out_.replies.empty());
  EXPECT_EQ(cp_->LargestFreeExtent(), 8u);
  Send(ReJoin(1, 0, 1, 64, 16, 2), MakePeer(5000));
  ASSERT_EQ(out_.replies.size(), 1u);
  ExpectAck(out_.replies[0], 1, 16, 3, 2);
}

// Four equal jobs arriving one by one on a pool of 64 converge to 16 slots each within a lease
// of every job, and every grant is at least the minimum.
TEST_F(ControlTest, FourJobsConvergeToEqualShares) {
  Make(64, 8, milliseconds(1000), 0, /*min_window=*/4, /*lease_calls=*/1);
  std::array<uint8_t, 5> epoch{};
  std::array<uint16_t, 5> window{};
  auto record = [&] {
    for (const Reply& r : out_.replies) {
      if (r.h.type != p::MsgType::kJoinAck) continue;
      ASSERT_GE(r.h.offset, 4u);
      epoch[r.h.job] = static_cast<uint8_t>(r.h.gen);
      window[r.h.job] = static_cast<uint16_t>(r.h.offset);
    }
    out_.replies.clear();
  };
  for (uint16_t job = 1; job <= 4; ++job) {
    out_.replies = JoinAll(job, 1, 64, 64, static_cast<uint16_t>(5000 + 100 * job));
    record();
    // Every active job re-joins once (its one-call lease ended), oldest first.
    for (int round = 0; round < 2; ++round) {
      for (uint16_t o = 1; o <= job; ++o) {
        if (epoch[o] == 0) continue;
        Send(ReJoin(o, 0, 1, 64, 64, epoch[o]), MakePeer(static_cast<uint16_t>(5000 + 100 * o)));
        record();
      }
    }
  }
  for (uint16_t job = 1; job <= 4; ++job) EXPECT_EQ(window[job], 16) << "job " << job;
  EXPECT_EQ(cp_->queued_jobs(), 0u);
}

TEST_F(ControlTest, GracefulLeaveOfTheLastRankCompletesARejoin) {
  Make(16, 8, milliseconds(1000), 0, /*min_window=*/4, /*lease_calls=*/3);
  ASSERT_EQ(JoinAll(1, 2, 64, 16, 5000).size(), 2u);
  Send(ReJoin(1, 0, 2, 64, 16, 1), MakePeer(5000));
  EXPECT_TRUE(out_.replies.empty());
  Send(DoneLeave(1, 1, 3), MakePeer(5001));  // rank 1 ends after the grant's 3 calls
  ASSERT_EQ(out_.replies.size(), 2u);
  ExpectAck(out_.replies[0], 1, 16, 2, 3);  // the new grant first, then the news of rank 1
  ExpectError(out_.replies[1], MakePeer(5000), 1, p::ErrorCode::kRankLeft);
}

// ---- Job keys (docs/security.md) -------------------------------------------------------------

namespace keys {

std::vector<uint8_t> Secret(uint8_t seed, size_t n = 32) {
  std::vector<uint8_t> s(n);
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<uint8_t>(seed * 31 + i);
  return s;
}

// A SET_KEY message as an operator's tool builds it: sealed under the admin key.
std::vector<uint8_t> SetKey(const std::vector<uint8_t>& admin_secret, uint16_t job, p::SecMode mode,
                            const std::vector<uint8_t>& secret, uint64_t seq) {
  return p::SealSetKey(admin_secret, job, mode, secret, seq).value();
}

// A SET_KEY as SealSetKey seals it, with any 16-bit mode in its aux (SealSetKey takes a SecMode).
std::vector<uint8_t> SetKeyOfMode(const std::vector<uint8_t>& admin_secret, uint16_t job,
                                  uint16_t mode, const std::vector<uint8_t>& secret, uint64_t seq) {
  const auto key =
      p::DeriveTrafficKey(admin_secret, p::KeyDirection::kUp, 0, 0, p::Session{}).value();
  constexpr auto kSealed = static_cast<uint8_t>(p::SecMode::kMacEncrypt);
  std::vector<uint8_t> b(p::MessageBytes(secret.size() / p::kElemBytes, kSealed));
  p::SetKeyMsg{.sec = kSealed,
               .job = job,
               .seq_hi = static_cast<uint16_t>(seq >> 32),
               .count = static_cast<uint16_t>(secret.size() / p::kElemBytes),
               .seq_lo = static_cast<uint32_t>(seq),
               .mode = mode}
      .Encode(b.data());
  std::copy(secret.begin(), secret.end(), b.begin() + p::kHeaderBytes);
  EXPECT_TRUE(p::SealOnce(key, p::SecMode::kMacEncrypt, b.data(), b.size() - p::kTagBytes,
                          p::MakeNonce(0, 0, seq)));
  return b;
}

// Data packet d sealed as a keyed job's worker seals it in grant `grant` (use = gen), under the
// session salt its join_challenge carried.
std::vector<uint8_t> SealedData(const std::vector<uint8_t>& secret, const p::Session& salt,
                                p::SecMode mode, uint16_t job, uint16_t rank, uint16_t slot,
                                uint16_t gen, const std::vector<int32_t>& elems,
                                uint64_t grant = 1) {
  std::vector<uint8_t> b = Data(job, rank, slot, gen, elems);
  const size_t len = b.size() - p::kCrcBytes;
  b.resize(len + p::kTagBytes);
  p::SetSec(b.data(), static_cast<uint8_t>(mode));
  const auto up = p::DeriveTrafficKey(secret, p::KeyDirection::kUp, job, grant, salt).value();
  EXPECT_TRUE(p::SealOnce(up, mode, b.data(), len, p::MakeNonce(rank, slot, gen)));
  return b;
}

}  // namespace keys

TEST_F(ControlTest, KeyedFabricRefusesKeylessJoinsAndLogsOncePerJob) {
  std::vector<std::string> lines;
  base_cfg_.require_keys = true;
  base_cfg_.log = [&](const std::string& l) { lines.push_back(l); };
  Make();
  const Peer a = MakePeer(5000), b = MakePeer(5001);
  Send(Join(5, 0, 2, 64, 4), a);
  Send(Join(5, 1, 2, 64, 4), b);
  Send(Join(6, 0, 1, 64, 4), a);  // a guessed id: refused too
  ASSERT_EQ(out_.replies.size(), 3u);
  ExpectError(out_.replies[0], a, 5, p::ErrorCode::kUnauthorized);
  ExpectError(out_.replies[1], b, 5, p::ErrorCode::kUnauthorized);
  ExpectError(out_.replies[2], a, 6, p::ErrorCode::kUnauthorized);
  EXPECT_EQ(Ctr(ControlCounter::kJoinsUnauthorized), 3u);
  EXPECT_FALSE(cp_->HasJob(5));
  EXPECT_FALSE(cp_->HasJob(6));
  ASSERT_EQ(lines.size(), 2u);  // one line per job id
  EXPECT_NE(lines[0].find("job 5"), std::string::npos);
  EXPECT_NE(lines[0].find("no key"), std::string::npos);

  // With its key, job 5 runs keyed: CRC-only data is another job's (cross job), sealed data sums
  // and its result is sealed with the grant's down key.
  const auto secret = keys::Secret(1);
  ASSERT_TRUE(cp_->InstallJobKey(5, p::SecMode::kMac, secret).ok());
  EXPECT_EQ(Ctr(ControlCounter::kKeysInstalled), 1u);
  prove_[5] = secret;
  auto acks = JoinAll(5, 2, 64, 4, 5000);
  ASSERT_EQ(acks.size(), 2u);
  EXPECT_EQ(acks[0].h.type, p::MsgType::kJoinAck);
  auto feed = [&](const std::vector<uint8_t>& pkt) {
    ResultCollector r;
    engine_->Process(pkt, r);
    std::vector<std::vector<uint8_t>> got;
    for (auto& i : r.items) got.push_back(i.bytes);
    return got;
  };
  EXPECT_TRUE(feed(Data(5, 0, 0, 0, {1, 2})).empty());
  EXPECT_EQ(ECtr(p::Counter::kDropCrossJob), 1u);
  const p::Session salt = salt_.at(5);
  EXPECT_NE(salt, p::Session{}) << "a random session salt";
  // Data sealed as before the salt (session zero): another key, dropped.
  EXPECT_TRUE(
      feed(keys::SealedData(secret, p::Session{}, p::SecMode::kMac, 5, 0, 0, 0, {1, 2})).empty());
  EXPECT_EQ(ECtr(p::Counter::kDropForged), 1u);
  EXPECT_TRUE(feed(keys::SealedData(secret, salt, p::SecMode::kMac, 5, 0, 0, 0, {1, 2})).empty());
  const auto got = feed(keys::SealedData(secret, salt, p::SecMode::kMac, 5, 1, 0, 0, {10, 20}));
  ASSERT_EQ(got.size(), 1u);
  const auto down = p::DeriveTrafficKey(secret, p::KeyDirection::kDown, 5, 1, salt).value();
  EXPECT_TRUE(
      p::OpenOnce(down, p::SecMode::kMac, got[0], p::MakeNonce(p::kRankAll, 0, 0), nullptr));
  EXPECT_EQ(p::Load32(got[0].data() + p::kHeaderBytes), 11u);
  // A forger with another secret is dropped.
  EXPECT_TRUE(
      feed(keys::SealedData(keys::Secret(2), salt, p::SecMode::kMac, 5, 0, 1, 0, {1, 1})).empty());
  EXPECT_EQ(ECtr(p::Counter::kDropForged), 2u);

  // The key belongs to this incarnation: an aborted job forgets it; a new JOIN is refused again
  // and logged again.
  EXPECT_EQ(Ctr(ControlCounter::kJoinsProven), 2u);
  Send(AbortLeave(5, 0), a);
  EXPECT_FALSE(cp_->HasJobKey(5));
  out_.replies.clear();
  Send(Join(5, 0, 2, 64, 4), a);
  ASSERT_EQ(out_.replies.size(), 1u);
  ExpectError(out_.replies[0], a, 5, p::ErrorCode::kUnauthorized);
  EXPECT_EQ(lines.size(), 3u);

  // The same secret installed again is a new incarnation under a new salt: what was recorded in
  // the last one (rank 0's first data packet, the same slot and use) does not open.
  const auto recorded = keys::SealedData(secret, salt, p::SecMode::kMac, 5, 0, 0, 0, {1, 2});
  ASSERT_TRUE(cp_->InstallJobKey(5, p::SecMode::kMac, secret).ok());
  JoinAll(5, 2, 64, 4, 5000);
  ASSERT_TRUE(cp_->HasJob(5));
  EXPECT_NE(salt_.at(5), salt) << "a key taken again gets a fresh salt";
  const uint64_t forged = ECtr(p::Counter::kDropForged);
  EXPECT_TRUE(feed(recorded).empty());
  EXPECT_EQ(ECtr(p::Counter::kDropForged), forged + 1) << "the last incarnation's data, replayed";
  EXPECT_TRUE(
      feed(keys::SealedData(secret, salt_.at(5), p::SecMode::kMac, 5, 0, 0, 0, {1, 2})).empty());
  EXPECT_EQ(
      feed(keys::SealedData(secret, salt_.at(5), p::SecMode::kMac, 5, 1, 0, 0, {1, 2})).size(), 1u);
}

// The JOIN of a keyed job proves the secret (docs/security.md, "JOIN proves knowledge of the
// key"): a CRC-only JOIN creates nothing and gets a challenge; a proof under another secret, for
// another nonce (a replay after the nonce's time), from another address or for other parameters
// is dropped, counted, logged once and answered with a fresh challenge; the right one joins.
TEST_F(ControlTest, KeyedJoinProvesTheSecretAgainstAFreshNonce) {
  std::vector<std::string> lines;
  base_cfg_.log = [&](const std::string& l) { lines.push_back(l); };
  base_cfg_.join_nonce_period = std::chrono::seconds(10);
  Make();
  const auto secret = keys::Secret(1);
  ASSERT_TRUE(cp_->InstallJobKey(5, p::SecMode::kMac, secret).ok());
  const Peer a = MakePeer(5000), b = MakePeer(5001), rogue = MakePeer(5999);
  const TimePoint t0 = TimePoint{} + std::chrono::seconds(1000);
  const auto join0 = Join(5, 0, 2, 64, 4);

  Send(join0, a, t0);
  ASSERT_EQ(out_.replies.size(), 1u);
  const Reply c = out_.replies[0];
  EXPECT_EQ(c.to, a);
  EXPECT_EQ(c.h.type, p::MsgType::kJoinChallenge);
  EXPECT_EQ(c.h.job, 5);
  EXPECT_EQ(c.h.rank, 0);
  EXPECT_EQ(p::JoinChallengeMsg::From(c.h).mode, static_cast<uint16_t>(p::SecMode::kMac))
      << "the key's mode, which the worker must run";
  EXPECT_FALSE(cp_->HasJob(5)) << "an unproven JOIN creates nothing";
  EXPECT_EQ(Ctr(ControlCounter::kJoinChallenges), 1u);
  EXPECT_EQ(Ctr(ControlCounter::kJoins), 0u);
  // The same JOIN within the period gets the same nonce (nothing is stored per challenge); from
  // another address, another.
  out_.replies.clear();
  Send(join0, a, t0 + std::chrono::seconds(1));
  Send(join0, rogue, t0);
  ASSERT_EQ(out_.replies.size(), 2u);
  EXPECT_EQ(out_.replies[0].nonce, c.nonce);
  EXPECT_NE(out_.replies[1].nonce, c.nonce);

  // Failed proofs: another secret; the right proof sent from another address; a proof of other
  // parameters (window 8) under this nonce; damaged.
  out_.replies.clear();
  Send(ProvenJoin(join0, keys::Secret(2), c.nonce), a, t0);
  Send(ProvenJoin(join0, secret, c.nonce), rogue, t0);
  Send(ProvenJoin(Join(5, 0, 2, 64, 8), secret, c.nonce), a, t0);
  auto damaged = ProvenJoin(join0, secret, c.nonce);
  damaged[p::kHeaderBytes + 2] ^= 1;
  Send(damaged, a, t0);
  EXPECT_EQ(Ctr(ControlCounter::kJoinsUnproven), 4u);
  EXPECT_EQ(Ctr(ControlCounter::kJoinsProven), 0u);
  EXPECT_FALSE(cp_->HasJob(5));
  ASSERT_EQ(out_.replies.size(), 4u);
  for (const Reply& r : out_.replies) EXPECT_EQ(r.h.type, p::MsgType::kJoinChallenge);
  ASSERT_EQ(lines.size(), 1u) << "one line per job";
  EXPECT_NE(lines[0].find("job 5"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("does not verify"), std::string::npos) << lines[0];

  // The right proof joins, within two periods of its challenge; resent (retx), it is the same
  // JOIN again.
  out_.replies.clear();
  auto proof = ProvenJoin(join0, secret, c.nonce);
  Send(proof, a, t0 + std::chrono::seconds(12));
  EXPECT_EQ(Ctr(ControlCounter::kJoinsProven), 1u);
  EXPECT_EQ(Ctr(ControlCounter::kJoins), 1u);
  ASSERT_TRUE(cp_->HasJob(5));
  proof[p::kFlagsOffset] |= p::flags::kRetx;
  Send(proof, a, t0 + std::chrono::seconds(13));
  EXPECT_EQ(Ctr(ControlCounter::kJoinsProven), 2u);
  ASSERT_EQ(out_.replies.size(), 1u) << "rank 1 has not joined: no ack yet";
  EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kJoinPending);
  EXPECT_EQ(p::JoinPendingMsg::From(out_.replies[0].h).missing_rank, 1u);
  // Replayed after its time (the nonce's period and the next have passed): refused.
  Send(proof, a, t0 + std::chrono::seconds(25));
  EXPECT_EQ(Ctr(ControlCounter::kJoinsUnproven), 5u);
  // A rogue JOIN for rank 1 without the secret cannot take the rank: rank 1 proves and joins.
  out_.replies.clear();
  Send(ProvenJoin(Join(5, 1, 2, 64, 4), keys::Secret(3), c.nonce), rogue, t0);
  EXPECT_EQ(Ctr(ControlCounter::kJoinsUnproven), 6u);
  prove_[5] = secret;
  out_.replies.clear();
  Send(join0, a, t0 + std::chrono::seconds(30));
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kJoinPending);
  out_.replies.clear();
  Send(Join(5, 1, 2, 64, 4), b, t0 + std::chrono::seconds(30));
  ASSERT_EQ(out_.replies.size(), 2u);
  EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kJoinAck);
  EXPECT_EQ(out_.replies[1].h.type, p::MsgType::kJoinAck);
  EXPECT_EQ(Ctr(ControlCounter::kErrRankTaken), 0u);

  // A proven JOIN for a job without a key is dropped without a reply.
  out_.replies.clear();
  Send(ProvenJoin(Join(9, 0, 1, 64, 4), secret, c.nonce), a, t0);
  EXPECT_TRUE(out_.replies.empty());
  EXPECT_EQ(Ctr(ControlCounter::kJoinsUnproven), 7u);
  EXPECT_FALSE(cp_->HasJob(9));
}

// A key installed for an allocated id that nobody joins goes when the reservation expires; a key
// of a job that joined stays until the job ends.
TEST_F(ControlTest, KeyOfAnIdNobodyJoinedGoesWithItsReservation) {
  Make(64, 8, milliseconds(1000));
  const Peer a = MakePeer(5000);
  Send(Control(p::AllocJobMsg{.hint = 1, .nonce = 7}), a);
  Send(Control(p::AllocJobMsg{.hint = 2, .nonce = 8}), a);
  ASSERT_EQ(out_.replies.size(), 2u);
  const uint16_t unused = out_.replies[0].h.job, used = out_.replies[1].h.job;
  ASSERT_TRUE(cp_->InstallJobKey(unused, p::SecMode::kMac, keys::Secret(1)).ok());
  ASSERT_TRUE(cp_->InstallJobKey(used, p::SecMode::kMac, keys::Secret(2)).ok());
  prove_[used] = keys::Secret(2);
  ASSERT_EQ(JoinAll(used, 1, 64, 4, 5000, TimePoint{} + milliseconds(500)).size(), 1u);
  cp_->Tick(TimePoint{} + milliseconds(1200), out_);
  EXPECT_EQ(Ctr(ControlCounter::kAllocsExpired), 1u);
  EXPECT_FALSE(cp_->HasJobKey(unused));
  EXPECT_TRUE(cp_->HasJobKey(used));
}

TEST_F(ControlTest, InstallJobKeyChecksModeAndSecret) {
  Make();
  EXPECT_EQ(cp_->InstallJobKey(1, p::SecMode::kCrc, keys::Secret(1)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cp_->InstallJobKey(1, static_cast<p::SecMode>(3), keys::Secret(1)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cp_->InstallJobKey(1, p::SecMode::kMac, keys::Secret(1, 15)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cp_->InstallJobKey(1, p::SecMode::kMac, keys::Secret(1, 65)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(cp_->InstallJobKey(1, p::SecMode::kMacEncrypt, keys::Secret(1, 16)).ok());
  EXPECT_TRUE(cp_->HasJobKey(1));
}

TEST_F(ControlTest, SetKeyNeedsTheAdminKeyAndAGrowingSequence) {
  const auto admin = keys::Secret(9);
  base_cfg_.admin_secret = admin;
  Make();
  const Peer op = MakePeer(7000);
  const auto msg = keys::SetKey(admin, 12, p::SecMode::kMac, keys::Secret(3), 100);
  Send(msg, op);
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kSetKeyAck);
  EXPECT_EQ(out_.replies[0].h.job, 12);
  EXPECT_EQ(out_.replies[0].h.offset, 100u);
  EXPECT_TRUE(cp_->HasJobKey(12));
  // The same message again (replayed), an older sequence, a flipped bit, another admin key.
  Send(msg, op);
  Send(keys::SetKey(admin, 13, p::SecMode::kMac, keys::Secret(3), 99), op);
  std::vector<uint8_t> bad = keys::SetKey(admin, 14, p::SecMode::kMac, keys::Secret(3), 101);
  bad[p::kHeaderBytes + 3] ^= 0x10;
  Send(bad, op);
  Send(keys::SetKey(keys::Secret(8), 15, p::SecMode::kMac, keys::Secret(3), 102), op);
  EXPECT_EQ(Ctr(ControlCounter::kAdminReplayed), 2u);
  EXPECT_EQ(Ctr(ControlCounter::kAdminForged), 2u);
  EXPECT_FALSE(cp_->HasJobKey(13) || cp_->HasJobKey(14) || cp_->HasJobKey(15));
  // A bad mode is refused after the tag opened (it still uses up the sequence), and said
  // (AKeyOfAModeThatCannotRunIsRefusedSayingSo).
  Send(keys::SetKey(admin, 16, p::SecMode::kCrc, keys::Secret(3), 103), op);
  EXPECT_EQ(Ctr(ControlCounter::kAdminRefused), 1u);
  Send(keys::SetKey(admin, 17, p::SecMode::kMacEncrypt, keys::Secret(3, 16), 104), op);
  EXPECT_TRUE(cp_->HasJobKey(17));
  ASSERT_EQ(out_.replies.size(), 3u);
  ExpectError(out_.replies[1], op, 16, p::ErrorCode::kKeyRefused);
  EXPECT_EQ(out_.replies[2].h.type, p::MsgType::kSetKeyAck);
  EXPECT_EQ(Ctr(ControlCounter::kKeysInstalled), 2u);
}

// A SET_KEY that opens under the admin key but whose mode cannot be installed (not mac or
// mac_encrypt) is answered with error(key_refused): sec_mode, the mode and the sequence echoed, so
// the launcher fails at once instead of waiting for an ack. Nothing is installed, the sequence is
// used up, and each mode is logged once. (An engine that cannot run a keyed mode is refused the
// same way: AKeyOfAModeTheEngineCannotRunIsRefusedSayingSo.)
TEST_F(ControlTest, AKeyOfAModeThatCannotRunIsRefusedSayingSo) {
  std::vector<std::string> lines;
  const auto admin = keys::Secret(9);
  base_cfg_.admin_secret = admin;
  base_cfg_.log = [&lines](const std::string& l) { lines.push_back(l); };
  Make();
  const Peer op = MakePeer(7000);
  const uint64_t seq = (uint64_t{0x1234} << 32) | 0x89ABCDEFu;  // both halves echoed
  Send(keys::SetKey(admin, 21, static_cast<p::SecMode>(3), keys::Secret(3), seq), op);
  Send(keys::SetKey(admin, 22, static_cast<p::SecMode>(3), keys::Secret(3), seq + 1), op);
  Send(keys::SetKey(admin, 23, p::SecMode::kCrc, keys::Secret(3), seq + 2), op);
  ASSERT_EQ(out_.replies.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const Reply& r = out_.replies[i];
    ExpectError(r, op, static_cast<uint16_t>(21 + i), p::ErrorCode::kKeyRefused);
    const auto e = p::ErrorMsg::From(r.h);
    EXPECT_EQ(e.join_param(), p::JoinParam::kSecMode);
    EXPECT_EQ(e.key_mode(), i < 2 ? 3 : 0);
    EXPECT_EQ(p::SetKeySeq(e), seq + i);
  }
  EXPECT_FALSE(cp_->HasJobKey(21) || cp_->HasJobKey(22) || cp_->HasJobKey(23));
  EXPECT_EQ(Ctr(ControlCounter::kAdminRefused), 3u);
  EXPECT_EQ(Ctr(ControlCounter::kErrorsSent), 3u);
  EXPECT_EQ(Ctr(ControlCounter::kKeysInstalled), 0u);
  ASSERT_EQ(lines.size(), 2u) << "once per mode";
  EXPECT_NE(lines[0].find("SET_KEY for job 21 from 127.0.0.1:7000 refused: sec mode 3 is not mac "
                          "(1) or mac_encrypt (2); it hears error(key_refused)"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[1].find("sec mode 0 is not"), std::string::npos) << lines[1];
  // Mode 257 is no mode, though its low byte is mac's (it was taken as mac before).
  out_.replies.clear();
  Send(keys::SetKeyOfMode(admin, 25, 257, keys::Secret(3), seq + 3), op);
  ASSERT_EQ(out_.replies.size(), 1u);
  ExpectError(out_.replies[0], op, 25, p::ErrorCode::kKeyRefused);
  EXPECT_EQ(p::ErrorMsg::From(out_.replies[0].h).key_mode(), 257);
  EXPECT_FALSE(cp_->HasJobKey(25));
  // The sequence was used up: a replay of it is refused as one, unanswered.
  out_.replies.clear();
  Send(keys::SetKey(admin, 24, p::SecMode::kMac, keys::Secret(3), seq + 3), op);
  EXPECT_TRUE(out_.replies.empty());
  EXPECT_EQ(Ctr(ControlCounter::kAdminReplayed), 1u);
  Send(keys::SetKey(admin, 24, p::SecMode::kMac, keys::Secret(3), seq + 4), op);
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kSetKeyAck);
}

// An engine that cannot run a keyed mode (WithoutMacEncrypt): the control plane refuses a key of
// that mode with error(key_refused) naming it, logged once; a key of mode mac, which it runs, is
// installed.
TEST_F(ControlTest, AKeyOfAModeTheEngineCannotRunIsRefusedSayingSo) {
  std::vector<std::string> lines;
  const auto admin = keys::Secret(9);
  base_cfg_.admin_secret = admin;
  base_cfg_.log = [&lines](const std::string& l) { lines.push_back(l); };
  without_mac_encrypt_ = true;
  Make();
  const Peer op = MakePeer(7000);
  const uint64_t seq = 1000;
  Send(keys::SetKey(admin, 12, p::SecMode::kMacEncrypt, keys::Secret(3), seq), op);
  Send(keys::SetKey(admin, 13, p::SecMode::kMacEncrypt, keys::Secret(3), seq + 1), op);
  ASSERT_EQ(out_.replies.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    ExpectError(out_.replies[i], op, static_cast<uint16_t>(12 + i), p::ErrorCode::kKeyRefused);
    const auto e = p::ErrorMsg::From(out_.replies[i].h);
    EXPECT_EQ(e.join_param(), p::JoinParam::kSecMode);
    EXPECT_EQ(e.key_mode(), static_cast<uint16_t>(p::SecMode::kMacEncrypt));
    EXPECT_EQ(p::SetKeySeq(e), seq + i);
  }
  EXPECT_FALSE(cp_->HasJobKey(12) || cp_->HasJobKey(13));
  EXPECT_EQ(Ctr(ControlCounter::kAdminRefused), 2u);
  ASSERT_EQ(lines.size(), 1u) << "once per mode";
  EXPECT_NE(lines[0].find("SET_KEY for job 12 from 127.0.0.1:7000 refused: this fabric's engine "
                          "cannot run sec mode mac_encrypt"),
            std::string::npos)
      << lines[0];
  out_.replies.clear();
  Send(keys::SetKey(admin, 12, p::SecMode::kMac, keys::Secret(3), seq + 2), op);
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kSetKeyAck);
  EXPECT_TRUE(cp_->HasJobKey(12));
}

// A key put in without the admin channel (in process) for a mode the engine cannot run: the
// engine refuses the install at the grant, and every rank hears error(no_slots) naming join_param
// sec_mode and the mode (what a worker turns into UNIMPLEMENTED); the switch logs why.
TEST_F(ControlTest, AJobOfAModeTheEngineCannotRunFailsItsJoinsNamingTheMode) {
  std::vector<std::string> lines;
  base_cfg_.log = [&lines](const std::string& l) { lines.push_back(l); };
  without_mac_encrypt_ = true;
  Make();
  const auto secret = keys::Secret(4);
  ASSERT_TRUE(cp_->InstallJobKey(20, p::SecMode::kMacEncrypt, secret).ok());
  prove_[20] = secret;
  const auto replies = JoinAll(20, 2, 256, 4, 5000);
  ASSERT_EQ(replies.size(), 2u) << "both ranks hear it once the job is complete";
  for (uint16_t rank = 0; rank < 2; ++rank) {
    ExpectError(replies[rank], MakePeer(static_cast<uint16_t>(5000 + rank)), 20,
                p::ErrorCode::kNoSlots);
    const auto e = p::ErrorMsg::From(replies[rank].h);
    EXPECT_EQ(e.join_param(), p::JoinParam::kSecMode);
    EXPECT_EQ(e.job_value(), static_cast<uint32_t>(p::SecMode::kMacEncrypt));
  }
  EXPECT_EQ(cp_->num_jobs(), 0u);
  bool logged = false;
  for (const auto& l : lines) {
    logged |= l.find(
                  "job 20: the engine refused to install it (UNIMPLEMENTED: program job: this "
                  "engine runs no mac_encrypt") != std::string::npos;
  }
  EXPECT_TRUE(logged);
}

// The same key installed again (a launcher's next attempt, a leaf passing it on, a second
// launcher of one tree: docs/hierarchy.md) keeps the key's salt, so the traffic keys of a job that
// joined meanwhile stay; another secret or another mode is a new key with a salt of its own.
TEST_F(ControlTest, TheSameKeyAgainKeepsItsSaltAndAnotherKeyGetsANewOne) {
  const auto admin = keys::Secret(9);
  base_cfg_.admin_secret = admin;
  Make();
  const Peer op = MakePeer(7000), worker = MakePeer(5000);
  auto salt = [&] {
    out_.replies.clear();
    Send(Join(12, 0, 2, 64, 4), worker);
    EXPECT_EQ(out_.replies.size(), 1u);
    EXPECT_EQ(out_.replies.at(0).h.type, p::MsgType::kJoinChallenge);
    return out_.replies.at(0).nonce.salt;
  };
  Send(keys::SetKey(admin, 12, p::SecMode::kMac, keys::Secret(3), 100), op);
  const p::Session first = salt();
  out_.replies.clear();
  Send(keys::SetKey(admin, 12, p::SecMode::kMac, keys::Secret(3), 101), op);
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kSetKeyAck) << "acknowledged as any other";
  EXPECT_EQ(salt(), first);
  ASSERT_TRUE(cp_->InstallJobKey(12, p::SecMode::kMac, keys::Secret(3)).ok());
  EXPECT_EQ(salt(), first);
  Send(keys::SetKey(admin, 12, p::SecMode::kMac, keys::Secret(4), 102), op);
  const p::Session second = salt();
  EXPECT_NE(second, first) << "another secret";
  Send(keys::SetKey(admin, 12, p::SecMode::kMacEncrypt, keys::Secret(4), 103), op);
  EXPECT_NE(salt(), second) << "another mode";
  EXPECT_EQ(Ctr(ControlCounter::kKeysInstalled), 5u);
}

TEST_F(ControlTest, SetKeyBelowTheFloorIsAReplayLoggedOnce) {
  // The floor is the switch's start (ina-switchd: proto::SetKeySequence of it): a SET_KEY sealed
  // before it, such as one recorded before a restart, is refused; one sealed after is taken.
  std::vector<std::string> lines;
  const auto admin = keys::Secret(9);
  const auto start = std::chrono::system_clock::now();
  base_cfg_.admin_secret = admin;
  base_cfg_.admin_seq_floor = p::SetKeySequence(start);
  base_cfg_.log = [&lines](const std::string& l) { lines.push_back(l); };
  Make();
  const Peer op = MakePeer(7000);
  const auto before = p::SetKeySequence(start - std::chrono::hours(1), 3);
  Send(keys::SetKey(admin, 12, p::SecMode::kMac, keys::Secret(3), before), op);
  Send(keys::SetKey(admin, 13, p::SecMode::kMac, keys::Secret(3), before + 1), op);
  EXPECT_EQ(Ctr(ControlCounter::kAdminReplayed), 2u);
  EXPECT_FALSE(cp_->HasJobKey(12) || cp_->HasJobKey(13));
  EXPECT_TRUE(out_.replies.empty());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("SET_KEY for job 12"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("clock is behind"), std::string::npos) << lines[0];
  Send(keys::SetKey(admin, 14, p::SecMode::kMac, keys::Secret(3),
                    p::SetKeySequence(start + std::chrono::milliseconds(5))),
       op);
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(out_.replies[0].h.type, p::MsgType::kSetKeyAck);
  EXPECT_TRUE(cp_->HasJobKey(14));
}

TEST_F(ControlTest, SetKeyWithoutAnAdminSecretIsRefused) {
  Make();
  Send(keys::SetKey(keys::Secret(9), 12, p::SecMode::kMac, keys::Secret(3), 1), MakePeer(7000));
  EXPECT_EQ(Ctr(ControlCounter::kAdminRefused), 1u);
  EXPECT_FALSE(cp_->HasJobKey(12));
  EXPECT_TRUE(out_.replies.empty());
}

TEST_F(ControlTest, BadAdminSecretIsRefusedAtCreate) {
  EngineLimits lim;
  lim.pool_slots = 8;
  lim.max_jobs = 2;
  auto engine = MakeReferenceEngine(lim);
  ControlConfig cfg;
  cfg.admin_secret = keys::Secret(1, 8);
  EXPECT_EQ(ControlPlane::Create(*engine, cfg).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ina::dp
