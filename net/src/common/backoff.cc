// The idle back-off (see ina/net/backoff.h).
#include "ina/net/backoff.h"

#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>
#include <thread>

namespace ina::net {
namespace {

void Pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Once per thread, before its first sleep: 1 us of timer slack instead of Linux's 50 us.
void TightenTimerSlack() {
  thread_local bool done = false;
  if (done) return;
  done = true;
  (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);  // best effort: slack only costs latency
}

// A thread pinned to one CPU (a DPDK lcore) owns it: spinning costs nobody. Any other thread may
// share its CPUs with other pollers, and spinning there only delays them.
std::chrono::microseconds SpinBudget() {
  thread_local const std::chrono::microseconds budget = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    const bool pinned = sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) == 1;
    return pinned ? IdleBackoff::kSpinUs : std::chrono::microseconds(0);
  }();
  return budget;
}

}  // namespace

IdleBackoff::IdleBackoff(int max_sleep_us) : max_us_(std::max(max_sleep_us, 1)) {}

void IdleBackoff::Idle(std::chrono::microseconds left) {
  const Clock::time_point now = Clock::now();
  if (!idle_) {
    idle_ = true;
    idle_since_ = now;
    sleep_us_ = 1;
  }
  const auto idle = now - idle_since_;
  const auto spin = SpinBudget();
  if (idle < spin) {
    for (int i = 0; i < 8; ++i) Pause();
    return;
  }
  if (idle < spin + kYieldUs) {
    sched_yield();
    return;
  }
  TightenTimerSlack();
  std::this_thread::sleep_for(std::min(std::chrono::microseconds(sleep_us_), left));
  sleep_us_ = std::min(sleep_us_ * 2, max_us_);
}

}  // namespace ina::net
