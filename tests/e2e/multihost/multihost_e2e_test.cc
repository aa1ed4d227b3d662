// ina-bench with workers started as separate processes that meet the parent over TCP on loopback
// (--listen / --role worker --coordinator), as on a testbed of several hosts (docs/testbed.md):
// a verified run with Gloo, and the failures that must end in bounded time with an error naming
// who: a worker with options that differ from the parent's, a worker killed mid-run, a parent
// killed mid-run, a worker that never comes, and the --kill-rank drill over TCP. The switch is
// this test's own, so that killing the parent leaves nothing behind. (The network-namespace mode,
// the same TCP path, runs in tests/e2e/testbed.)
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "json_line.h"
#include "process.h"
#include "support/seed.h"

namespace ina::bench {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// argv with stderr folded into stdout, so that the test reads both.
Result<Process> Start(std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1"});
  return Process::Start(argv);
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  return all;
}

class MultiHost : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = std::to_string(ina::tests::Seed());
    auto sw = Process::Start({INA_SWITCHD_BIN, "--port", "0", "--bind", "127.0.0.1"});
    ASSERT_TRUE(sw.ok()) << sw.status().ToString();
    switch_.emplace(std::move(*sw));
    auto line = switch_->WaitForLine("ina-switchd listening on ", 30s);
    ASSERT_TRUE(line.ok()) << line.status().ToString();
    switch_addr_ = line->substr(line->rfind(' ') + 1);
  }

  // The parent, coordinating `workers` workers started here; returns the port it listens on.
  std::string StartParent(int workers, std::vector<std::string> extra) {
    std::vector<std::string> argv = {INA_BENCH_BIN, "--workers",  std::to_string(workers),
                                     "--switch",    switch_addr_, "--listen",
                                     "127.0.0.1:0", "--seed",     seed_,
                                     "--timeout-s", "120",        "--progress-timeout-ms",
                                     "1000"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto p = Start(argv);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) return "";
    parent_.emplace(std::move(*p));
    auto line = parent_->WaitForLine("ina-bench: coordinator listening on ", 30s);
    EXPECT_TRUE(line.ok()) << line.status().ToString();
    if (!line.ok()) return "";
    const size_t at = line->find("listening on ") + 13;
    const std::string addr = line->substr(at, line->find(';', at) - at);
    return "127.0.0.1" + addr.substr(addr.rfind(':'));
  }

  void StartWorker(int rank, const std::string& coordinator, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {INA_BENCH_BIN,       "--role",    "worker",
                                     "--coordinator",     coordinator, "--rank",
                                     std::to_string(rank)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto p = Start(argv);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    workers_.push_back(std::move(*p));
  }

  // Whether the parent says that n ranks joined, within 30 s.
  bool WaitJoined(int n) {
    for (int i = 0; i < n; ++i) {
      if (!parent_->WaitForLine("  coordinator: rank ", 30s).ok()) return false;
    }
    return true;
  }

  // Reads the parent's output to its end (bounded); returns it and its exit code.
  std::string FinishParent(std::chrono::seconds limit, int* code) {
    auto lines = parent_->Drain(limit);
    auto st = parent_->Stop(SIGTERM, 5s);
    *code = st.ok() && WIFEXITED(*st) ? WEXITSTATUS(*st) : -1;
    const std::string out = Joined(lines);
    std::printf("%s", out.c_str());
    return out;
  }

  // A worker's output and exit code, waiting at most `limit` for it to end.
  std::string FinishWorker(int i, std::chrono::seconds limit, int* code) {
    auto lines = workers_[i].Drain(limit);
    auto st = workers_[i].Stop(SIGKILL, 5s);  // already gone if it ended by itself
    *code = st.ok() && WIFEXITED(*st) ? WEXITSTATUS(*st) : -1;
    return Joined(lines);
  }

  static std::string JsonOf(const std::string& out) {
    std::string json;
    size_t at = 0;
    while ((at = out.find("\n{", at)) != std::string::npos) {
      ++at;
      json = out.substr(at, out.find('\n', at) - at);
    }
    return json;
  }

  std::string seed_;
  std::optional<Process> switch_;
  std::string switch_addr_;
  std::optional<Process> parent_;
  std::vector<Process> workers_;
};

TEST_F(MultiHost, WorkersOverTcpVerifiedAgainstGloo) {
  const std::string coord = StartParent(3, {"--elements", "100003", "--iters", "2"});
  ASSERT_FALSE(coord.empty());
  StartWorker(0, coord);
  StartWorker(1, coord, {"--elements", "100003", "--quiet"});  // agrees with the parent
  StartWorker(2, coord, {"--quiet", "--switch", switch_addr_});
  int code = -1;
  const std::string out = FinishParent(120s, &code);
  const std::string json = JsonOf(out);
  ASSERT_FALSE(json.empty()) << out;
  EXPECT_EQ(code, 0);
  EXPECT_TRUE(JsonTrue(json, "verified")) << json;
  EXPECT_EQ(JsonString(json, "launch"), "tcp");
  EXPECT_EQ(JsonNumber(json, "workers"), 3);
  EXPECT_GT(JsonNumber(json, "gloo_ms_median"), 0) << json;
  EXPECT_NE(out.find("rank 2 joined from 127.0.0.1"), std::string::npos);
  for (int r = 0; r < 3; ++r) {
    int wc = -1;
    FinishWorker(r, 10s, &wc);
    EXPECT_EQ(wc, 0) << "rank " << r;
  }
}

