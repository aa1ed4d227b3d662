// ina-switchd --io dpdk and 4 worker processes (ina-dpdk-worker, INA_TRANSPORT=dpdk), over
// net_memif (one host) and over net_af_packet on veth pairs between network namespaces, with
// loss injected at the switch. Every rank's result must be bit-identical to the same run over the
// UDP path (kernel sockets on loopback) and to the exact quantized sum (ExpectFloat).
// Skips with the reason when not root, when ina-switchd lacks DPDK, or when the EAL cannot start.
// Seeds: INA_SEED (default 1) picks the input data; printed.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "process.h"
#include "support/seed.h"

namespace ina::bench {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr int kWorld = 4;
constexpr size_t kElements = 100000;  // not a multiple of k: a short last block
constexpr const char* kSwitchIp = "10.77.0.1";
constexpr int kSwitchPort = 47000;

uint64_t Seed() { return ina::tests::Seed(); }

std::string Unique() { return std::to_string(getpid()); }

int Sh(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// Process::Start does not search PATH.
std::string IpBin() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "ip";
}

std::string EalCommon(const std::string& prefix) {
  return "--no-huge -m 192 --no-pci --no-telemetry --log-level=*:warning --file-prefix " + prefix;
}

struct WorkerResult {
  std::string fingerprint;
  bool exact = false;
  double pps = 0;
};

// Starts the workers (argv per rank), waits for each result line; empty fingerprint on failure.
std::vector<WorkerResult> RunWorkers(const std::vector<std::vector<std::string>>& argvs) {
  std::vector<Process> ps;
  for (const auto& a : argvs) {
    auto p = Process::Start(a);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) return {};
    ps.push_back(std::move(*p));
  }
  std::vector<WorkerResult> out(argvs.size());
  const std::regex re("fingerprint=([0-9a-f]+) exact=([01]) packets_per_s=([0-9.]+)");
  for (size_t r = 0; r < ps.size(); ++r) {
    auto line = ps[r].WaitForLine("result ", 120s);
    EXPECT_TRUE(line.ok()) << "rank " << r << ": " << line.status().ToString();
    std::smatch m;
    if (line.ok() && std::regex_search(*line, m, re)) {
      out[r] = {m[1], m[2] == "1", std::stod(m[3])};
    }
    (void)ps[r].Drain(30s);  // until it exits (after LEAVE), so the exit status is its own
    auto st = ps[r].Stop(SIGTERM, 10s);
    EXPECT_TRUE(st.ok() && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << "rank " << r;
  }
  return out;
}

std::vector<std::string> WorkerArgv(std::vector<std::string> prefix, int rank,
                                    const std::vector<std::string>& env) {
  prefix.push_back("/usr/bin/env");
  prefix.push_back("INA_RANK=" + std::to_string(rank));
  prefix.push_back("INA_WORLD=" + std::to_string(kWorld));
  prefix.push_back("INA_JOB=7");
  prefix.push_back("INA_JOIN_TIMEOUT_MS=30000");
  prefix.push_back("INA_PROGRESS_TIMEOUT_MS=30000");
  // The same K on every path (the default follows the path MTU: 2048 over loopback, 256 over a
  // DPDK port of 1500-byte frames), so results compare bit for bit; env may set another.
  prefix.push_back("INA_K=256");
  prefix.insert(prefix.end(), env.begin(), env.end());
  prefix.push_back(INA_WORKER_BIN);
  prefix.push_back(std::to_string(kElements));
  prefix.push_back(std::to_string(Seed()));
  return prefix;
}

// A DPDK rank's transport settings: its EAL arguments, its address 10.77.1.(r+1):40000.
std::vector<std::string> DpdkEnv(const std::string& eal, int rank) {
  return {"INA_TRANSPORT=dpdk",
          "INA_SWITCH=" + std::string(kSwitchIp) + ":" + std::to_string(kSwitchPort),
          "INA_DPDK_EAL=" + eal, "INA_DPDK_LOCAL=10.77.1." + std::to_string(rank + 1) + ":40000",
          "INA_DPDK_BACKOFF_US=200"};
}

class DpdkE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Seed();  // prints it once, before the skips
    if (geteuid() != 0) GTEST_SKIP() << "DPDK's EAL and network namespaces need root";
    char tmpl[] = "/tmp/ina-dpdk-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    switch_.reset();  // kills the switch if still running
    for (const auto& ns : namespaces_) Sh("ip netns del " + ns + " 2>/dev/null");
    for (const auto& p : prefixes_) {
      std::error_code ec;
      fs::remove_all("/var/run/dpdk/" + p, ec);
    }
    if (!dir_.empty()) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }

  std::string Prefix(const std::string& what) {
    prefixes_.push_back("ina8_" + what + "_" + Unique());
    return prefixes_.back();
  }

  // The UDP path's fingerprints for the same inputs (no loss: the result does not depend on it),
  // for `world` ranks.
  std::vector<WorkerResult> UdpBaseline(int world = kWorld,
                                        const std::vector<std::string>& extra_env = {}) {
    auto sw = Process::Start({INA_SWITCHD_BIN, "--bind", "127.0.0.1", "--port", "0"});
    EXPECT_TRUE(sw.ok());
    if (!sw.ok()) return {};
    auto line = sw->WaitForLine("ina-switchd listening on ", 10s);
    EXPECT_TRUE(line.ok());
    if (!line.ok()) return {};
    const std::string addr = line->substr(std::string("ina-switchd listening on ").size());
    std::vector<std::vector<std::string>> argvs;
    for (int r = 0; r < world; ++r) {
      std::vector<std::string> env = {"INA_TRANSPORT=udp", "INA_SWITCH=" + addr,
                                      "INA_WORLD=" + std::to_string(world)};
      env.insert(env.end(), extra_env.begin(), extra_env.end());
      argvs.push_back(WorkerArgv({}, r, env));
    }
    auto res = RunWorkers(argvs);
    (void)sw->Stop(SIGTERM, 5s);
    return res;
  }

  // Starts ina-switchd --io dpdk; skips the test when the EAL (or DPDK support) is missing.
  bool StartSwitch(std::vector<std::string> prefix, const std::string& eal, const std::string& drop,
                   const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = std::move(prefix);
    for (const std::string& a :
         {std::string(INA_SWITCHD_BIN), std::string("--bind"), std::string(kSwitchIp),
          std::string("--port"), std::to_string(kSwitchPort), std::string("--dpdk"), eal,
          std::string("--drop-rate"), drop, std::string("--seed"), std::to_string(Seed()),
          std::string("--dpdk-backoff-us"), std::string("200")}) {
      argv.push_back(a);
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto sw = Process::Start(argv);
    EXPECT_TRUE(sw.ok());
    if (!sw.ok()) return false;
    switch_ = std::make_unique<Process>(std::move(*sw));
    auto line = switch_->WaitForLine("ina-switchd listening on ", 30s);
    if (!line.ok()) {
      auto st = switch_->Stop(SIGKILL, 1s);
      const int code = st.ok() && WIFEXITED(*st) ? WEXITSTATUS(*st) : -1;
      if (code == 1 || code == 2) {
        skip_reason_ = "ina-switchd --io dpdk did not start (exit " + std::to_string(code) +
                       ": EAL or DPDK support missing; see its stderr)";
      } else {
        ADD_FAILURE() << "ina-switchd --io dpdk: no listening line";
      }
      return false;
    }
    std::printf("%s\n", line->c_str());
    return true;
  }

  // Stops the switch; returns its port_counters JSON line.
  std::string StopSwitch() {
    auto st = switch_->Stop(SIGTERM, 10s);
    const bool clean = st.ok() && WIFEXITED(*st) && WEXITSTATUS(*st) == 0;
    // How it ended, when not cleanly: a signal of its own (a crash) or the SIGKILL after 10 s
    // without exiting on SIGTERM (a core stuck) read differently.
    EXPECT_TRUE(clean) << "ina-switchd: "
                       << (!st.ok()           ? st.status().ToString()
                           : WIFSIGNALED(*st) ? "killed by signal " + std::to_string(WTERMSIG(*st))
                           : WIFEXITED(*st)   ? "exit " + std::to_string(WEXITSTATUS(*st))
                                              : "status " + std::to_string(*st));
    std::string ports;
    for (const auto& l : switch_->Drain(5s)) {
      if (l.rfind("{\"port_counters\"", 0) == 0) ports = l;
      if (l.rfind("{\"switch_counters\"", 0) == 0) counters_line_ = l;
      if (l.rfind("{\"core_counters\"", 0) == 0) core_line_ = l;
      if (!clean || l.rfind("  ", 0) == 0 || l[0] == '{' || l.rfind("ina-switchd", 0) == 0) {
        std::printf("switch: %s\n", l.c_str());  // all of it after an unclean end
      }
    }
    switch_.reset();
    return ports;
  }

  void Check(const std::vector<WorkerResult>& got, const std::vector<WorkerResult>& udp) {
    ASSERT_EQ(got.size(), static_cast<size_t>(kWorld));
    ASSERT_EQ(udp.size(), static_cast<size_t>(kWorld));
    for (int r = 0; r < kWorld; ++r) {
      EXPECT_FALSE(got[r].fingerprint.empty()) << "rank " << r << " gave no result";
      EXPECT_TRUE(got[r].exact) << "rank " << r << " differs from the exact quantized sum";
      EXPECT_EQ(got[r].fingerprint, udp[r].fingerprint) << "rank " << r << " dpdk vs udp";
      std::printf("rank %d fingerprint %s (udp %s) %.0f packets/s\n", r, got[r].fingerprint.c_str(),
                  udp[r].fingerprint.c_str(), got[r].pps);
    }
  }

  std::string dir_;
  std::vector<std::string> namespaces_;
  std::vector<std::string> prefixes_;
  std::unique_ptr<Process> switch_;
  std::string skip_reason_;
  std::string counters_line_;  // the stopped switch's {"switch_counters": ...} line
  std::string core_line_;      // and its {"core_counters": [...]} line

  // A counter of each core of the last stopped switch, in core order.
  std::vector<uint64_t> CoreCounters(const std::string& name) const {
    std::vector<uint64_t> v;
    const std::regex re("\"" + name + "\": ([0-9]+)");
    for (auto it = std::sregex_iterator(core_line_.begin(), core_line_.end(), re);
         it != std::sregex_iterator(); ++it) {
      v.push_back(std::stoull((*it)[1]));
    }
    return v;
  }

  // A counter of the last stopped switch (0 when absent).
  uint64_t Counter(const std::string& name) const {
    std::smatch m;
    const std::regex re("\"" + name + "\": ([0-9]+)");
    return std::regex_search(counters_line_, m, re) ? std::stoull(m[1]) : 0;
  }

  // The four ranks over memif: the switch with one memif server port per rank (cores > 1:
  // --cores, port r on core r % cores), each rank a DPDK client. jumbo: 9000-byte frames on both
  // sides (--dpdk-mtu, INA_DPDK_MTU) and K=2048, 8 KiB payloads, against UDP at K=2048.
  // one_job: the job on every core instead (--core-ports 1: core c owns queue c of every port at
  // port + c; each rank's lane l on queue l of its memif, INA_SWITCH_CORES=cores).
  void FourWorkersOverMemif(int cores, bool jumbo = false, bool one_job = false) {
    const std::vector<std::string> k_env =
        jumbo ? std::vector<std::string>{"INA_K=2048"} : std::vector<std::string>{};
    const auto udp = UdpBaseline(kWorld, k_env);
    ASSERT_EQ(udp.size(), static_cast<size_t>(kWorld));
    // Jumbo: memif buffers that hold a whole frame (net/dpdk.h: chained memif frames are damaged).
    const std::string bsize = jumbo ? ",bsize=16384" : "";
    std::string eal = EalCommon(Prefix("sw")) + (cores > 1 ? " -l 0-1" : " -l 0");
    for (int r = 0; r < kWorld; ++r) {
      eal += " --vdev net_memif" + std::to_string(r) + ",role=server,id=0,socket=" + dir_ + "/w" +
             std::to_string(r) + ".sock" + bsize;
    }
    std::vector<std::string> sw_extra = {"--cores", std::to_string(cores)};
    if (jumbo) sw_extra.insert(sw_extra.end(), {"--dpdk-mtu", "9000"});
    if (one_job) sw_extra.insert(sw_extra.end(), {"--core-ports", "1"});
    if (!StartSwitch({}, eal, "0.01", sw_extra)) {
      if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
      return;
    }
    std::vector<std::vector<std::string>> argvs;
    for (int r = 0; r < kWorld; ++r) {
      const std::string weal = EalCommon(Prefix("w" + std::to_string(r))) + " -l " +
                               std::to_string(r % 2) +
                               " --vdev net_memif0,role=client,id=0,socket=" + dir_ + "/w" +
                               std::to_string(r) + ".sock" + bsize;
      std::vector<std::string> env = DpdkEnv(weal, r);
      if (jumbo) env.insert(env.end(), {"INA_K=2048", "INA_DPDK_MTU=9000"});
      if (one_job) {
        env.push_back("INA_SWITCH_CORES=" + std::to_string(cores));
        env.push_back("INA_PROGRESS_THREADS=" + std::to_string(cores));
      }
      argvs.push_back(WorkerArgv({}, r, env));
    }
    const auto got = RunWorkers(argvs);
    const std::string ports = StopSwitch();
    Check(got, udp);
    EXPECT_NE(ports.find("net_memif3"), std::string::npos) << ports;
  }
};

