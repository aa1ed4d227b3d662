// ina-bench --transport memif (the switch with one net_memif port per rank, every rank over DPDK,
// all set up by ina-bench) and scripts/bench-pps.sh (ina beside the plain DPDK ceiling), run for
// real at a small size: results verified, the JSON fields the docs quote present and positive,
// nothing left behind. Figures are not judged here (benchmarks print them; docs/benchmarks.md).
// Skips with the reason when not root or where DPDK was not built.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>

#include "process.h"

namespace ina::bench {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// Runs argv to its end; returns its output lines joined, and the exit code in *rc.
std::string RunToEnd(const std::vector<std::string>& argv, int* rc) {
  auto p = Process::Start(argv);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (!p.ok()) return "";
  std::string out;
  for (const auto& l : p->Drain(240s)) out += l + "\n";
  auto st = p->Stop(SIGKILL, 1s);
  *rc = st.ok() && WIFEXITED(*st) ? WEXITSTATUS(*st) : -1;
  return out;
}

double Field(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\": ([0-9.e+]+)"))) return -1;
  return std::stod(m[1]);
}

// The EAL runtime folders of ina-bench's and bench-pps.sh's prefixes.
size_t EalLeftovers() {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/var/run/dpdk", ec)) {
    const std::string name = e.path().filename();
    if (name.rfind("inab", 0) == 0 || name.rfind("inapps", 0) == 0) ++n;
  }
  return n;
}

class BenchMemifTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "DPDK's EAL needs root";
    if (!fs::exists(INA_CEILING_BIN)) GTEST_SKIP() << "built without DPDK (no ina-pps-ceiling)";
  }
};

TEST_F(BenchMemifTest, TwoWorkersOverMemifVerifiedWithLoss) {
  const size_t before = EalLeftovers();
  int rc = -1;
  const std::string out =
      RunToEnd({INA_BENCH_BIN, "--transport", "memif", "--workers", "2", "--elements", "100003",
                "--iters", "2", "--drop-rate", "0.01", "--no-gloo", "--quiet"},
               &rc);
  std::printf("%s", out.c_str());
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"verified\": true"), std::string::npos);
  EXPECT_NE(out.find("\"transport\": \"memif\""), std::string::npos);
  EXPECT_GT(Field(out, "ina_pps"), 0);
  EXPECT_GT(Field(out, "retransmissions"), 0) << "1% loss injected: some blocks were resent";
  EXPECT_EQ(EalLeftovers(), before) << "ina-bench left EAL runtime folders behind";
}

std::string Str(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\": \"([^\"]*)\""))) return "";
  return m[1];
}

// Lanes over DPDK: each lane of each worker on its own memif link (the switch with a port per
// rank and lane). With loss, 2 and 3 lanes give the one-lane result bit for bit (same seed), every
// lane joined, and nothing came from a wrong lane.
TEST_F(BenchMemifTest, LanesOverMemifGiveTheOneLaneResultBitForBit) {
  const size_t before = EalLeftovers();
  std::string fingerprint;
  for (const char* lanes : {"1", "2", "3"}) {
    SCOPED_TRACE(std::string("progress_threads=") + lanes);
    int rc = -1;
    const std::string out =
        RunToEnd({INA_BENCH_BIN, "--transport", "memif", "--workers", "2", "--elements", "100003",
                  "--iters", "1", "--drop-rate", "0.01", "--seed", "11", "--progress-threads",
                  lanes, "--no-gloo", "--quiet"},
                 &rc);
    std::printf("%s", out.c_str());
    ASSERT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("\"verified\": true"), std::string::npos);
    EXPECT_GE(Field(out, "join_acks"), 2 * std::stoi(lanes)) << out;
    EXPECT_EQ(Field(out, "drop_foreign_src"), 0) << out;
    if (fingerprint.empty()) fingerprint = Str(out, "fingerprint");
    EXPECT_FALSE(fingerprint.empty()) << out;
    EXPECT_EQ(Str(out, "fingerprint"), fingerprint);
  }
  EXPECT_EQ(EalLeftovers(), before) << "ina-bench left EAL runtime folders behind";
}

TEST_F(BenchMemifTest, BenchPpsPrintsInaBesideTheCeiling) {
  int rc = -1;
  const std::string out = RunToEnd({"/bin/bash", INA_BENCH_PPS_SCRIPT, "--build", INA_BUILD_DIR,
                                    "--rounds", "1", "--elements", "262144", "--seconds", "1"},
                                   &rc);
  std::printf("%s", out.c_str());
  ASSERT_EQ(rc, 0) << out;
  const std::string last = out.substr(out.rfind("{\"ina_pps\""));
  EXPECT_GT(Field(last, "ina_pps"), 0);
  EXPECT_GT(Field(last, "ceiling_pps"), 0);
  EXPECT_GT(Field(last, "ratio"), 0);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("verified, ([0-9]+)-byte frames"))) << out;
  EXPECT_EQ(Field(last, "frame_bytes"), std::stod(m[1])) << "the ceiling runs ina's frame size";
}

}  // namespace
}  // namespace ina::bench
