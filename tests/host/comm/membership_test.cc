// The join, re-join and LEAVE without sockets, threads or sleeps: Membership driven packet by
// packet with hand-made replies, and Progress's join turns for several ranks over a fake
// transport into the in-process fabric (the real control plane), all on a fake clock. Each test
// runs in microseconds of real time; the fake clock says exactly when the JOIN is resent and when
// the join gives up.
#include "membership.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "fake_net.h"
#include "ina/dp/control.h"
#include "ina/host/quant.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/wire.h"
#include "progress.h"

namespace ina::host::internal {
namespace {

using ::ina::testing::FabricConfig;
using ::ina::testing::FakeClock;
using ::ina::testing::FakeNet;
using ::ina::testing::NetPacket;
using ::ina::testing::Verdict;
using proto::ErrorCode;
using proto::MsgType;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using State = Membership::State;

// Rank `rank` of `world` of job 7 (K 64, window 8), at fabric:9000.
CommConfig Comm(uint16_t rank = 0, uint16_t world = 2) {
  CommConfig c;
  c.job_id = 7;
  c.rank = rank;
  c.world_size = world;
  c.k = 64;
  c.window = 8;
  c.join_timeout_ms = 1000;
  c.slot_wait_timeout_ms = 3000;
  c.switch_host = "fabric";
  c.switch_port = 9000;
  return c;
}

JoinConfig Config(uint16_t rank = 0, uint16_t world = 2) {
  return JoinConfig::From(Comm(rank, world), 0);
}

// A fabric message (a typed message: proto::JoinAckMsg{...}), sealed as the fabric sends it.
template <class Msg>
std::vector<uint8_t> Reply(const Msg& m) {
  std::vector<uint8_t> b(proto::MessageBytes(0));
  m.Encode(b.data());
  proto::SealMessage(b.data(), proto::kHeaderBytes);
  return b;
}

std::vector<uint8_t> JoinAck(uint16_t window, uint16_t epoch, uint16_t lease = 0,
                             uint8_t release = 0) {
  return Reply(proto::JoinAckMsg{
      .release = release, .job = 7, .epoch = epoch, .k = 64, .window = window, .lease = lease});
}

std::vector<uint8_t> Error(ErrorCode code, proto::JoinParam param = proto::JoinParam::kNone,
                           uint32_t value = 0, uint16_t peer = 0) {
  // slot, offset and count as the codes under test name them (join_param, its value, the peer).
  return Reply(proto::ErrorMsg{.job = 7,
                               .slot = static_cast<uint16_t>(param),
                               .count = peer,
                               .offset = value,
                               .code = code});
}

// The headers of the packets queued, marked sent at `now`.
std::vector<proto::Header> Take(Membership& m, TimePoint now) {
  std::array<TxMessage, 8> tx{};
  const size_t n = m.PeekTx(std::span(tx));
  std::vector<proto::Header> out;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_TRUE(proto::MessageCrcOk({tx[i].data, tx[i].len}));
    out.push_back(proto::DecodeHeader(tx[i].data));
  }
  m.OnSent(n, now);
  return out;
}

// The bytes of the packets queued, marked sent at `now` (a proven JOIN has a tag, not a CRC).
std::vector<std::vector<uint8_t>> TakeBytes(Membership& m, TimePoint now) {
  std::array<TxMessage, 8> tx{};
  const size_t n = m.PeekTx(std::span(tx));
  std::vector<std::vector<uint8_t>> out;
  for (size_t i = 0; i < n; ++i) out.emplace_back(tx[i].data, tx[i].data + tx[i].len);
  m.OnSent(n, now);
  return out;
}

// The fabric's join_challenge to rank `rank` lane `lane` of job 7 with `nonce` (and salt), naming
// the key's `mode` (0: not said).
std::vector<uint8_t> Challenge(const proto::JoinChallenge& nonce, uint16_t rank = 0,
                               uint16_t lane = 0, proto::SecMode mode = proto::SecMode::kCrc) {
  constexpr uint16_t kWords = proto::kJoinChallengeBytes / proto::kElemBytes;
  std::vector<uint8_t> b(proto::MessageBytes(kWords));
  proto::JoinChallengeMsg{.job = 7,
                          .rank = rank,
                          .lane = lane,
                          .payload_words = kWords,
                          .mode = static_cast<uint16_t>(mode)}
      .Encode(b.data());
  nonce.EncodeTo(b.data() + proto::kHeaderBytes);
  proto::SealMessage(b.data(), proto::kHeaderBytes + proto::kJoinChallengeBytes);
  return b;
}

std::vector<uint8_t> TestSecret(uint8_t seed) {
  std::vector<uint8_t> s(32);
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(seed * 31 + i);
  return s;
}

bool Has(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

class MembershipTest : public ::testing::Test {
 protected:
  // The headers a new member of `c` queues when it joins at t0_.
  std::vector<proto::Header> JoinSends(const JoinConfig& c) const {
    Membership m(c);
    m.Join(0, t0_);
    return Take(m, t0_);
  }

  TimePoint t0_ = TimePoint{} + std::chrono::seconds(1000);
};

// ---- Membership alone ----

TEST_F(MembershipTest, JoinCarriesTheAskedParameters) {
  Membership m(Config(1, 3));
  m.Join(0, t0_);
  EXPECT_EQ(m.state(), State::kJoining);
  const auto sent = Take(m, t0_);
  ASSERT_EQ(sent.size(), 1u);
  const proto::Header& h = sent[0];
  EXPECT_EQ(h.type, MsgType::kJoin);
  EXPECT_EQ(h.job, 7);
  EXPECT_EQ(h.rank, 1);
  EXPECT_EQ(h.count, 64);   // K
  EXPECT_EQ(h.offset, 8u);  // window asked
  EXPECT_EQ(h.aux, 3);      // world size
  EXPECT_EQ(h.exp, 0);      // a first join
  EXPECT_EQ(h.slot, 0);     // one lane: no lane fields
  EXPECT_EQ(h.gen, 0);
}

TEST_F(MembershipTest, LanesNameTheirLaneUnlessOnSwitchCores) {
  JoinConfig c = Config();
  c.lanes = 3;
  c.lane = 2;
  const auto sent = JoinSends(c);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].slot, 2);
  EXPECT_EQ(sent[0].gen, 3);
  c.core_lanes = true;  // each core holds its share as a job of its own
  const auto core_sent = JoinSends(c);
  ASSERT_EQ(core_sent.size(), 1u);
  EXPECT_EQ(core_sent[0].slot, 0);
  EXPECT_EQ(core_sent[0].gen, 0);
}

