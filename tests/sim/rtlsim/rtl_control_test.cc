// What ina-rtlsim composes, in process: the control plane (ina/dp/control.h) over the verilated
// RTL core (ina::sim::RtlEngine). The core says what it runs (Engine::max_k, RunsSecMode):
//   - every sec mode: keys of both keyed modes are taken and their jobs granted (a set_key of no
//     mode gets error(key_refused));
//   - hello_ack's largest K is the core's MaxK.
// (A control plane over an engine that cannot run a keyed mode refuses its key and fails its
// JOINs naming the mode: dataplane/control's ControlTest, over an engine that says so.)
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ina/dp/control.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/sec.h"
#include "ina/proto/wire.h"
#include "ina/sim/rtl_engine.h"

namespace ina::sim {
namespace {

namespace p = ::ina::proto;

dp::Peer MakePeer(uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  return dp::Peer::From(reinterpret_cast<const sockaddr*>(&sa), sizeof(sa));
}

struct Reply {
  dp::Peer to;
  std::vector<uint8_t> bytes;
  p::Header h() const { return p::DecodeHeader(bytes.data()); }
};

class Collector : public dp::ReplySink {
 public:
  void Send(const dp::Peer& to, std::span<const uint8_t> packet) override {
    replies.push_back({to, {packet.begin(), packet.end()}});
  }
  std::vector<Reply> replies;
};

std::vector<uint8_t> Secret(uint8_t seed) {
  std::vector<uint8_t> s(32);
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(seed * 31 + i);
  return s;
}

class RtlControl : public ::testing::Test {
 protected:
  void SetUp() override {
    dp::ControlConfig cfg;
    cfg.admin_secret = admin_;
    cfg.log = [this](const std::string& l) { log_.push_back(l); };
    auto cp = dp::ControlPlane::Create(engine_, cfg);
    ASSERT_TRUE(cp.ok()) << cp.status().ToString();
    cp_ = std::move(cp).value();
  }
  void Send(std::span<const uint8_t> packet, uint16_t port) {
    cp_->HandleControl(packet, MakePeer(port), dp::ControlPlane::TimePoint{}, out_);
  }
  uint64_t Ctr(dp::ControlCounter c) const { return dp::Get(cp_->counters(), c); }
  bool Logged(const std::string& words) const {
    for (const auto& l : log_) {
      if (l.find(words) != std::string::npos) return true;
    }
    return false;
  }

  RtlEngine engine_;
  const std::vector<uint8_t> admin_ = Secret(9);
  std::unique_ptr<dp::ControlPlane> cp_;
  Collector out_;
  std::vector<std::string> log_;
};

TEST_F(RtlControl, TheCoreSaysWhatItRuns) {
  EXPECT_EQ(engine_.max_k(), kRtlMaxK);
  for (const p::SecMode mode : {p::SecMode::kCrc, p::SecMode::kMac, p::SecMode::kMacEncrypt}) {
    EXPECT_TRUE(engine_.RunsSecMode(mode)) << p::SecModeName(static_cast<uint8_t>(mode));
  }
  // What it says matches what it does: AddJob takes every mode.
  dp::JobConfig job{.job_id = 3, .world_size = 2, .k = 256, .slot_base = 0, .window = 4};
  job.security.mode = p::SecMode::kMacEncrypt;
  EXPECT_TRUE(engine_.AddJob(job).ok());
  job.job_id = 4;
  job.slot_base = 4;
  job.security.mode = p::SecMode::kMac;
  EXPECT_TRUE(engine_.AddJob(job).ok());
  const auto hello = dp::MakeControl(p::HelloMsg{.job = 7});
  Send(hello, 5000);
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(p::HelloAckMsg::From(out_.replies[0].h()).max_k, kRtlMaxK);
}

// Keys of both keyed modes are taken through the admin channel and their jobs granted by the core;
// a set_key of no mode gets error(key_refused) naming it.
TEST_F(RtlControl, KeysOfBothKeyedModesAreTakenAndTheirJobsGranted) {
  uint64_t seq = 1000;
  uint16_t job = 12;
  for (const p::SecMode mode : {p::SecMode::kMacEncrypt, p::SecMode::kMac}) {
    SCOPED_TRACE(p::SecModeName(static_cast<uint8_t>(mode)));
    const auto secret = Secret(static_cast<uint8_t>(job));
    out_.replies.clear();
    Send(p::SealSetKey(admin_, job, mode, secret, seq++).value(), 7000);
    ASSERT_EQ(out_.replies.size(), 1u);
    EXPECT_EQ(out_.replies[0].h().type, p::MsgType::kSetKeyAck);
    EXPECT_TRUE(cp_->HasJobKey(job));
    for (uint16_t rank = 0; rank < 2; ++rank) {
      const auto join = dp::MakeControl(
          p::JoinMsg{.job = job, .rank = rank, .k = 256, .window = 4, .world_size = 2});
      out_.replies.clear();
      Send(join, static_cast<uint16_t>(5000 + rank));
      ASSERT_EQ(out_.replies.size(), 1u);
      ASSERT_EQ(out_.replies[0].h().type, p::MsgType::kJoinChallenge);
      const auto nonce = p::JoinChallenge::From(out_.replies[0].bytes.data() + p::kHeaderBytes);
      std::vector<uint8_t> proven(join.begin(), join.begin() + p::kHeaderBytes);
      proven.resize(p::kHeaderBytes + p::kTagBytes);
      p::SetSec(proven.data(), static_cast<uint8_t>(p::SecMode::kMac));
      ASSERT_TRUE(p::SealJoinProof(secret, nonce, proven.data()).ok());
      out_.replies.clear();
      Send(proven, static_cast<uint16_t>(5000 + rank));
    }
    ASSERT_EQ(out_.replies.size(), 2u) << "both ranks hear it once the job is complete";
    for (const Reply& r : out_.replies) EXPECT_EQ(r.h().type, p::MsgType::kJoinAck);
    ++job;
  }
  EXPECT_EQ(cp_->num_jobs(), 2u);
  EXPECT_EQ(Ctr(dp::ControlCounter::kAdminRefused), 0u);
  // Mode 3 is none.
  out_.replies.clear();
  Send(p::SealSetKey(admin_, 20, static_cast<p::SecMode>(3), Secret(3), seq).value(), 7000);
  ASSERT_EQ(out_.replies.size(), 1u);
  const auto e = p::ErrorMsg::From(out_.replies[0].h());
  EXPECT_EQ(e.code, p::ErrorCode::kKeyRefused);
  EXPECT_EQ(e.key_mode(), 3);
  EXPECT_FALSE(cp_->HasJobKey(20));
  EXPECT_EQ(Ctr(dp::ControlCounter::kAdminRefused), 1u);
}

}  // namespace
}  // namespace ina::sim