TEST_F(MultiHost, MismatchedOptionFailsFastNamingTheRank) {
  const std::string coord = StartParent(2, {"--elements", "4096", "--iters", "2"});
  ASSERT_FALSE(coord.empty());
  StartWorker(0, coord);
  StartWorker(1, coord, {"--elements", "5000"});
  const auto t0 = Clock::now();
  int code = -1;
  const std::string out = FinishParent(60s, &code);
  EXPECT_LT(Clock::now() - t0, 20s);
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("rank 1"), std::string::npos) << out;
  EXPECT_NE(out.find("--elements is '5000' on its command line but '4096' at the coordinator"),
            std::string::npos)
      << out;
  int wc = -1;
  const std::string w1 = FinishWorker(1, 10s, &wc);
  EXPECT_NE(wc, 0);
  EXPECT_NE(w1.find("refused rank 1: --elements"), std::string::npos) << w1;
  const std::string w0 = FinishWorker(0, 10s, &wc);
  EXPECT_NE(wc, 0) << "rank 0 must fail too, not hang: " << w0;
}

TEST_F(MultiHost, KilledWorkerIsNamedWithinBound) {
  // Long enough that the kill lands mid-run (tens of all-reduces of 4M floats).
  const std::string coord = StartParent(2, {"--elements", "4194304", "--iters", "50", "--no-gloo"});
  ASSERT_FALSE(coord.empty());
  StartWorker(0, coord, {"--quiet"});
  StartWorker(1, coord, {"--quiet"});
  ASSERT_TRUE(WaitJoined(2));
  std::this_thread::sleep_for(500ms);
  const auto t0 = Clock::now();
  kill(workers_[1].pid(), SIGKILL);
  int code = -1;
  const std::string out = FinishParent(60s, &code);
  // Bound: the progress timeout (1 s) + 2 s of grace, with slack for a loaded machine.
  EXPECT_LT(Clock::now() - t0, 20s);
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("rank 1: closed its connection to the coordinator without reporting"),
            std::string::npos)
      << out;
  int wc = -1;
  FinishWorker(0, 10s, &wc);
  EXPECT_NE(wc, 0);
}

TEST_F(MultiHost, KilledParentEndsTheWorkers) {
  const std::string coord = StartParent(2, {"--elements", "4194304", "--iters", "50", "--no-gloo"});
  ASSERT_FALSE(coord.empty());
  StartWorker(0, coord);
  StartWorker(1, coord);
  ASSERT_TRUE(WaitJoined(2));
  std::this_thread::sleep_for(500ms);
  const auto t0 = Clock::now();
  kill(parent_->pid(), SIGKILL);
  for (int r = 0; r < 2; ++r) {
    int wc = -1;
    const std::string w = FinishWorker(r, 30s, &wc);
    EXPECT_NE(wc, 0) << w;
    EXPECT_NE(w.find("lost the coordinator"), std::string::npos) << w;
    EXPECT_NE(w.find("the coordinator at " + coord), std::string::npos) << w;
  }
  EXPECT_LT(Clock::now() - t0, 15s);
}

TEST_F(MultiHost, WorkerThatNeverComesIsNamed) {
  const std::string coord = StartParent(2, {"--elements", "4096", "--join-timeout-s", "2"});
  ASSERT_FALSE(coord.empty());
  StartWorker(0, coord, {"--quiet"});
  const auto t0 = Clock::now();
  int code = -1;
  const std::string out = FinishParent(60s, &code);
  EXPECT_LT(Clock::now() - t0, 20s);
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("rank 1: did not connect to the coordinator"), std::string::npos) << out;
  int wc = -1;
  FinishWorker(0, 10s, &wc);
  EXPECT_NE(wc, 0);
}

TEST_F(MultiHost, KillDrillOverTcp) {
  const std::string coord = StartParent(
      3, {"--elements", "4194304", "--kill-rank", "2", "--kill-after-ms", "5", "--no-gloo"});
  ASSERT_FALSE(coord.empty());
  for (int r = 0; r < 3; ++r) StartWorker(r, coord, {"--quiet"});
  int code = -1;
  const std::string out = FinishParent(60s, &code);
  const std::string json = JsonOf(out);
  ASSERT_FALSE(json.empty()) << out;
  EXPECT_EQ(code, 0) << out;
  EXPECT_TRUE(JsonTrue(json, "survivors_failed")) << json;
  EXPECT_LT(JsonNumber(json, "max_error_ms"), 10000) << json;
}

}  // namespace
}  // namespace ina::bench