TEST_F(MembershipTest, ResendsEveryResendAfterTheLastSend) {
  Membership m(Config());
  m.Join(0, t0_);
  EXPECT_EQ(m.NextDeadline(), t0_ + milliseconds(1000));  // queued: only the deadline
  ASSERT_EQ(Take(m, t0_ + microseconds(30)).size(), 1u);
  EXPECT_EQ(m.NextDeadline(), t0_ + milliseconds(100) + microseconds(30));
  m.OnTimers(t0_ + milliseconds(100) + microseconds(29));
  EXPECT_EQ(m.tx_queued(), 0u);
  m.OnTimers(t0_ + milliseconds(100) + microseconds(30));
  EXPECT_EQ(m.tx_queued(), 1u);
  // A JOIN the transport did not take stays queued, and its timer waits for the send.
  m.OnSent(0, t0_ + milliseconds(150));
  EXPECT_EQ(m.tx_queued(), 1u);
  EXPECT_EQ(m.NextDeadline(), t0_ + milliseconds(1000));
}

TEST_F(MembershipTest, TimesOutAtJoinTimeoutNamingTheTransportError) {
  Membership m(Config());
  m.Join(0, t0_);
  Take(m, t0_);
  m.OnTransportError(Unavailable("udp: recv: Connection refused"));
  EXPECT_TRUE(m.joining());  // the fabric is not up yet: keep trying
  m.OnTimers(t0_ + milliseconds(1000) - microseconds(1));
  EXPECT_TRUE(m.joining());
  m.OnTimers(t0_ + milliseconds(1000));
  EXPECT_EQ(m.state(), State::kFailed);
  const Status s = m.status();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_TRUE(Has(s,
                  "join job 7 as rank 0 of 2 at fabric:9000: no join_ack within 1000 ms "
                  "(did every rank start?); last transport error: UNAVAILABLE: udp: recv: "
                  "Connection refused"))
      << s.ToString();
  EXPECT_EQ(m.tx_queued(), 0u);  // not queued at the fabric: nothing to leave
  EXPECT_EQ(m.result().status().code(), StatusCode::kDeadlineExceeded);
}

// join_pending (the fabric waits for ranks) changes nothing but the timeout's words: who was
// missing, at a flat switch, at a tree's spine (a leaf) or at a leaf. The last one counts; a new
// join forgets it.
TEST_F(MembershipTest, JoinPendingNamesWhoIsMissingWhenTheJoinTimesOut) {
  struct Case {
    proto::JoinPendingMsg pending;
    const char* words;
  } cases[] = {
      {{.job = 7, .joined = 3, .missing_rank = 2, .world_size = 4},
       "no join_ack within 1000 ms: 3 of 4 ranks joined the job at the switch; rank 2 has not "
       "(did it start, with this switch as its INA_SWITCH?)"},
      {{.scope = 1, .job = 7, .missing_ranks = 4, .joined = 1, .missing_rank = 4, .world_size = 2},
       "no join_ack within 1000 ms: 1 of 2 leaves of the tree joined the spine; the leaf of ranks "
       "4..7 has not (did those ranks start, and does their leaf reach the spine?"},
      {{.scope = 2, .job = 7, .joined = 3, .missing_rank = 6, .world_size = 4},
       "no join_ack within 1000 ms: 3 of 4 ranks of this leaf joined it; rank 6 has not (did it "
       "start, with this leaf as its INA_SWITCH?)"},
  };
  for (const Case& c : cases) {
    Membership m(Config());
    m.Join(0, t0_);
    Take(m, t0_);
    m.OnPacket(
        Reply(proto::JoinPendingMsg{.job = 7, .joined = 1, .missing_rank = 1, .world_size = 4}),
        t0_ + milliseconds(100));
    m.OnPacket(Reply(c.pending), t0_ + milliseconds(200));
    EXPECT_EQ(m.state(), State::kJoining);
    // The resend pace is the usual one: an answer does not delay or hasten it.
    m.OnTimers(t0_ + milliseconds(200));
    EXPECT_EQ(Take(m, t0_ + milliseconds(200)).size(), 1u);
    m.OnTimers(t0_ + milliseconds(1000));
    ASSERT_EQ(m.state(), State::kFailed);
    EXPECT_EQ(m.status().code(), StatusCode::kDeadlineExceeded);
    EXPECT_TRUE(Has(m.status(), c.words)) << m.status().ToString();
  }
  // A new join forgets the last one's news.
  Membership m(Config());
  m.Join(0, t0_);
  m.OnPacket(Reply(cases[0].pending), t0_);
  m.OnTimers(t0_ + milliseconds(1000));
  m.Join(0, t0_ + milliseconds(1000));
  m.OnTimers(t0_ + milliseconds(2000));
  EXPECT_TRUE(Has(m.status(), "no join_ack within 1000 ms (did every rank start?)"))
      << m.status().ToString();
}

// A pending job aborted by a rank that gave up waiting first (its join timeout ended a moment
// before this one's, and its LEAVE ended the job): this rank's error still names who was missing,
// from the join_pending it was told; without one, the bare refusal.
TEST_F(MembershipTest, AJobAbortedWhileWaitingStillNamesWhoIsMissing) {
  Membership m(Config());
  m.Join(0, t0_);
  Take(m, t0_);
  m.OnPacket(Reply(proto::JoinPendingMsg{
                 .scope = 2, .job = 7, .joined = 3, .missing_rank = 7, .world_size = 4}),
             t0_ + milliseconds(100));
  m.OnPacket(Reply(proto::ErrorMsg{.job = 7, .code = ErrorCode::kJobAborted}),
             t0_ + milliseconds(900));
  ASSERT_EQ(m.state(), State::kFailed);
  EXPECT_EQ(m.status().code(), StatusCode::kAborted);
  EXPECT_TRUE(Has(m.status(),
                  "fabric answered error(job_aborted) while the job waited for a missing rank: 3 "
                  "of 4 ranks of this leaf joined it; rank 7 has not"))
      << m.status().ToString();
  Membership bare(Config());
  bare.Join(0, t0_);
  bare.OnPacket(Reply(proto::ErrorMsg{.job = 7, .code = ErrorCode::kJobAborted}),
                t0_ + milliseconds(900));
  EXPECT_EQ(bare.status().code(), StatusCode::kAborted);
  EXPECT_FALSE(Has(bare.status(), "missing")) << bare.status().ToString();
}

