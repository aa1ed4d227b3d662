// Exchange: a control request resent until the fabric answers it: job-id allocation's and key
// installation's (job_alloc.cc), and the hello of switch_cores auto (communicator.cc). The join
// handshake is a state machine of its own (membership.h); this one has its shape, with one
// request and one reply.
//
// It is driven by (now, packets received) and gives (the request when it is due, the next
// deadline, the reply or a Status). It reads no clock and owns no socket: RunExchange moves
// packets between it and a Transport on an injected Clock, so unit tests drive it with a fake
// clock (tests/host/comm/exchange_test.cc).
//
//   kWaiting --reply (is_reply)-->              kDone: result() is the reply's header
//   kWaiting --deadline (timeout from start)--> kFailed: DeadlineExceeded, `who`: `no_answer`,
//                                               naming the last Unavailable transport error
//   kWaiting --cancel set-->                    kFailed: Aborted ("another lane failed")
//   kWaiting --transport error-->               Unavailable (the fabric is not up yet) is
//                                               remembered; any other: kFailed with it
//
// The request is due at the start, then `resend` after it was last handed to the transport (a
// send that failed counts as sent: the resend retries it). Replies: only headers of this version
// whose CRC32C trailer matches reach is_reply; a damaged reply is ignored and the next resend
// gets another.
//
// Threading: one thread at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <span>
#include <string>

#include "clock.h"
#include "ina/base/status.h"
#include "ina/host/transport.h"
#include "ina/proto/wire.h"

namespace ina::host::internal {

struct ExchangeSpec {
  std::span<const uint8_t> request;  // one header-only message with its trailer, sent as is
  std::chrono::milliseconds resend{100};
  std::chrono::milliseconds timeout{10000};
  // True for the reply that ends the exchange (only headers of this version whose CRC32C trailer
  // matches reach it; a damaged reply is ignored and the next resend gets another).
  std::function<bool(const proto::Header&)> is_reply;
  std::string who;        // context for every error ("join job 7 as rank 0 of 2 at ...")
  std::string no_answer;  // the DeadlineExceeded text after `who` ("no join_ack within ... ms")
  const std::atomic<bool>* cancel = nullptr;  // set: stop with Aborted

  ExchangeSpec WithTimeout(std::chrono::milliseconds t) const {
    ExchangeSpec s = *this;
    s.timeout = t;
    return s;
  }
};

class Exchange {
 public:
  enum class State : uint8_t {
    kWaiting,  // the request is (re)sent until an answer, the deadline or cancel
    kDone,     // result(): the reply
    kFailed,   // result(): why
  };

  // Starts at `now`: the request is due at once. `spec` (and what it points to) must outlive the
  // Exchange.
  Exchange(const ExchangeSpec& spec, TimePoint now);

  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // The request when it is due at `now` (kWaiting), else empty.
  std::span<const uint8_t> PeekTx(TimePoint now) const;
  // The request was handed to the transport at `now` (or its send failed: OnTransportError
  // first); the next is due `resend` later.
  void OnSent(TimePoint now);
  // One received packet (a whole ina message): a reply ends the exchange.
  void OnPacket(std::span<const uint8_t> packet);
  // Fails the exchange past its deadline, or once cancel is set. No-op unless kWaiting.
  void OnTimers(TimePoint now);
  // A transport error: Unavailable is remembered (the deadline's message names it); any other
  // fails the exchange with it, `who` as context. No-op unless kWaiting.
  void OnTransportError(const Status& s);

  // The earliest time OnTimers or PeekTx may have something to do; TimePoint::max() once ended.
  TimePoint NextDeadline() const;

  State state() const { return state_; }
  bool done() const { return state_ != State::kWaiting; }
  // After the exchange ended: the reply or the failure.
  Result<proto::Header> result() const;

 private:
  void Fail(Status s);

  const ExchangeSpec& spec_;
  State state_ = State::kWaiting;
  TimePoint deadline_;
  TimePoint next_send_;
  proto::Header reply_{};
  Status status_;
  Status last_transport_error_;  // Unavailable, named by the deadline's message
};

// Runs an Exchange of spec.request over `t` on `clock` to its end: the reply, DeadlineExceeded
// (spec.timeout), Aborted (spec.cancel) or the transport's error (other than Unavailable). A
// transport whose receive keeps failing with Unavailable at once is waited on with
// Clock::SleepUntil until the next resend. Blocks up to spec.timeout.
Result<proto::Header> RunExchange(Transport& t, const ExchangeSpec& spec, const Clock& clock);

}  // namespace ina::host::internal
