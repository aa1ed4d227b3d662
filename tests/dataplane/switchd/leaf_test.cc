// Unit tests of a leaf of two-level aggregation (ina/dp/switchd/leaf.h) over the reference
// engine and a real control plane, with a fake clock and a sink that records every packet: the
// rank partition, the join through the spine, partials up and finals down, the upstream RTO, a
// worker's retransmission while the partial is upstream and after the final came, duplicates
// from the spine, errors both ways.
#include "ina/dp/switchd/leaf.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "ina/dp/ref_engine.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/sec.h"
#include "ina/proto/wire.h"

namespace ina::dp::switchd {
namespace {

namespace p = ::ina::proto;
using TimePoint = Leaf::TimePoint;
using std::chrono::milliseconds;

constexpr uint16_t kJob = 9;
constexpr uint16_t kWorld = 8;  // 2 leaves: this one (index 1) serves ranks 4..7
constexpr uint16_t kK = 64;
constexpr uint16_t kWindow = 16;  // asked by the workers
constexpr uint16_t kGranted = 8;  // granted by the spine

Peer MakePeer(uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  return Peer::From(reinterpret_cast<const sockaddr*>(&sa), sizeof(sa));
}

std::vector<uint8_t> Message(const p::Header& h, const std::vector<int32_t>& payload = {}) {
  std::vector<uint8_t> b(p::MessageBytes(payload.size()));
  p::EncodeHeader(h, b.data());
  for (size_t i = 0; i < payload.size(); ++i) {
    const uint32_t v = static_cast<uint32_t>(payload[i]);
    uint8_t* e = b.data() + p::kHeaderBytes + 4 * i;
    e[0] = static_cast<uint8_t>(v >> 24);
    e[1] = static_cast<uint8_t>(v >> 16);
    e[2] = static_cast<uint8_t>(v >> 8);
    e[3] = static_cast<uint8_t>(v);
  }
  p::SealMessage(b.data(), b.size() - p::kCrcBytes);
  return b;
}

// A worker's JOIN of job kJob (world kWorld, K kK, window kWindow) as global rank `rank`.
// A worker's JOIN (global rank `rank`), or its re-join of grant `rejoin_epoch` (0: a first join).
p::Header WorkerJoin(uint16_t rank, uint8_t rejoin_epoch = 0, uint32_t window = kWindow) {
  return p::JoinMsg{.rejoin_epoch = rejoin_epoch,
                    .job = kJob,
                    .rank = rank,
                    .k = kK,
                    .window = window,
                    .world_size = kWorld}
      .ToHeader();
}

int32_t Elem(const std::vector<uint8_t>& b, size_t i) {
  const uint8_t* e = b.data() + p::kHeaderBytes + 4 * i;
  return static_cast<int32_t>((uint32_t{e[0]} << 24) | (uint32_t{e[1]} << 16) |
                              (uint32_t{e[2]} << 8) | e[3]);
}

// The spine's join_challenge to this leaf (leaf 1, lane 0) for job kJob: nonce and salt `c`, the
// key's `mode` (0: not said).
std::vector<uint8_t> SpineChallenge(const p::JoinChallenge& c, uint16_t mode = 0) {
  std::vector<uint8_t> b(p::MessageBytes(p::kJoinChallengeBytes / p::kElemBytes));
  p::JoinChallengeMsg{.job = kJob,
                      .rank = 1,
                      .lane = 0,
                      .payload_words = p::kJoinChallengeBytes / p::kElemBytes,
                      .mode = mode}
      .Encode(b.data());
  c.EncodeTo(b.data() + p::kHeaderBytes);
  p::SealMessage(b.data(), b.size() - p::kCrcBytes);
  return b;
}

struct Sent {
  Peer to;
  std::vector<uint8_t> bytes;
  p::Header h() const { return p::DecodeHeader(bytes.data()); }
};

// The switch core around a leaf, as switch.cc wires it.
class LeafHarness : public LeafSink, public Emitter {
 public:
  // `rx_queue`: messages the core's socket holds (ControlConfig::rx_queue; 0: no limit).
  // `lane` of `lanes`: this leaf core's lane of the leaf's rank at the spine (LeafConfig).
  // `admin`, `upstream_admin`: the leaf's admin secret and the spine's (LeafConfig: keys passed
  // on); empty, none.
  explicit LeafHarness(uint32_t pool_slots = 256, size_t rx_queue = 0, uint16_t lane = 0,
                       uint16_t lanes = 1, std::vector<uint8_t> admin = {},
                       std::vector<uint8_t> upstream_admin = {}) {
    engine_ = MakeReferenceEngine({pool_slots, 16});
    ControlConfig cc;
    cc.lease_calls = 0;
    cc.engine_keys = false;  // as ina-switchd configures a leaf's control plane
    cc.doom_unknown = false;
    if (rx_queue != 0) cc.rx_queue = [rx_queue](size_t) { return rx_queue; };
    cc.admin_secret = std::move(admin);
    control_ = std::move(ControlPlane::Create(*engine_, cc)).value();
    LeafConfig lc;
    lc.upstream_admin = std::move(upstream_admin);
    lc.log = [this](const std::string& line) { logs.push_back(line); };
    lc.upstream = spine;
    lc.index = 1;
    lc.leaves = 2;
    lc.rto = {1000, 5000, 200000, 1};
    lc.lane = lane;
    lc.lanes = lanes;
    leaf_ = std::make_unique<Leaf>(lc, *control_, *this);
    for (uint16_t r = 0; r < 4; ++r) workers.push_back(MakePeer(static_cast<uint16_t>(6000 + r)));
  }

  void SendTo(const Peer& to, std::span<const uint8_t> packet, bool) override {
    // Every packet out carries its trailer: a CRC32C, or a keyed job's tag (opened by the tests).
    if (p::GetSec(packet.data()) == 0) {
      ASSERT_TRUE(p::MessageCrcOk(packet)) << "every packet out carries its trailer";
    }
    sent.push_back({to, {packet.begin(), packet.end()}});
  }
  void OnResult(uint16_t job, uint16_t dest, std::span<const uint8_t> packet) override {
    leaf_->OnEngineResult(job, dest, packet, now);
  }

  void FromWorker(uint16_t local, const std::vector<uint8_t>& b) {
    const Peer& from = workers[local];
    if (ControlPlane::IsControlType(p::GetType(b.data()))) {
      leaf_->HandleWorkerControl(b, from, now);
      return;
    }
    std::vector<uint8_t> scratch(p::kMaxPacketBytes);
    const auto mapped = leaf_->MapData(b, from, scratch.data());
    const auto m = mapped.packet;
    if (m.empty()) {
      if (mapped.foreign) ++foreign;
      return;
    }
    if (control_->CheckDataSource(p::GetJob(m.data()), p::GetRank(m.data()), p::GetSlot(m.data()),
                                  from, now) == SourceCheck::kForeign) {
      ++foreign;
      return;
    }
    engine_->Process(m, *this);
  }
  void FromSpine(const std::vector<uint8_t>& b) { leaf_->HandleUpstream(b, now); }
  void FromPeer(const Peer& from, const std::vector<uint8_t>& b) {
    leaf_->HandleWorkerControl(b, from, now);
  }
  void Tick() {
    (void)control_->Tick(now, leaf_->replies());
    leaf_->Tick(now);
  }

  std::vector<Sent> Take() { return std::exchange(sent, {}); }
  std::vector<Sent> TakeTo(const Peer& to) {
    std::vector<Sent> out, rest;
    for (auto& s : sent) (s.to == to ? out : rest).push_back(std::move(s));
    sent = std::move(rest);
    return out;
  }
  uint64_t Count(LeafCounter c) const { return leaf_->counters()[static_cast<size_t>(c)]; }
  uint64_t Count(ControlCounter c) const { return control_->counters()[static_cast<size_t>(c)]; }
  std::pair<p::SecMode, std::vector<uint8_t>> KeyOf(uint16_t job) const {
    const auto [mode, secret] = control_->KeyOf(job);
    return {mode, {secret.begin(), secret.end()}};
  }
  // The job's key at the leaf (its admin channel's, or ina-jobkey's, set_key).
  Status InstallKey(p::SecMode mode, std::span<const uint8_t> secret) {
    return control_->InstallJobKey(kJob, mode, secret);
  }

  // Every worker joins; the spine grants kGranted; every worker gets its join_ack (unless
  // `expect_acks` is false).
  void JoinAll(bool expect_acks = true) {
    for (uint16_t l = 0; l < 4; ++l) {
      const p::Header h = WorkerJoin(static_cast<uint16_t>(4 + l));
      FromWorker(l, Message(h));
    }
    auto up = TakeTo(spine);
    ASSERT_EQ(up.size(), 1u) << "one JOIN to the spine";
    EXPECT_EQ(up[0].h().type, p::MsgType::kJoin);
    EXPECT_EQ(up[0].h().rank, 1);
    EXPECT_EQ(up[0].h().aux, 2) << "world = leaves";
    EXPECT_EQ(p::JoinMsg::From(up[0].h()).tree_world, kWorld) << "the workers' world size";
    EXPECT_EQ(up[0].h().count, kK);
    EXPECT_EQ(up[0].h().offset, kWindow);
    EXPECT_TRUE(Take().empty()) << "workers wait for the spine";
    FromSpine(Message(
        p::JoinAckMsg{.job = kJob, .rank = 1, .epoch = 3, .k = kK, .window = kGranted, .lease = 64}
            .ToHeader()));
    for (uint16_t l = 0; l < 4; ++l) {  // the workers' JOIN resends
      const p::Header h = WorkerJoin(static_cast<uint16_t>(4 + l));
      FromWorker(l, Message(h));
    }
    if (!expect_acks) return;
    auto acks = Take();
    ASSERT_EQ(acks.size(), 4u);
    for (uint16_t l = 0; l < 4; ++l) {
      EXPECT_EQ(acks[l].to, workers[l]);
      EXPECT_EQ(acks[l].h().type, p::MsgType::kJoinAck);
      EXPECT_EQ(acks[l].h().rank, 4 + l) << "the worker's global rank";
      EXPECT_EQ(acks[l].h().offset, kGranted) << "the spine's window";
      EXPECT_EQ(acks[l].h().aux, 64) << "the spine's lease";
    }
  }

  // Worker `local` sends int32 block (slot, gen) = value at every element.
  std::vector<uint8_t> Data(uint16_t local, uint16_t slot, uint16_t gen, int32_t value,
                            bool retx = false) {
    const p::DataMsg h{
        .flags = static_cast<uint8_t>(p::flags::kInt32 | (retx ? p::flags::kRetx : 0)),
        .job = kJob,
        .rank = static_cast<uint16_t>(4 + local),
        .slot = slot,
        .gen = gen,
        .count = kK,
        .offset = uint32_t{slot} * kK};
    return Message(h.ToHeader(), std::vector<int32_t>(kK, value));
  }

  TimePoint now = TimePoint() + std::chrono::hours(1);
  Peer spine = MakePeer(5000);
  std::vector<Peer> workers;
  std::vector<Sent> sent;
  std::vector<std::string> logs;
  int foreign = 0;

