// End-to-end tests of ina-switchd: the real binary, fake workers on raw UDP sockets.
#include <algorithm>
#include <memory>
#include <random>

#include "support/seed.h"
#include "support/switchd_process.h"

namespace ina::test {
namespace {

using Workers = std::vector<std::unique_ptr<Worker>>;

Workers MakeWorkers(uint16_t port, int n) {
  Workers w;
  for (int i = 0; i < n; ++i) w.push_back(std::make_unique<Worker>(port));
  return w;
}

// Every rank joins; returns the granted window (every rank must get the same join_ack).
uint32_t JoinAll(Workers& w, uint16_t job, uint16_t k, uint32_t window) {
  const uint16_t world = static_cast<uint16_t>(w.size());
  for (uint16_t r = 0; r < world; ++r) w[r]->Send(Join(job, r, world, k, window));
  uint32_t granted = 0;
  for (uint16_t r = 0; r < world; ++r) {
    auto b = w[r]->Recv();
    EXPECT_TRUE(b.has_value()) << "rank " << r << ": no join_ack";
    if (!b) return 0;
    p::Header h = p::DecodeHeader(b->data());
    EXPECT_EQ(h.type, p::MsgType::kJoinAck)
        << "rank " << r << " got " << p::MsgTypeName(h.type) << " " << p::ErrorCodeName(h.aux);
    EXPECT_EQ(h.job, job);
    EXPECT_EQ(h.rank, r);
    EXPECT_EQ(h.count, k);
    if (r == 0) granted = h.offset;
    EXPECT_EQ(h.offset, granted);
  }
  return granted;
}

std::vector<int32_t> Elems(uint16_t job, uint16_t rank, uint16_t slot, uint16_t gen, int n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[i] = (rank + 1) * 1000003 * (i + 1) + slot * 31 + gen * 7 + job;
  return v;
}

std::vector<int32_t> Sum(uint16_t job, uint16_t world, uint16_t slot, uint16_t gen, int n) {
  std::vector<uint32_t> s(static_cast<size_t>(n), 0);
  for (uint16_t r = 0; r < world; ++r) {
    auto e = Elems(job, r, slot, gen, n);
    for (int i = 0; i < n; ++i) s[i] += static_cast<uint32_t>(e[i]);  // wrapping
  }
  return {s.begin(), s.end()};
}

// Every rank sends (slot, gen) for slots 0..slots-1; every rank must get each all-ranks result.
void RunRound(Workers& w, uint16_t job, uint16_t slots, uint16_t gen, int n) {
  const uint16_t world = static_cast<uint16_t>(w.size());
  for (uint16_t s = 0; s < slots; ++s) {
    for (uint16_t r = 0; r < world; ++r) w[r]->Send(Data(job, r, s, gen, Elems(job, r, s, gen, n)));
  }
  for (uint16_t r = 0; r < world; ++r) {
    std::vector<bool> seen(slots, false);
    for (uint16_t i = 0; i < slots; ++i) {
      auto b = w[r]->Recv();
      ASSERT_TRUE(b.has_value()) << "rank " << r << ": result " << i << " of gen " << gen;
      p::Header h = p::DecodeHeader(b->data());
      ASSERT_EQ(h.type, p::MsgType::kResult);
      EXPECT_EQ(h.job, job);
      EXPECT_EQ(h.rank, p::kRankAll);
      EXPECT_EQ(h.gen, gen);
      ASSERT_LT(h.slot, slots);
      EXPECT_FALSE(seen[h.slot]) << "slot " << h.slot << " twice";
      seen[h.slot] = true;
      EXPECT_EQ(Payload(*b), Sum(job, world, h.slot, gen, n)) << "slot " << h.slot;
    }
  }
}

class AllReduce : public ::testing::TestWithParam<std::string> {};

TEST_P(AllReduce, TwoToFourRanksGetTheSumOnEverySlot) {
  SwitchProcess sw({"--port", "0", "--engine", GetParam()});
  ASSERT_TRUE(sw.ok());
  for (int world = 2; world <= 4; ++world) {
    const uint16_t job = static_cast<uint16_t>(100 + world);
    Workers w = MakeWorkers(sw.port(), world);
    ASSERT_EQ(JoinAll(w, job, 64, 4), 4u);
    for (uint16_t gen = 0; gen < 3; ++gen) RunRound(w, job, 4, gen, gen == 1 ? 64 : 17);
    for (auto& x : w) EXPECT_FALSE(x->Recv(milliseconds(20)).has_value()) << "extra packet";
    w[0]->Send(Leave(job, 0));
  }
  auto c = sw.Stop();
  EXPECT_EQ(c["results"], 3u * 3 * 4);
  EXPECT_EQ(c["rx_data"], (2u + 3 + 4) * 3 * 4);
  EXPECT_EQ(c["jobs_admitted"], 3u);
  EXPECT_EQ(c["jobs_left"], 3u);
  EXPECT_EQ(c["tx_errors"], 0u);
  EXPECT_EQ(c["drop_foreign_src"], 0u);
}

INSTANTIATE_TEST_SUITE_P(Engines, AllReduce, ::testing::Values("ref", "fast"));

TEST(Switchd, RetransmissionGetsTheStoredResultUnicast) {
  SwitchProcess sw({"--port", "0"});
  ASSERT_TRUE(sw.ok());
  Workers w = MakeWorkers(sw.port(), 2);
  ASSERT_EQ(JoinAll(w, 5, 64, 2), 2u);
  RunRound(w, 5, 2, 0, 8);
  w[1]->Send(Data(5, 1, 1, 0, Elems(5, 1, 1, 0, 8), p::flags::kInt32 | p::flags::kRetx));
  auto b = w[1]->Recv();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(p::GetRank(b->data()), 1);  // unicast to the retransmitting rank
  EXPECT_EQ(Payload(*b), Sum(5, 2, 1, 0, 8));
  EXPECT_FALSE(w[0]->Recv(milliseconds(50)).has_value());
  auto c = sw.Stop();
  EXPECT_EQ(c["result_resends"], 1u);
  EXPECT_EQ(c["retransmissions"], 1u);
}

// A refused JOIN names the parameter; the joined rank of the pending job hears of it at once
// (peer_refused: the refused rank, the parameter, its value), and so does a later JOIN; a rank
// taken in an active job answers the claimant only. With --cores 2 the jobs (8 and 9) live on
// different cores, each with its own control plane.
class SwitchdRefused : public ::testing::TestWithParam<int> {};

TEST_P(SwitchdRefused, JoinParamMismatchIsToldToThePeersAndRankTakenToTheClaimant) {
  const std::string cores = std::to_string(GetParam());
  SwitchProcess sw({"--port", "0", "--cores", cores});
  ASSERT_TRUE(sw.ok());
  Workers w = MakeWorkers(sw.port(), 4);
  for (uint16_t job : {8, 9}) {
    SCOPED_TRACE("job " + std::to_string(job));
    w[0]->Send(Join(job, 0, 2, 64, 4));
    EXPECT_FALSE(w[0]->Recv(milliseconds(50)).has_value());  // pending: JOIN is not answered
    w[1]->Send(Join(job, 1, 2, 256, 4));                     // other K
    auto b = w[1]->Recv();
    ASSERT_TRUE(b.has_value());
    p::Header h = p::DecodeHeader(b->data());
    EXPECT_EQ(h.type, p::MsgType::kError);
    EXPECT_EQ(h.aux, static_cast<uint16_t>(p::ErrorCode::kBadParams));
    EXPECT_EQ(h.slot, static_cast<uint16_t>(p::JoinParam::kK));
    EXPECT_EQ(h.offset, 64u);  // the job's K
    b = w[0]->Recv();
    ASSERT_TRUE(b.has_value());
    h = p::DecodeHeader(b->data());
    EXPECT_EQ(h.aux, static_cast<uint16_t>(p::ErrorCode::kPeerRefused));
    EXPECT_EQ(h.count, 1);  // the refused rank
    EXPECT_EQ(h.slot, static_cast<uint16_t>(p::JoinParam::kK));
    EXPECT_EQ(h.offset, 256u);           // what it sent
    w[1]->Send(Join(job, 1, 2, 64, 4));  // right params now: too late, the job cannot start
    b = w[1]->Recv();
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(p::GetAux(b->data()), static_cast<uint16_t>(p::ErrorCode::kPeerRefused));
  }
  // An active job (10): a second claimant of rank 0 gets rank_taken, nobody else hears.
  EXPECT_EQ(JoinAll(w, 10, 64, 4), 4u);
  w[2]->Send(Join(10, 0, 4, 64, 4));
  auto b = w[2]->Recv();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(p::GetAux(b->data()), static_cast<uint16_t>(p::ErrorCode::kRankTaken));
  EXPECT_EQ(p::GetSlot(b->data()), static_cast<uint16_t>(p::JoinParam::kRankTaken));
  EXPECT_FALSE(w[0]->Recv(milliseconds(50)).has_value());
  auto c = sw.Stop();
  EXPECT_EQ(c["err_bad_params"], 2u);
  EXPECT_EQ(c["err_peer_refused"], 4u);
  EXPECT_EQ(c["err_rank_taken"], 1u);
  EXPECT_EQ(c["jobs_admitted"], 1u);
}

INSTANTIATE_TEST_SUITE_P(Cores, SwitchdRefused, ::testing::Values(1, 2));

TEST(Switchd, LeaveAbortsTheOtherRanks) {
  SwitchProcess sw({"--port", "0"});
  ASSERT_TRUE(sw.ok());
  Workers w = MakeWorkers(sw.port(), 3);
  ASSERT_EQ(JoinAll(w, 77, 256, 8), 8u);
  w[1]->Send(Leave(77, 1));
  for (int r : {0, 2}) {
    auto b = w[r]->Recv();
    ASSERT_TRUE(b.has_value()) << "rank " << r;
    EXPECT_EQ(p::GetType(b->data()), p::MsgType::kError);
    EXPECT_EQ(p::GetAux(b->data()), static_cast<uint16_t>(p::ErrorCode::kJobAborted));
    EXPECT_EQ(p::GetRank(b->data()), r);
  }
  EXPECT_FALSE(w[1]->Recv(milliseconds(50)).has_value());
  // The job is gone: data for it is an unknown job now, and its sender is told (once its
  // job_aborted was lost, it would otherwise wait out its progress timeout).
  w[0]->Send(Data(77, 0, 3, 5, {1, 2, 3}));
  auto b = w[0]->Recv();
  ASSERT_TRUE(b.has_value()) << "no answer to data of an unknown job";
  const p::Header h = p::DecodeHeader(b->data());
  EXPECT_EQ(h.type, p::MsgType::kError);
  EXPECT_EQ(h.aux, static_cast<uint16_t>(p::ErrorCode::kUnknownJob)) << p::ErrorCodeName(h.aux);
  EXPECT_EQ(h.job, 77);
  EXPECT_EQ(h.rank, 0);
  EXPECT_EQ(h.slot, 3);
  EXPECT_EQ(h.gen, 5);
  // At most one answer per sender every 100 ms: a second packet at once is not answered; another
  // sender is.
  w[0]->Send(Data(77, 0, 4, 5, {1, 2, 3}));
  EXPECT_FALSE(w[0]->Recv(milliseconds(50)).has_value());
  w[2]->Send(Data(77, 2, 4, 5, {1, 2, 3}));
  auto d = w[2]->Recv();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(p::GetAux(d->data()), static_cast<uint16_t>(p::ErrorCode::kUnknownJob));
  auto c = sw.Stop();
  EXPECT_EQ(c["err_job_aborted"], 2u);
  EXPECT_EQ(c["jobs_freed"], 1u);
  EXPECT_EQ(c["drop_unknown_job"], 3u);
  EXPECT_EQ(c["err_unknown_job"], 2u);
}

// Two ranks send different blocks for the same slot and generation, each one a block the slot
// can carry (rank 1 a shorter tensor): the switch ends the job at once, and every rank gets
// error(rank_mismatch) naming the slot and generation, within the receive timeout (2 s), not at a
// worker's 5 s progress timeout. With --cores 2 the job's core does it.
class SwitchdMismatch : public ::testing::TestWithParam<const char*> {};

TEST_P(SwitchdMismatch, DisagreeingRanksGetEveryRankAnErrorAtOnce) {
  SwitchProcess sw({"--port", "0", "--cores", GetParam()});
  ASSERT_TRUE(sw.ok());
  Workers w = MakeWorkers(sw.port(), 3);
  ASSERT_EQ(JoinAll(w, 41, 64, 2), 2u);
  w[0]->Send(Data(41, 0, 1, 0, Elems(41, 0, 1, 0, 64)));
  w[2]->Send(Data(41, 2, 1, 0, Elems(41, 2, 1, 0, 64)));
  ASSERT_FALSE(w[0]->Recv(milliseconds(100)).has_value());
  w[1]->Send(Data(41, 1, 1, 0, Elems(41, 1, 1, 0, 10)));  // block 1, but 10 elements
  for (uint16_t r = 0; r < 3; ++r) {
    auto b = w[r]->Recv();
    ASSERT_TRUE(b.has_value()) << "rank " << r << " heard nothing";
    ASSERT_TRUE(p::MessageCrcOk(*b));
    const p::Header h = p::DecodeHeader(b->data());
    EXPECT_EQ(h.type, p::MsgType::kError);
    EXPECT_EQ(h.aux, static_cast<uint16_t>(p::ErrorCode::kRankMismatch));
    EXPECT_EQ(h.job, 41);
    EXPECT_EQ(h.rank, r);
    EXPECT_EQ(h.slot, 1);
    EXPECT_EQ(h.gen, 0);
    EXPECT_EQ(h.count, 1) << "the rank whose block proved it";
  }
  // The job is gone: its data is an unknown job now (its sender is told: had the rank_mismatch
  // been lost, it would know now), and its id can be joined afresh.
  w[0]->Send(Data(41, 0, 0, 0, Elems(41, 0, 0, 0, 64)));
  {
    auto u = w[0]->Recv();
    ASSERT_TRUE(u.has_value()) << "no error(unknown_job)";
    EXPECT_EQ(p::GetAux(u->data()), static_cast<uint16_t>(p::ErrorCode::kUnknownJob));
  }
  ASSERT_EQ(JoinAll(w, 41, 64, 2), 2u);
  RunRound(w, 41, 2, 0, 64);
  auto c = sw.Stop();
  EXPECT_EQ(c["drop_mismatch"], 1u);
  EXPECT_EQ(c["err_rank_mismatch"], 3u);
  EXPECT_EQ(c["jobs_failed"], 1u);
  EXPECT_EQ(c["jobs_freed"], 1u);
  EXPECT_EQ(c["drop_unknown_job"], 1u);
  EXPECT_EQ(c["results"], 2u);
}

INSTANTIATE_TEST_SUITE_P(Cores, SwitchdMismatch, ::testing::Values("1", "2"));

TEST(Switchd, JobTimeoutFreesTheSlots) {
  SwitchProcess sw({"--port", "0", "--slots", "16", "--job-timeout-ms", "300"});
  ASSERT_TRUE(sw.ok());
  Workers a = MakeWorkers(sw.port(), 2);
  ASSERT_EQ(JoinAll(a, 1, 64, 16), 16u);  // the whole pool
  Workers b = MakeWorkers(sw.port(), 1);
  b[0]->Send(Join(2, 0, 1, 64, 16));
  auto r = b[0]->Recv();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(p::GetType(r->data()), p::MsgType::kJoinWait);  // queued
  EXPECT_EQ(p::GetAux(r->data()), 0u);                      // nobody ahead
  // Job 1 goes idle while job 2 resends its JOIN every 100 ms, as a waiting worker does: within a
  // bounded wait both of job 1's ranks are told it was aborted, and job 2 gets the whole pool.
  bool aborted[2] = {false, false};
  bool acked = false;
  for (int t = 0; t < 60 && !(aborted[0] && aborted[1] && acked); ++t) {
    if (!acked) b[0]->Send(Join(2, 0, 1, 64, 16));
    for (int i = 0; i < 2; ++i) {
      if (aborted[i]) continue;
      if (auto e = a[i]->Recv(milliseconds(20))) {
        EXPECT_EQ(p::GetAux(e->data()), static_cast<uint16_t>(p::ErrorCode::kJobAborted));
        aborted[i] = true;
      }
    }
    while (!acked) {
      auto m = b[0]->Recv(milliseconds(60));
      if (!m.has_value()) break;
      if (p::GetType(m->data()) != p::MsgType::kJoinAck) continue;
      EXPECT_EQ(p::GetOffset(m->data()), 16u);
      acked = true;
    }
  }
  EXPECT_TRUE(aborted[0] && aborted[1]) << "no job_aborted after the timeout";
  EXPECT_TRUE(acked) << "the waiting job was not admitted when the pool was freed";
  auto c = sw.Stop();
  EXPECT_EQ(c["jobs_timed_out"], 1u);
  EXPECT_EQ(c["jobs_queued"], 1u);
  EXPECT_EQ(c["err_no_slots"], 0u);
}

TEST(Switchd, BadInputIsCountedByCauseAndResultsStayRight) {
  SwitchProcess sw({"--port", "0"});
  ASSERT_TRUE(sw.ok());
  Workers w = MakeWorkers(sw.port(), 2);
  Worker intruder(sw.port());
  ASSERT_EQ(JoinAll(w, 300, 64, 2), 2u);
  const int n = 16;
  // Rank 0 contributes to slot 0 first, so forged rank-0 packets would be duplicates of a real
  // contribution and forged rank-1 packets would complete the slot with a wrong sum.
  w[0]->Send(Data(300, 0, 0, 0, Elems(300, 0, 0, 0, n)));

  const uint64_t seed = tests::Seed();
  std::mt19937_64 rng(seed);
  uint64_t malformed = 0;
  for (int i = 0; i < 10; ++i) {  // random bytes shorter than a header
    Bytes b(rng() % p::kHeaderBytes);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    w[i % 2]->Send(b);
    ++malformed;
  }
  for (int i = 0; i < 10; ++i) {  // random bytes, sealed, a good version and a type no one takes
    Bytes b(p::kHeaderBytes + rng() % 300);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    b[0] = p::kVersion;
    b[1] = static_cast<uint8_t>(8 + rng() % 248);
    w[i % 2]->Send(Sealed(b));
    ++malformed;
  }
  Bytes truncated = Data(300, 1, 0, 0, Elems(300, 1, 0, 0, n));
  truncated.resize(p::kHeaderBytes + 4 * n - 3);  // length does not match count (sealed again)
  w[1]->Send(Sealed(truncated));
  ++malformed;
  Bytes short_header = Data(300, 1, 0, 0, {});
  short_header.resize(10);  // a truncated header
  w[1]->Send(short_header);
  ++malformed;
  Bytes wrong_version = Data(300, 1, 0, 0, Elems(300, 1, 0, 0, n));
  p::SetVersion(wrong_version.data(), 1);  // version 1: no trailer, not checked for one
  w[1]->Send(wrong_version);
  // Damaged in flight: a real rank's packets with one byte changed (not version or type: those
  // would be another protocol or a control message), which would otherwise complete slot 0 with a
  // wrong sum, and a damaged JOIN for another job.
  uint64_t damaged = 0;
  for (int i = 0; i < 12; ++i) {
    Bytes d = Data(300, 1, 0, 0, Elems(300, 1, 0, 0, n));
    d[2 + rng() % (d.size() - 2)] ^= static_cast<uint8_t>(1 + rng() % 255);
    w[1]->Send(d);
    ++damaged;
  }
  Bytes bad_join = Join(302, 0, 2, 64, 2);
  bad_join[p::kAuxOffset + 1] ^= 0x04;
  w[0]->Send(bad_join);
  w[1]->Send(Data(301, 1, 0, 0, Elems(300, 1, 0, 0, n)));  // unknown job: its sender is told
  {
    auto u = w[1]->Recv();
    ASSERT_TRUE(u.has_value()) << "no error(unknown_job)";
    EXPECT_EQ(p::GetType(u->data()), p::MsgType::kError);
    EXPECT_EQ(p::GetAux(u->data()), static_cast<uint16_t>(p::ErrorCode::kUnknownJob));
    EXPECT_EQ(p::GetJob(u->data()), 301);
  }
  w[1]->Send(Data(300, 2, 0, 0, Elems(300, 1, 0, 0, n)));  // rank out of range
  w[1]->Send(Data(300, 1, 2, 0, Elems(300, 1, 0, 0, n)));  // slot out of range
  // Forged packets for real (job, rank) pairs from another socket: plain and retransmission.
  intruder.Send(Data(300, 1, 0, 0, std::vector<int32_t>(n, 12345)));
  intruder.Send(Data(300, 0, 1, 0, std::vector<int32_t>(n, 666)));
  intruder.Send(Data(300, 1, 0, 0, std::vector<int32_t>(n, 1), p::flags::kInt32 | p::flags::kRetx));
  // A LEAVE forged from another socket is ignored too.
  intruder.Send(Leave(300, 0));
  EXPECT_FALSE(w[0]->Recv(milliseconds(100)).has_value()) << "a bad packet produced a result";

  // The real traffic: both slots, two generations; every sum exact.
  w[1]->Send(Data(300, 1, 0, 0, Elems(300, 1, 0, 0, n)));
  for (int r = 0; r < 2; ++r) {
    auto b = w[r]->Recv();
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(p::GetSlot(b->data()), 0);
    EXPECT_EQ(Payload(*b), Sum(300, 2, 0, 0, n));
  }
  // Slot 1 gen 0 and both slots gen 1 through the normal round.
  for (uint16_t r = 0; r < 2; ++r) w[r]->Send(Data(300, r, 1, 0, Elems(300, r, 1, 0, n)));
  for (int r = 0; r < 2; ++r) {
    auto b = w[r]->Recv();
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(Payload(*b), Sum(300, 2, 1, 0, n));
  }
  RunRound(w, 300, 2, 1, n);
  EXPECT_FALSE(intruder.Recv(milliseconds(20)).has_value());
  auto c = sw.Stop();
  EXPECT_EQ(c["drop_malformed"], malformed);
  EXPECT_EQ(c["drop_bad_version"], 1u);
  EXPECT_EQ(c["drop_bad_crc"], damaged);
  EXPECT_EQ(c["control_bad_crc"], 1u);
  EXPECT_EQ(c["drop_unknown_job"], 1u);
  EXPECT_EQ(c["err_unknown_job"], 1u);
  EXPECT_EQ(c["drop_bad_rank"], 1u);
  EXPECT_EQ(c["drop_bad_slot"], 1u);
  EXPECT_EQ(c["drop_foreign_src"], 3u);
  EXPECT_EQ(c["retransmissions"], 0u);  // the forged retransmission never reached the engine
  EXPECT_EQ(c["leave_ignored"], 1u);
  EXPECT_EQ(c["duplicates"], 0u);
  EXPECT_EQ(c["results"], 4u);
  EXPECT_EQ(c["rx_data"], 8u);
  EXPECT_EQ(c["jobs_freed"], 0u);
}

TEST(Switchd, DupRateOneDuplicatesEveryPacketBothWays) {
  SwitchProcess sw({"--port", "0", "--dup-rate", "1"});
  ASSERT_TRUE(sw.ok());
  Workers w = MakeWorkers(sw.port(), 2);
  for (uint16_t r = 0; r < 2; ++r) w[r]->Send(Join(4, r, 2, 64, 1));
  // Each rank: the join_ack twice (tx dup); rank 1's JOIN was processed twice (rx dup), the
  // second one re-acked (twice more); rank 0's second copy came while the job waited for rank 1:
  // join_pending, twice.
  int acks[2] = {0, 0}, pendings[2] = {0, 0};
  for (int r = 0; r < 2; ++r) {
    while (auto b = w[r]->Recv(milliseconds(200))) {
      const auto type = p::GetType(b->data());
      EXPECT_TRUE(type == p::MsgType::kJoinAck || type == p::MsgType::kJoinPending);
      ++(type == p::MsgType::kJoinAck ? acks : pendings)[r];
    }
  }
  EXPECT_EQ(acks[0], 2);
  EXPECT_EQ(acks[1], 4);
  EXPECT_EQ(pendings[0], 2);
  EXPECT_EQ(pendings[1], 0);
  for (uint16_t r = 0; r < 2; ++r) w[r]->Send(Data(4, r, 0, 0, Elems(4, r, 0, 0, 8)));
  // The result goes to both ranks, twice each; rank 1's duplicate (processed after completion)
  // gets the stored result unicast, twice.
  int results[2] = {0, 0};
  for (int r = 0; r < 2; ++r) {
    while (auto b = w[r]->Recv(milliseconds(200))) {
      EXPECT_EQ(Payload(*b), Sum(4, 2, 0, 0, 8));
      ++results[r];
    }
  }
  EXPECT_EQ(results[0], 2);
  EXPECT_EQ(results[1], 4);
  auto c = sw.Stop();
  EXPECT_EQ(c["inj_rx_dups"], c["rx_datagrams"]);
  EXPECT_EQ(c["inj_tx_dups"] * 2, c["tx_packets"]);
  EXPECT_EQ(c["duplicates"], 1u);      // rank 0's second copy, before the slot completed
  EXPECT_EQ(c["result_resends"], 1u);  // rank 1's second copy, after
  EXPECT_EQ(c["results"], 1u);
}

TEST(Switchd, DropRateDropsBothWaysAndEveryDropIsCounted) {
  SwitchProcess sw({"--port", "0", "--drop-rate", "0.5", "--seed", "7"});
  ASSERT_TRUE(sw.ok());
  Worker w(sw.port());
  const int kSends = 200;
  for (int i = 0; i < kSends; ++i) w.Send(Join(1, 0, 1, 64, 1));
  int acks = 0;
  while (auto b = w.Recv(milliseconds(300))) ++acks;
  auto c = sw.Stop();
  EXPECT_EQ(c["rx_datagrams"], static_cast<uint64_t>(kSends));
  EXPECT_GT(c["inj_rx_drops"], 50u);
  EXPECT_LT(c["inj_rx_drops"], 150u);
  EXPECT_EQ(c["joins"], kSends - c["inj_rx_drops"]);
  EXPECT_GT(c["inj_tx_drops"], 0u);
  EXPECT_EQ(c["join_acks"], c["tx_packets"] + c["inj_tx_drops"]);
  EXPECT_EQ(static_cast<uint64_t>(acks), c["tx_packets"]);
  EXPECT_LT(acks, kSends / 2);
}

TEST(Switchd, ReorderRateReordersButLosesNothing) {
  SwitchProcess sw({"--port", "0", "--reorder-rate", "0.3", "--seed", "3"});
  ASSERT_TRUE(sw.ok());
  Worker w(sw.port());
  w.Send(Join(6, 0, 1, 64, 64));
  // JOIN or its ack may be held back: repeat until acked (bounded).
  std::optional<Bytes> ack;
  for (int i = 0; i < 20 && !ack; ++i) {
    ack = w.Recv(milliseconds(100));
    if (!ack) w.Send(Join(6, 0, 1, 64, 64));
  }
  ASSERT_TRUE(ack.has_value());
  while (w.Recv(milliseconds(50))) {
  }  // extra acks
  for (uint16_t s = 0; s < 64; ++s) w.Send(Data(6, 0, s, 0, {s, -s}));
  std::vector<uint16_t> order;
  while (auto b = w.Recv(milliseconds(300))) {
    if (p::GetType(b->data()) != p::MsgType::kResult) continue;
    const uint16_t s = p::GetSlot(b->data());
    EXPECT_EQ(Payload(*b), (std::vector<int32_t>{s, -s}));
    order.push_back(s);
  }
  ASSERT_EQ(order.size(), 64u);
  std::vector<uint16_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (uint16_t s = 0; s < 64; ++s) EXPECT_EQ(sorted[s], s);
  EXPECT_NE(order, sorted) << "nothing was reordered";
  auto c = sw.Stop();
  EXPECT_GT(c["inj_rx_reorders"] + c["inj_tx_reorders"], 0u);
  EXPECT_EQ(c["results"], 64u);
}

TEST(Switchd, BadFlagsExitTwoNamingTheFlag) {
  for (const char* args : {"--slots abc", "--drop-rate 1.5", "--port 70000", "--engine x",
                           "--bind nowhere", "--max-jobs 0", "--nope"}) {
    const std::string cmd = std::string(INA_SWITCHD_BIN) + " " + args + " 2>&1";
    FILE* f = popen(cmd.c_str(), "r");
    ASSERT_NE(f, nullptr);
    char buf[512] = {};
    const size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    const int status = pclose(f);
    const std::string out(buf, n);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << args;
    const std::string flag = std::string(args).substr(0, std::string(args).find(' '));
    EXPECT_NE(out.find(flag), std::string::npos) << args << ": " << out;
  }
}

}  // namespace
}  // namespace ina::test
