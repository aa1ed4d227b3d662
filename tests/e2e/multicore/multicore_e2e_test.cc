// ina-switchd --cores 2 with two jobs (job ids 1 and 2, two ranks each, ina-dpdk-worker over the
// UDP transport on loopback): every rank's result is the exact quantized sum and bit-identical to
// the same run at --cores 1; the kernel steered each job to its own core (core_counters), and the
// merged counters add up. Seeds: INA_SEED (default 1) picks the inputs and the fault streams.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "process.h"

namespace ina::bench {
namespace {

using namespace std::chrono_literals;

constexpr int kWorld = 2;
constexpr size_t kElements = 100000;

uint64_t Seed() {
  const char* s = std::getenv("INA_SEED");
  return s != nullptr ? std::strtoull(s, nullptr, 10) : 1;
}

// "name": value pairs of one JSON object line (flat).
std::map<std::string, uint64_t> Counters(const std::string& obj) {
  std::map<std::string, uint64_t> m;
  const std::regex re("\"([a-z_]+)\": ([0-9]+)");
  for (auto it = std::sregex_iterator(obj.begin(), obj.end(), re); it != std::sregex_iterator();
       ++it) {
    m[(*it)[1]] = std::stoull((*it)[2]);
  }
  return m;
}

struct RunResult {
  std::map<int, std::string> fingerprint;  // by job * 10 + rank
  bool all_exact = true;
  std::map<std::string, uint64_t> total;
  std::vector<std::map<std::string, uint64_t>> cores;
};

RunResult RunJobs(int cores, const std::string& drop) {
  std::printf("--cores %d --drop-rate %s, INA_SEED=%llu\n", cores, drop.c_str(),
              static_cast<unsigned long long>(Seed()));
  RunResult out;
  auto sw = Process::Start({INA_SWITCHD_BIN, "--bind", "127.0.0.1", "--port", "0", "--cores",
                            std::to_string(cores), "--drop-rate", drop, "--seed",
                            std::to_string(Seed())});
  EXPECT_TRUE(sw.ok());
  if (!sw.ok()) return out;
  auto line = sw->WaitForLine("ina-switchd listening on ", 10s);
  EXPECT_TRUE(line.ok());
  if (!line.ok()) return out;
  const std::string addr = line->substr(std::string("ina-switchd listening on ").size());
  std::vector<Process> ws;
  std::vector<int> keys;
  for (int job : {1, 2}) {
    for (int r = 0; r < kWorld; ++r) {
      auto p = Process::Start({"/usr/bin/env", "INA_TRANSPORT=udp", "INA_SWITCH=" + addr,
                               "INA_JOB=" + std::to_string(job), "INA_RANK=" + std::to_string(r),
                               "INA_WORLD=" + std::to_string(kWorld), "INA_JOIN_TIMEOUT_MS=30000",
                               "INA_PROGRESS_TIMEOUT_MS=30000", INA_WORKER_BIN,
                               std::to_string(kElements), std::to_string(Seed() + job)});
      EXPECT_TRUE(p.ok());
      if (!p.ok()) return out;
      ws.push_back(std::move(*p));
      keys.push_back(job * 10 + r);
    }
  }
  const std::regex re("fingerprint=([0-9a-f]+) exact=([01])");
  for (size_t i = 0; i < ws.size(); ++i) {
    auto l = ws[i].WaitForLine("result ", 120s);
    EXPECT_TRUE(l.ok()) << "job/rank " << keys[i] << ": " << l.status().ToString();
    std::smatch m;
    if (l.ok() && std::regex_search(*l, m, re)) {
      out.fingerprint[keys[i]] = m[1];
      out.all_exact = out.all_exact && m[2] == "1";
    } else {
      out.all_exact = false;
    }
    (void)ws[i].Drain(30s);
    auto st = ws[i].Stop(SIGTERM, 10s);
    EXPECT_TRUE(st.ok() && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << "job/rank " << keys[i];
  }
  auto st = sw->Stop(SIGTERM, 10s);
  EXPECT_TRUE(st.ok() && WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
  for (const auto& l : sw->Drain(5s)) {
    if (l.rfind("{\"switch_counters\"", 0) == 0) out.total = Counters(l);
    if (l.rfind("{\"core_counters\"", 0) == 0) {
      std::printf("%s\n", l.c_str());
      size_t pos = 0;
      while ((pos = l.find('{', pos + 1)) != std::string::npos) {
        const size_t end = l.find('}', pos);
        out.cores.push_back(Counters(l.substr(pos, end - pos)));
        pos = end;
      }
    }
  }
  return out;
}

TEST(MultiCoreSwitch, TwoJobsOnTwoCoresAreBitIdenticalToOneCore) {
  RunResult one = RunJobs(1, "0");
  RunResult two = RunJobs(2, "0");
  ASSERT_EQ(one.fingerprint.size(), 4u);
  ASSERT_EQ(two.fingerprint.size(), 4u);
  EXPECT_TRUE(one.all_exact);
  EXPECT_TRUE(two.all_exact);
  EXPECT_EQ(one.fingerprint, two.fingerprint);
  EXPECT_NE(one.fingerprint.at(10), one.fingerprint.at(20)) << "the jobs had different inputs";
  EXPECT_TRUE(one.cores.empty()) << "one core prints no core_counters";
  // Job 2 is steered to core 0, job 1 to core 1: each core admitted and finished one job.
  ASSERT_EQ(two.cores.size(), 2u);
  for (int c = 0; c < 2; ++c) {
    EXPECT_EQ(two.cores[c]["jobs_admitted"], 1u) << "core " << c;
    EXPECT_EQ(two.cores[c]["jobs_freed"], 1u) << "core " << c;
    EXPECT_GT(two.cores[c]["rx_data"], 0u) << "core " << c;
  }
  EXPECT_EQ(two.total["jobs_admitted"], 2u);
  EXPECT_EQ(two.total["jobs_freed"], 2u);
  EXPECT_EQ(two.total["rx_data"], two.cores[0]["rx_data"] + two.cores[1]["rx_data"]);
  EXPECT_EQ(two.total["results"], one.total["results"]);
}

TEST(MultiCoreSwitch, TwoCoresUnderLossStayExact) {
  RunResult two = RunJobs(2, "0.02");
  ASSERT_EQ(two.fingerprint.size(), 4u);
  EXPECT_TRUE(two.all_exact);
  EXPECT_GT(two.total["inj_rx_drops"] + two.total["inj_tx_drops"], 0u);
  EXPECT_GT(two.total["retransmissions"], 0u);
}

// 0 cores; more than 16 with DPDK ports (their rings); several with RoCE over raw sockets (one
// raw socket). Several cores with DPDK ports are fine: tests/e2e/dpdk.
TEST(MultiCoreSwitch, CoresZeroOrMoreThanTheIoTakesIsABadFlag) {
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--cores", "0"},
        std::vector<std::string>{"--cores", "17", "--bind", "10.9.0.1", "--dpdk", "--no-huge"},
        std::vector<std::string>{"--cores", "2", "--bind", "10.9.0.1", "--io", "roce"}}) {
    std::vector<std::string> argv = {INA_SWITCHD_BIN, "--port", "47000"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto p = Process::Start(argv);
    ASSERT_TRUE(p.ok());
    auto st = p->Stop(0, 10s);  // signal 0: just wait for the exit
    (void)p->Drain(1s);
    ASSERT_TRUE(st.ok());
    EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 2) << extra[1];
  }
}

}  // namespace
}  // namespace ina::bench