 private:
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ControlPlane> control_;
  std::unique_ptr<Leaf> leaf_;
};

// A leaf whose socket holds 24 messages serves 4 workers: it asks the spine for no more than 6
// slots (4 x 6 fit), so the spine's grant is one its own control plane gives the workers whole
// (a larger one would end the job: the leaf's grant must be the spine's).
TEST(Leaf, AsksTheSpineForNoMoreThanItsSocketHoldsForItsWorkers) {
  LeafHarness t(256, 24);
  for (uint16_t l = 0; l < 4; ++l)
    t.FromWorker(l, Message(WorkerJoin(static_cast<uint16_t>(4 + l))));
  auto up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].h().type, p::MsgType::kJoin);
  EXPECT_EQ(up[0].h().offset, 6u) << "the window asked upstream";
  t.FromSpine(
      Message(p::JoinAckMsg{.job = kJob, .rank = 1, .epoch = 1, .k = kK, .window = 6, .lease = 0}
                  .ToHeader()));
  for (uint16_t l = 0; l < 4; ++l)
    t.FromWorker(l, Message(WorkerJoin(static_cast<uint16_t>(4 + l))));
  auto acks = t.Take();
  ASSERT_EQ(acks.size(), 4u);
  for (const Sent& a : acks) {
    EXPECT_EQ(a.h().type, p::MsgType::kJoinAck);
    EXPECT_EQ(a.h().offset, 6u);
  }
  EXPECT_EQ(t.Count(LeafCounter::kNoSlots), 0u);
}

// Workers asking different windows: while the spine has not granted, a smaller ask makes the
// leaf ask the spine again for the least; once granted, a worker asking less than the grant is
// refused naming it, and one asking more gets the grant.
TEST(Leaf, WorkersAskingLessMakeTheLeafAskLessUntilTheGrant) {
  LeafHarness t;
  auto join = [&](uint16_t l, uint32_t window) {
    p::JoinMsg m{.job = kJob,
                 .rank = static_cast<uint16_t>(4 + l),
                 .k = kK,
                 .window = window,
                 .world_size = kWorld};
    t.FromWorker(l, Message(m.ToHeader()));
  };
  join(0, 16);
  join(1, 10);  // less: asked again
  join(2, 12);  // more than the least: nothing new
  auto up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 2u);
  EXPECT_EQ(up[0].h().offset, 16u);
  EXPECT_EQ(up[1].h().offset, 10u);
  EXPECT_TRUE(t.Take().empty());
  t.FromSpine(
      Message(p::JoinAckMsg{.job = kJob, .rank = 1, .epoch = 1, .k = kK, .window = 10, .lease = 0}
                  .ToHeader()));
  for (uint16_t l = 0; l < 3; ++l) join(l, 16);  // asking at least the grant: in
  EXPECT_TRUE(t.Take().empty()) << "the local job waits for worker 3";
  join(3, 4);  // less than the grant: refused, naming it
  auto refused = t.TakeTo(t.workers[3]);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].h().type, p::MsgType::kError);
  EXPECT_EQ(refused[0].h().aux, static_cast<uint16_t>(p::ErrorCode::kBadParams));
  EXPECT_EQ(refused[0].h().slot, static_cast<uint16_t>(p::JoinParam::kWindow));
  EXPECT_EQ(refused[0].h().offset, 10u);
  // The job cannot start without worker 3: the others and the spine hear why.
  auto others = t.Take();
  ASSERT_EQ(others.size(), 6u) << "3 LEAVEs up, 3 workers";
  for (const Sent& o : others) {
    if (o.to == t.spine) {
      EXPECT_EQ(o.h().type, p::MsgType::kLeave);
      continue;
    }
    const auto e = p::ErrorMsg::From(o.h());
    EXPECT_EQ(e.code, p::ErrorCode::kPeerRefused);
    EXPECT_EQ(e.refused_rank(), 7);
    EXPECT_EQ(e.join_param(), p::JoinParam::kWindow);
    EXPECT_EQ(e.refused_value(), 4u) << "what worker 3 asked";
  }
}

TEST(RanksOfLeaf, PartitionEveryWorldInContiguousBalancedRuns) {
  for (uint16_t world = 1; world <= p::kMaxWorkers; ++world) {
    for (uint16_t leaves = 1; leaves <= world; ++leaves) {
      uint16_t next = 0;
      for (uint16_t i = 0; i < leaves; ++i) {
        const LeafRanks r = RanksOfLeaf(i, leaves, world);
        ASSERT_EQ(r.lo, next) << world << " " << leaves << " " << i;
        ASSERT_GE(r.n, world / leaves);
        ASSERT_LE(r.n, (world + leaves - 1) / leaves);
        for (uint16_t x = r.lo; x < r.lo + r.n; ++x) ASSERT_EQ(x * leaves / world, i);
        next = static_cast<uint16_t>(r.lo + r.n);
      }
      ASSERT_EQ(next, world);
    }
  }
}

TEST(Leaf, JoinGoesThroughTheSpineAndRanksAreMapped) {
  LeafHarness t;
  t.JoinAll();
  // A rank leaf 0 serves is refused, naming the rank.
  const p::Header h = WorkerJoin(2);
  t.FromWorker(0, Message(h));
  auto r = t.Take();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].h().aux, static_cast<uint16_t>(p::ErrorCode::kBadParams));
  EXPECT_EQ(r[0].h().slot, static_cast<uint16_t>(p::JoinParam::kRank));
  EXPECT_EQ(t.Count(LeafCounter::kForeignRank), 1u);
}

TEST(Leaf, PartialGoesUpOnceAndTheFinalComesDownToEveryWorker) {
  LeafHarness t;
  t.JoinAll();
  for (uint16_t l = 0; l < 3; ++l) t.FromWorker(l, t.Data(l, 2, 0, 10 + l));
  EXPECT_TRUE(t.Take().empty()) << "incomplete: nothing";
  t.FromWorker(1, t.Data(1, 2, 0, 11, true));  // a duplicate never counts twice
  t.FromWorker(3, t.Data(3, 2, 0, 13));
  auto up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 1u);
  EXPECT_TRUE(t.Take().empty()) << "the partial does not go to the workers";
  const p::Header u = up[0].h();
  EXPECT_EQ(u.type, p::MsgType::kData);
  EXPECT_EQ(u.rank, 1) << "the leaf's rank on the spine";
  EXPECT_EQ(u.slot, 2);
  EXPECT_EQ(u.gen, 0);
  EXPECT_EQ(u.offset, 2u * kK);
  EXPECT_EQ(u.flags & p::flags::kRetx, 0);
  EXPECT_NE(u.flags & p::flags::kInt32, 0);
  for (size_t i = 0; i < kK; ++i) ASSERT_EQ(Elem(up[0].bytes, i), 10 + 11 + 12 + 13);

  // A worker lost nothing yet but retransmits while the partial is upstream: nothing.
  t.FromWorker(0, t.Data(0, 2, 0, 10, true));
  EXPECT_TRUE(t.Take().empty());
  EXPECT_EQ(t.Count(LeafCounter::kResendPending), 1u);

  // The spine's result (to this leaf) goes to every worker as a result for every rank.
  p::Header res = u;
  res.type = p::MsgType::kResult;
  res.rank = 1;
  const auto result = Message(res, std::vector<int32_t>(kK, 1000));
  t.FromSpine(result);
  auto down = t.Take();
  ASSERT_EQ(down.size(), 4u);
  for (uint16_t l = 0; l < 4; ++l) {
    EXPECT_EQ(down[l].to, t.workers[l]);
    EXPECT_EQ(down[l].h().type, p::MsgType::kResult);
    EXPECT_EQ(down[l].h().rank, p::kRankAll);
    EXPECT_EQ(Elem(down[l].bytes, 0), 1000);
  }
  // The same result again (the spine re-sent it): counted, nothing sent.
  t.FromSpine(result);
  EXPECT_TRUE(t.Take().empty());
  EXPECT_EQ(t.Count(LeafCounter::kUpDupResults), 1u);
  // A worker that lost the final retransmits: it gets the final, not the partial.
  t.FromWorker(2, t.Data(2, 2, 0, 12, true));
  auto again = t.Take();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].to, t.workers[2]);
  EXPECT_EQ(Elem(again[0].bytes, 0), 1000);
  EXPECT_EQ(t.Count(LeafCounter::kDownResends), 1u);
  // No retransmission upstream after the result.
  t.now += milliseconds(500);
  t.Tick();
  EXPECT_TRUE(t.TakeTo(t.spine).empty());
}

TEST(Leaf, PartialIsResentUpstreamOnItsTimeoutWithRetxUntilTheResult) {
  LeafHarness t;
  t.JoinAll();
  for (uint16_t l = 0; l < 4; ++l) t.FromWorker(l, t.Data(l, 0, 0, 1));
  auto first = t.TakeTo(t.spine);
  ASSERT_EQ(first.size(), 1u);
  t.now += milliseconds(1);
  t.Tick();
  EXPECT_TRUE(t.TakeTo(t.spine).empty()) << "before the initial RTO (5 ms)";
  t.now += milliseconds(10);
  t.Tick();
  auto r1 = t.TakeTo(t.spine);
  ASSERT_EQ(r1.size(), 1u);
  EXPECT_NE(r1[0].h().flags & p::flags::kRetx, 0);
  EXPECT_EQ(
      std::vector<uint8_t>(r1[0].bytes.begin() + p::kHeaderBytes, r1[0].bytes.end() - 4),
      std::vector<uint8_t>(first[0].bytes.begin() + p::kHeaderBytes, first[0].bytes.end() - 4))
      << "the same partial";
  // Backoff: the next try waits twice as long.
  t.now += milliseconds(6);
  t.Tick();
  EXPECT_TRUE(t.TakeTo(t.spine).empty());
  t.now += milliseconds(6);
  t.Tick();
  EXPECT_EQ(t.TakeTo(t.spine).size(), 1u);
  EXPECT_EQ(t.Count(LeafCounter::kUpRetx), 2u);
}

TEST(Leaf, SpineErrorEndsTheLocalJobForEveryWorkerAndLaterJoins) {
  LeafHarness t;
  t.JoinAll();
  t.FromSpine(Message(p::ErrorMsg{.job = kJob, .rank = 1, .code = p::ErrorCode::kRankMismatch}
                          .set_proving_rank(0)  // leaf 0 proved it: its first rank is 0
                          .set_mismatch_slot(3)
                          .set_mismatch_gen(7)
                          .ToHeader()));
  auto errs = t.Take();
  ASSERT_EQ(errs.size(), 4u);
  for (uint16_t l = 0; l < 4; ++l) {
    EXPECT_EQ(errs[l].to, t.workers[l]);
    EXPECT_EQ(errs[l].h().aux, static_cast<uint16_t>(p::ErrorCode::kRankMismatch));
    EXPECT_EQ(errs[l].h().rank, 4 + l);
    EXPECT_EQ(errs[l].h().slot, 3);
    EXPECT_EQ(errs[l].h().gen, 7);
  }
  // Data of the job is no longer aggregated; a JOIN hears the error.
  t.FromWorker(0, t.Data(0, 0, 0, 1));
  const p::Header h = WorkerJoin(5);
  t.FromWorker(1, Message(h));
  auto r = t.Take();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].h().aux, static_cast<uint16_t>(p::ErrorCode::kRankMismatch));
  EXPECT_EQ(r[0].h().rank, 5);
}

