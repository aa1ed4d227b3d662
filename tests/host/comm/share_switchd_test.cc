// Jobs sharing one ina-switchd's slot pool (docs/protocol.md, "Sharing the slot pool"), real
// processes on loopback: several concurrent jobs whose windows do not all fit wait for slots,
// re-join at each lease's end and get fair shares, and every result is bit-exact; a job that
// cannot get slots in time fails with an error naming the wait; a waiting job starts once the
// job holding the pool ends.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ina/host/communicator.h"
#include "support/switchd_process.h"

namespace ina::host {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Rank r's element i of call c of job j: every rank's input differs, the sum wraps.
int32_t Input(uint16_t job, uint16_t rank, int call, size_t i) {
  const uint32_t x = 2654435761u * static_cast<uint32_t>(i + 1) + 40503u * job +
                     97u * static_cast<uint32_t>(call) + 1000003u * rank;
  return static_cast<int32_t>(x);
}

CommConfig Base(uint16_t port, uint16_t job, uint16_t world) {
  CommConfig c;
  c.switch_port = port;
  c.job_id = job;
  c.world_size = world;
  c.k = 256;
  c.window = 64;
  c.join_timeout_ms = 30000;
  c.slot_wait_timeout_ms = 60000;
  c.progress_timeout_ms = 20000;  // a loaded CI machine
  return c;
}

// Four jobs of two ranks (with `lanes` progress threads each), each asking 64 slots of a pool of
// 64, lease 4 calls: at most one fits at first; the others wait and get their share at the lease
// ends. Every rank checks every int32 result against the exact wrapping sum, and float results
// against the other ranks'.
class ShareSwitchdLanes : public ::testing::TestWithParam<int> {};

TEST_P(ShareSwitchdLanes, ConcurrentJobsGetFairSharesAndExactResults) {
  test::SwitchProcess sw(
      {"--port", "0", "--slots", "64", "--lease-calls", "4", "--min-window", "8"});
  ASSERT_NE(sw.port(), 0);
  const int lanes = GetParam();
  constexpr int kJobs = 4, kWorld = 2, kCalls = 24;
  constexpr size_t kN = 64 * 256 + 77;  // more blocks than any window: every slot reused
  std::vector<Status> st(kJobs * kWorld);
  std::vector<uint16_t> max_window(kJobs * kWorld, 0), min_window(kJobs * kWorld, 0xFFFF);
  std::vector<std::vector<float>> floats(kJobs * kWorld);
  std::vector<std::thread> ts;
  for (int j = 0; j < kJobs; ++j) {
    for (int r = 0; r < kWorld; ++r) {
      ts.emplace_back([&, j, r] {
        const size_t me = static_cast<size_t>(j * kWorld + r);
        const auto job = static_cast<uint16_t>(21 + j);
        CommConfig c = Base(sw.port(), job, kWorld);
        c.rank = static_cast<uint16_t>(r);
        c.progress_threads = lanes;
        auto comm = Communicator::Create(c);
        if (!comm.ok()) {
          st[me] = comm.status();
          return;
        }
        std::vector<int32_t> v(kN);
        for (int call = 0; call < kCalls; ++call) {
          min_window[me] = std::min(min_window[me], (*comm)->window());
          max_window[me] = std::max(max_window[me], (*comm)->window());
          if (call % 6 == 5) {  // a float call now and then
            std::vector<float> f(kN);
            for (size_t i = 0; i < kN; ++i) {
              f[i] = static_cast<float>(Input(job, c.rank, call, i) % 1000) / 8.0f;
            }
            if (Status s = (*comm)->AllReduce(std::span<float>(f)); !s.ok()) {
              st[me] = s.WithContext("call " + std::to_string(call));
              return;
            }
            if (call == 5) floats[me] = std::move(f);
            continue;
          }
          for (size_t i = 0; i < kN; ++i) v[i] = Input(job, c.rank, call, i);
          if (Status s = (*comm)->AllReduce(std::span<int32_t>(v)); !s.ok()) {
            st[me] = s.WithContext("call " + std::to_string(call));
            return;
          }
          for (size_t i = 0; i < kN; ++i) {
            uint32_t want = 0;
            for (uint16_t q = 0; q < kWorld; ++q) {
              want += static_cast<uint32_t>(Input(job, q, call, i));
            }
            if (v[i] != static_cast<int32_t>(want)) {
              st[me] = Internal("job " + std::to_string(job) + " call " + std::to_string(call) +
                                " element " + std::to_string(i) + ": " + std::to_string(v[i]) +
                                " != " + std::to_string(static_cast<int32_t>(want)));
              return;
            }
          }
        }
      });
    }
  }
  for (auto& t : ts) t.join();
  for (int j = 0; j < kJobs; ++j) {
    for (int r = 0; r < kWorld; ++r) {
      const size_t me = static_cast<size_t>(j * kWorld + r);
      ASSERT_TRUE(st[me].ok()) << "job " << 21 + j << " rank " << r << ": " << st[me].ToString();
      std::printf("job %d rank %d: window %u .. %u\n", 21 + j, r, min_window[me], max_window[me]);
      EXPECT_GE(min_window[me], 8);
      EXPECT_LE(max_window[me], 64);
    }
    EXPECT_EQ(floats[static_cast<size_t>(j * kWorld)], floats[static_cast<size_t>(j * kWorld + 1)])
        << "job " << 21 + j << ": ranks got different float results";
  }
  const auto counters = sw.Stop();
  EXPECT_EQ(counters.at("jobs_admitted"), 4u);
  EXPECT_EQ(counters.at("err_no_slots"), 0u);
  EXPECT_GE(counters.at("jobs_queued"), 1u);  // 4 x 64 slots asked of 64: someone waited
  EXPECT_GE(counters.at("regrants"), 4u);     // each job renewed its lease at least once
  EXPECT_EQ(counters.at("jobs_done"), 4u);
}

INSTANTIATE_TEST_SUITE_P(Lanes, ShareSwitchdLanes, ::testing::Values(1, 2));

// A pool held by a job that never ends its lease (lease 0): another job waits, and fails after
// its slot wait with a message that names the wait; once the holder ends, a waiting job starts.
TEST(ShareSwitchd, WaitTimesOutNamingTheWaitAndStartsWhenSlotsFree) {
  // An idle holder is not asked to release its grant here (--idle-release-ms 0): the test is of
  // the wait itself (AnIdleJobReleasesItsSlotsToAWaitingJob below is of the release).
  test::SwitchProcess sw(
      {"--port", "0", "--slots", "16", "--lease-calls", "0", "--idle-release-ms", "0"});
  ASSERT_NE(sw.port(), 0);
  CommConfig a = Base(sw.port(), 31, 1);
  a.window = 16;
  auto holder = Communicator::Create(a);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  EXPECT_EQ((*holder)->window(), 16);

  CommConfig b = Base(sw.port(), 32, 1);
  b.window = 16;
  b.slot_wait_timeout_ms = 400;
  const auto t0 = Clock::now();
  auto refused = Communicator::Create(b);
  const double waited = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(refused.status().message().find("waited 400 ms for slots"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("INA_SLOT_WAIT_MS"), std::string::npos);
  EXPECT_GE(waited, 400.0);

  // The next try waits long enough: the holder ends meanwhile and the job gets the whole pool.
  b.job_id = 33;
  b.slot_wait_timeout_ms = 30000;
  Result<std::unique_ptr<Communicator>> later = Internal("not run");
  std::thread t([&] { later = Communicator::Create(b); });
  std::this_thread::sleep_for(milliseconds(300));
  std::vector<int32_t> v(1000, 3);
  ASSERT_TRUE((*holder)->AllReduce(std::span<int32_t>(v)).ok());
  holder->reset();  // LEAVE: its slots go to the waiting job
  t.join();
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  EXPECT_EQ((*later)->window(), 16);
  std::vector<int32_t> w(5000, 7);
  ASSERT_TRUE((*later)->AllReduce(std::span<int32_t>(w)).ok());
  EXPECT_EQ(w[4999], 7);
  later->reset();
  const auto counters = sw.Stop();
  EXPECT_EQ(counters.at("jobs_queued"), 2u);
  EXPECT_EQ(counters.at("err_no_slots"), 0u);
  EXPECT_GE(counters.at("join_waits"), 2u);
}

// Runs call `call` of job `job` on every communicator of `comms` at once (rank r: comms[r]) and
// checks every int32 result against the exact wrapping sum.
Status CallEveryRank(std::vector<std::unique_ptr<Communicator>>& comms, uint16_t job, int call) {
  constexpr size_t kN = 16 * 256 + 5;
  const auto world = static_cast<uint16_t>(comms.size());
  std::vector<Status> st(world);
  std::vector<std::thread> ts;
  for (uint16_t r = 0; r < world; ++r) {
    ts.emplace_back([&, r] {
      std::vector<int32_t> v(kN);
      for (size_t i = 0; i < kN; ++i) v[i] = Input(job, r, call, i);
      st[r] = comms[r]->AllReduce(std::span<int32_t>(v));
      for (size_t i = 0; i < kN && st[r].ok(); ++i) {
        uint32_t want = 0;
        for (uint16_t q = 0; q < world; ++q) want += static_cast<uint32_t>(Input(job, q, call, i));
        if (v[i] != static_cast<int32_t>(want)) {
          st[r] = Internal("rank " + std::to_string(r) + " element " + std::to_string(i) + ": " +
                           std::to_string(v[i]) + " != " + std::to_string(want));
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  for (const Status& s : st) INA_RETURN_IF_ERROR(s);
  return Status::Ok();
}

// A job that holds the whole pool and goes idle (a trainer validating, or writing a checkpoint)
// is asked to release its grant once another job waits (docs/protocol.md, "Idle jobs"): its two
// ranks re-join while idle, the waiting job gets its fair share within seconds instead of failing
// at its slot wait timeout (lease 0: no lease end would free the slots), and the idle job's next
// call runs on its new grant, exact.
TEST(ShareSwitchd, AnIdleJobReleasesItsSlotsToAWaitingJob) {
  test::SwitchProcess sw(
      {"--port", "0", "--slots", "16", "--lease-calls", "0", "--idle-release-ms", "300"});
  ASSERT_NE(sw.port(), 0);
  std::vector<std::unique_ptr<Communicator>> idle(2);
  {
    std::vector<Status> st(2);
    std::vector<std::thread> ts;
    for (uint16_t r = 0; r < 2; ++r) {
      ts.emplace_back([&, r] {
        CommConfig c = Base(sw.port(), 41, 2);
        c.rank = r;
        c.window = 16;
        auto comm = Communicator::Create(c);
        st[r] = comm.status();
        if (comm.ok()) idle[r] = std::move(*comm);
      });
    }
    for (auto& t : ts) t.join();
    ASSERT_TRUE(st[0].ok() && st[1].ok()) << st[0].ToString() << " / " << st[1].ToString();
  }
  EXPECT_EQ(idle[0]->window(), 16);
  ASSERT_TRUE(CallEveryRank(idle, 41, 0).ok());

  CommConfig b = Base(sw.port(), 42, 1);
  b.window = 16;
  b.slot_wait_timeout_ms = 30000;
  const auto t0 = Clock::now();
  auto waiting = Communicator::Create(b);
  const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_TRUE(waiting.ok()) << waiting.status().ToString();
  std::printf("the waiting job got %u slots after %.2f s\n", (*waiting)->window(), waited);
  EXPECT_LT(waited, 10.0) << "idle release 0.3 s: well before the 30 s slot wait";
  EXPECT_EQ((*waiting)->window(), 8) << "its fair share of 16";
  std::vector<std::unique_ptr<Communicator>> one;
  one.push_back(std::move(*waiting));
  ASSERT_TRUE(CallEveryRank(one, 42, 0).ok());

  // The idle job calls again: on its new grant, exact.
  const Status again = CallEveryRank(idle, 41, 1);
  ASSERT_TRUE(again.ok()) << again.ToString();
  EXPECT_EQ(idle[0]->window(), 8);
  EXPECT_EQ(idle[1]->window(), 8);
  one.clear();
  idle.clear();
  const auto counters = sw.Stop();
  EXPECT_GE(counters.at("releases_asked"), 1u);
  EXPECT_GE(counters.at("releases"), 1u);
  EXPECT_EQ(counters.at("err_no_slots"), 0u);
  EXPECT_EQ(counters.at("jobs_done"), 2u);
}

// A released job whose next grant cannot come yet (the pool holds one job at --min-window 16)
// waits for it idle, past its slot wait, and is not failed for it: its slot wait runs only while
// a call waits. Nor does the idle job that holds the pool then release it for the idle one (no
// ping-pong between idle jobs). Once it calls, its JOIN says so, and an idle holder releases.
TEST(ShareSwitchd, AReleasedJobWaitsIdleForItsNextGrantPastItsSlotWait) {
  test::SwitchProcess sw({"--port", "0", "--slots", "16", "--min-window", "16", "--lease-calls",
                          "0", "--idle-release-ms", "300"});
  ASSERT_NE(sw.port(), 0);
  CommConfig a = Base(sw.port(), 61, 1);
  a.window = 16;
  a.slot_wait_timeout_ms = 1000;
  auto idle = Communicator::Create(a);
  ASSERT_TRUE(idle.ok()) << idle.status().ToString();
  std::vector<std::unique_ptr<Communicator>> one;
  one.push_back(std::move(*idle));
  ASSERT_TRUE(CallEveryRank(one, 61, 0).ok());

  CommConfig b = Base(sw.port(), 62, 1);
  b.window = 16;
  auto other = Communicator::Create(b);  // the idle job releases: this one gets the pool
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_EQ((*other)->window(), 16);
  std::this_thread::sleep_for(milliseconds(2500));  // 61 waits, queued, 2.5x its slot wait
  other->reset();                                   // the pool goes to 61
  const Status next = CallEveryRank(one, 61, 1);
  ASSERT_TRUE(next.ok()) << next.ToString();
  EXPECT_EQ(one[0]->window(), 16);

  // Again with 63 taking the pool from idle 61; then 61 calls while 63 is idle: 63 releases.
  CommConfig c = Base(sw.port(), 63, 1);
  c.window = 16;
  auto third = Communicator::Create(c);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  std::this_thread::sleep_for(milliseconds(1500));  // both idle: nobody releases
  const auto t0 = Clock::now();
  const Status got = CallEveryRank(one, 61, 2);
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_TRUE(got.ok()) << got.ToString();
  std::printf("61's call waited %.2f s for 63 to release the pool\n", s);
  EXPECT_LT(s, 10.0);
  third->reset();
  one.clear();
  const auto counters = sw.Stop();
  EXPECT_EQ(counters.at("releases"), 3u) << "61 twice, 63 once: no ping-pong while both idle";
}

// The race a release must survive: the fabric asks an idle job of two ranks to release its grant,
// rank 0 (a communicator) re-joins, but rank 1 (a raw socket here, so the test decides when)
// calls again before re-joining. Its data calls the release off: rank 0 hears that the grant
// stands and runs its next call on it, exact, as if nothing happened. The next idle spell,
// both re-join, and the waiting job gets its slots.
TEST(ShareSwitchd, AReleaseARankOvertakesLeavesTheGrantStanding) {
  namespace p = ::ina::proto;
  test::SwitchProcess sw(
      {"--port", "0", "--slots", "16", "--lease-calls", "0", "--idle-release-ms", "300"});
  ASSERT_NE(sw.port(), 0);
  constexpr uint16_t kJob = 51, kK = 64;
  test::Worker fake(sw.port());  // rank 1
  // The next packet of job kJob at the fake rank that `want` accepts (others are skipped).
  auto await = [&](const std::function<bool(const test::Bytes&)>& want) {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline) {
      auto b = fake.Recv(milliseconds(100));
      if (b && b->size() >= p::kHeaderBytes && p::GetJob(b->data()) == kJob && want(*b)) return b;
    }
    return std::optional<test::Bytes>{};
  };
  auto is_ack = [](uint8_t release) {
    return [release](const test::Bytes& b) {
      return p::IsType(b.data(), p::MsgType::kJoinAck) &&
             p::JoinAckMsg::Decode(b.data()).release == release;
    };
  };
  auto is_result = [](const test::Bytes& b) { return p::IsType(b.data(), p::MsgType::kResult); };
  auto input = [](int rank, int call) {
    std::vector<int32_t> v(kK);
    for (size_t i = 0; i < kK; ++i) v[i] = Input(kJob, static_cast<uint16_t>(rank), call, i);
    return v;
  };

  CommConfig c = Base(sw.port(), kJob, 2);
  c.k = kK;
  c.window = 16;
  std::unique_ptr<Communicator> rank0;
  std::thread creating([&] {
    auto comm = Communicator::Create(c);
    ASSERT_TRUE(comm.ok()) << comm.status().ToString();
    rank0 = std::move(*comm);
  });
  fake.Send(test::Join(kJob, 1, 2, kK, 16));
  auto ack = await(is_ack(0));
  creating.join();
  ASSERT_TRUE(ack && rank0 != nullptr);
  const auto epoch = static_cast<uint8_t>(p::JoinAckMsg::Decode(ack->data()).epoch);
  // Call `call` at both ranks: rank 0 through its communicator, rank 1 one block in slot 0 at
  // generation `call` (sent once the release was called off, for call 1). Checks both results.
  auto call = [&](int n, bool fake_sends) {
    std::vector<int32_t> v = input(0, n);
    Status s;
    std::thread t([&] { s = rank0->AllReduce(std::span<int32_t>(v)); });
    if (fake_sends) {
      fake.Send(
          test::Data(kJob, 1, 0, static_cast<uint16_t>(n), input(1, n), p::flags::kInt32, kK));
    }
    auto res = await(is_result);
    t.join();
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(res.has_value());
    const std::vector<int32_t> got = test::Payload(*res);
    ASSERT_EQ(got.size(), kK);
    for (size_t i = 0; i < kK; ++i) {
      const auto want = static_cast<int32_t>(static_cast<uint32_t>(input(0, n)[i]) +
                                             static_cast<uint32_t>(input(1, n)[i]));
      ASSERT_EQ(v[i], want) << "call " << n << " element " << i;
      ASSERT_EQ(got[i], want) << "call " << n << " element " << i;
    }
  };
  call(0, true);

  // Another job waits; the idle job is asked to release (rank 1 hears it too) and rank 0, idle,
  // re-joins. Rank 1 calls again instead: the release is off and rank 0's call runs on the grant.
  CommConfig b = Base(sw.port(), 52, 1);
  b.window = 16;
  Result<std::unique_ptr<Communicator>> waiting = Internal("not run");
  std::thread waiter([&] { waiting = Communicator::Create(b); });
  ASSERT_TRUE(await(is_ack(1)).has_value()) << "no release asked";
  std::this_thread::sleep_for(milliseconds(300));  // rank 0 re-joins within its 5 ms idle poll
  fake.Send(test::Data(kJob, 1, 0, 1, input(1, 1), p::flags::kInt32, kK));
  std::this_thread::sleep_for(milliseconds(100));  // the release is called off (a 10 ms tick)
  call(1, false);
  EXPECT_EQ(rank0->window(), 16) << "the grant stood";

  // Idle again: asked again, and this time rank 1 re-joins too; the waiting job gets its share.
  ASSERT_TRUE(await(is_ack(1)).has_value()) << "no second release";
  fake.Send(test::Sealed(test::Header(p::JoinMsg{.release = 1,
                                                 .rejoin_epoch = epoch,
                                                 .job = kJob,
                                                 .rank = 1,
                                                 .k = kK,
                                                 .window = 16,
                                                 .world_size = 2})));
  auto regrant = await(is_ack(0));
  waiter.join();
  ASSERT_TRUE(regrant.has_value());
  EXPECT_NE(p::JoinAckMsg::Decode(regrant->data()).epoch, epoch);
  ASSERT_TRUE(waiting.ok()) << waiting.status().ToString();
  EXPECT_EQ((*waiting)->window(), 8);
  waiting->reset();
  fake.Send(test::Leave(kJob, 1));
  rank0.reset();
  const auto counters = sw.Stop();
  EXPECT_GE(counters.at("releases_asked"), 2u);
  EXPECT_EQ(counters.at("releases_cancelled"), 1u);
  EXPECT_EQ(counters.at("releases"), 1u);
  // Rank 0 re-joined for the first release and heard that the grant stands: at once if its
  // re-join came before rank 1's data, else when it came (a worker that heard the release late).
  EXPECT_GE(counters.at("release_stands"), 1u);
}

}  // namespace
}  // namespace ina::host