// A re-join whose fabric refuses its packets (ICMP port unreachable: the switch or leaf that
// granted the job died, or restarted without it) fails at once; a first join keeps trying.
TEST_F(MembershipTest, AReJoinFailsAtOnceWhenTheFabricWentAway) {
  Membership m(Config());
  m.Join(3, t0_);
  Take(m, t0_);
  m.OnTransportError(Unavailable("udp: recv: Connection refused"));
  ASSERT_EQ(m.state(), State::kFailed);
  EXPECT_EQ(m.status().code(), StatusCode::kUnavailable) << m.status().ToString();
  EXPECT_TRUE(Has(m.status(),
                  "re-join job 7 as rank 0 of 2 at fabric:9000: the fabric went away "
                  "since its last grant (UNAVAILABLE: udp: recv: Connection refused)"))
      << m.status().ToString();
  EXPECT_EQ(m.tx_queued(), 0u);
}

TEST_F(MembershipTest, JoinAckGrantsAndIsChecked) {
  Membership m(Config());
  m.Join(0, t0_);
  m.OnPacket(JoinAck(4, 1, 10), t0_ + microseconds(5));
  ASSERT_EQ(m.state(), State::kMember);
  EXPECT_EQ(m.grant().window, 4);
  EXPECT_EQ(m.grant().epoch, 1);
  EXPECT_EQ(m.grant().lease, 10);
  EXPECT_EQ(m.tx_queued(), 0u);  // the JOIN not sent yet is not sent any more
  EXPECT_EQ(m.NextDeadline(), TimePoint::max());

  Membership bad(Config());
  bad.Join(0, t0_);
  bad.OnPacket(JoinAck(9, 1), t0_);  // more than asked
  EXPECT_EQ(bad.status().code(), StatusCode::kInternal) << bad.status().ToString();
  EXPECT_TRUE(Has(bad.status(), "join_ack with k 64 window 9 epoch 1 (asked k 64 window 8)"));
}

TEST_F(MembershipTest, IgnoresDamagedForeignAndUnrelatedMessages) {
  Membership m(Config());
  m.Join(0, t0_);
  std::vector<uint8_t> damaged = JoinAck(4, 1);
  damaged[10] ^= 0x40;
  m.OnPacket(damaged, t0_);
  m.OnPacket(Reply(proto::JoinAckMsg{.job = 8, .epoch = 1, .k = 64, .window = 4}), t0_);
  m.OnPacket(Reply(proto::ResultMsg{.job = 7}), t0_);
  std::vector<uint8_t> other_version = JoinAck(4, 1);
  other_version[0] ^= 0x10;
  proto::SealMessage(other_version.data(), proto::kHeaderBytes);
  m.OnPacket(other_version, t0_);
  m.OnPacket(std::span<const uint8_t>(JoinAck(4, 1)).first(10), t0_);  // short
  EXPECT_EQ(m.state(), State::kJoining);
}

// A keyed job's JOIN (docs/security.md, "JOIN proves knowledge of the key"): plain until the
// fabric challenges it, then the proven JOIN for the challenge's nonce, resent as the JOIN was;
// an old proof gives way to the plain JOIN (a fresh nonce); a challenge repeating the proven
// nonce is a refusal, named at the timeout.
TEST_F(MembershipTest, KeyedJoinAnswersTheChallengeWithAProof) {
  JoinConfig c = Config();
  const auto secret = TestSecret(1);
  c.secret = JobSecret(secret);
  c.join_timeout = milliseconds(10000);
  c.challenge_max_age = milliseconds(500);
  Membership m(c);
  m.Join(0, t0_);
  const auto plain = TakeBytes(m, t0_);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(proto::GetSec(plain[0].data()), 0);
  EXPECT_TRUE(proto::MessageCrcOk(plain[0]));

  proto::JoinChallenge n1{};
  n1.nonce[0] = 0xA1;
  n1.salt[3] = 0x5C;
  m.OnPacket(Challenge(n1, 1), t0_);     // another rank's: ignored
  m.OnPacket(Challenge(n1, 0, 2), t0_);  // another lane's: ignored
  EXPECT_EQ(m.tx_queued(), 0u);
  m.OnPacket(Challenge(n1), t0_ + microseconds(10));
  const auto proof = TakeBytes(m, t0_ + microseconds(10));  // at once, not at the resend
  ASSERT_EQ(proof.size(), 1u);
  ASSERT_EQ(proof[0].size(), proto::kHeaderBytes + proto::kTagBytes);
  EXPECT_EQ(proto::GetSec(proof[0].data()), static_cast<uint8_t>(proto::SecMode::kMac));
  EXPECT_TRUE(std::equal(plain[0].begin() + proto::kSecOffset + 1,
                         plain[0].begin() + proto::kHeaderBytes,
                         proof[0].begin() + proto::kSecOffset + 1))
      << "the proven JOIN is the JOIN";
  EXPECT_TRUE(proto::JoinProofOk(secret, n1, proof[0]));
  EXPECT_FALSE(proto::JoinProofOk(TestSecret(2), n1, proof[0]));

  // Resent every `resend` as it was; the same challenge again answers the proof: a refusal.
  m.OnTimers(t0_ + milliseconds(100) + microseconds(10));
  const auto again = TakeBytes(m, t0_ + milliseconds(100) + microseconds(10));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0], proof[0]);
  m.OnPacket(Challenge(n1), t0_ + milliseconds(101));
  EXPECT_EQ(m.tx_queued(), 0u);
  // Past challenge_max_age the plain JOIN goes out (for a fresh nonce) ...
  m.OnTimers(t0_ + milliseconds(600));
  const auto fresh = TakeBytes(m, t0_ + milliseconds(600));
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh[0], plain[0]);
  // ... and the next challenge's nonce gets a new proof.
  proto::JoinChallenge n2 = n1;
  n2.nonce[5] = 0x77;
  m.OnPacket(Challenge(n2), t0_ + milliseconds(601));
  const auto proof2 = TakeBytes(m, t0_ + milliseconds(601));
  ASSERT_EQ(proof2.size(), 1u);
  EXPECT_TRUE(proto::JoinProofOk(secret, n2, proof2[0]));
  EXPECT_NE(proof2[0], proof[0]);

  m.OnTimers(t0_ + milliseconds(10000));
  ASSERT_EQ(m.state(), State::kFailed);
  EXPECT_TRUE(Has(m.status(),
                  "answered this rank's proof of the job secret with another "
                  "challenge 1 time(s)"))
      << m.status().ToString();
}