// The spine refuses this leaf's JOIN before any grant: its workers' world size (the tree_world it
// sent) is not the one the other leaf's workers sent. Every worker hears the refusal at its next
// JOIN resend, as it would from a flat switch, not at its join timeout.
TEST(Leaf, ASpineRefusalWhileJoiningReachesEveryWorkerAtItsNextJoin) {
  LeafHarness t;
  for (uint16_t l = 0; l < 4; ++l)
    t.FromWorker(l, Message(WorkerJoin(static_cast<uint16_t>(4 + l))));
  auto up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(p::JoinMsg::From(up[0].h()).tree_world, kWorld);
  EXPECT_TRUE(t.Take().empty()) << "workers wait for the spine";
  t.FromSpine(Message(p::ErrorMsg{.job = kJob, .rank = 1, .code = p::ErrorCode::kBadParams}
                          .set_join_param(p::JoinParam::kWorldSize)
                          .set_job_value(4)
                          .ToHeader()));
  for (uint16_t l = 0; l < 4; ++l)
    t.FromWorker(l, Message(WorkerJoin(static_cast<uint16_t>(4 + l))));
  auto errs = t.Take();
  ASSERT_EQ(errs.size(), 4u);
  for (uint16_t l = 0; l < 4; ++l) {
    EXPECT_EQ(errs[l].to, t.workers[l]);
    EXPECT_EQ(errs[l].h().aux, static_cast<uint16_t>(p::ErrorCode::kBadParams));
    EXPECT_EQ(errs[l].h().rank, 4 + l);
    EXPECT_EQ(errs[l].h().slot, static_cast<uint16_t>(p::JoinParam::kWorldSize));
    EXPECT_EQ(errs[l].h().offset, 4u) << "the other leaf's workers' world size";
  }
  EXPECT_TRUE(t.TakeTo(t.spine).empty()) << "a refused leaf does not join again";
}

// A LEAVE peer_refused the leaf (rank 1 on the spine) sent up, naming `worker`, `param` and the
// value it sent.
void ExpectLeaveRefused(const Sent& u, uint16_t worker, p::JoinParam param, uint32_t value) {
  const auto leave = p::LeaveMsg::From(u.h());
  EXPECT_EQ(u.h().type, p::MsgType::kLeave);
  EXPECT_EQ(leave.rank, 1) << "the leaf's rank on the spine";
  EXPECT_EQ(leave.reason, static_cast<uint16_t>(p::ErrorCode::kPeerRefused));
  EXPECT_EQ(leave.refused_rank, worker);
  EXPECT_EQ(leave.join_param, param);
  EXPECT_EQ(leave.calls, value);
}

// What the leaf sends the spine and its workers when it refused a worker's JOIN while its part of
// the job was joining: LEAVE peer_refused (thrice) naming the worker, the parameter and the value,
// and error(peer_refused), tree_rank 1, to every worker at once or at its next JOIN.
void ExpectRefusedBelow(LeafHarness& t, uint16_t worker, p::JoinParam param, uint32_t value,
                        const std::vector<uint16_t>& told_at_once,
                        const std::vector<uint16_t>& told_later) {
  auto up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 3u);
  for (const Sent& u : up) ExpectLeaveRefused(u, worker, param, value);
  auto expect_told = [&](const Sent& s, uint16_t local) {
    EXPECT_EQ(s.to, t.workers[local]);
    const auto e = p::ErrorMsg::From(s.h());
    EXPECT_EQ(s.h().type, p::MsgType::kError);
    EXPECT_EQ(e.code, p::ErrorCode::kPeerRefused);
    EXPECT_EQ(e.rank, 4 + local);
    EXPECT_EQ(e.refused_rank(), worker);
    EXPECT_EQ(e.join_param(), param);
    EXPECT_EQ(e.refused_value(), value);
    EXPECT_EQ(e.tree_rank(), 1);
  };
  // The local control plane's own copy (tree_rank 0, the same rank) may come first.
  auto now = t.Take();
  std::erase_if(now, [](const Sent& s) { return p::ErrorMsg::From(s.h()).tree_rank() == 0; });
  ASSERT_EQ(now.size(), told_at_once.size());
  for (size_t i = 0; i < now.size(); ++i) expect_told(now[i], told_at_once[i]);
  for (uint16_t l : told_later) {
    t.FromWorker(l, Message(WorkerJoin(static_cast<uint16_t>(4 + l))));
    auto r = t.Take();
    ASSERT_EQ(r.size(), 1u);
    expect_told(r[0], l);
  }
  t.now += milliseconds(500);
  t.Tick();
  EXPECT_TRUE(t.TakeTo(t.spine).empty()) << "a doomed job does not join again";
  EXPECT_EQ(t.Count(LeafCounter::kUpRefusals), 1u);
}

// Before the spine's grant: worker 6 says the world has 4 ranks where 4 and 5 said 8.
TEST(Leaf, AWorkerRefusedBeforeTheSpinesGrantDoomsTheJob) {
  LeafHarness t;
  t.FromWorker(0, Message(WorkerJoin(4)));
  t.FromWorker(1, Message(WorkerJoin(5)));
  EXPECT_EQ(t.TakeTo(t.spine).size(), 1u);
  p::Header h = WorkerJoin(6);
  h.aux = 4;
  t.FromWorker(2, Message(h));
  auto refused = t.TakeTo(t.workers[2]);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(p::ErrorMsg::From(refused[0].h()).code, p::ErrorCode::kBadParams);
  EXPECT_EQ(p::ErrorMsg::From(refused[0].h()).job_value(), kWorld);
  ExpectRefusedBelow(t, 6, p::JoinParam::kWorldSize, 4, {}, {0, 1, 3});
}

// The leaf's first JOIN of the job is from a rank the other leaf serves (rank 2, its INA_SWITCH
// set to this leaf): the leaf joins the spine and, right after, sends LEAVE peer_refused, so that
// the spine dooms the job for the other leaf too, which would otherwise wait out its workers'
// join timeout. This leaf's own workers hear the refusal at their JOINs.
TEST(Leaf, AForeignRankAsTheFirstJoinDoomsTheJobUpTheTree) {
  LeafHarness t;
  t.FromPeer(MakePeer(7000), Message(WorkerJoin(2)));
  auto refused = t.TakeTo(MakePeer(7000));
  ASSERT_EQ(refused.size(), 1u);
  const auto e = p::ErrorMsg::From(refused[0].h());
  EXPECT_EQ(e.code, p::ErrorCode::kBadParams);
  EXPECT_EQ(e.join_param(), p::JoinParam::kRank);
  EXPECT_EQ(e.job_value(), p::kJoinValueNone);
  auto up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 4u);
  EXPECT_EQ(up[0].h().type, p::MsgType::kJoin) << "a member first, so the LEAVE counts";
  EXPECT_EQ(p::JoinMsg::From(up[0].h()).tree_world, kWorld);
  for (size_t i = 1; i < 4; ++i) ExpectLeaveRefused(up[i], 2, p::JoinParam::kRank, 2);
  t.FromWorker(0, Message(WorkerJoin(4)));
  auto told = t.Take();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].to, t.workers[0]);
  const auto pr = p::ErrorMsg::From(told[0].h());
  EXPECT_EQ(pr.code, p::ErrorCode::kPeerRefused);
  EXPECT_EQ(pr.rank, 4);
  EXPECT_EQ(pr.refused_rank(), 2);
  EXPECT_EQ(pr.tree_rank(), 1);
  t.now += milliseconds(500);
  t.Tick();
  EXPECT_TRUE(t.TakeTo(t.spine).empty()) << "a doomed job does not join again";
  EXPECT_EQ(t.Count(LeafCounter::kUpRefusals), 1u);
  EXPECT_EQ(t.Count(LeafCounter::kForeignRank), 1u);
}

// After the spine's grant, while the local job waits for its last worker: the local control
// plane refuses worker 6's JOIN (another K), or takes rank 6 as joined from another address.
TEST(Leaf, AWorkerTheLocalControlPlaneRefusesWhileJoiningDoomsTheJob) {
  for (const bool taken : {false, true}) {
    SCOPED_TRACE(taken ? "rank taken" : "another K");
    LeafHarness t;
    for (uint16_t l = 0; l < 3; ++l)
      t.FromWorker(l, Message(WorkerJoin(static_cast<uint16_t>(4 + l))));
    EXPECT_EQ(t.TakeTo(t.spine).size(), 1u);
    t.FromSpine(Message(
        p::JoinAckMsg{.job = kJob, .rank = 1, .epoch = 3, .k = kK, .window = kGranted}.ToHeader()));
    for (uint16_t l = 0; l < 3; ++l)
      t.FromWorker(l, Message(WorkerJoin(static_cast<uint16_t>(4 + l))));
    EXPECT_TRUE(t.Take().empty()) << "the local job waits for worker 7";
    if (taken) {
      t.FromPeer(MakePeer(7000), Message(WorkerJoin(6)));
      auto refused = t.TakeTo(MakePeer(7000));
      ASSERT_EQ(refused.size(), 1u);
      EXPECT_EQ(p::ErrorMsg::From(refused[0].h()).code, p::ErrorCode::kRankTaken);
      ExpectRefusedBelow(t, 6, p::JoinParam::kRankTaken, 0, {0, 1, 2}, {3});
    } else {
      p::Header h = WorkerJoin(7);
      h.count = 256;
      t.FromWorker(3, Message(h));
      auto refused = t.TakeTo(t.workers[3]);
      ASSERT_EQ(refused.size(), 1u);
      EXPECT_EQ(p::ErrorMsg::From(refused[0].h()).code, p::ErrorCode::kBadParams);
      ExpectRefusedBelow(t, 7, p::JoinParam::kK, 256, {0, 1, 2}, {});
    }
  }
}

// Once every local worker is in, the job runs on: a refusal answers the refused JOIN only, as a
// flat switch does for a job every rank joined.
TEST(Leaf, ARefusalOnceEveryWorkerIsInLeavesTheJobAlone) {
  LeafHarness t;
  t.JoinAll();
  p::Header h = WorkerJoin(5);
  h.aux = 4;
  t.FromPeer(MakePeer(7000), Message(h));
  ASSERT_EQ(t.TakeTo(MakePeer(7000)).size(), 1u);
  t.FromWorker(0, Message(p::JoinMsg{
                      .job = kJob, .rank = 4, .k = 256, .window = kWindow, .world_size = kWorld}
                              .ToHeader()));
  ASSERT_EQ(t.TakeTo(t.workers[0]).size(), 1u) << "another K: refused";
  EXPECT_TRUE(t.Take().empty()) << "nothing up, nothing to the others";
  EXPECT_EQ(t.Count(LeafCounter::kUpRefusals), 0u);
  for (uint16_t l = 0; l < 4; ++l) t.FromWorker(l, t.Data(l, 0, 0, 1));
  EXPECT_EQ(t.TakeTo(t.spine).size(), 1u) << "the partial goes up";
}

// A spine's peer_refused names a leaf (tree_rank 0: mapped to its first worker) or, passed on from
// a leaf, a worker of the tree (tree_rank 1: as it is).
TEST(Leaf, ASpineRefusalNamesALeafOrAWorkerAsItSays) {
  for (const uint8_t tree_rank : {0, 1}) {
    LeafHarness t;
    t.JoinAll();
    t.FromSpine(Message(p::ErrorMsg{.job = kJob, .rank = 1, .code = p::ErrorCode::kPeerRefused}
                            .set_join_param(p::JoinParam::kK)
                            .set_refused_rank(1)
                            .set_refused_value(256)
                            .set_tree_rank(tree_rank)
                            .ToHeader()));
    auto errs = t.Take();
    ASSERT_EQ(errs.size(), 4u);
    for (const Sent& e : errs) {
      EXPECT_EQ(p::ErrorMsg::From(e.h()).refused_rank(), tree_rank ? 1 : 4)
          << "leaf 1 of 2 in a world of 8 starts at rank 4";
    }
  }
}

