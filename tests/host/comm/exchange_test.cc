// The control requests' exchange (job-id allocation, key installation, hello) without sockets,
// threads or sleeps: the Exchange state machine driven with hand-made replies, and RunExchange
// over a fake transport into the in-process fabric (the real control plane), on a fake clock that
// says exactly when the request is resent and when the exchange gives up.
#include "exchange.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "fake_net.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/wire.h"

namespace ina::host::internal {
namespace {

using ::ina::testing::FakeClock;
using ::ina::testing::FakeNet;
using ::ina::testing::FakeTransport;
using ::ina::testing::NetPacket;
using ::ina::testing::Verdict;
using proto::MsgType;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using State = Exchange::State;

// ALLOC_JOB with nonce 0x1234, and a spec waiting for its alloc_ack (nonce echoed in gen).
struct AllocSpec {
  AllocSpec() {
    proto::AllocJobMsg{.hint = 9, .nonce = kNonce}.Encode(req.data());
    proto::SealMessage(req.data(), proto::kHeaderBytes);
    spec.request = req;
    spec.resend = milliseconds(100);
    spec.timeout = milliseconds(1000);
    spec.is_reply = [](const proto::Header& a) {
      return a.type == MsgType::kAllocAck && a.gen == kNonce;
    };
    spec.who = "allocate a job id at fabric:9000";
    spec.no_answer = "no alloc_ack within 1000 ms";
  }
  static constexpr uint16_t kNonce = 0x1234;
  std::vector<uint8_t> req = std::vector<uint8_t>(proto::MessageBytes(0));
  ExchangeSpec spec;
};

// A sealed header-only message from the fabric.
std::vector<uint8_t> AllocAck(uint16_t job, uint16_t nonce) {
  std::vector<uint8_t> b(proto::MessageBytes(0));
  proto::AllocAckMsg{.job = job, .nonce = nonce}.Encode(b.data());
  proto::SealMessage(b.data(), proto::kHeaderBytes);
  return b;
}

TEST(ExchangeTest, SendsAtOnceThenEveryResendAfterTheLastSend) {
  AllocSpec a;
  const FakeClock clock;
  const TimePoint t0 = clock.Now();
  Exchange x(a.spec, t0);
  ASSERT_EQ(x.state(), State::kWaiting);
  const auto req = x.PeekTx(t0);
  ASSERT_EQ(req.size(), a.req.size());
  EXPECT_EQ(req.data(), a.req.data()) << "the request as given, not a copy";
  EXPECT_EQ(x.NextDeadline(), t0);
  x.OnSent(t0);
  EXPECT_TRUE(x.PeekTx(t0 + milliseconds(99)).empty());
  EXPECT_EQ(x.NextDeadline(), t0 + milliseconds(100));
  // Handed to the transport late (a slow turn): the next is due a resend after that send.
  EXPECT_FALSE(x.PeekTx(t0 + milliseconds(130)).empty());
  x.OnSent(t0 + milliseconds(130));
  EXPECT_TRUE(x.PeekTx(t0 + milliseconds(229)).empty());
  EXPECT_EQ(x.NextDeadline(), t0 + milliseconds(230));
  // Near the end the deadline comes first.
  x.OnSent(t0 + milliseconds(950));
  EXPECT_EQ(x.NextDeadline(), t0 + milliseconds(1000));
  x.OnTimers(t0 + milliseconds(999));
  EXPECT_EQ(x.state(), State::kWaiting);
}

TEST(ExchangeTest, OnlyAWholeReplyOfThisVersionThatIsTheReplyEndsIt) {
  AllocSpec a;
  const FakeClock clock;
  Exchange x(a.spec, clock.Now());
  x.OnSent(clock.Now());
  std::vector<uint8_t> damaged = AllocAck(300, AllocSpec::kNonce);
  damaged[3] ^= 0x01;
  x.OnPacket(damaged);
  std::vector<uint8_t> other_version = AllocAck(300, AllocSpec::kNonce);
  other_version[0] = static_cast<uint8_t>(proto::kVersion + 1);
  proto::SealMessage(other_version.data(), proto::kHeaderBytes);
  x.OnPacket(other_version);
  x.OnPacket(AllocAck(300, AllocSpec::kNonce + 1));  // another request's answer
  const std::vector<uint8_t> ack = AllocAck(300, AllocSpec::kNonce);
  x.OnPacket(std::span(ack).first(proto::kHeaderBytes - 1));  // short
  EXPECT_EQ(x.state(), State::kWaiting);
  EXPECT_FALSE(x.result().ok());

  x.OnPacket(ack);
  ASSERT_EQ(x.state(), State::kDone);
  EXPECT_TRUE(x.done());
  EXPECT_TRUE(x.PeekTx(clock.Now() + milliseconds(500)).empty()) << "nothing resent once answered";
  EXPECT_EQ(x.NextDeadline(), TimePoint::max());
  x.OnPacket(AllocAck(301, AllocSpec::kNonce));  // a duplicate answer changes nothing
  x.OnTimers(clock.Now() + milliseconds(2000));  // nor does the deadline
  const auto r = x.result();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->type, MsgType::kAllocAck);
  EXPECT_EQ(r->job, 300);
}

TEST(ExchangeTest, TheDeadlineSaysWhoAndNamesTheLastUnavailableTransportError) {
  AllocSpec a;
  const FakeClock clock;
  const TimePoint t0 = clock.Now();
  Exchange x(a.spec, t0);
  x.OnTransportError(Unavailable("sendmsg: connection refused"));  // the fabric is not up yet
  x.OnSent(t0);
  EXPECT_EQ(x.state(), State::kWaiting);
  x.OnTimers(t0 + milliseconds(1000));
  ASSERT_EQ(x.state(), State::kFailed);
  const Status s = x.result().status();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.message(),
            "allocate a job id at fabric:9000: no alloc_ack within 1000 ms; last transport error: "
            "UNAVAILABLE: sendmsg: connection refused");
  EXPECT_TRUE(x.PeekTx(t0 + milliseconds(1100)).empty());
}

