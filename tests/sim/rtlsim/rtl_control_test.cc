// What ina-rtlsim composes, in process: the control plane (ina/dp/control.h) over the verilated
// RTL core (ina::sim::RtlEngine). The core says what it runs (Engine::max_k, RunsSecMode), and the
// control plane refuses what it cannot run saying why, before anything reaches the core:
//   - a SET_KEY for mode mac_encrypt, which the core does not run, gets error(key_refused);
//   - a key installed in process for that mode (no admin channel to refuse it) fails the job's
//     JOINs with error(no_slots) naming join_param sec_mode, when the core refuses the install;
//   - hello_ack's largest K is the core's MaxK.
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
  EXPECT_TRUE(engine_.RunsSecMode(p::SecMode::kMac));
  EXPECT_FALSE(engine_.RunsSecMode(p::SecMode::kMacEncrypt));
  // What it says matches what it does: AddJob refuses the mode it does not run.
  dp::JobConfig job{.job_id = 3, .world_size = 2, .k = 256, .slot_base = 0, .window = 4};
  job.security.mode = p::SecMode::kMacEncrypt;
  EXPECT_EQ(engine_.AddJob(job).code(), StatusCode::kUnimplemented);
  job.security.mode = p::SecMode::kMac;
  EXPECT_TRUE(engine_.AddJob(job).ok());
  const auto hello = dp::MakeControl(p::HelloMsg{.job = 7});
  Send(hello, 5000);
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(p::HelloAckMsg::From(out_.replies[0].h()).max_k, kRtlMaxK);
}

TEST_F(RtlControl, AMacEncryptKeyIsRefusedSayingTheCoreCannotRunIt) {
  const uint64_t seq = 1000;
  Send(p::SealSetKey(admin_, 12, p::SecMode::kMacEncrypt, Secret(3), seq).value(), 7000);
  ASSERT_EQ(out_.replies.size(), 1u);
  const Reply& r = out_.replies[0];
  EXPECT_EQ(r.to, MakePeer(7000));
  EXPECT_TRUE(p::MessageCrcOk(r.bytes));
  ASSERT_EQ(r.h().type, p::MsgType::kError);
  const auto e = p::ErrorMsg::From(r.h());
  EXPECT_EQ(e.code, p::ErrorCode::kKeyRefused);
  EXPECT_EQ(e.job, 12);
  EXPECT_EQ(e.join_param(), p::JoinParam::kSecMode);
  EXPECT_EQ(e.key_mode(), static_cast<uint16_t>(p::SecMode::kMacEncrypt));
  EXPECT_EQ(p::SetKeySeq(e), seq);
  EXPECT_FALSE(cp_->HasJobKey(12));
  EXPECT_EQ(Ctr(dp::ControlCounter::kAdminRefused), 1u);
  EXPECT_TRUE(
      Logged("SET_KEY for job 12 from 127.0.0.1:7000 refused: this fabric's engine cannot "
             "run sec mode mac_encrypt"));
  // Mode mac, which it runs, is installed and acknowledged.
  out_.replies.clear();
  Send(p::SealSetKey(admin_, 12, p::SecMode::kMac, Secret(3), seq + 1).value(), 7000);
  ASSERT_EQ(out_.replies.size(), 1u);
  EXPECT_EQ(out_.replies[0].h().type, p::MsgType::kSetKeyAck);
  EXPECT_TRUE(cp_->HasJobKey(12));
}

// A key put in without the admin channel: the core refuses the install at the grant, and every
// rank hears error(no_slots) naming the mode (what a worker turns into UNIMPLEMENTED).
TEST_F(RtlControl, AJobOfAModeTheCoreCannotRunFailsItsJoinsNamingTheMode) {
  const auto secret = Secret(4);
  ASSERT_TRUE(cp_->InstallJobKey(20, p::SecMode::kMacEncrypt, secret).ok());
  for (uint16_t rank = 0; rank < 2; ++rank) {
    const auto join = dp::MakeControl(
        p::JoinMsg{.job = 20, .rank = rank, .k = 256, .window = 4, .world_size = 2});
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
  for (uint16_t rank = 0; rank < 2; ++rank) {
    const Reply& r = out_.replies[rank];
    EXPECT_EQ(r.to, MakePeer(static_cast<uint16_t>(5000 + rank)));
    const auto e = p::ErrorMsg::From(r.h());
    EXPECT_EQ(e.code, p::ErrorCode::kNoSlots);
    EXPECT_EQ(e.join_param(), p::JoinParam::kSecMode);
    EXPECT_EQ(e.job_value(), static_cast<uint32_t>(p::SecMode::kMacEncrypt));
  }
  EXPECT_EQ(cp_->num_jobs(), 0u);
  EXPECT_TRUE(
      Logged("job 20: the engine refused to install it (UNIMPLEMENTED: program job: sec "
             "mode mac_encrypt is not in the RTL core"));
}

}  // namespace
}  // namespace ina::sim