TEST(Leaf, APoolThatCannotGiveTheSpinesWindowEndsTheJob) {
  LeafHarness t(4);  // the spine grants 8
  t.JoinAll(false);
  auto up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 3u);
  EXPECT_EQ(up[0].h().type, p::MsgType::kLeave);
  EXPECT_NE(up[0].h().aux, 0);
  auto errs = t.Take();
  ASSERT_EQ(errs.size(), 4u) << "no join_ack with another window: every worker an error";
  for (const auto& e : errs) {
    EXPECT_EQ(e.h().type, p::MsgType::kError);
    EXPECT_EQ(e.h().aux, static_cast<uint16_t>(p::ErrorCode::kNoSlots));
  }
  EXPECT_EQ(t.Count(LeafCounter::kNoSlots), 1u);
}

// Leaf core 1 of 2 under a spine at one port (--upstream-core-ports 0): its workers number its
// slots and blocks densely, the spine's job numbers both cores' together (docs/protocol.md,
// "Lanes on switch cores"). The leaf asks the spine for twice its workers' window, sends slot s
// up as 2s + 1 (offset likewise) and turns the result back.
TEST(Leaf, ALaneAtTheSpineNumbersItsCoresSlotsAsTheSpineDoes) {
  LeafHarness t(256, 0, 1, 2);
  for (uint16_t l = 0; l < 4; ++l)
    t.FromWorker(l, Message(WorkerJoin(static_cast<uint16_t>(4 + l))));
  auto up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].h().type, p::MsgType::kJoin);
  EXPECT_EQ(up[0].h().slot, 1) << "lane 1";
  EXPECT_EQ(up[0].h().gen, 2) << "of 2";
  EXPECT_EQ(up[0].h().offset, 2u * kWindow) << "the spine's window: both cores'";
  t.FromSpine(
      Message(p::JoinAckMsg{.job = kJob, .rank = 1, .epoch = 3, .k = kK, .window = 16, .lease = 64}
                  .ToHeader()));
  for (uint16_t l = 0; l < 4; ++l)
    t.FromWorker(l, Message(WorkerJoin(static_cast<uint16_t>(4 + l))));
  auto acks = t.Take();
  ASSERT_EQ(acks.size(), 4u);
  for (const auto& a : acks) EXPECT_EQ(a.h().offset, 8u) << "this core's half of 16";

  for (uint16_t l = 0; l < 4; ++l) t.FromWorker(l, t.Data(l, 2, 0, 10 + l));
  up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].h().slot, 5) << "slot 2 of lane 1 of 2";
  EXPECT_EQ(up[0].h().offset, 5u * kK);
  for (size_t i = 0; i < kK; ++i) ASSERT_EQ(Elem(up[0].bytes, i), 10 + 11 + 12 + 13);

  p::Header res = up[0].h();
  res.type = p::MsgType::kResult;
  res.slot = 4;  // lane 0's: not this core's
  res.offset = 4u * kK;
  t.FromSpine(Message(res, std::vector<int32_t>(kK, 1000)));
  EXPECT_TRUE(t.Take().empty());
  EXPECT_EQ(t.Count(LeafCounter::kUpStale), 1u);
  res.slot = 5;
  res.offset = 5u * kK;
  t.FromSpine(Message(res, std::vector<int32_t>(kK, 1000)));
  auto down = t.Take();
  ASSERT_EQ(down.size(), 4u);
  for (const auto& d : down) {
    EXPECT_EQ(d.h().type, p::MsgType::kResult);
    EXPECT_EQ(d.h().slot, 2) << "this core's numbers again";
    EXPECT_EQ(d.h().offset, 2u * kK);
    EXPECT_EQ(d.h().rank, p::kRankAll);
    EXPECT_EQ(Elem(d.bytes, 0), 1000);
  }
  // A spine error naming a slot names it in this core's numbers too.
  t.FromSpine(Message(p::ErrorMsg{.job = kJob, .rank = 1, .code = p::ErrorCode::kRankMismatch}
                          .set_proving_rank(1)
                          .set_mismatch_slot(7)
                          .set_mismatch_gen(1)
                          .ToHeader()));
  auto errs = t.Take();
  ASSERT_EQ(errs.size(), 4u);
  for (const auto& e : errs) EXPECT_EQ(e.h().slot, 3) << "slot 3 of lane 1 of 2 is the spine's 7";
}

// A spine grant that both cores cannot share alike ends the job, as one the pool cannot give.
TEST(Leaf, ALaneGrantedAWindowNotAMultipleOfTheLanesEndsTheJob) {
  LeafHarness t(256, 0, 0, 2);
  for (uint16_t l = 0; l < 4; ++l)
    t.FromWorker(l, Message(WorkerJoin(static_cast<uint16_t>(4 + l))));
  ASSERT_EQ(t.TakeTo(t.spine).size(), 1u);
  t.FromSpine(
      Message(p::JoinAckMsg{.job = kJob, .rank = 1, .epoch = 3, .k = kK, .window = 15, .lease = 64}
                  .ToHeader()));
  t.Tick();
  auto up = t.TakeTo(t.spine);
  ASSERT_GE(up.size(), 1u);
  EXPECT_EQ(up[0].h().type, p::MsgType::kLeave);
  EXPECT_NE(up[0].h().aux, 0);
  for (uint16_t l = 0; l < 4; ++l)
    t.FromWorker(l, Message(WorkerJoin(static_cast<uint16_t>(4 + l))));
  auto errs = t.Take();
  ASSERT_EQ(errs.size(), 4u);
  for (const auto& e : errs) {
    EXPECT_EQ(e.h().type, p::MsgType::kError);
    EXPECT_EQ(e.h().aux, static_cast<uint16_t>(p::ErrorCode::kNoSlots));
  }
  EXPECT_EQ(t.Count(LeafCounter::kNoSlots), 1u);
}

// Its workers idle between calls keep the job alive here with their JOINs; the leaf keeps it at
// the spine: a JOIN of its rank every third of the spine's job timeout (30 s when its join_ack
// does not say), whose answer is no news.
// Lanes on switch cores whose cores granted different windows re-join those above the least
// asking it (a leaf on every core: its core's window is the spine core's grant). When every local
// rank re-joined the local grant asking less, the leaf re-joins the spine (its epoch) asking the
// least, and the spine's new grant reaches the workers through a new local grant. A JOIN asking
// less that is no re-join of the grant is still refused.
TEST(Leaf, WorkersReJoiningAskingLessReJoinTheSpineForIt) {
  LeafHarness t;
  t.JoinAll();  // the spine's grant: kGranted (8), epoch 3
  // The local grant's epoch, from a join_ack resent to a worker.
  t.FromWorker(0, Message(WorkerJoin(4)));
  auto resent = t.Take();
  ASSERT_EQ(resent.size(), 1u);
  const uint8_t local_epoch = p::JoinAckMsg::From(resent[0].h()).epoch;
  ASSERT_NE(local_epoch, 0);
  auto rejoin = [&](uint16_t l, uint8_t epoch, uint32_t window) {
    t.FromWorker(l, Message(WorkerJoin(static_cast<uint16_t>(4 + l), epoch, window)));
  };
  rejoin(0, static_cast<uint8_t>(local_epoch + 1), 4);  // not this grant's: refused
  auto refused = t.Take();
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].h().type, p::MsgType::kError);
  EXPECT_EQ(refused[0].h().slot, static_cast<uint16_t>(p::JoinParam::kWindow));
  // Rank 7's re-join from rank 4's address: not rank 7's, refused and not counted.
  t.FromWorker(0, Message(WorkerJoin(7, local_epoch, 4)));
  refused = t.Take();
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].h().type, p::MsgType::kError);
  for (uint16_t l = 0; l < 3; ++l) rejoin(l, local_epoch, 4);
  EXPECT_TRUE(t.Take().empty()) << "the grant stands until every local rank asked";
  rejoin(3, local_epoch, 4);
  auto up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].h().type, p::MsgType::kJoin);
  EXPECT_EQ(p::JoinMsg::From(up[0].h()).rejoin_epoch, 3) << "a re-join of the spine's grant";
  EXPECT_EQ(up[0].h().offset, 4u) << "asking the least";
  EXPECT_TRUE(t.Take().empty()) << "the workers wait for the spine";
  t.now += milliseconds(150);
  t.Tick();
  up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 1u) << "resent until the spine answers";
  EXPECT_EQ(p::JoinMsg::From(up[0].h()).rejoin_epoch, 3);
  // The old grant's join_ack (an answer to an earlier keep-alive) is not the answer.
  t.FromSpine(Message(
      p::JoinAckMsg{.job = kJob, .rank = 1, .epoch = 3, .k = kK, .window = kGranted}.ToHeader()));
  for (uint16_t l = 0; l < 4; ++l) rejoin(l, local_epoch, 4);
  EXPECT_TRUE(t.Take().empty());
  t.FromSpine(
      Message(p::JoinAckMsg{.job = kJob, .rank = 1, .epoch = 4, .k = kK, .window = 4}.ToHeader()));
  for (uint16_t l = 0; l < 4; ++l) rejoin(l, local_epoch, 4);  // the workers' resends
  auto acks = t.Take();
  ASSERT_EQ(acks.size(), 4u) << "a new local grant once every rank re-joined";
  for (uint16_t l = 0; l < 4; ++l) {
    EXPECT_EQ(acks[l].to, t.workers[l]);
    EXPECT_EQ(acks[l].h().type, p::MsgType::kJoinAck);
    EXPECT_EQ(acks[l].h().offset, 4u) << "the spine's new window";
    EXPECT_NE(p::JoinAckMsg::From(acks[l].h()).epoch, local_epoch) << "a new grant";
  }
  // The job runs on the new window: slot 3's partial goes up and its final comes down.
  for (uint16_t l = 0; l < 4; ++l) t.FromWorker(l, t.Data(l, 3, 0, l + 1));
  up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].h().type, p::MsgType::kData);
  EXPECT_EQ(up[0].h().slot, 3);
  EXPECT_EQ(Elem(up[0].bytes, 0), 10);
  auto result = up[0].bytes;
  p::SetType(result.data(), p::MsgType::kResult);
  p::SetRank(result.data(), p::kRankAll);
  p::SealMessage(result.data(), result.size() - p::kCrcBytes);
  t.FromSpine(result);
  EXPECT_EQ(t.Take().size(), 4u) << "the final to every worker";
  EXPECT_EQ(t.Count(LeafCounter::kNoSlots), 0u);
}

// A keyed job through the leaf: each hop under its own keys, the leaf opening and sealing. The
// workers prove the job secret to the leaf (over the headers they sent, global ranks) and seal
// their data under the local grant's up key with their global ranks; the leaf proves it to the
// spine and seals its partial under the spine grant's up key (its rank, the spine's slot, the
// use); the spine's result, opened under its down key, goes to the workers sealed under the local
// down key. Forged, replayed, CRC-only and misaddressed data never reach the engine.
class KeyedLeaf : public ::testing::TestWithParam<p::SecMode> {
 protected:
  const std::vector<uint8_t> secret_ = std::vector<uint8_t>(32, 0x5A);
  p::Session spine_salt_{};