TEST_F(DpdkE2eTest, FourWorkersOverMemifWithLoss) { FourWorkersOverMemif(1); }

// Jumbo frames: 8 KiB payloads (K=2048) in 9000-byte memif frames, 1% loss at the switch, bit for
// bit UDP's result at K=2048; the frames are single mbufs on both sides.
TEST_F(DpdkE2eTest, FourWorkersOverMemifJumboK2048WithLoss) {
  FourWorkersOverMemif(1, /*jumbo=*/true);
}

// --cores 2 over DPDK with two jobs of 2 ranks: job 6 (core 0) on ports 0 and 1, job 7 (core 1)
// on ports 2 and 3, so each core aggregates a job of its own and each job has a port on either
// core: handoffs both ways for both jobs at once. Each job bit-identical to UDP's 2-rank run.
TEST_F(DpdkE2eTest, TwoJobsOnTwoCoresOverMemifWithLoss) {
  const auto udp = UdpBaseline(2);
  ASSERT_EQ(udp.size(), 2u);
  std::string eal = EalCommon(Prefix("sw")) + " -l 0-1";
  for (int p = 0; p < 4; ++p) {
    eal += " --vdev net_memif" + std::to_string(p) + ",role=server,id=0,socket=" + dir_ + "/w" +
           std::to_string(p) + ".sock";
  }
  if (!StartSwitch({}, eal, "0.01", {"--cores", "2"})) {
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
    return;
  }
  std::vector<std::vector<std::string>> argvs;
  for (int p = 0; p < 4; ++p) {
    const std::string weal =
        EalCommon(Prefix("w" + std::to_string(p))) + " -l " + std::to_string(p % 2) +
        " --vdev net_memif0,role=client,id=0,socket=" + dir_ + "/w" + std::to_string(p) + ".sock";
    std::vector<std::string> env = DpdkEnv(weal, p);
    env.push_back("INA_WORLD=2");
    env.push_back(p < 2 ? "INA_JOB=6" : "INA_JOB=7");
    argvs.push_back(WorkerArgv({}, p % 2, env));
  }
  const auto got = RunWorkers(argvs);
  StopSwitch();
  ASSERT_EQ(got.size(), 4u);
  for (int p = 0; p < 4; ++p) {
    EXPECT_TRUE(got[p].exact) << "port " << p;
    EXPECT_EQ(got[p].fingerprint, udp[p % 2].fingerprint)
        << "port " << p << " (job " << 6 + p / 2 << ", rank " << p % 2 << ")";
  }
  EXPECT_GT(Counter("handoff_rx"), 0u);
  EXPECT_GT(Counter("handoff_tx"), 0u);
  EXPECT_EQ(Counter("jobs_admitted"), 2u);
}

