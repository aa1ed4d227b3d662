// Progress: one lane's progress loop, a SlotWindow (the ops) and a Membership (join, re-join,
// LEAVE) fed from an injected Transport and Clock.
//
// A turn (Turn) sends what the window queued (bursts of kBurst; a partial send is retried at the
// next turn, at most 100 us later), hands the window a burst of what already arrived, retransmits
// what is then due, sends the parked slots whose block the domain has quantized since (polled at
// least every kParkedPoll while a slot is parked), checks the progress timeout, and when nothing
// had arrived receives one burst, waiting at most until the window's next deadline (and at most
// `max_wait`). Packets waiting in
// the transport are always read before timers are judged: a thread that was descheduled finds
// results, not losses. RunOp turns until the op is done, failed or stopped.
// Unavailable from the transport (ICMP port unreachable: the fabric is down or restarting) is not
// an error here: it is remembered, and the progress timeout's message names it; a failed send
// counts as sent (lost), so the retransmission timer resends it.
//
// A join turn (JoinTurn) does the same for the Membership: its timers, its packets to send, one
// burst received until its next deadline (and at most `max_wait`), handed to it. Join turns until
// the join ends or `cancel` is set. A transport whose receive keeps failing with Unavailable at
// once is waited on with Clock::SleepUntil until the membership's next deadline.
//
// Nothing here reads the wall clock or starts a thread: the communicator's progress thread passes
// the real transport and SteadyClock; unit tests pass a fake transport and a fake clock, call
// Begin (BeginJoin) and then Turn (JoinTurn) with max_wait 0, and advance the clock by
// last_wait() when nothing moves.
//
// Buffers: kBurst x kRxBufBytes RX, allocated at construction. Threading: one thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "clock.h"
#include "counter.h"
#include "ina/base/status.h"
#include "ina/host/transport.h"
#include "ina/proto/wire.h"
#include "membership.h"
#include "slot_window.h"

namespace ina::host::internal {

inline constexpr size_t kBurst = 32;
// > kMaxPacketBytes, so oversize packets are visible.
inline constexpr size_t kRxBufBytes = (proto::kMaxPacketBytes / 64 + 2) * 64;
inline constexpr std::chrono::microseconds kMaxWait{10000};  // re-check the stop flag this often
inline constexpr std::chrono::microseconds kSendRetry{100};  // after a partial send
// How often parked slots (waiting for the domain's quantization) are polled.
inline constexpr std::chrono::microseconds kParkedPoll{20};

class Progress {
 public:
  // `transport` and `clock` must outlive the Progress.
  Progress(const WindowConfig& config, const JoinConfig& join, const quant::Kernels& kernels,
           Transport& transport, const Clock& clock);

  // Joins (finished_epoch 0) or re-joins at the end of the lease of grant `finished_epoch`:
  // turns until the fabric grants (the grant), refuses or the join times out (its Status), or
  // `cancel` is set (when given: Aborted, another lane's join failed). Blocks up to the join's
  // timeout. The window is left as it is (the caller resizes it to the grant). `release`: the
  // re-join releases an idle job's grant (Membership::Join); while `idle` (when given) is set, no
  // call waits for it, and the slot wait does not run (Membership::RestartSlotWait); once it is
  // not, the queued JOIN says a call waits (Membership::CallWaits).
  Result<Grant> Join(uint8_t finished_epoch, const std::atomic<bool>* cancel = nullptr,
                     bool release = false, const std::atomic<bool>* idle = nullptr);
  // The window the next Join asks (Membership::AskWindow).
  void AskWindow(uint16_t window) { membership_.AskWindow(window); }
  // Step by step (tests): BeginJoin, then JoinTurn while membership().joining().
  void BeginJoin(uint8_t finished_epoch, bool release = false) {
    membership_.Join(finished_epoch, clock_.Now(), release);
  }
  void JoinTurn(std::chrono::microseconds max_wait);

  // Runs `op` to its end: Ok, the window's error, the transport's (other than Unavailable), or
  // Aborted once `stop` is set (checked every turn, so within kMaxWait), or `cancel` (when given:
  // another lane's part of the op failed). The window is idle afterwards.
  Status RunOp(const OpDesc& op, const std::atomic<bool>& stop,
               const std::atomic<bool>* cancel = nullptr);

  // Step by step (tests): Begin, then Turn until window().done() or an error; then window().End().
  Status Begin(const OpDesc& op) { return window_.Begin(op, clock_.Now()); }
  Status Turn(std::chrono::microseconds max_wait);
  // How long the last Turn asked the transport to wait (before clamping to max_wait).
  std::chrono::microseconds last_wait() const { return last_wait_; }

  // Between ops: receives what is there without waiting, so error(job_aborted) fails the
  // communicator before its next call and rank_left is recorded.
  Status PollIdle();

  // LEAVE with aux = `reason` (kNone: this rank is done, anything else: abort the job) and
  // offset = `calls` (the calls this rank completed). Best effort, sent three times since nothing
  // acknowledges it (the fabric ignores copies).
  void SendLeave(proto::ErrorCode reason, uint64_t calls);

  SlotWindow& window() { return window_; }
  const SlotWindow& window() const { return window_; }
  const Membership& membership() const { return membership_; }
  uint64_t packets_received() const { return packets_received_.Get(); }

 private:
  Status Flush();
  void FlushMembership();
  // One burst into rx_: the transport's count or error.
  Result<size_t> ReceiveBurst(std::chrono::microseconds timeout);
  // ReceiveBurst for the window: Unavailable is noted there and counts as nothing received.
  Result<size_t> Receive(std::chrono::microseconds timeout);
  Status Deliver(size_t got, TimePoint now);  // the first `got` packets of rx_ to the window

  SlotWindow window_;
  Membership membership_;
  Transport& transport_;
  const Clock& clock_;
  std::vector<uint8_t> rx_bufs_;
  std::array<RxMessage, kBurst> rx_{};
  std::array<TxMessage, kBurst> tx_{};
  std::chrono::microseconds last_wait_{0};
  Counter packets_received_;
};

}  // namespace ina::host::internal