  void SetUp() override {
    for (size_t i = 0; i < spine_salt_.size(); ++i) spine_salt_[i] = static_cast<uint8_t>(i * 7);
  }
  p::SecMode mode() const { return GetParam(); }
  uint8_t sec() const { return static_cast<uint8_t>(GetParam()); }

  // The JOIN of worker `local` (global rank 4 + local), proven against the challenge in `ch`.
  std::vector<uint8_t> Proof(uint16_t local, const Sent& ch, uint8_t rejoin_epoch = 0,
                             uint32_t window = kWindow) {
    std::vector<uint8_t> b(p::MessageBytes(0, static_cast<uint8_t>(p::SecMode::kMac)));
    p::Header h = WorkerJoin(static_cast<uint16_t>(4 + local), rejoin_epoch, window);
    h.sec = static_cast<uint8_t>(p::SecMode::kMac);
    p::EncodeHeader(h, b.data());
    const auto c = p::JoinChallenge::From(ch.bytes.data() + p::kHeaderBytes);
    EXPECT_TRUE(p::SealJoinProof(secret_, c, b.data()).ok());
    return b;
  }
  // The job's key at the leaf, then worker 0's JOIN, its challenge (returned) and its proof: the
  // leaf's JOIN goes up.
  Sent FirstProvenJoin(LeafHarness& t) {
    EXPECT_TRUE(t.InstallKey(mode(), secret_).ok());
    t.FromWorker(0, Message(WorkerJoin(4)));
    auto sent = t.Take();
    EXPECT_EQ(sent.size(), 1u);
    if (sent.empty()) return {};
    EXPECT_EQ(sent[0].h().type, p::MsgType::kJoinChallenge) << "nothing of the job before a proof";
    EXPECT_EQ(sent[0].h().rank, 4);
    t.FromWorker(0, Proof(0, sent[0]));
    return sent[0];
  }
  // Every worker's JOIN, its challenge and its proof, once the spine granted: the acks.
  std::vector<Sent> ProveAll(LeafHarness& t) {
    for (uint16_t l = 0; l < 4; ++l) t.FromWorker(l, Message(WorkerJoin(4 + l)));
    auto challenges = t.Take();
    EXPECT_EQ(challenges.size(), 4u);
    for (uint16_t l = 0; l < 4 && l < challenges.size(); ++l) {
      EXPECT_EQ(challenges[l].h().type, p::MsgType::kJoinChallenge);
      EXPECT_EQ(challenges[l].h().rank, 4 + l) << "the worker's own rank";
      t.FromWorker(l, Proof(l, challenges[l]));
    }
    return t.Take();
  }
  p::TrafficKey Key(p::KeyDirection dir, uint64_t grant, const p::Session& salt) {
    auto k = p::DeriveTrafficKey(secret_, dir, kJob, grant, salt);
    EXPECT_TRUE(k.ok());
    return k.ok() ? *k : p::TrafficKey{};
  }
  // Worker `local`'s int32 block (slot, gen) = value, sealed for `use` under `up`.
  std::vector<uint8_t> Data(uint16_t local, uint16_t slot, uint16_t gen, uint64_t use,
                            int32_t value, const p::TrafficKey& up) {
    const uint16_t rank = static_cast<uint16_t>(4 + local);
    p::Header h = p::DataMsg{.flags = p::flags::kInt32,
                             .job = kJob,
                             .rank = rank,
                             .slot = slot,
                             .gen = gen,
                             .count = kK,
                             .offset = uint32_t{slot} * kK}
                      .ToHeader();
    h.sec = sec();
    std::vector<uint8_t> b(p::MessageBytes(kK, sec()));
    p::EncodeHeader(h, b.data());
    for (size_t i = 0; i < kK; ++i) {
      const uint32_t v = static_cast<uint32_t>(value);
      uint8_t* e = b.data() + p::kHeaderBytes + 4 * i;
      e[0] = static_cast<uint8_t>(v >> 24);
      e[1] = static_cast<uint8_t>(v >> 16);
      e[2] = static_cast<uint8_t>(v >> 8);
      e[3] = static_cast<uint8_t>(v);
    }
    EXPECT_TRUE(
        p::SealOnce(up, mode(), b.data(), p::kHeaderBytes + 4 * kK, p::MakeNonce(rank, slot, use)));
    return b;
  }
  // The plaintext of a sealed message (header and payload, a CRC trailer) or empty if it does not
  // open under `key` with `nonce`.
  std::vector<uint8_t> Open(const std::vector<uint8_t>& b, const p::TrafficKey& key,
                            const p::Nonce& nonce) {
    if (b.size() < p::kHeaderBytes + p::kTagBytes) return {};
    const size_t payload = b.size() - p::kHeaderBytes - p::kTagBytes;
    std::vector<uint8_t> plain(p::kHeaderBytes + payload + p::kCrcBytes);
    std::memcpy(plain.data(), b.data(), p::kHeaderBytes + payload);
    if (!p::OpenOnce(key, mode(), b, nonce, plain.data() + p::kHeaderBytes)) return {};
    return plain;
  }
};

// A keyed job whose first JOIN at this leaf is a rank another leaf serves (rank 2, proven): the
// spine takes a LEAVE only from a member, which a keyed job's leaf becomes at its proof, so the
// LEAVE peer_refused sent with the JOIN is sent again right after the proof.
TEST_P(KeyedLeaf, AForeignRanksRefusalReachesTheSpineOnceTheJoinIsProven) {
  LeafHarness t;
  ASSERT_TRUE(t.InstallKey(mode(), secret_).ok());
  const Peer stray = MakePeer(7000);
  t.FromPeer(stray, Message(WorkerJoin(2)));
  auto ch = t.TakeTo(stray);
  ASSERT_EQ(ch.size(), 1u);
  ASSERT_EQ(ch[0].h().type, p::MsgType::kJoinChallenge);
  std::vector<uint8_t> proof(p::MessageBytes(0, static_cast<uint8_t>(p::SecMode::kMac)));
  p::Header h = WorkerJoin(2);
  h.sec = static_cast<uint8_t>(p::SecMode::kMac);
  p::EncodeHeader(h, proof.data());
  ASSERT_TRUE(p::SealJoinProof(secret_,
                               p::JoinChallenge::From(ch[0].bytes.data() + p::kHeaderBytes),
                               proof.data())
                  .ok());
  t.FromPeer(stray, proof);
  auto refused = t.TakeTo(stray);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(p::ErrorMsg::From(refused[0].h()).code, p::ErrorCode::kBadParams);
  auto up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 4u) << "the JOIN, then LEAVE peer_refused thrice";
  EXPECT_EQ(up[0].h().type, p::MsgType::kJoin);
  // The spine challenges the JOIN: the proof, then the LEAVEs again.
  const p::JoinChallenge sc{.nonce = p::JoinNonce{1, 2, 3}, .salt = spine_salt_};
  t.FromSpine(SpineChallenge(sc));
  auto after = t.TakeTo(t.spine);
  ASSERT_EQ(after.size(), 4u);
  EXPECT_TRUE(p::JoinProofOk(secret_, sc, after[0].bytes));
  for (size_t i = 1; i < 4; ++i) ExpectLeaveRefused(after[i], 2, p::JoinParam::kRank, 2);
  // Once: a later challenge of the doomed job is stale.
  t.FromSpine(SpineChallenge(sc));
  EXPECT_TRUE(t.TakeTo(t.spine).empty());
}

TEST_P(KeyedLeaf, EachHopIsSealedUnderItsOwnKeys) {
  LeafHarness t;
  const Sent first = FirstProvenJoin(t);
  ASSERT_FALSE(first.bytes.empty());
  auto up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 1u) << "the proven JOIN goes up";
  EXPECT_EQ(up[0].h().type, p::MsgType::kJoin);
  // The spine challenges the leaf: its proof, of the JOIN it sent, under the job's secret.
  const p::JoinChallenge ch{.nonce = p::JoinNonce{1, 2, 3}, .salt = spine_salt_};
  t.FromSpine(SpineChallenge(ch));
  auto proof = t.TakeTo(t.spine);
  ASSERT_EQ(proof.size(), 1u);
  EXPECT_EQ(proof[0].h().sec, static_cast<uint8_t>(p::SecMode::kMac));
  EXPECT_EQ(proof[0].h().rank, 1);
  EXPECT_TRUE(p::JoinProofOk(secret_, ch, proof[0].bytes));
  EXPECT_EQ(t.Count(LeafCounter::kUpProofs), 1u);
  t.FromSpine(Message(
      p::JoinAckMsg{.job = kJob, .rank = 1, .epoch = 3, .k = kK, .window = kGranted}.ToHeader()));
  auto acks = ProveAll(t);
  ASSERT_EQ(acks.size(), 4u);
  for (const Sent& a : acks) {
    EXPECT_EQ(a.h().type, p::MsgType::kJoinAck);
    EXPECT_EQ(a.h().offset, kGranted);
  }
  // The local grant's keys: grant 1 under the leaf's salt, which its challenges carry.
  const p::Session local_salt = p::JoinChallenge::From(first.bytes.data() + p::kHeaderBytes).salt;
  const p::TrafficKey up_key = Key(p::KeyDirection::kUp, 1, local_salt);
  const p::TrafficKey down_key = Key(p::KeyDirection::kDown, 1, local_salt);
  const p::TrafficKey spine_up = Key(p::KeyDirection::kUp, 1, spine_salt_);
  const p::TrafficKey spine_down = Key(p::KeyDirection::kDown, 1, spine_salt_);

  // Bad data first: none of it reaches the engine.
  auto forged = Data(0, 3, 0, 0, 100, up_key);
  forged[p::kHeaderBytes + 5] ^= 1;
  t.FromWorker(0, forged);
  t.FromWorker(0, Data(0, 3, 0, 0, 100, Key(p::KeyDirection::kUp, 2, local_salt)));  // grant 2's
  t.FromWorker(0, t.Data(0, 3, 0, 100));                                             // CRC-only
  t.FromWorker(1, Data(0, 3, 0, 0, 100, up_key));  // rank 4's, from rank 5's address
  EXPECT_EQ(t.Count(LeafCounter::kDataForged), 2u);
  EXPECT_EQ(t.Count(LeafCounter::kDataCrossJob), 1u);
  EXPECT_EQ(t.foreign, 1);
  EXPECT_TRUE(t.Take().empty());

  for (uint16_t l = 0; l < 4; ++l) t.FromWorker(l, Data(l, 3, 0, 0, l + 1, up_key));
  up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 1u) << "one partial up, the forged block not in it";
  EXPECT_EQ(up[0].h().type, p::MsgType::kData);
  EXPECT_EQ(up[0].h().sec, sec());
  EXPECT_EQ(up[0].h().rank, 1);
  ASSERT_EQ(up[0].bytes.size(), p::MessageBytes(kK, sec()));
  EXPECT_TRUE(Open(up[0].bytes, spine_up, p::MakeNonce(1, 2, 0)).empty()) << "another slot";
  const auto partial = Open(up[0].bytes, spine_up, p::MakeNonce(1, 3, 0));
  ASSERT_FALSE(partial.empty()) << "sealed under the spine's up key, nonce (leaf, slot, use 0)";
  EXPECT_EQ(Elem(partial, 0), 10);
  EXPECT_EQ(Elem(partial, kK - 1), 10);
  if (mode() == p::SecMode::kMacEncrypt) {
    EXPECT_NE(Elem(up[0].bytes, 0), 10) << "the partial crosses encrypted";
  }

  // The spine's result: sealed under its down key for every rank; a forged copy first.
  std::vector<uint8_t> result(p::MessageBytes(kK, sec()));
  std::memcpy(result.data(), partial.data(), p::kHeaderBytes + 4 * kK);
  p::SetType(result.data(), p::MsgType::kResult);
  p::SetRank(result.data(), p::kRankAll);
  p::SetSec(result.data(), sec());
  ASSERT_TRUE(p::SealOnce(spine_down, mode(), result.data(), p::kHeaderBytes + 4 * kK,
                          p::MakeNonce(p::kRankAll, 3, 0)));
  auto bad = result;
  bad[p::kHeaderBytes] ^= 0x80;
  t.FromSpine(bad);
  EXPECT_EQ(t.Count(LeafCounter::kUpForged), 1u);
  EXPECT_TRUE(t.Take().empty());
  t.FromSpine(result);
  auto finals = t.Take();
  ASSERT_EQ(finals.size(), 4u);
  for (const Sent& f : finals) {
    EXPECT_EQ(f.h().type, p::MsgType::kResult);
    EXPECT_EQ(f.h().rank, p::kRankAll);
    EXPECT_EQ(f.h().sec, sec());
    const auto plain = Open(f.bytes, down_key, p::MakeNonce(p::kRankAll, 3, 0));
    ASSERT_FALSE(plain.empty()) << "sealed under the local down key";
    EXPECT_EQ(Elem(plain, 0), 10);
  }
  // A worker that lost its final asks again (a retransmission of its block): the same final.
  t.FromWorker(2, Data(2, 3, 0, 0, 3, up_key));
  auto again = t.Take();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].to, t.workers[2]);
  EXPECT_EQ(again[0].bytes, finals[2].bytes);
  // The slot's next use: gen 1, use 1 under the same grant.
  for (uint16_t l = 0; l < 4; ++l) t.FromWorker(l, Data(l, 3, 1, 1, 2 * (l + 1), up_key));
  up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 1u);
  const auto second = Open(up[0].bytes, spine_up, p::MakeNonce(1, 3, 1));
  ASSERT_FALSE(second.empty()) << "use 1";
  EXPECT_EQ(Elem(second, 0), 20);
  EXPECT_EQ(t.Count(LeafCounter::kKeyMismatch), 0u);
}