TEST(ExchangeTest, ATransportErrorOtherThanUnavailableFailsAtOnceSayingWho) {
  AllocSpec a;
  const FakeClock clock;
  Exchange x(a.spec, clock.Now());
  x.OnTransportError(Status::Ok());
  EXPECT_EQ(x.state(), State::kWaiting);
  x.OnTransportError(Internal("sendmsg: message too long"));
  ASSERT_EQ(x.state(), State::kFailed);
  const Status s = x.result().status();
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("allocate a job id at fabric:9000"), std::string::npos)
      << s.ToString();
  x.OnPacket(AllocAck(300, AllocSpec::kNonce));  // too late
  EXPECT_EQ(x.state(), State::kFailed);
}

TEST(ExchangeTest, CancelAbortsAtTheNextTimerCheck) {
  AllocSpec a;
  std::atomic<bool> cancel{false};
  a.spec.cancel = &cancel;
  const FakeClock clock;
  Exchange x(a.spec, clock.Now());
  x.OnTimers(clock.Now());
  EXPECT_EQ(x.state(), State::kWaiting);
  cancel = true;
  x.OnTimers(clock.Now());
  ASSERT_EQ(x.state(), State::kFailed);
  EXPECT_EQ(x.result().status().code(), StatusCode::kAborted);
  EXPECT_EQ(x.result().status().message(), "allocate a job id at fabric:9000: another lane failed");
}

// An endpoint of the fake net that the blocking RunExchange can drive: a send goes through the
// fabric at once, and a receive that finds nothing lets its whole timeout pass on the fake clock.
class PumpedTransport final : public Transport {
 public:
  PumpedTransport(FakeNet& net, FakeClock& clock) : net_(net), clock_(clock) {}
  Result<size_t> SendBurst(std::span<const TxMessage> packets) override {
    send_times.push_back(clock_.Now());
    auto r = net_.Endpoint(0).SendBurst(packets);
    net_.Pump();
    return r;
  }
  Result<size_t> RecvBurst(std::span<RxMessage> packets, microseconds timeout) override {
    auto r = net_.Endpoint(0).RecvBurst(packets, timeout);
    if (r.ok() && *r == 0) clock_.Advance(timeout);
    return r;
  }
  std::string_view name() const override { return "pumped"; }

  std::vector<TimePoint> send_times;

 private:
  FakeNet& net_;
  FakeClock& clock_;
};

TEST(RunExchangeTest, GetsAJobIdFromTheRealControlPlaneThroughLostRequests) {
  FakeClock clock;
  FakeNet net(clock);
  int requests = 0;
  net.filter = [&](const NetPacket& p) {
    if (p.up && p.type() == MsgType::kAllocJob && ++requests <= 2) return Verdict{.copies = 0};
    return Verdict{};
  };
  PumpedTransport t(net, clock);
  AllocSpec a;
  const TimePoint t0 = clock.Now();
  const auto r = RunExchange(t, a.spec, clock);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->type, MsgType::kAllocAck);
  EXPECT_GE(r->job, proto::kAllocJobMin);
  EXPECT_EQ(requests, 3);
  ASSERT_EQ(t.send_times.size(), 3u);
  EXPECT_EQ(t.send_times[0], t0);
  EXPECT_EQ(t.send_times[1], t0 + milliseconds(100));
  EXPECT_EQ(t.send_times[2], t0 + milliseconds(200));
  EXPECT_EQ(clock.Now(), t0 + milliseconds(200)) << "it returned on the answer, waiting no more";
}

TEST(RunExchangeTest, AFabricNotUpIsRetriedEveryResendUntilTheDeadline) {
  FakeClock clock;
  FakeNet net(clock);
  FakeTransport& t = net.Endpoint(0);
  t.send_error = Unavailable("sendmsg: connection refused");
  t.recv_error = Unavailable("recvmmsg: connection refused");
  AllocSpec a;
  const TimePoint t0 = clock.Now();
  const auto r = RunExchange(t, a.spec, clock);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("no alloc_ack within 1000 ms; last transport error: "
                                      "UNAVAILABLE: recvmmsg: connection refused"),
            std::string::npos)
      << r.status().ToString();
  // Each wait was a SleepUntil to the next resend (the receive failed at once): the fake clock
  // stopped exactly at the deadline.
  EXPECT_EQ(clock.Now(), t0 + milliseconds(1000));
}

}  // namespace
}  // namespace ina::host::internal
