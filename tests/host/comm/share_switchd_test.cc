// Jobs sharing one ina-switchd's slot pool (docs/protocol.md, "Sharing the slot pool"), real
// processes on loopback: several concurrent jobs whose windows do not all fit wait for slots,
// re-join at each lease's end and get fair shares, and every result is bit-exact; a job that
// cannot get slots in time fails with an error naming the wait; a waiting job starts once the
// job holding the pool ends.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
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
  test::SwitchProcess sw({"--port", "0", "--slots", "16", "--lease-calls", "0"});
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

}  // namespace
}  // namespace ina::host