// A slot used 65537 times: its 16-bit gen wrapped, so a worker's packet of use 1 has use 65537's
// gen. Sent again then, it fails the tag under use 65537 and verifies under use 1: counted as a
// replay, not summed. (The leaf counts a slot's uses without wrapping, as the engine does.)
TEST_P(KeyedLeaf, AReplayAfterTheGenerationWrapsIsCounted) {
  LeafHarness t;
  ASSERT_TRUE(t.InstallKey(mode(), secret_).ok());
  for (uint16_t l = 0; l < 4; ++l) t.FromWorker(l, Message(WorkerJoin(4 + l)));
  auto ch = t.Take();
  ASSERT_EQ(ch.size(), 4u);
  for (uint16_t l = 0; l < 4; ++l) t.FromWorker(l, Proof(l, ch[l]));
  t.FromSpine(SpineChallenge({.nonce = {}, .salt = spine_salt_}));
  t.FromSpine(Message(
      p::JoinAckMsg{.job = kJob, .rank = 1, .epoch = 3, .k = kK, .window = kGranted}.ToHeader()));
  ASSERT_EQ(t.TakeTo(t.spine).size(), 2u) << "the JOIN and its proof";
  ASSERT_EQ(ProveAll(t).size(), 4u);
  const p::Session local_salt = p::JoinChallenge::From(ch[0].bytes.data() + p::kHeaderBytes).salt;
  const p::TrafficKey up_key = Key(p::KeyDirection::kUp, 1, local_salt);
  const p::TrafficKey spine_down = Key(p::KeyDirection::kDown, 1, spine_salt_);
  std::vector<uint8_t> use1;
  std::vector<uint8_t> result(p::MessageBytes(kK, sec()));
  for (uint64_t use = 0; use <= 65537; ++use) {
    const auto gen = static_cast<uint16_t>(use);
    for (uint16_t l = 0; l < 4; ++l) {
      auto d = Data(l, 0, gen, use, 1, up_key);
      if (use == 1 && l == 0) use1 = d;
      if (use == 65537 && l == 0) {
        t.FromWorker(0, use1);  // use 1's packet again: the same gen
        ASSERT_EQ(t.Count(LeafCounter::kDataReplayed), 1u);
      }
      t.FromWorker(l, d);
    }
    t.sent.clear();
    // The spine's result for the partial (its header: the engine's, as the leaf sent it up).
    p::Header h = p::DataMsg{.flags = p::flags::kInt32,
                             .job = kJob,
                             .rank = p::kRankAll,
                             .slot = 0,
                             .gen = gen,
                             .count = kK,
                             .offset = 0}
                      .ToHeader();
    h.type = p::MsgType::kResult;
    h.sec = sec();
    p::EncodeHeader(h, result.data());
    ASSERT_TRUE(p::SealOnce(spine_down, mode(), result.data(), p::kHeaderBytes + 4 * kK,
                            p::MakeNonce(p::kRankAll, 0, use)));
    t.FromSpine(result);
    if (t.Count(LeafCounter::kUpResults) != use + 1) {
      FAIL() << "use " << use << ": the spine's result was not taken (forged "
             << t.Count(LeafCounter::kUpForged) << ", stale " << t.Count(LeafCounter::kUpStale)
             << ")";
    }
  }
  EXPECT_EQ(t.Count(LeafCounter::kDataReplayed), 1u);
  EXPECT_EQ(t.Count(LeafCounter::kDataForged), 0u);
  EXPECT_EQ(t.Count(LeafCounter::kUpResults), 65538u);
}

// A job keyed at the leaf whose spine grants it unchallenged (the spine holds no key): its
// partials would cross open. The workers get error(unauthorized), the spine an aborting LEAVE.
TEST_P(KeyedLeaf, ASpineWithoutTheKeyEndsTheJob) {
  LeafHarness t;
  ASSERT_FALSE(FirstProvenJoin(t).bytes.empty());
  ASSERT_EQ(t.TakeTo(t.spine).size(), 1u);
  t.FromSpine(Message(
      p::JoinAckMsg{.job = kJob, .rank = 1, .epoch = 3, .k = kK, .window = kGranted}.ToHeader()));
  auto up = t.TakeTo(t.spine);
  ASSERT_FALSE(up.empty());
  EXPECT_EQ(up[0].h().type, p::MsgType::kLeave);
  EXPECT_NE(up[0].h().aux, 0) << "aborting";
  EXPECT_EQ(t.Count(LeafCounter::kKeyMismatch), 1u);
  auto acks = ProveAll(t);  // later JOINs, proven, get the job's error
  ASSERT_EQ(acks.size(), 4u);
  for (const Sent& e : acks) {
    EXPECT_EQ(e.h().type, p::MsgType::kError);
    EXPECT_EQ(e.h().aux, static_cast<uint16_t>(p::ErrorCode::kUnauthorized));
  }
}

// The spine holds the key in the other mode: it would drop every partial as cross-job. The leaf
// ends the job at its challenge instead, no proof sent.
TEST_P(KeyedLeaf, ASpineKeyInAnotherModeEndsTheJob) {
  LeafHarness t;
  ASSERT_FALSE(FirstProvenJoin(t).bytes.empty());
  ASSERT_EQ(t.TakeTo(t.spine).size(), 1u);
  const auto other = mode() == p::SecMode::kMac ? p::SecMode::kMacEncrypt : p::SecMode::kMac;
  t.FromSpine(SpineChallenge({.nonce = {}, .salt = spine_salt_}, static_cast<uint16_t>(other)));
  auto up = t.TakeTo(t.spine);
  ASSERT_FALSE(up.empty());
  EXPECT_EQ(up[0].h().type, p::MsgType::kLeave) << "no proof: an aborting LEAVE";
  EXPECT_EQ(t.Count(LeafCounter::kUpProofs), 0u);
  EXPECT_EQ(t.Count(LeafCounter::kKeyMismatch), 1u);
}

INSTANTIATE_TEST_SUITE_P(Modes, KeyedLeaf,
                         ::testing::Values(p::SecMode::kMac, p::SecMode::kMacEncrypt),
                         [](const auto& info) {
                           return info.param == p::SecMode::kMac ? "Mac" : "MacEncrypt";
                         });

// The spine challenges a job the leaf holds no key for: the leaf cannot prove the JOIN, and its
// workers (CRC-only here) get error(unauthorized).
TEST(Leaf, ASpineHoldingAKeyTheLeafDoesNotEndsTheJob) {
  LeafHarness t;
  for (uint16_t l = 0; l < 4; ++l) t.FromWorker(l, Message(WorkerJoin(4 + l)));
  ASSERT_EQ(t.TakeTo(t.spine).size(), 1u);
  t.FromSpine(SpineChallenge({}));
  auto up = t.TakeTo(t.spine);
  ASSERT_FALSE(up.empty());
  EXPECT_EQ(up[0].h().type, p::MsgType::kLeave) << "no proof: an aborting LEAVE";
  EXPECT_EQ(t.Count(LeafCounter::kUpProofs), 0u);
  EXPECT_EQ(t.Count(LeafCounter::kKeyMismatch), 1u);
  t.FromWorker(0, Message(WorkerJoin(4)));
  auto e = t.Take();
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].h().type, p::MsgType::kError);
  EXPECT_EQ(e[0].h().aux, static_cast<uint16_t>(p::ErrorCode::kUnauthorized));
}

TEST(Leaf, AnIdleJobIsKeptAliveAtTheSpine) {
  LeafHarness t;
  t.JoinAll();
  t.now += std::chrono::seconds(9);
  t.Tick();
  EXPECT_TRUE(t.TakeTo(t.spine).empty()) << "within a third of 30 s";
  t.now += std::chrono::seconds(2);
  t.Tick();
  auto up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].h().type, p::MsgType::kJoin);
  EXPECT_EQ(up[0].h().rank, 1);
  EXPECT_EQ(up[0].h().offset, kWindow) << "what it asked before: the spine's ask is unchanged";
  const uint64_t stale = t.Count(LeafCounter::kUpStale);
  t.FromSpine(Message(p::JoinAckMsg{.job = kJob,
                                    .rank = 1,
                                    .job_timeout_ms = 3000,
                                    .epoch = 3,
                                    .k = kK,
                                    .window = kGranted,
                                    .lease = 64}
                          .ToHeader()));
  EXPECT_TRUE(t.Take().empty());
  EXPECT_EQ(t.Count(LeafCounter::kUpStale), stale) << "the keep-alive's answer is not stale";
  t.now += std::chrono::seconds(9);
  t.Tick();
  EXPECT_EQ(t.TakeTo(t.spine).size(), 1u);
}