// The grant carries the session salt of the challenge its proof answered: the session of the
// grant's traffic keys. A challenge with the nonce already proven but another salt (the key was
// installed again meanwhile) is no refusal: it gets a proof of its own.
TEST_F(MembershipTest, TheGrantCarriesTheSaltOfTheChallengeItsProofAnswered) {
  JoinConfig c = Config();
  const auto secret = TestSecret(1);
  c.secret = JobSecret(secret);
  Membership m(c);
  m.Join(0, t0_);
  Take(m, t0_);
  proto::JoinChallenge n{};
  n.nonce[0] = 0x11;
  n.salt[0] = 0x22;
  m.OnPacket(Challenge(n), t0_);
  ASSERT_EQ(TakeBytes(m, t0_).size(), 1u);
  proto::JoinChallenge reinstalled = n;
  reinstalled.salt[0] = 0x33;
  m.OnPacket(Challenge(reinstalled), t0_ + microseconds(5));
  const auto proof = TakeBytes(m, t0_ + microseconds(5));
  ASSERT_EQ(proof.size(), 1u) << "a new salt is a new challenge";
  EXPECT_TRUE(proto::JoinProofOk(secret, reinstalled, proof[0]));
  EXPECT_FALSE(proto::JoinProofOk(secret, n, proof[0]));
  m.OnPacket(JoinAck(4, 1), t0_ + microseconds(10));
  ASSERT_EQ(m.state(), State::kMember);
  EXPECT_EQ(m.grant().salt, reinstalled.salt);

  Membership crc(Config());  // never challenged: session zero
  crc.Join(0, t0_);
  Take(crc, t0_);
  crc.OnPacket(JoinAck(4, 1), t0_);
  ASSERT_EQ(crc.state(), State::kMember);
  EXPECT_EQ(crc.grant().salt, proto::Session{});
}

TEST_F(MembershipTest, ChallengedCrcOnlyJobFailsNamingTheKey) {
  Membership m(Config());
  m.Join(0, t0_);
  Take(m, t0_);
  m.OnPacket(Challenge(proto::JoinChallenge{}), t0_);
  ASSERT_EQ(m.state(), State::kFailed);
  EXPECT_EQ(m.status().code(), StatusCode::kFailedPrecondition) << m.status().ToString();
  EXPECT_TRUE(Has(m.status(), "the fabric holds a key for job 7")) << m.status().ToString();
  EXPECT_TRUE(Has(m.status(), "INA_JOB_KEY")) << m.status().ToString();
}

// A challenge naming the key's mode: the same mode is proven as any; another fails the join at
// once, naming both (the fabric would drop this worker's data as another mode's).
TEST_F(MembershipTest, AChallengeInAnotherModeFailsTheJoinNamingBoth) {
  for (const auto fabric : {proto::SecMode::kMac, proto::SecMode::kMacEncrypt}) {
    JoinConfig c = Config();
    c.secret = JobSecret(TestSecret(1));
    c.mode = proto::SecMode::kMac;
    Membership m(c);
    m.Join(0, t0_);
    Take(m, t0_);
    m.OnPacket(Challenge(proto::JoinChallenge{}, 0, 0, fabric), t0_);
    if (fabric == proto::SecMode::kMac) {
      EXPECT_TRUE(m.joining()) << m.status().ToString();
      const auto proof = TakeBytes(m, t0_);
      ASSERT_EQ(proof.size(), 1u);
      EXPECT_EQ(proto::GetSec(proof[0].data()), static_cast<uint8_t>(proto::SecMode::kMac));
      continue;
    }
    ASSERT_EQ(m.state(), State::kFailed);
    EXPECT_EQ(m.status().code(), StatusCode::kFailedPrecondition) << m.status().ToString();
    EXPECT_TRUE(Has(m.status(), "key in mode mac_encrypt, but this worker runs it mac"))
        << m.status().ToString();
  }
}

