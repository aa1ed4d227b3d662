// Idle back-off for polling ports (DPDK): spin a little with a CPU pause, then sleep 1, 2, 4 ...
// microseconds up to a ceiling, so an idle poller does not hold a core of a small machine; the
// first packet resets it. Written once for the worker transport and the switch.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace ina::net {

class IdleBackoff {
 public:
  static constexpr int kSpinPolls = 64;  // polls with a pause before the first sleep

  explicit IdleBackoff(int max_sleep_us) : max_us_(std::max(max_sleep_us, 1)) {}

  void Reset() {
    idle_ = 0;
    sleep_us_ = 1;
  }
  // One idle step: a pause, or a sleep of at most `left` (never past the caller's deadline).
  void Idle(std::chrono::microseconds left) {
    if (idle_++ < kSpinPolls) {
      Pause();
      return;
    }
    std::this_thread::sleep_for(std::min(std::chrono::microseconds(sleep_us_), left));
    sleep_us_ = std::min(sleep_us_ * 2, max_us_);
  }

 private:
  static void Pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  int max_us_;
  int idle_ = 0;
  int sleep_us_ = 1;
};

}  // namespace ina::net