// --cores 2 over DPDK: ports 0 and 2 on core 0, 1 and 3 on core 1, the job (7) on core 1. So
// core 0 passes every packet it receives to core 1 and core 1 passes the results for ranks 0 and
// 2 back to core 0's ports: both rings, both ways, under loss, bit-identical to UDP.
TEST_F(DpdkE2eTest, FourWorkersOverMemifOnTwoCoresWithLoss) {
  FourWorkersOverMemif(2);
  if (HasFatalFailure() || IsSkipped()) return;
  EXPECT_GT(Counter("handoff_rx"), 0u) << "core 0 passed nothing to the job's core";
  EXPECT_GT(Counter("handoff_tx"), 0u) << "core 1 passed nothing to core 0's ports";
}

// One job on both cores over DPDK (--core-ports 1): every memif has two queues on either end,
// rank r's lane l sends on its queue l, which the switch's core l owns. Both cores aggregate (a
// share of the slots each), nothing passes between them (no handoff), and the result is bit for
// bit UDP's on one core, under 1% loss.
TEST_F(DpdkE2eTest, OneJobOnTwoCoresByQueueOverMemifWithLoss) {
  FourWorkersOverMemif(2, /*jumbo=*/false, /*one_job=*/true);
  if (HasFatalFailure() || IsSkipped()) return;
  EXPECT_EQ(Counter("handoff_rx"), 0u);
  EXPECT_EQ(Counter("handoff_tx"), 0u);
  const std::vector<uint64_t> rx_data = CoreCounters("rx_data");
  const std::vector<uint64_t> results = CoreCounters("results");
  ASSERT_EQ(rx_data.size(), 2u) << core_line_;
  ASSERT_EQ(results.size(), 2u) << core_line_;
  for (int c = 0; c < 2; ++c) {
    EXPECT_GT(rx_data[c], 0u) << "core " << c << " aggregated nothing: " << core_line_;
    EXPECT_GT(results[c], 0u) << "core " << c << ": " << core_line_;
  }
}