// A spine that says its job timeout sets the pace: 3 s, a JOIN every second.
TEST(Leaf, TheSpinesJobTimeoutSetsTheKeepAlive) {
  LeafHarness t;
  for (uint16_t l = 0; l < 4; ++l) {
    t.FromWorker(l, Message(WorkerJoin(static_cast<uint16_t>(4 + l))));
  }
  ASSERT_EQ(t.TakeTo(t.spine).size(), 1u);
  t.FromSpine(Message(p::JoinAckMsg{
      .job = kJob, .rank = 1, .job_timeout_ms = 3000, .epoch = 1, .k = kK, .window = kGranted}
                          .ToHeader()));
  for (uint16_t l = 0; l < 4; ++l) {
    t.FromWorker(l, Message(WorkerJoin(static_cast<uint16_t>(4 + l))));
  }
  (void)t.Take();
  t.now += std::chrono::milliseconds(900);
  t.Tick();
  EXPECT_TRUE(t.TakeTo(t.spine).empty());
  t.now += std::chrono::milliseconds(200);
  t.Tick();
  EXPECT_EQ(t.TakeTo(t.spine).size(), 1u);
}

TEST(Leaf, AllocJobGoesToTheSpineWithTheLeafsOwnNonce) {
  LeafHarness t;
  auto alloc = [&](uint16_t local, uint16_t nonce) {
    t.FromWorker(local, Message(p::AllocJobMsg{.hint = 77, .nonce = nonce}.ToHeader()));
  };
  alloc(0, 5);
  alloc(1, 5);  // the same random nonce from another worker
  alloc(0, 5);  // a resend
  auto up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 3u);
  EXPECT_NE(up[0].h().gen, up[1].h().gen) << "two requests, two nonces on the spine";
  EXPECT_EQ(up[2].h().gen, up[0].h().gen) << "a resend keeps its nonce (the spine's same id)";
  EXPECT_EQ(up[0].h().type, p::MsgType::kAllocJob);
  EXPECT_EQ(t.Count(LeafCounter::kUpAllocs), 3u);
  EXPECT_TRUE(t.Take().empty());
  t.FromSpine(Message(
      p::AllocAckMsg{.job = 40000, .nonce = p::AllocAckMsg::From(up[1].h()).nonce}.ToHeader()));
  // The refusal carries the request's nonce in gen, as alloc_ack does.
  t.FromSpine(Message(
      p::ErrorMsg{.gen = p::AllocJobMsg::From(up[0].h()).nonce, .code = p::ErrorCode::kTooManyJobs}
          .ToHeader()));
  auto down = t.Take();
  ASSERT_EQ(down.size(), 2u);
  EXPECT_EQ(down[0].to, t.workers[1]);
  EXPECT_EQ(down[0].h().type, p::MsgType::kAllocAck);
  EXPECT_EQ(down[0].h().job, 40000);
  EXPECT_EQ(down[0].h().gen, 5) << "the worker's own nonce";
  EXPECT_EQ(down[1].to, t.workers[0]);
  EXPECT_EQ(down[1].h().aux, static_cast<uint16_t>(p::ErrorCode::kTooManyJobs));
  EXPECT_EQ(down[1].h().gen, 5);
}

TEST(Leaf, WorkerAbortIsALeaveUpstreamAndGracefulLeavesAreOne) {
  {
    LeafHarness t;
    t.JoinAll();
    t.FromWorker(
        2, Message(p::LeaveMsg{
               .job = kJob, .rank = 6, .reason = static_cast<uint16_t>(p::ErrorCode::kJobAborted)}
                       .ToHeader()));
    auto up = t.TakeTo(t.spine);
    ASSERT_EQ(up.size(), 3u) << "three copies";
    EXPECT_EQ(up[0].h().type, p::MsgType::kLeave);
    EXPECT_EQ(up[0].h().rank, 1);
    EXPECT_NE(up[0].h().aux, 0);
    EXPECT_EQ(t.Take().size(), 3u) << "the other workers: job_aborted";
  }
  {
    LeafHarness t;
    t.JoinAll();
    for (uint16_t w = 0; w < 4; ++w) {
      t.FromWorker(
          w, Message(p::LeaveMsg{.job = kJob, .rank = static_cast<uint16_t>(4 + w), .calls = 42}
                         .ToHeader()));
      auto up = t.TakeTo(t.spine);
      if (w < 3) {
        EXPECT_TRUE(up.empty()) << "worker " << w;
        continue;
      }
      ASSERT_EQ(up.size(), 3u);
      EXPECT_EQ(up[0].h().aux, 0) << "graceful";
      EXPECT_EQ(up[0].h().offset, 42u) << "calls";
    }
  }
}

// Keys passed on (LeafConfig::upstream_admin): a launcher's SET_KEY at the leaf is installed here,
// sealed again under the spine's admin secret and sent up (a real control plane plays the
// spine), resent under a fresh sequence until the spine acknowledges, and only then acknowledged
// to the launcher with its own sequence. One the spine never acknowledges is given up and logged.
TEST(Leaf, AKeyInstalledHereIsPassedOnAndAcknowledgedOnceTheSpineHasIt) {
  const std::vector<uint8_t> admin(32, 0x11), spine_admin(32, 0x22), secret(32, 0x5a);
  LeafHarness t(256, 0, 0, 1, admin, spine_admin);
  auto spine_engine = MakeReferenceEngine({256, 16});
  ControlConfig sc;
  sc.admin_secret = spine_admin;
  auto spine = std::move(ControlPlane::Create(*spine_engine, sc)).value();
  struct : ReplySink {
    void Send(const Peer&, std::span<const uint8_t> packet) override {
      acks.emplace_back(packet.begin(), packet.end());
    }
    std::vector<std::vector<uint8_t>> acks;
  } spine_out;
  auto spine_takes = [&](const Sent& s) {
    spine->HandleControl(s.bytes, MakePeer(5000), TimePoint{}, spine_out);
  };
  const Peer launcher = MakePeer(7000);
  const uint64_t seq = 1000;
  t.FromPeer(launcher, p::SealSetKey(admin, kJob, p::SecMode::kMac, secret, seq).value());
  EXPECT_EQ(t.KeyOf(kJob), std::make_pair(p::SecMode::kMac, secret)) << "installed here";
  auto up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].h().type, p::MsgType::kSetKey);
  EXPECT_TRUE(t.Take().empty()) << "the launcher hears once the spine has the key";
  // The launcher's resend while the spine's ack is awaited: neither a replay nor a new key.
  t.FromPeer(launcher, p::SealSetKey(admin, kJob, p::SecMode::kMac, secret, seq).value());
  EXPECT_TRUE(t.Take().empty());
  EXPECT_EQ(t.Count(ControlCounter::kAdminReplayed), 0u);
  // Resent under a fresh, higher sequence: the spine takes both (the same key, kept).
  t.now += milliseconds(100);
  t.Tick();
  auto again = t.TakeTo(t.spine);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].h().type, p::MsgType::kSetKey);
  EXPECT_GT(p::SetKeyMsg::Decode(again[0].bytes.data()).seq_lo,
            p::SetKeyMsg::Decode(up[0].bytes.data()).seq_lo);
  spine_takes(up[0]);
  spine_takes(again[0]);
  ASSERT_EQ(spine_out.acks.size(), 2u) << "sealed under the spine's admin secret";
  const auto [mode, spine_secret] = spine->KeyOf(kJob);
  EXPECT_EQ(mode, p::SecMode::kMac);
  EXPECT_TRUE(std::ranges::equal(spine_secret, secret));
  // The first ack is the launcher's; the second answers nothing pending any more.
  t.FromSpine(spine_out.acks[0]);
  auto acks = t.Take();
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].to, launcher);
  EXPECT_EQ(acks[0].h().type, p::MsgType::kSetKeyAck);
  EXPECT_EQ(acks[0].h().job, kJob);
  EXPECT_EQ(acks[0].h().offset, seq) << "the launcher's own sequence";
  t.FromSpine(spine_out.acks[1]);
  EXPECT_TRUE(t.Take().empty());
  EXPECT_EQ(t.Count(LeafCounter::kUpKeys), 2u);
  EXPECT_EQ(t.Count(LeafCounter::kUpKeyAcks), 1u);
  t.now += milliseconds(500);
  t.Tick();
  EXPECT_TRUE(t.Take().empty()) << "nothing resent once acknowledged";

  // A SET_KEY the leaf does not take (another admin secret) goes nowhere.
  t.FromPeer(launcher, p::SealSetKey(spine_admin, 10, p::SecMode::kMac, secret, seq + 1).value());
  EXPECT_TRUE(t.Take().empty());
  EXPECT_EQ(t.Count(ControlCounter::kAdminForged), 1u);

  // A spine that never acknowledges: resent every join_resend, given up after
  // key_forward_timeout (3 s), logged; the launcher never hears.
  t.FromPeer(launcher, p::SealSetKey(admin, 11, p::SecMode::kMac, secret, seq + 2).value());
  for (int i = 0; i < 40; ++i) {
    t.now += milliseconds(100);
    t.Tick();
  }
  auto sent = t.Take();
  EXPECT_EQ(sent.size(), 30u) << "the first send and a resend every 100 ms until 3 s";
  for (const Sent& x : sent) EXPECT_EQ(x.to, t.spine);
  EXPECT_EQ(t.Count(LeafCounter::kUpKeyTimeouts), 1u);
  ASSERT_EQ(t.logs.size(), 1u);
  EXPECT_NE(t.logs[0].find("did not acknowledge job 11's key"), std::string::npos) << t.logs[0];
}

// A key whose mode the spine's engine cannot run (an RTL core and mac_encrypt): the spine answers
// the leaf's SET_KEY with error(key_refused), which the leaf passes to the launcher under the
// launcher's own sequence, so it fails at once. A refusal of no key of ours is stale, and a mode
// the leaf itself cannot take is refused at the leaf, nothing sent up.
TEST(Leaf, AKeyTheSpineRefusesIsRefusedToItsSender) {
  const std::vector<uint8_t> admin(32, 0x11), spine_admin(32, 0x22), secret(32, 0x5a);
  LeafHarness t(256, 0, 0, 1, admin, spine_admin);
  const Peer launcher = MakePeer(7000);
  const uint64_t seq = 2000;
  t.FromPeer(launcher, p::SealSetKey(admin, kJob, p::SecMode::kMacEncrypt, secret, seq).value());
  auto up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 1u);
  const uint64_t up_seq = p::SetKeySeq(p::SetKeyMsg::Decode(up[0].bytes.data()));
  auto refusal = [](uint16_t job, uint64_t s) {
    const ControlMessage m = MakeControl(p::SetKeyRefused(job, s, 2));
    return std::vector<uint8_t>(m.begin(), m.end());
  };
  t.FromSpine(refusal(kJob, up_seq + 7));  // a sequence the leaf never sent
  EXPECT_TRUE(t.Take().empty());
  EXPECT_EQ(t.Count(LeafCounter::kUpStale), 1u);
  t.FromSpine(refusal(kJob, up_seq));
  auto got = t.Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].to, launcher);
  ASSERT_EQ(got[0].h().type, p::MsgType::kError);
  const auto e = p::ErrorMsg::From(got[0].h());
  EXPECT_EQ(e.code, p::ErrorCode::kKeyRefused);
  EXPECT_EQ(e.job, kJob);
  EXPECT_EQ(e.key_mode(), 2);
  EXPECT_EQ(p::SetKeySeq(e), seq) << "the launcher's own sequence";
  EXPECT_EQ(t.Count(LeafCounter::kUpKeyRefusals), 1u);
  EXPECT_EQ(t.Count(LeafCounter::kUpKeyAcks), 0u);
  t.now += milliseconds(500);
  t.Tick();
  EXPECT_TRUE(t.Take().empty()) << "nothing resent once refused";
  t.FromSpine(refusal(kJob, up_seq));  // again: answers nothing pending any more
  EXPECT_TRUE(t.Take().empty());
  EXPECT_EQ(t.Count(LeafCounter::kUpStale), 2u);

  // Mode 3, which no fabric takes: refused here at once.
  t.FromPeer(launcher,
             p::SealSetKey(admin, 12, static_cast<p::SecMode>(3), secret, seq + 1).value());
  got = t.Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].to, launcher);
  EXPECT_EQ(p::ErrorMsg::From(got[0].h()).code, p::ErrorCode::kKeyRefused);
  EXPECT_EQ(p::SetKeySeq(p::ErrorMsg::From(got[0].h())), seq + 1);
  EXPECT_EQ(t.Count(LeafCounter::kUpKeys), 1u) << "only the first went up";
}

