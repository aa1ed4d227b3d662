// Exchange: see exchange.h.
#include "exchange.h"

#include <algorithm>
#include <array>
#include <vector>

#include "ina/proto/crc32c.h"
#include "progress.h"

namespace ina::host::internal {

Exchange::Exchange(const ExchangeSpec& spec, TimePoint now)
    : spec_(spec), deadline_(now + spec.timeout), next_send_(now) {}

std::span<const uint8_t> Exchange::PeekTx(TimePoint now) const {
  if (state_ != State::kWaiting || now < next_send_) return {};
  return spec_.request;
}

void Exchange::OnSent(TimePoint now) {
  if (state_ == State::kWaiting) next_send_ = now + spec_.resend;
}

void Exchange::OnPacket(std::span<const uint8_t> packet) {
  if (state_ != State::kWaiting || packet.size() < proto::kHeaderBytes) return;
  if (!proto::MessageCrcOk(packet)) return;  // damaged: the resend gets another
  const proto::Header a = proto::DecodeHeader(packet.data());
  if (a.version != proto::kVersion || !spec_.is_reply(a)) return;
  reply_ = a;
  state_ = State::kDone;
}

void Exchange::OnTimers(TimePoint now) {
  if (state_ != State::kWaiting) return;
  if (spec_.cancel != nullptr && spec_.cancel->load(std::memory_order_relaxed)) {
    Fail(Aborted(spec_.who + ": another lane failed"));
  } else if (now >= deadline_) {
    std::string m = spec_.who + ": " + spec_.no_answer;
    if (!last_transport_error_.ok())
      m += "; last transport error: " + last_transport_error_.ToString();
    Fail(DeadlineExceeded(m));
  }
}

void Exchange::OnTransportError(const Status& s) {
  if (state_ != State::kWaiting || s.ok()) return;
  if (s.code() == StatusCode::kUnavailable) {
    last_transport_error_ = s;
    return;
  }
  Fail(s.WithContext(spec_.who));
}

TimePoint Exchange::NextDeadline() const {
  return state_ == State::kWaiting ? std::min(next_send_, deadline_) : TimePoint::max();
}

Result<proto::Header> Exchange::result() const {
  if (state_ == State::kDone) return reply_;
  if (state_ == State::kFailed) return status_;
  return FailedPrecondition(spec_.who + ": the exchange has not ended");
}

void Exchange::Fail(Status s) {
  state_ = State::kFailed;
  status_ = std::move(s);
}

Result<proto::Header> RunExchange(Transport& t, const ExchangeSpec& spec, const Clock& clock) {
  using std::chrono::microseconds;
  Exchange x(spec, clock.Now());
  std::vector<uint8_t> bufs(kBurst * kRxBufBytes);
  std::array<RxMessage, kBurst> rx{};
  while (true) {
    const TimePoint now = clock.Now();
    x.OnTimers(now);
    if (const auto req = x.PeekTx(now); !req.empty()) {
      const TxMessage tx{req.data(), req.size()};
      auto sent = t.SendBurst(std::span(&tx, 1));
      if (!sent.ok()) x.OnTransportError(sent.status());
      x.OnSent(now);
    }
    if (x.done()) return x.result();
    const auto wait = std::chrono::duration_cast<microseconds>(x.NextDeadline() - now);
    for (size_t i = 0; i < kBurst; ++i) rx[i] = {bufs.data() + i * kRxBufBytes, kRxBufBytes, 0};
    auto got = t.RecvBurst(std::span(rx.data(), kBurst), std::max(wait, microseconds(0)));
    if (!got.ok()) {
      x.OnTransportError(got.status());
      if (!x.done()) clock.SleepUntil(x.NextDeadline());  // the fabric is not up (yet)
      continue;
    }
    for (size_t i = 0; i < *got && !x.done(); ++i) x.OnPacket({rx[i].data, rx[i].len});
  }
}

}  // namespace ina::host::internal