TEST_F(MembershipTest, RefusalsNameTheParameterAndBothValues) {
  struct Case {
    std::vector<uint8_t> error;
    StatusCode code;
    std::string text;
  };
  const std::vector<Case> cases = {
      {Error(ErrorCode::kBadParams, proto::JoinParam::kK, 128), StatusCode::kInvalidArgument,
       "this rank's K 64 differs from 128, what the ranks that joined first sent (k 0"},
      {Error(ErrorCode::kBadParams, proto::JoinParam::kWindow, proto::kJoinValueNone),
       StatusCode::kInvalidArgument, "this rank's window 8 is out of the fabric's range"},
      {Error(ErrorCode::kBadParams, proto::JoinParam::kRank, proto::kJoinValueNone),
       StatusCode::kInvalidArgument,
       "this switch does not serve rank 0: a leaf of a tree serves only its share of the ranks"},
      {Error(ErrorCode::kBadParams), StatusCode::kInvalidArgument,
       "K, world size or window differ"},
      {Error(ErrorCode::kRankTaken, proto::JoinParam::kRankTaken, proto::kJoinValueNone),
       StatusCode::kAlreadyExists, "another process already joined as rank 0 lane 0"},
      {Error(ErrorCode::kPeerRefused, proto::JoinParam::kWorldSize, 3, 1), StatusCode::kAborted,
       "rank 1's JOIN was refused, so the job cannot start: its world size 3 differs from 2, "
       "this rank's"},
      {Reply(proto::ErrorMsg{.job = 7, .code = ErrorCode::kPeerRefused}
                 .set_join_param(proto::JoinParam::kRank)
                 .set_refused_rank(7)
                 .set_refused_value(7)
                 .set_tree_rank(1)),  // a leaf's refusal
       StatusCode::kAborted,
       "rank 7's JOIN was refused, so the job cannot start: it joined a leaf that does not serve "
       "it"},
      {Error(ErrorCode::kNoSlots), StatusCode::kResourceExhausted,
       "error(no_slots): the fabric could not install the job: its engine refused it (its job "
       "table or memory is full"},
      {Error(ErrorCode::kNoSlots, proto::JoinParam::kSecMode,
             static_cast<uint32_t>(proto::SecMode::kMacEncrypt)),
       StatusCode::kUnimplemented,
       "error(no_slots): the fabric's engine cannot run this job's sec mode mac_encrypt"},
      {Error(ErrorCode::kTooManyJobs), StatusCode::kResourceExhausted, "error(too_many_jobs)"},
      {Error(ErrorCode::kJobAborted), StatusCode::kAborted, "error(job_aborted)"},
  };
  for (const Case& c : cases) {
    Membership m(Config());
    m.Join(0, t0_);
    Take(m, t0_);
    m.OnPacket(c.error, t0_ + microseconds(7));
    ASSERT_EQ(m.state(), State::kFailed);
    EXPECT_EQ(m.status().code(), c.code) << m.status().ToString();
    EXPECT_TRUE(Has(m.status(), "join job 7 as rank 0 of 2 at fabric:9000: fabric answered error("))
        << m.status().ToString();
    EXPECT_TRUE(Has(m.status(), c.text)) << m.status().ToString();
    EXPECT_EQ(m.tx_queued(), 0u);  // a refusal is the fabric's word: nothing to leave
    EXPECT_EQ(m.NextDeadline(), TimePoint::max());
  }
}

TEST_F(MembershipTest, QueuedJobWaitsForSlotsThenGivesUpWithThreeAbortLeaves) {
  Membership m(Config());
  m.Join(0, t0_);
  Take(m, t0_);
  const TimePoint t1 = t0_ + milliseconds(40);
  m.OnPacket(Reply(proto::JoinWaitMsg{.job = 7, .queue_ahead = 2}), t1);
  ASSERT_EQ(m.state(), State::kQueued);
  EXPECT_EQ(m.ahead(), 2);
  // Resent every 100 ms after the fabric's last answer; the deadline is now the slot wait's.
  EXPECT_EQ(m.NextDeadline(), t1 + milliseconds(100));
  m.OnTimers(t1 + milliseconds(100));
  ASSERT_EQ(Take(m, t1 + milliseconds(100)).size(), 1u);
  m.OnPacket(Reply(proto::JoinWaitMsg{.job = 7, .queue_ahead = 1}), t1 + milliseconds(101));
  EXPECT_EQ(m.NextDeadline(), t1 + milliseconds(201));
  // Past join_timeout (1 s from Join) it still waits: the slot wait counts from the first
  // join_wait.
  m.OnTimers(t0_ + milliseconds(1500));
  EXPECT_TRUE(m.joining());
  Take(m, t0_ + milliseconds(1500));
  m.OnTimers(t1 + milliseconds(3000) - microseconds(1));
  EXPECT_TRUE(m.joining());
  m.OnTimers(t1 + milliseconds(3000));
  ASSERT_EQ(m.state(), State::kFailed);
  EXPECT_EQ(m.status().code(), StatusCode::kDeadlineExceeded) << m.status().ToString();
  EXPECT_TRUE(Has(m.status(), "waited 3000 ms for slots (slot_wait_timeout_ms, INA_SLOT_WAIT_MS)"));
  EXPECT_TRUE(Has(m.status(), "queued the job behind 1 other job(s)")) << m.status().ToString();
  const auto leaves = Take(m, t1 + milliseconds(3000));
  ASSERT_EQ(leaves.size(), 3u);
  for (const proto::Header& h : leaves) {
    EXPECT_EQ(h.type, MsgType::kLeave);
    EXPECT_EQ(h.rank, 0);
    EXPECT_EQ(h.aux, static_cast<uint16_t>(ErrorCode::kJobAborted));
    EXPECT_EQ(h.offset, 0u);
  }
  EXPECT_EQ(m.tx_queued(), 0u);
}

TEST_F(MembershipTest, CancelAbortsAndLeavesOnlyAQueuedJob) {
  Membership joining(Config());
  joining.Join(0, t0_);
  Take(joining, t0_);
  joining.Cancel();
  EXPECT_EQ(joining.status().code(), StatusCode::kAborted);
  EXPECT_TRUE(Has(joining.status(), "another lane failed"));
  EXPECT_EQ(joining.tx_queued(), 0u);

  Membership queued(Config());
  queued.Join(0, t0_);
  Take(queued, t0_);
  queued.OnPacket(Reply(proto::JoinWaitMsg{.job = 7}), t0_);
  queued.Cancel();
  EXPECT_EQ(queued.status().code(), StatusCode::kAborted);
  EXPECT_EQ(queued.tx_queued(), 3u);
}

TEST_F(MembershipTest, OtherTransportErrorsFailTheJoinWithItsContext) {
  Membership m(Config());
  m.Join(0, t0_);
  m.OnPacket(Reply(proto::JoinWaitMsg{.job = 7}), t0_);
  m.OnTransportError(Internal("fake: socket closed"));
  ASSERT_EQ(m.state(), State::kFailed);
  EXPECT_EQ(m.status().code(), StatusCode::kInternal);
  EXPECT_TRUE(Has(m.status(), "join job 7 as rank 0 of 2 at fabric:9000")) << m.status().ToString();
  EXPECT_EQ(m.tx_queued(), 3u);  // queued: the abort LEAVEs go out, best effort
}

