#include "progress.h"

#include <algorithm>

#include "ina/proto/crc32c.h"

namespace ina::host::internal {

using std::chrono::microseconds;

Progress::Progress(const WindowConfig& config, const JoinConfig& join,
                   const quant::Kernels& kernels, Transport& transport, const Clock& clock)
    : window_(config, kernels),
      membership_(join),
      transport_(transport),
      clock_(clock),
      rx_bufs_(kBurst * kRxBufBytes) {}

Status Progress::RunOp(const OpDesc& op, const std::atomic<bool>& stop,
                       const std::atomic<bool>* cancel) {
  INA_RETURN_IF_ERROR(Begin(op));
  Status s;
  while (!window_.done()) {
    if (stop.load(std::memory_order_relaxed)) {
      s = Aborted("communicator destroyed while the op was in progress");
      break;
    }
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
      s = Aborted("another lane of this op failed");
      break;
    }
    s = Turn(kMaxWait);
    if (!s.ok()) break;
  }
  window_.End();
  return s;
}

Status Progress::Flush() {
  while (window_.tx_queued() > 0) {
    const size_t n = window_.PeekTx(std::span(tx_));
    auto r = transport_.SendBurst(std::span(tx_.data(), n));
    size_t sent = 0;
    if (!r.ok()) {
      if (r.status().code() != StatusCode::kUnavailable) return r.status();
      window_.NoteTransportError(r.status());  // fabric unreachable: retried on the timer
      sent = n;                                // treat as sent (lost)
    } else {
      sent = std::min(*r, n);
    }
    window_.OnSent(sent, clock_.Now());
    if (sent < n) return Status::Ok();  // queue full: retry on the next turn
  }
  return Status::Ok();
}

Status Progress::Turn(microseconds max_wait) {
  INA_RETURN_IF_ERROR(Flush());
  // What already arrived is read before any timer is judged: a progress thread that was not
  // scheduled for a while (more pollers than CPUs) finds its results waiting, and they are not
  // losses.
  INA_ASSIGN_OR_RETURN(size_t got, Receive(microseconds(0)));
  auto now = clock_.Now();
  INA_RETURN_IF_ERROR(Deliver(got, now));
  window_.OnTimers(now);
  INA_RETURN_IF_ERROR(window_.OnReady());
  bool backlog = false;
  if (window_.tx_queued() > 0) {
    INA_RETURN_IF_ERROR(Flush());
    backlog = window_.tx_queued() > 0;
  }
  INA_RETURN_IF_ERROR(window_.CheckProgress(now));
  if (got > 0) {
    last_wait_ = microseconds(0);
    return Status::Ok();  // the next turn sends what these results freed
  }
  auto next = window_.NextDeadline();
  if (backlog) next = std::min(next, now + kSendRetry);
  if (window_.parked() > 0) next = std::min(next, now + kParkedPoll);
  microseconds wait = max_wait;
  if (next != TimePoint::max()) {
    wait = std::clamp(std::chrono::duration_cast<microseconds>(next - now), microseconds(0),
                      std::chrono::duration_cast<microseconds>(kMaxWait));
    // Round up: waking before the deadline would spin a turn with nothing to do.
    if (now + wait < next && wait < kMaxWait) wait += microseconds(1);
  }
  last_wait_ = wait;
  INA_ASSIGN_OR_RETURN(got, Receive(std::min(wait, max_wait)));
  return Deliver(got, clock_.Now());
}

Status Progress::Deliver(size_t got, TimePoint now) {
  for (size_t i = 0; i < got; ++i) {
    INA_RETURN_IF_ERROR(window_.OnPacket(std::span(rx_[i].data, rx_[i].len), now));
  }
  return Status::Ok();
}

Status Progress::PollIdle() {
  INA_ASSIGN_OR_RETURN(size_t got, Receive(microseconds(0)));
  return Deliver(got, clock_.Now());
}

Result<size_t> Progress::ReceiveBurst(microseconds timeout) {
  for (size_t i = 0; i < kBurst; ++i) {
    rx_[i] = {rx_bufs_.data() + i * kRxBufBytes, kRxBufBytes, 0};
  }
  auto r = transport_.RecvBurst(std::span(rx_.data(), kBurst), timeout);
  if (r.ok()) packets_received_.Inc(*r);
  return r;
}

Result<size_t> Progress::Receive(microseconds timeout) {
  auto r = ReceiveBurst(timeout);
  if (!r.ok()) {
    // ICMP port unreachable: the fabric is down or restarting. Keep going; the progress timeout
    // bounds how long we wait, and its message names this error.
    if (r.status().code() == StatusCode::kUnavailable) {
      window_.NoteTransportError(r.status());
      return size_t{0};
    }
    return r.status();
  }
  return *r;
}

Result<Grant> Progress::Join(uint8_t finished_epoch, const std::atomic<bool>* cancel, bool release,
                             const std::atomic<bool>* idle) {
  BeginJoin(finished_epoch, release);
  while (membership_.joining()) {
    if (idle != nullptr) {
      if (idle->load(std::memory_order_relaxed)) {
        membership_.RestartSlotWait(clock_.Now());
      } else {
        membership_.CallWaits();
      }
    }
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
      membership_.Cancel();
      FlushMembership();
      break;
    }
    JoinTurn(kMaxWait);
  }
  return membership_.result();
}

void Progress::JoinTurn(microseconds max_wait) {
  TimePoint now = clock_.Now();
  membership_.OnTimers(now);
  FlushMembership();
  if (!membership_.joining()) return;
  const TimePoint next = membership_.NextDeadline();
  microseconds wait =
      std::clamp(std::chrono::duration_cast<microseconds>(next - now), microseconds(0),
                 std::chrono::duration_cast<microseconds>(kMaxWait));
  if (now + wait < next && wait < kMaxWait) wait += microseconds(1);  // round up, as Turn
  last_wait_ = wait;
  auto got = ReceiveBurst(std::min(wait, max_wait));
  if (!got.ok()) {
    membership_.OnTransportError(got.status());
    // A receive that fails at once (the fabric is not up): wait as a receive would have.
    if (membership_.joining()) clock_.SleepUntil(now + std::min(wait, max_wait));
    FlushMembership();
    return;
  }
  now = clock_.Now();
  for (size_t i = 0; i < *got && membership_.joining(); ++i) {
    membership_.OnPacket(std::span(rx_[i].data, rx_[i].len), now);
  }
  FlushMembership();
}

void Progress::FlushMembership() {
  std::array<TxMessage, 4> tx{};
  while (membership_.tx_queued() > 0) {
    const size_t n = membership_.PeekTx(std::span(tx));
    auto r = transport_.SendBurst(std::span(tx.data(), n));
    const TimePoint now = clock_.Now();
    if (!r.ok()) {
      membership_.OnSent(n, now);  // lost: the JOIN is resent on its timer
      membership_.OnTransportError(r.status());
      continue;
    }
    const size_t sent = std::min(*r, n);
    membership_.OnSent(sent, now);
    if (sent < n) return;  // queue full: the JOIN is retried on the next turn
  }
}

void Progress::SendLeave(proto::ErrorCode reason, uint64_t calls) {
  membership_.Leave(reason, calls);
  FlushMembership();
}

}  // namespace ina::host::internal
