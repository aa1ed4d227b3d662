// ina-rtlsim --replay on a capture the project records itself: ina-switchd --record while two
// ina-bench workers all-reduce through it (with loss and duplication, so retransmissions are in
// the capture). The replay feeds every recorded datagram through the verilated core and the
// reference engine side by side: they must agree on every record, emit as many results as the
// recording switch's engine did (its counters), and the --out pcap must hold those results as
// frames to the workers, each a sealed ina result. Bad captures (missing, not pcap, cut short)
// end with exit status 2 and an error naming the file.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "ina/net/frame.h"
#include "ina/net/pcap.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/wire.h"
#include "json_line.h"
#include "process.h"
#include "support/seed.h"

namespace ina::bench {
namespace {

using namespace std::chrono_literals;

// Runs a command line to its end (stderr into the lines); returns its exit status (-1: none).
int RunAll(const std::string& cmd, std::vector<std::string>* lines) {
  auto p = Process::Start({"/bin/sh", "-c", cmd + " 2>&1"});
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (!p.ok()) return -1;
  *lines = p->Drain(240s);
  auto st = p->Stop(SIGTERM, 5s);
  return st.ok() && WIFEXITED(*st) ? WEXITSTATUS(*st) : -1;
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

TEST(RtlsimReplay, ReplaysWhatSwitchdRecorded) {
  const uint64_t seed = ina::tests::Seed();
  const std::string dir = ::testing::TempDir();
  const std::string cap = dir + "/replay_test_in.pcap";
  const std::string out = dir + "/replay_test_out.pcap";
  // The core's pool (the simulated model's PoolSlots) and job table, so that the replay grants what
  // the recording switch granted.
  auto sw =
      Process::Start({INA_SWITCHD_BIN, "--port", "0", "--engine", "ref", "--slots",
                      std::to_string(INA_RTL_POOL_SLOTS), "--max-jobs", "8", "--record", cap,
                      "--drop-rate", "0.02", "--dup-rate", "0.02", "--seed", std::to_string(seed)});
  ASSERT_TRUE(sw.ok()) << sw.status().ToString();
  auto line = sw->WaitForLine("ina-switchd listening on ", 30s);
  ASSERT_TRUE(line.ok()) << line.status().ToString();
  const std::string port = line->substr(line->rfind(':') + 1);
  std::vector<std::string> bench;
  const int bench_rc = RunAll(std::string(INA_BENCH_BIN) +
                                  " --quiet --no-gloo --timeout-s 120 --workers 2 --iters 1"
                                  " --elements 20000 --k 64 --switch 127.0.0.1:" +
                                  port + " --seed " + std::to_string(seed),
                              &bench);
  EXPECT_EQ(bench_rc, 0) << Joined(bench);
  auto st = sw->Stop(SIGTERM, 10s);
  ASSERT_TRUE(st.ok() && WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
  std::string counters;
  for (const auto& l : sw->Drain(5s)) {
    if (l.rfind("{\"switch_counters\": {", 0) == 0) counters = l;
  }
  ASSERT_FALSE(counters.empty());
  const double results = JsonNumber(counters, "results") + JsonNumber(counters, "result_resends");
  ASSERT_GT(JsonNumber(counters, "results"), 0) << counters;

  std::vector<std::string> replay;
  const int rc = RunAll(std::string(INA_RTLSIM_BIN) + " --replay " + cap + " --out " + out +
                            " --rtl-stall 0.2 --seed " + std::to_string(seed),
                        &replay);
  const std::string text = Joined(replay);
  std::printf("%s", text.c_str());
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("; 0 records differ;"), std::string::npos) << text;
  EXPECT_NE(text.find("results rtl " + std::to_string(static_cast<uint64_t>(results)) + " ref " +
                      std::to_string(static_cast<uint64_t>(results)) + ";"),
            std::string::npos)
      << "the recording switch's engine emitted " << results << " results: " << counters;

  // The output: one frame per result and worker, each a sealed result to a worker's port.
  auto r = net::PcapReader::Open(out);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  net::PcapRecord rec;
  size_t frames = 0;
  while (true) {
    auto more = (*r)->Next(&rec);
    ASSERT_TRUE(more.ok()) << more.status().ToString();
    if (!*more) break;
    ++frames;
    net::ParsedFrame pf;
    ASSERT_EQ(net::ParseUdpFrame(rec.frame, &pf), net::FrameError::kOk) << "frame " << frames;
    const std::span<const uint8_t> pkt(rec.frame.data() + pf.payload_offset, pf.payload_len);
    ASSERT_GE(pkt.size(), proto::kHeaderBytes + proto::kCrcBytes);
    EXPECT_EQ(proto::GetType(pkt.data()), proto::MsgType::kResult);
    EXPECT_TRUE(proto::MessageCrcOk(pkt)) << "frame " << frames;
    EXPECT_EQ(pf.addrs.src_port, htons(static_cast<uint16_t>(std::stoi(port))));
  }
  EXPECT_GE(frames, static_cast<size_t>(results)) << "every result goes to at least one worker";
  EXPECT_NE(text.find("frames written"), std::string::npos);
  EXPECT_NE(text.find(std::to_string(frames) + " frames written"), std::string::npos) << text;

  // Bad captures: exit status 2, the file named, what is wrong said.
  std::vector<std::string> lines;
  EXPECT_EQ(RunAll(std::string(INA_RTLSIM_BIN) + " --replay " + dir + "/no_such.pcap", &lines), 2);
  EXPECT_NE(Joined(lines).find(dir + "/no_such.pcap"), std::string::npos) << Joined(lines);
  const std::string cut = dir + "/replay_test_cut.pcap";
  {
    std::FILE* in = std::fopen(cap.c_str(), "rb");
    std::FILE* o = std::fopen(cut.c_str(), "wb");
    ASSERT_NE(in, nullptr);
    ASSERT_NE(o, nullptr);
    std::vector<char> b(24 + 16 + 50);  // the file header, a record header, part of its frame
    ASSERT_EQ(std::fread(b.data(), 1, b.size(), in), b.size());
    std::fwrite(b.data(), 1, b.size(), o);
    std::fclose(in);
    std::fclose(o);
  }
  EXPECT_EQ(RunAll(std::string(INA_RTLSIM_BIN) + " --replay " + cut, &lines), 2);
  EXPECT_NE(Joined(lines).find("record 1 at byte 24"), std::string::npos) << Joined(lines);
  EXPECT_NE(Joined(lines).find("cut short"), std::string::npos) << Joined(lines);
  EXPECT_EQ(RunAll(std::string(INA_RTLSIM_BIN) + " --replay " + INA_RTLSIM_BIN, &lines), 2);
  EXPECT_NE(Joined(lines).find("not a pcap file"), std::string::npos) << Joined(lines);
  std::remove(cap.c_str());
  std::remove(out.c_str());
  std::remove(cut.c_str());
}

}  // namespace
}  // namespace ina::bench
