// Communicators joining through the real ina-switchd on loopback: a rank refused by the fabric
// (another K) makes the others fail at once with peer_refused, naming it, on one core and on two
// (each job on the core its id steers to, with its own control plane); ranks asking different
// windows run on the least.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ina/host/communicator.h"
#include "support/switchd_process.h"

namespace ina::host {
namespace {

using Clock = std::chrono::steady_clock;

class JoinSwitchd : public ::testing::TestWithParam<int> {};

TEST_P(JoinSwitchd, RefusedRankFailsThePeersAtOnceNamingRankAndParameter) {
  test::SwitchProcess sw({"--port", "0", "--cores", std::to_string(GetParam())});
  ASSERT_NE(sw.port(), 0);
  for (uint16_t job : {11, 12}) {  // cores 1 and 0 of two
    SCOPED_TRACE("job " + std::to_string(job));
    CommConfig base;
    base.switch_port = sw.port();
    base.job_id = job;
    base.world_size = 3;
    base.k = 256;
    base.join_timeout_ms = 30000;
    std::vector<Status> st(3);
    std::vector<Clock::time_point> end(3);
    std::vector<std::thread> ts;
    for (uint16_t r : {0, 1}) {
      ts.emplace_back([&, r] {
        CommConfig c = base;
        c.rank = r;
        st[r] = Communicator::Create(c).status();
        end[r] = Clock::now();
      });
    }
    // Ranks 0 and 1 send their first JOIN at once (and every 100 ms): they fix the job's K.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    CommConfig c2 = base;
    c2.rank = 2;
    c2.k = 64;
    const auto start2 = Clock::now();
    st[2] = Communicator::Create(c2).status();
    for (auto& t : ts) t.join();
    EXPECT_EQ(st[2].code(), StatusCode::kInvalidArgument) << st[2].ToString();
    EXPECT_NE(st[2].message().find("K 64 differs from 256"), std::string::npos) << st[2].message();
    for (int r : {0, 1}) {
      const double ms = std::chrono::duration<double, std::milli>(end[r] - start2).count();
      std::printf("--cores %d job %u: rank %d failed %.1f ms after rank 2 started joining\n",
                  GetParam(), job, r, ms);
      EXPECT_EQ(st[r].code(), StatusCode::kAborted) << st[r].ToString();
      EXPECT_NE(st[r].message().find("rank 2's JOIN was refused"), std::string::npos)
          << st[r].message();
      EXPECT_NE(st[r].message().find("its K 64 differs from 256"), std::string::npos)
          << st[r].message();
      EXPECT_LT(ms, 1000.0);
    }
  }
  const auto counters = sw.Stop();
  // At least once per refused JOIN and per peer told; a JOIN resent (every 100 ms) before its
  // answer arrived, as on a loaded machine, is answered again and counted again.
  EXPECT_GE(counters.at("err_bad_params"), 2u);
  EXPECT_GE(counters.at("err_peer_refused"), 4u);
  EXPECT_EQ(counters.at("jobs_admitted"), 0u);
}

// The switch dies mid-job and a new one starts on its port (a crash and a restart by its
// supervisor): the new switch holds no job, and answers the ranks' data with error(unknown_job).
// Every rank fails at once, saying so, instead of at its progress timeout (30 s here).
TEST(SwitchdRestart, RanksOfAJobTheNewSwitchDoesNotHoldFailAtOnce) {
  std::optional<test::SwitchProcess> sw;
  sw.emplace(std::vector<std::string>{"--port", "0"});
  ASSERT_TRUE(sw->ok());
  const uint16_t port = sw->port();
  constexpr int kWorld = 3;
  std::vector<Status> st(kWorld);
  std::vector<Clock::time_point> end(kWorld);
  std::atomic<int> calls{0};
  std::vector<std::thread> ts;
  for (int r = 0; r < kWorld; ++r) {
    ts.emplace_back([&, r] {
      CommConfig c;
      c.switch_port = port;
      c.job_id = 21;
      c.rank = static_cast<uint16_t>(r);
      c.world_size = kWorld;
      c.k = 256;
      c.progress_timeout_ms = 30000;
      auto comm = Communicator::Create(c);
      if (!comm.ok()) {
        st[r] = comm.status();
        end[r] = Clock::now();
        return;
      }
      std::vector<float> data(200000, 1.0f);
      // Calls until one fails (at most 60 s of them: a bound, never reached when it works).
      const auto stop = Clock::now() + std::chrono::seconds(60);
      while (st[r].ok() && Clock::now() < stop) {
        st[r] = (*comm)->AllReduce(std::span<float>(data));
        ++calls;
      }
      end[r] = Clock::now();
    });
  }
  const auto wait_until = Clock::now() + std::chrono::seconds(30);
  while (calls.load() < 3 * kWorld && Clock::now() < wait_until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GE(calls.load(), 3 * kWorld) << "the job did not run";
  sw.reset();  // SIGKILL: mid-call, or between two
  const auto restarted = Clock::now();
  sw.emplace(std::vector<std::string>{"--port", std::to_string(port)});
  ASSERT_TRUE(sw->ok()) << "the new switch did not start on port " << port;
  for (auto& t : ts) t.join();
  for (int r = 0; r < kWorld; ++r) {
    const double s = std::chrono::duration<double>(end[r] - restarted).count();
    std::printf("rank %d failed %.2f s after the restart: %s\n", r, s, st[r].ToString().c_str());
    EXPECT_EQ(st[r].code(), StatusCode::kAborted) << st[r].ToString();
    EXPECT_NE(st[r].message().find("not held by the fabric"), std::string::npos) << st[r].message();
    EXPECT_LT(s, 10.0) << "rank " << r << " waited for its progress timeout";
  }
  const auto counters = sw->Stop();
  EXPECT_GE(counters.at("err_unknown_job"), static_cast<uint64_t>(kWorld));
  EXPECT_EQ(counters.at("jobs_admitted"), 0u);
}

// Ranks asking different windows (each what its socket holds: a worker on a host whose
// net.core.rmem_max is Debian's asks fewer slots) join one job, which runs on the least of them.
TEST_P(JoinSwitchd, RanksAskingDifferentWindowsRunOnTheLeast) {
  test::SwitchProcess sw({"--port", "0", "--cores", std::to_string(GetParam())});
  ASSERT_NE(sw.port(), 0);
  constexpr int kWorld = 3;
  const uint16_t asked[kWorld] = {64, 24, 40};
  std::vector<Status> st(kWorld);
  std::vector<uint16_t> window(kWorld);
  std::vector<std::vector<int32_t>> data(kWorld, std::vector<int32_t>(20000));
  std::vector<std::thread> ts;
  for (int r = 0; r < kWorld; ++r) {
    ts.emplace_back([&, r] {
      CommConfig c;
      c.switch_port = sw.port();
      c.job_id = 13;
      c.rank = static_cast<uint16_t>(r);
      c.world_size = kWorld;
      c.k = 256;
      c.window = asked[r];
      c.join_timeout_ms = 30000;
      auto comm = Communicator::Create(c);
      if (!comm.ok()) {
        st[r] = comm.status();
        return;
      }
      window[r] = (*comm)->window();
      for (size_t i = 0; i < data[r].size(); ++i) data[r][i] = static_cast<int32_t>(i * (r + 1));
      st[r] = (*comm)->AllReduce(std::span<int32_t>(data[r]));
    });
  }
  for (auto& t : ts) t.join();
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
    EXPECT_EQ(window[r], 24) << "rank " << r;
    for (size_t i = 0; i < data[r].size(); i += 997)
      ASSERT_EQ(data[r][i], static_cast<int32_t>(6 * i));
  }
  const auto counters = sw.Stop();
  EXPECT_EQ(counters.at("err_bad_params"), 0u);
}

INSTANTIATE_TEST_SUITE_P(Cores, JoinSwitchd, ::testing::Values(1, 2));

}  // namespace
}  // namespace ina::host