TEST_F(DpdkE2eTest, FourWorkersOverAfPacketInNamespacesWithLoss) {
  if (Sh("ip netns list >/dev/null 2>&1") != 0) GTEST_SKIP() << "no 'ip netns'";
  const auto udp = UdpBaseline();
  ASSERT_EQ(udp.size(), static_cast<size_t>(kWorld));
  const std::string u = Unique();
  const std::string sw_ns = "ina8s" + u;
  namespaces_.push_back(sw_ns);
  if (Sh("ip netns add " + sw_ns) != 0) GTEST_SKIP() << "cannot create a network namespace";
  std::string eal = EalCommon(Prefix("swp")) + " -l 0";
  for (int r = 0; r < kWorld; ++r) {
    const std::string ns = "ina8w" + std::to_string(r) + "_" + u;
    namespaces_.push_back(ns);
    const std::string a = "i8s" + std::to_string(r), b = "i8w" + std::to_string(r);
    // No IP addresses on the veths: DPDK owns addressing and the kernel stays out of it.
    ASSERT_EQ(Sh("ip netns add " + ns + " && ip link add " + a + " netns " + sw_ns +
                 " type veth peer name " + b + " netns " + ns + " && ip -n " + sw_ns +
                 " link set " + a + " up && ip -n " + ns + " link set " + b + " up"),
              0);
    eal += " --vdev net_af_packet" + std::to_string(r) + ",iface=" + a;
  }
  if (!StartSwitch({IpBin(), "netns", "exec", sw_ns}, eal, "0.01")) {
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
    return;
  }
  std::vector<std::vector<std::string>> argvs;
  for (int r = 0; r < kWorld; ++r) {
    const std::string ns = "ina8w" + std::to_string(r) + "_" + u;
    const std::string weal = EalCommon(Prefix("wp" + std::to_string(r))) + " -l " +
                             std::to_string(r % 2) + " --vdev net_af_packet0,iface=i8w" +
                             std::to_string(r);
    argvs.push_back(WorkerArgv({IpBin(), "netns", "exec", ns}, r, DpdkEnv(weal, r)));
  }
  const auto got = RunWorkers(argvs);
  const std::string ports = StopSwitch();
  Check(got, udp);
  EXPECT_NE(ports.find("net_af_packet3"), std::string::npos) << ports;
}

}  // namespace
}  // namespace ina::bench