TEST_F(MembershipTest, ReJoinIgnoresTheOldGrantsJoinAckAndNamesItself) {
  Membership m(Config());
  m.Join(0, t0_);
  m.OnPacket(JoinAck(8, 5, 2), t0_);
  ASSERT_EQ(m.state(), State::kMember);
  m.Join(5, t0_ + milliseconds(3));  // the lease of epoch 5 ended
  const auto sent = Take(m, t0_ + milliseconds(3));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].exp, 5);
  m.OnPacket(JoinAck(8, 5, 2), t0_ + milliseconds(4));  // a late copy of the old grant's
  EXPECT_EQ(m.state(), State::kJoining);
  m.OnPacket(JoinAck(6, 6, 2), t0_ + milliseconds(5));
  ASSERT_EQ(m.state(), State::kMember);
  EXPECT_EQ(m.grant().window, 6);
  EXPECT_EQ(m.grant().epoch, 6);

  Membership late(Config());
  late.Join(3, t0_);
  late.OnTimers(t0_ + milliseconds(1000));
  EXPECT_TRUE(Has(late.status(),
                  "re-join job 7 as rank 0 of 2 at fabric:9000: no join_ack "
                  "within 1000 ms (did every rank re-join?)"))
      << late.status().ToString();

  Membership left(Config());
  left.Join(3, t0_);
  left.OnPacket(Error(ErrorCode::kRankLeft, proto::JoinParam::kNone, 4, 1), t0_);
  EXPECT_EQ(left.status().code(), StatusCode::kAborted);
  EXPECT_TRUE(Has(left.status(), "rank 1 left after 4 calls")) << left.status().ToString();
}

// An idle job asked to release its grant (docs/protocol.md, "Idle jobs"): the keep-alive's
// join_ack says so in the grant; a re-join for it ignores another "release", and takes "stands"
// (the release called off) as its answer: the grant it holds, the same epoch.
TEST_F(MembershipTest, AReleaseIsSaidInTheGrantAndAReJoinForItTakesStands) {
  Membership m(Config());
  m.Join(0, t0_);
  m.OnPacket(JoinAck(8, 5, 0, 1), t0_);
  ASSERT_EQ(m.state(), State::kMember);
  EXPECT_EQ(m.grant().release, 1);
  m.Join(5, t0_ + milliseconds(1));
  m.OnPacket(JoinAck(8, 5, 0, 1), t0_ + milliseconds(2));  // asked again: not the answer
  EXPECT_EQ(m.state(), State::kJoining);
  m.OnPacket(JoinAck(8, 5, 0, 2), t0_ + milliseconds(3));
  ASSERT_EQ(m.state(), State::kMember);
  EXPECT_EQ(m.grant().epoch, 5);
  EXPECT_EQ(m.grant().window, 8);
  EXPECT_EQ(m.grant().release, 2);
}

// A re-join releasing an idle job's grant, queued behind another job: its slot wait starts again
// while no call waits (RestartSlotWait), so the idle job is not failed for waiting; once a call
// waits, its JOIN drops the release flag (CallWaits), and the slot wait runs.
TEST_F(MembershipTest, AReleasedJobQueuedWaitsIdleUntilACallWaits) {
  Membership m(Config());
  m.Join(0, t0_);
  m.OnPacket(JoinAck(8, 5), t0_);
  m.Join(5, t0_, true);
  auto sent = Take(m, t0_);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(proto::JoinMsg::From(sent[0]).release, 1);
  m.OnPacket(Reply(proto::JoinWaitMsg{.job = 7, .queue_ahead = 1}), t0_);
  ASSERT_EQ(m.state(), State::kQueued);
  m.RestartSlotWait(t0_ + milliseconds(2900));
  m.OnTimers(t0_ + milliseconds(3000));  // 3 s queued, but idle for the last 0.1 s only
  EXPECT_TRUE(m.joining());
  m.CallWaits();
  sent = Take(m, t0_ + milliseconds(3000));
  ASSERT_EQ(sent.size(), 1u) << "resent at once, saying a call waits";
  EXPECT_EQ(proto::JoinMsg::From(sent[0]).release, 0);
  EXPECT_EQ(sent[0].exp, 5);
  m.CallWaits();
  EXPECT_TRUE(Take(m, t0_ + milliseconds(3000)).empty()) << "once";
  m.OnTimers(t0_ + milliseconds(2900) + milliseconds(3000));
  EXPECT_EQ(m.status().code(), StatusCode::kDeadlineExceeded) << m.status().ToString();
}

TEST_F(MembershipTest, LeaveQueuesThreeCopiesSentOnceBestEffort) {
  Membership m(Config());
  m.Join(0, t0_);
  m.OnPacket(JoinAck(8, 1), t0_);
  m.Leave(ErrorCode::kNone, 12);
  EXPECT_EQ(m.state(), State::kOut);
  EXPECT_EQ(m.grant().epoch, 1);  // the last grant is kept
  std::array<TxMessage, 8> tx{};
  ASSERT_EQ(m.PeekTx(std::span(tx)), 3u);
  const proto::Header h = proto::DecodeHeader(tx[0].data);
  EXPECT_EQ(h.type, MsgType::kLeave);
  EXPECT_EQ(h.aux, 0);
  EXPECT_EQ(h.offset, 12u);
  m.OnSent(1, t0_);  // the transport took one: the others are dropped, never resent
  EXPECT_EQ(m.tx_queued(), 0u);
  m.OnTimers(t0_ + std::chrono::seconds(10));
  EXPECT_EQ(m.tx_queued(), 0u);
  EXPECT_EQ(m.NextDeadline(), TimePoint::max());
}

// ---- Progress's join turns against the in-process fabric ----

// Ranks joining over a FakeNet: every round turns each joining rank once, pumps the net, and
// when nothing moved advances the clock by the shortest wait asked.
class JoinSim {
 public:
  explicit JoinSim(const FabricConfig& fabric = {}) : net_(clock_, fabric) {}

  Progress& Add(const CommConfig& c) {
    const int id = static_cast<int>(ranks_.size());
    ranks_.push_back(std::make_unique<Progress>(WindowConfig::From(c, c.window),
                                                JoinConfig::From(c, 0), quant::ActiveKernels(),
                                                net_.Endpoint(id), clock_));
    return *ranks_.back();
  }