// Who is missing, as the workers' join timeout will name it: while the spine waits for another
// leaf, its join_pending (leaves) reaches the workers as the missing leaf's ranks (scope 1);
// once the spine granted, the local control plane's (this leaf's ranks) reaches them with the
// missing worker's rank in the whole tree (scope 2).
TEST(Leaf, AWorkerIsToldWhoIsMissingAtTheSpineAndAtItsLeaf) {
  LeafHarness t;
  for (uint16_t l = 0; l < 4; ++l)
    t.FromWorker(l, Message(WorkerJoin(static_cast<uint16_t>(4 + l))));
  ASSERT_EQ(t.TakeTo(t.spine).size(), 1u);
  EXPECT_TRUE(t.Take().empty()) << "nothing known yet";
  // The spine has leaf 1 (this one) of 2: leaf 0, ranks 0..3, is missing.
  t.FromSpine(Message(
      p::JoinPendingMsg{.job = kJob, .rank = 1, .joined = 1, .missing_rank = 0, .world_size = 2}
          .ToHeader()));
  t.FromSpine(Message(  // nonsense: a leaf the tree does not have
      p::JoinPendingMsg{.job = kJob, .rank = 1, .joined = 1, .missing_rank = 2, .world_size = 2}
          .ToHeader()));
  EXPECT_EQ(t.Count(LeafCounter::kUpStale), 1u);
  t.FromWorker(2, Message(WorkerJoin(6)));
  auto got = t.Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].to, t.workers[2]);
  ASSERT_EQ(got[0].h().type, p::MsgType::kJoinPending);
  auto pending = p::JoinPendingMsg::From(got[0].h());
  EXPECT_EQ(pending.rank, 6);
  EXPECT_EQ(pending.scope, 1);
  EXPECT_EQ(pending.joined, 1);
  EXPECT_EQ(pending.world_size, 2);
  EXPECT_EQ(pending.missing_rank, 0u) << "leaf 0's first rank";
  EXPECT_EQ(pending.missing_ranks, 4);
  // Granted; then local ranks 4, 5 and 7 join the local grant, 6 does not.
  t.FromSpine(Message(
      p::JoinAckMsg{.job = kJob, .rank = 1, .epoch = 3, .k = kK, .window = kGranted}.ToHeader()));
  for (uint16_t l : {0, 1, 3}) t.FromWorker(l, Message(WorkerJoin(static_cast<uint16_t>(4 + l))));
  EXPECT_TRUE(t.Take().empty()) << "first JOINs at the local control plane: no answer";
  t.FromWorker(3, Message(WorkerJoin(7)));
  got = t.Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].to, t.workers[3]);
  ASSERT_EQ(got[0].h().type, p::MsgType::kJoinPending);
  pending = p::JoinPendingMsg::From(got[0].h());
  EXPECT_EQ(pending.rank, 7);
  EXPECT_EQ(pending.scope, 2);
  EXPECT_EQ(pending.joined, 3);
  EXPECT_EQ(pending.world_size, 4) << "this leaf's ranks";
  EXPECT_EQ(pending.missing_rank, 6u) << "the missing worker's rank in the tree";
  // The last one: every worker acked.
  t.FromWorker(2, Message(WorkerJoin(6)));
  got = t.Take();
  ASSERT_EQ(got.size(), 4u);
  for (const Sent& x : got) EXPECT_EQ(x.h().type, p::MsgType::kJoinAck);
}

// Leases through a tree: the spine (a real control plane, --lease-calls 2, a pool of 16) grants
// the job its lease; the leaf passes it to its workers; when every worker re-joined at its end
// the leaf re-joins the spine, and the spine, once leaf 0 did too, takes the grant back and gives
// the job its fair share again: 8 of 16 while a second job waits, 16 again once that one ended
// (more than the local grant before it: the local control plane is asked exactly the spine's
// window). The workers' re-joins get the new grant each time, and the job runs on it.
TEST(Leaf, ALeaseEndReJoinsTheSpineAndTheTreeSharesItsPool) {
  LeafHarness t;
  auto spine_engine = MakeReferenceEngine({16, 8});
  ControlConfig sc;
  sc.lease_calls = 2;
  sc.min_window = 1;
  auto spine = std::move(ControlPlane::Create(*spine_engine, sc)).value();
  struct : ReplySink {
    void Send(const Peer& to, std::span<const uint8_t> packet) override {
      out.push_back({to, {packet.begin(), packet.end()}});
    }
    std::vector<Sent> out;
  } spine_out;
  const Peer leaf0 = MakePeer(5000), leaf1 = MakePeer(5001), other = MakePeer(5002);
  // Everything the leaf sent the spine, to the spine; every answer for leaf 1 back to it.
  auto pump = [&] {
    for (const Sent& x : t.TakeTo(t.spine)) spine->HandleControl(x.bytes, leaf1, t.now, spine_out);
    std::vector<Sent> to_leaf1;
    for (Sent& x : spine_out.out) {
      if (x.to == leaf1) to_leaf1.push_back(std::move(x));
    }
    spine_out.out.clear();
    for (const Sent& x : to_leaf1) t.FromSpine(x.bytes);
  };
  auto leaf0_join = [&](uint8_t rejoin_epoch) {
    const auto m = MakeControl(p::JoinMsg{.rejoin_epoch = rejoin_epoch,
                                          .tree_world = kWorld,
                                          .job = kJob,
                                          .rank = 0,
                                          .k = kK,
                                          .window = kWindow,
                                          .world_size = 2});
    spine->HandleControl(m, leaf0, t.now, spine_out);
  };
  auto join = [&](uint16_t l, uint8_t rejoin_epoch) {
    t.FromWorker(l, Message(WorkerJoin(static_cast<uint16_t>(4 + l), rejoin_epoch)));
  };
  // Every worker's JOIN (first, or re-join of `epoch`), the spine answering, until every worker
  // has its join_ack: the grant's (window, epoch, lease).
  auto grant = [&](uint8_t epoch) {
    for (uint16_t l = 0; l < 4; ++l) join(l, epoch);
    pump();
    for (uint16_t l = 0; l < 4; ++l) join(l, epoch);  // the resends take the spine's grant
    auto acks = t.Take();
    EXPECT_EQ(acks.size(), 4u);
    p::JoinAckMsg ack{};
    for (const Sent& a : acks) {
      EXPECT_EQ(a.h().type, p::MsgType::kJoinAck);
      ack = p::JoinAckMsg::From(a.h());
    }
    return ack;
  };
  leaf0_join(0);
  auto first = grant(0);
  EXPECT_EQ(first.window, 16);
  EXPECT_EQ(first.lease, 2) << "the spine's lease, passed on";
  // A second job asks the whole pool: it waits.
  const auto other_join =
      MakeControl(p::JoinMsg{.job = 10, .rank = 0, .k = kK, .window = 16, .world_size = 1});
  spine->HandleControl(other_join, other, t.now, spine_out);
  spine_out.out.clear();
  EXPECT_EQ(spine->Jobs().size(), 2u);
  // Two calls later: the workers re-join; the leaf re-joins the spine once all four did.
  for (uint16_t l = 0; l < 3; ++l) join(l, first.epoch);
  EXPECT_TRUE(t.TakeTo(t.spine).empty()) << "the grant stands until every local rank re-joined";
  join(3, first.epoch);
  auto up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(p::JoinMsg::From(up[0].h()).rejoin_epoch, 1) << "a re-join of the spine's grant";
  spine->HandleControl(up[0].bytes, leaf1, t.now, spine_out);
  leaf0_join(1);  // leaf 0 re-joins too: the grant goes back, both jobs share the pool
  auto second = grant(first.epoch);
  EXPECT_EQ(second.window, 8) << "its fair share beside the other job";
  EXPECT_NE(second.epoch, first.epoch);
  EXPECT_EQ(second.lease, 2);
  EXPECT_EQ(t.Count(LeafCounter::kUpStale), 0u);
  // The job runs on the new grant: slot 5's partial goes up.
  for (uint16_t l = 0; l < 4; ++l) t.FromWorker(l, t.Data(l, 5, 0, l + 1));
  up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].h().type, p::MsgType::kData);
  EXPECT_EQ(up[0].h().slot, 5);
  EXPECT_EQ(Elem(up[0].bytes, 0), 10);
  // The other job ends; at the next lease end the job gets the whole pool back, more than the
  // local grant it had: the local control plane grants it that.
  spine->HandleControl(MakeControl(p::LeaveMsg{.job = 10, .rank = 0}), other, t.now, spine_out);
  spine_out.out.clear();
  for (uint16_t l = 0; l < 4; ++l) join(l, second.epoch);
  up = t.TakeTo(t.spine);
  ASSERT_EQ(up.size(), 1u);
  spine->HandleControl(up[0].bytes, leaf1, t.now, spine_out);
  leaf0_join(2);
  auto third = grant(second.epoch);
  EXPECT_EQ(third.window, 16) << "the whole pool again";
  EXPECT_NE(third.epoch, second.epoch);
  EXPECT_EQ(t.Count(LeafCounter::kNoSlots), 0u);
  EXPECT_EQ(Get(spine->counters(), ControlCounter::kRegrants), 2u);
  // Past the epochs' wrap (1 .. 255, at the spine and at the leaf): every lease end still goes
  // through the spine.
  p::JoinAckMsg now = third;
  uint8_t spine_epoch = 3;
  for (int lease = 0; lease < 300; ++lease) {
    for (uint16_t l = 0; l < 4; ++l) join(l, now.epoch);
    up = t.TakeTo(t.spine);
    ASSERT_EQ(up.size(), 1u) << "lease " << lease << ": the leaf re-joins the spine";
    EXPECT_EQ(p::JoinMsg::From(up[0].h()).rejoin_epoch, spine_epoch);
    spine->HandleControl(up[0].bytes, leaf1, t.now, spine_out);
    leaf0_join(spine_epoch);
    const auto next = grant(now.epoch);
    ASSERT_NE(next.epoch, now.epoch) << "lease " << lease;
    now = next;
    spine_epoch = static_cast<uint8_t>(spine_epoch % 255 + 1);
  }
  EXPECT_EQ(Get(spine->counters(), ControlCounter::kRegrants), 302u);
}

}  // namespace
}  // namespace ina::dp::switchd
