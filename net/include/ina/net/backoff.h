// Idle back-off for polling ports (DPDK), written once for the worker transport and the switch.
//
// A poller that found nothing calls Idle(); one that got packets calls Reset(). The idle time
// since the last Reset decides what Idle does:
//   - up to kSpinUs, only on a thread pinned to one CPU (a dedicated DPDK lcore): a CPU pause (the
//     next packet of a running all-reduce is microseconds away);
//   - then up to kYieldUs: sched_yield, so where pollers share CPUs the others run at once (a
//     yield with nobody else runnable returns in about a microsecond). Measured with 4 memif
//     workers and the switch on 2 CPUs: ina-bench 16M floats 291-329 ms yielding at once against
//     398-436 ms spinning 50 us first (docs/benchmarks-dpdk.md);
//   - then sleeps of 1, 2, 4 ... microseconds up to the ceiling (max_sleep_us), so an idle poller
//     does not hold a core of a small machine.
// Sleeping threads get a timer slack of 1 us (prctl PR_SET_TIMERSLACK, once per thread): with
// Linux's default 50 us slack a 1 us sleep measured about 100 us on the 2-core VMs this project
// runs on, long enough to stall a window of in-flight packets (docs/benchmarks-dpdk.md).
//
// Threading: one IdleBackoff per polling thread. Cost: Idle reads the steady clock once per call.
#pragma once

#include <chrono>

namespace ina::net {

class IdleBackoff {
 public:
  static constexpr std::chrono::microseconds kSpinUs{50};
  static constexpr std::chrono::microseconds kYieldUs{2000};

  explicit IdleBackoff(int max_sleep_us);

  // Traffic seen: the next Idle starts spinning again.
  void Reset() { idle_ = false; }
  // One idle step: a pause, a yield, or a sleep of at most `left` (never past the caller's
  // deadline).
  void Idle(std::chrono::microseconds left);

 private:
  using Clock = std::chrono::steady_clock;
  int max_us_;
  bool idle_ = false;
  Clock::time_point idle_since_{};
  int sleep_us_ = 1;
};

}  // namespace ina::net