  // Turns until no rank is joining or `limit` of fake time (or a million rounds: a resend loop
  // that never lets the clock move) passed (false).
  bool Run(microseconds limit = std::chrono::seconds(100)) {
    const TimePoint stop_at = clock_.Now() + limit;
    for (int round = 0; round < 1000000 && clock_.Now() <= stop_at; ++round) {
      const uint64_t before = net_.moved();
      bool any = false;
      microseconds wait = microseconds::max();
      for (auto& p : ranks_) {
        if (!p->membership().joining()) continue;
        any = true;
        p->JoinTurn(microseconds(0));
        if (p->membership().joining()) wait = std::min(wait, p->last_wait());
      }
      net_.Pump();
      if (!any) return true;
      if (net_.moved() == before && net_.up.empty() && wait != microseconds::max()) {
        clock_.Advance(std::max(wait, microseconds(1)));
      }
    }
    return false;
  }

  FakeClock& clock() { return clock_; }
  FakeNet& net() { return net_; }
  Progress& rank(int r) { return *ranks_[r]; }

 private:
  FakeClock clock_;
  FakeNet net_;
  std::vector<std::unique_ptr<Progress>> ranks_;
};

size_t Count(const std::vector<NetPacket>& log, MsgType type, int endpoint) {
  size_t n = 0;
  for (const NetPacket& p : log) n += p.type() == type && p.endpoint == endpoint;
  return n;
}

TEST(ProgressJoin, RanksJoinAndGetOneGrantAtTheSameInstant) {
  JoinSim sim;
  for (uint16_t r = 0; r < 3; ++r) sim.Add(Comm(r, 3)).BeginJoin(0);
  const TimePoint t0 = sim.clock().Now();
  ASSERT_TRUE(sim.Run());
  for (int r = 0; r < 3; ++r) {
    const Result<Grant> g = sim.rank(r).membership().result();
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(g->window, 8);
    EXPECT_EQ(g->epoch, 1);
    EXPECT_EQ(g->lease, 0);
  }
  EXPECT_EQ(sim.clock().Now(), t0);  // no resend needed: all within one round of fake time
  EXPECT_TRUE(sim.net().fabric().control().HasJob(7));
}

TEST(ProgressJoin, MissingRankTimesOutAfterExactlyJoinTimeoutResendingEvery100ms) {
  JoinSim sim;
  std::vector<NetPacket> log;
  sim.net().filter = [&](const NetPacket& p) {
    if (p.up) log.push_back(p);
    return Verdict{};
  };
  sim.Add(Comm(0, 2)).BeginJoin(0);  // rank 1 never starts
  const TimePoint t0 = sim.clock().Now();
  ASSERT_TRUE(sim.Run());
  const Status s = sim.rank(0).membership().status();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  // The fabric's join_pending (answers to the resends) named who was missing.
  EXPECT_TRUE(Has(s,
                  "no join_ack within 1000 ms: 1 of 2 ranks joined the job at the switch; rank "
                  "1 has not (did it start, with this switch as its INA_SWITCH?)"))
      << s.ToString();
  EXPECT_EQ(sim.clock().Now() - t0, milliseconds(1000));
  EXPECT_EQ(Count(log, MsgType::kJoin, 0), 10u);  // at 0, 100, ..., 900 ms
  EXPECT_EQ(Count(log, MsgType::kLeave, 0), 0u);
}

TEST(ProgressJoin, RankWithAnotherWorldSizeIsRefusedAndItsPeerHearsAtOnce) {
  JoinSim sim;
  sim.Add(Comm(0, 2)).BeginJoin(0);
  ASSERT_FALSE(sim.Run(milliseconds(1)));  // rank 0 fixes the world size, 2
  sim.Add(Comm(1, 3)).BeginJoin(0);
  const TimePoint t1 = sim.clock().Now();
  ASSERT_TRUE(sim.Run());
  EXPECT_EQ(sim.clock().Now(), t1);  // no timer: both answered at once
  const Status s1 = sim.rank(1).membership().status();
  EXPECT_EQ(s1.code(), StatusCode::kInvalidArgument) << s1.ToString();
  EXPECT_TRUE(Has(s1, "this rank's world size 3 differs from 2")) << s1.ToString();
  const Status s0 = sim.rank(0).membership().status();
  EXPECT_EQ(s0.code(), StatusCode::kAborted) << s0.ToString();
  EXPECT_TRUE(Has(s0, "rank 1's JOIN was refused")) << s0.ToString();
  EXPECT_TRUE(Has(s0, "its world size 3 differs from 2, this rank's")) << s0.ToString();
}

TEST(ProgressJoin, QueuedJobGivesUpAtSlotWaitTimeoutAndLeavesTheQueue) {
  FabricConfig fc;
  fc.pool_slots = 8;  // job 7 takes them all; job 9 waits
  JoinSim sim(fc);
  sim.Add(Comm(0, 1)).BeginJoin(0);
  ASSERT_TRUE(sim.Run());
  ASSERT_TRUE(sim.rank(0).membership().result().ok());
  CommConfig other = Comm(0, 1);
  other.job_id = 9;
  sim.Add(other).BeginJoin(0);
  const TimePoint t1 = sim.clock().Now();
  ASSERT_TRUE(sim.Run());
  const Status s = sim.rank(1).membership().status();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_TRUE(Has(s, "waited 3000 ms for slots")) << s.ToString();
  EXPECT_EQ(sim.clock().Now() - t1, milliseconds(3000));  // from the first join_wait, at t1
  EXPECT_EQ(dp::Get(sim.net().fabric().control().counters(), dp::ControlCounter::kJoinWaits),
            30u);  // one per JOIN: at 0, 100, ..., 2900 ms
  ASSERT_EQ(sim.net().fabric().leaves().size(), 3u);
  EXPECT_EQ(sim.net().fabric().leaves()[0].job, 9);
  EXPECT_EQ(sim.net().fabric().control().queued_jobs(), 0u);
  EXPECT_FALSE(sim.net().fabric().control().HasJob(9));
  EXPECT_TRUE(sim.net().fabric().control().HasJob(7));
}

