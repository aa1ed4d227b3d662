// ina-rtlsim end to end: 4 worker processes all-reduce through the verilated RTL core (driven by
// ina-bench, which verifies each run: bit-identical on every rank, rank 0 exactly the sum of the
// quantized inputs, within the documented bound of the float64 sum), with loss, duplication and
// reordering injected; the result must be bit-identical to the same run (same seed, same sizes)
// through ina-switchd, and the RTL's own counters must show that it did the aggregation.
// Seeds: INA_SEED replays a run (printed).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ina/proto/crc32c.h"
#include "ina/proto/wire.h"
#include "json_line.h"
#include "process.h"
#include "support/seed.h"

namespace ina::bench {
namespace {

using namespace std::chrono_literals;

uint64_t Seed() { return ina::tests::Seed(); }

// Runs ina-bench to completion; returns its JSON line (the last line starting with '{').
std::string RunBench(const std::vector<std::string>& extra, int* exit_code) {
  std::vector<std::string> argv = {INA_BENCH_BIN, "--quiet", "--no-gloo", "--timeout-s", "120"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto p = Process::Start(argv);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (!p.ok()) return "";
  std::string json;
  for (const auto& line : p->Drain(150s)) {
    if (!line.empty() && line[0] == '{') json = line;
  }
  auto st = p->Stop(SIGTERM, 5s);
  *exit_code = st.ok() && WIFEXITED(*st) ? WEXITSTATUS(*st) : -1;
  return json;
}

struct Case {
  size_t elements;
  const char* dtype;
  int k;
  double drop, dup, reorder;
};

// Stable test names (the default would print the dtype pointer's bytes).
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.elements << " " << c.dtype << " K=" << c.k << " drop=" << c.drop << " dup=" << c.dup
      << " reorder=" << c.reorder;
}

class RtlsimE2e : public ::testing::TestWithParam<Case> {};

TEST_P(RtlsimE2e, FourWorkersVerifiedAndSameAsSwitchd) {
  const Case& c = GetParam();
  const uint64_t seed = Seed();
  const std::vector<std::string> common = {"--workers",  "4",
                                           "--iters",    "1",
                                           "--elements", std::to_string(c.elements),
                                           "--dtype",    c.dtype,
                                           "--k",        std::to_string(c.k),
                                           "--seed",     std::to_string(seed)};
  auto with = [&](std::vector<std::string> v, const char* dataplane, bool faults) {
    v.insert(v.begin(), common.begin(), common.end());
    v.insert(v.end(), {"--dataplane", dataplane});
    if (faults) {
      v.insert(v.end(), {"--drop-rate", std::to_string(c.drop), "--dup-rate", std::to_string(c.dup),
                         "--reorder-rate", std::to_string(c.reorder)});
    }
    return v;
  };
  int code = -1;
  const std::string rtl = RunBench(with({}, "rtl", true), &code);
  ASSERT_FALSE(rtl.empty()) << "no JSON from ina-bench --dataplane rtl";
  EXPECT_EQ(code, 0) << rtl;
  EXPECT_TRUE(JsonTrue(rtl, "verified")) << rtl;
  EXPECT_TRUE(JsonTrue(rtl, "bit_identical")) << rtl;
  EXPECT_TRUE(JsonTrue(rtl, "exact")) << rtl;
  EXPECT_EQ(JsonString(rtl, "dataplane"), "rtl") << rtl;
  // The RTL did the aggregation: every slot use completed in the core (counter registers).
  const double packets = std::ceil(static_cast<double>(c.elements) / c.k);
  EXPECT_GE(JsonNumber(rtl, "results"), packets) << rtl;
  EXPECT_GE(JsonNumber(rtl, "rx_data"), 4 * packets) << rtl;
  EXPECT_GT(JsonNumber(rtl, "inj_rx_drops") + JsonNumber(rtl, "inj_tx_drops"), 0) << rtl;
  EXPECT_GT(JsonNumber(rtl, "retransmissions"), 0) << "loss injected but nothing resent: " << rtl;

  // The same inputs through the software switch, without faults: the same bits.
  const std::string sw = RunBench(with({}, "sw", false), &code);
  ASSERT_FALSE(sw.empty()) << "no JSON from ina-bench --dataplane sw";
  EXPECT_EQ(code, 0) << sw;
  EXPECT_TRUE(JsonTrue(sw, "verified")) << sw;
  const std::string fp = JsonString(rtl, "fingerprint");
  EXPECT_EQ(fp.size(), 16u) << rtl;
  EXPECT_EQ(fp, JsonString(sw, "fingerprint")) << "rtl: " << rtl << "\nsw: " << sw;
}

INSTANTIATE_TEST_SUITE_P(Loss, RtlsimE2e,
                         ::testing::Values(Case{100003, "float", 256, 0.02, 0.01, 0.01},
                                           Case{20011, "int32", 64, 0.05, 0.02, 0.02},
                                           // 8 KiB payloads through the RTL (MaxK 2048).
                                           Case{100003, "float", 2048, 0.02, 0.01, 0.01}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.dtype) + "_k" +
                                  std::to_string(info.param.k);
                         });

// A keyed job (sec mode mac or mac_encrypt, docs/security.md) through the RTL core: the workers'
// tags checked and the results sealed in the core (ina_gcm_check, ina_agg's rule K4, ina_egress;
// in mac_encrypt the payloads decrypted and the results encrypted by ina_gcm_ctr), with one byte of
// 2% of the packets damaged in and out by the switch's fault injection: the damaged data packets
// are counted as forged by the RTL (its drop_forged register), the damaged results are refused by
// the workers and fetched again, and the job completes verified, with the same bits as the same
// job through ina-switchd.
class RtlsimE2eKeyed : public ::testing::TestWithParam<const char*> {};

TEST_P(RtlsimE2eKeyed, JobVerifiedWithDamageDropped) {
  const uint64_t seed = Seed();
  const std::string sec = GetParam();
  const std::vector<std::string> common = {"--workers",  "2",     "--iters", "2",
                                           "--elements", "50021", "--k",     "256",
                                           "--sec",      sec,     "--seed",  std::to_string(seed)};
  auto with = [&](const char* dataplane, bool faults) {
    std::vector<std::string> v = common;
    v.insert(v.end(), {"--dataplane", dataplane});
    if (faults) v.insert(v.end(), {"--corrupt-rate", "0.02"});
    return v;
  };
  int code = -1;
  const std::string rtl = RunBench(with("rtl", true), &code);
  ASSERT_FALSE(rtl.empty()) << "no JSON from ina-bench --dataplane rtl --sec " << sec;
  EXPECT_EQ(code, 0) << rtl;
  EXPECT_TRUE(JsonTrue(rtl, "verified")) << rtl;
  EXPECT_TRUE(JsonTrue(rtl, "bit_identical")) << rtl;
  EXPECT_TRUE(JsonTrue(rtl, "exact")) << rtl;
  EXPECT_EQ(JsonString(rtl, "dataplane"), "rtl") << rtl;
  EXPECT_EQ(JsonString(rtl, "sec"), sec) << rtl;
  const double packets = std::ceil(50021.0 / 256);
  EXPECT_GE(JsonNumber(rtl, "results"), 2 * packets) << rtl;
  // 36 and 49 forged of about 3000 packets in, in two runs of mode mac (the switch draws its
  // damage itself).
  EXPECT_GT(JsonNumber(rtl, "drop_forged"), 5) << rtl;

  const std::string sw = RunBench(with("sw", false), &code);
  ASSERT_FALSE(sw.empty()) << "no JSON from ina-bench --dataplane sw --sec " << sec;
  EXPECT_EQ(code, 0) << sw;
  EXPECT_TRUE(JsonTrue(sw, "verified")) << sw;
  const std::string fp = JsonString(rtl, "fingerprint");
  EXPECT_EQ(fp.size(), 16u) << rtl;
  EXPECT_EQ(fp, JsonString(sw, "fingerprint")) << "rtl: " << rtl << "\nsw: " << sw;
}

INSTANTIATE_TEST_SUITE_P(Sec, RtlsimE2eKeyed, ::testing::Values("mac", "mac_encrypt"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

// ina-rtlsim alone: announces itself like ina-switchd, counts malformed input in the RTL's
// registers, answers an unknown job's data, and prints the JSON counters line on SIGTERM.
TEST(RtlsimProcess, CountsBadInputAnswersUnknownJobsAndPrintsCountersOnSigterm) {
  auto sim = Process::Start(
      {INA_RTLSIM_BIN, "--bind", "127.0.0.1", "--port", "0", "--engine", "fast", "--seed", "3"});
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  auto line = sim->WaitForLine("ina-rtlsim listening on 127.0.0.1:", 30s);
  ASSERT_TRUE(line.ok()) << line.status().ToString();
  const int port = std::stoi(line->substr(line->rfind(':') + 1));
  ASSERT_GT(port, 0);

  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  auto send = [&](const std::vector<uint8_t>& b) {
    ASSERT_EQ(sendto(fd, b.data(), b.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)),
              static_cast<ssize_t>(b.size()));
  };
  std::vector<uint8_t> data(proto::MessageBytes(3), 0);
  proto::DataMsg{.job = 77, .count = 3}.Encode(data.data());
  proto::SealMessage(data.data(), data.size() - proto::kCrcBytes);
  send(std::vector<uint8_t>(5, 0xAB));  // short: drop_malformed
  send(data);                           // no such job: drop_unknown_job, and its sender is told
  {
    // ina-rtlsim runs ina-switchd's data path in front of the RTL, so it answers as the switch
    // does: error(unknown_job) echoing the packet's job (a restarted fabric ends its old jobs).
    timeval tv{.tv_sec = 5, .tv_usec = 0};
    ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    std::vector<uint8_t> answer(256);
    const ssize_t n = recv(fd, answer.data(), answer.size(), 0);
    ASSERT_GE(n, static_cast<ssize_t>(proto::kHeaderBytes)) << "no answer to an unknown job's data";
    answer.resize(static_cast<size_t>(n));
    ASSERT_TRUE(proto::MessageCrcOk(answer));
    const proto::Header h = proto::DecodeHeader(answer.data());
    EXPECT_EQ(h.type, proto::MsgType::kError);
    EXPECT_EQ(h.aux, static_cast<uint16_t>(proto::ErrorCode::kUnknownJob))
        << proto::ErrorCodeName(h.aux);
    EXPECT_EQ(h.job, 77);
  }
  data[proto::kHeaderBytes + 5] ^= 0x20;
  send(data);  // damaged: drop_bad_crc (the RTL's ina_crc32c)
  data[0] = static_cast<uint8_t>(proto::kVersion + 1);
  send(data);  // drop_bad_version
  close(fd);
  std::this_thread::sleep_for(300ms);

  auto st = sim->Stop(SIGTERM, 10s);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
  std::string json;
  for (const auto& l : sim->Drain(5s)) {
    if (l.rfind("{\"switch_counters\": {", 0) == 0) json = l;
  }
  ASSERT_FALSE(json.empty()) << "no {\"switch_counters\": ...} line";
  EXPECT_EQ(JsonNumber(json, "rx_packets"), 4) << json;
  EXPECT_EQ(JsonNumber(json, "drop_bad_crc"), 1) << json;
  EXPECT_EQ(JsonNumber(json, "drop_malformed"), 1) << json;
  EXPECT_EQ(JsonNumber(json, "drop_unknown_job"), 1) << json;
  EXPECT_EQ(JsonNumber(json, "err_unknown_job"), 1) << json;
  EXPECT_EQ(JsonNumber(json, "drop_bad_version"), 1) << json;
  EXPECT_EQ(JsonNumber(json, "rx_data"), 0) << json;
}

}  // namespace
}  // namespace ina::bench