TEST(ProgressJoin, QueuedJobIsGrantedWhenTheHolderLeaves) {
  FabricConfig fc;
  fc.pool_slots = 8;
  JoinSim sim(fc);
  sim.Add(Comm(0, 1)).BeginJoin(0);
  ASSERT_TRUE(sim.Run());
  CommConfig other = Comm(0, 1);
  other.job_id = 9;
  sim.Add(other).BeginJoin(0);
  ASSERT_FALSE(sim.Run(milliseconds(250)));
  EXPECT_EQ(sim.rank(1).membership().state(), State::kQueued);
  sim.rank(0).SendLeave(ErrorCode::kNone, 0);  // job 7 ends: its slots go to job 9
  ASSERT_TRUE(sim.Run());
  const Result<Grant> g = sim.rank(1).membership().result();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->window, 8);
}

TEST(ProgressJoin, ReJoinAtTheLeasesEndGetsTheNextEpoch) {
  FabricConfig fc;
  fc.lease_calls = 4;
  JoinSim sim(fc);
  for (uint16_t r = 0; r < 2; ++r) sim.Add(Comm(r, 2)).BeginJoin(0);
  ASSERT_TRUE(sim.Run());
  const Result<Grant> first = sim.rank(0).membership().result();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->lease, 4);
  // Rank 0 re-joins first and waits for rank 1 (the fabric answers nothing while pending, and
  // the old grant's join_ack would not count); then rank 1 re-joins.
  sim.rank(0).BeginJoin(first->epoch);
  ASSERT_FALSE(sim.Run(milliseconds(350)));
  EXPECT_EQ(sim.rank(0).membership().state(), State::kJoining);
  sim.rank(1).BeginJoin(first->epoch);
  ASSERT_TRUE(sim.Run());
  for (int r = 0; r < 2; ++r) {
    const Result<Grant> g = sim.rank(r).membership().result();
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(g->epoch, first->epoch + 1);
    EXPECT_EQ(g->window, 8);
  }
  EXPECT_EQ(dp::Get(sim.net().fabric().control().counters(), dp::ControlCounter::kRegrants), 1u);
}

// Keyed ranks through the real control plane: each JOIN is challenged and proven; a rank holding
// another secret never joins (nothing of it is admitted) and says why at its timeout.
TEST(ProgressJoin, KeyedRanksProveTheSecretAndAWrongSecretIsNotAdmitted) {
  const auto secret = TestSecret(1);
  auto keyed = [&](uint16_t rank, const std::vector<uint8_t>& s) {
    CommConfig c = Comm(rank, 2);
    c.sec = "mac";
    c.job_secret = JobSecret(s);
    return c;
  };
  {
    JoinSim sim;
    ASSERT_TRUE(sim.net().fabric().InstallJobKey(7, proto::SecMode::kMac, secret).ok());
    for (uint16_t r = 0; r < 2; ++r) sim.Add(keyed(r, secret)).BeginJoin(0);
    ASSERT_TRUE(sim.Run());
    for (int r = 0; r < 2; ++r) {
      const Result<Grant> g = sim.rank(r).membership().result();
      ASSERT_TRUE(g.ok()) << g.status().ToString();
    }
    const auto& ctl = sim.net().fabric().control().counters();
    EXPECT_EQ(dp::Get(ctl, dp::ControlCounter::kJoinChallenges), 2u);
    EXPECT_EQ(dp::Get(ctl, dp::ControlCounter::kJoinsProven), 2u);
    EXPECT_EQ(dp::Get(ctl, dp::ControlCounter::kJoinsUnproven), 0u);
  }
  {
    JoinSim sim;
    ASSERT_TRUE(sim.net().fabric().InstallJobKey(7, proto::SecMode::kMac, secret).ok());
    sim.Add(keyed(0, secret)).BeginJoin(0);
    sim.Add(keyed(1, TestSecret(2))).BeginJoin(0);
    ASSERT_TRUE(sim.Run());
    const Status s = sim.rank(1).membership().status();
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
    EXPECT_TRUE(Has(s, "another secret")) << s.ToString();
    EXPECT_EQ(sim.rank(0).membership().status().code(), StatusCode::kDeadlineExceeded);
    EXPECT_FALSE(sim.net().fabric().control().Jobs().empty() &&
                 sim.net().fabric().control().Jobs()[0].active);
    EXPECT_GT(dp::Get(sim.net().fabric().control().counters(), dp::ControlCounter::kJoinsUnproven),
              0u);
  }
}

TEST(ProgressJoin, JoinWaitsOnAFabricThatIsNotUpWithoutSpinning) {
  FakeClock clock;
  FakeNet net(clock);
  net.Endpoint(0).recv_error = Unavailable("udp: recv: Connection refused");
  const CommConfig c = Comm(0, 2);
  Progress p(WindowConfig::From(c, c.window), JoinConfig::From(c, 0), quant::ActiveKernels(),
             net.Endpoint(0), clock);
  const TimePoint t0 = clock.Now();
  const Result<Grant> g = p.Join(0);  // blocks: the fake clock jumps where it would sleep
  EXPECT_EQ(g.status().code(), StatusCode::kDeadlineExceeded) << g.status().ToString();
  EXPECT_TRUE(Has(g.status(), "last transport error: UNAVAILABLE: udp: recv: Connection refused"));
  EXPECT_EQ(clock.Now() - t0, milliseconds(1000));
  EXPECT_EQ(net.Endpoint(0).sent, 10u);  // still resent every 100 ms
}

TEST(ProgressJoin, JoinStopsWhenCancelled) {
  FakeClock clock;
  FakeNet net(clock);
  const CommConfig c = Comm(0, 2);
  Progress p(WindowConfig::From(c, c.window), JoinConfig::From(c, 0), quant::ActiveKernels(),
             net.Endpoint(0), clock);
  std::atomic<bool> cancel{true};
  const Result<Grant> g = p.Join(0, &cancel);
  EXPECT_EQ(g.status().code(), StatusCode::kAborted) << g.status().ToString();
  EXPECT_FALSE(p.membership().joining());
}

}  // namespace
}  // namespace ina::host::internal
