// The time source of the progress engine, injected so that tests drive it with a fake clock.
//
// The engine never reads std::chrono::steady_clock itself: the communicator's progress thread
// passes SteadyClock, unit tests a clock they advance by hand (tests/host/comm/fake_net.h).
// Threading: Now() and SleepUntil() may be called from the one thread that owns the engine.
#pragma once

#include <chrono>
#include <thread>

namespace ina::host::internal {

using TimePoint = std::chrono::steady_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
  // Waits until `t`: the real clock sleeps, a fake one jumps there. Only for a transport that
  // keeps failing at once (a loop waiting on its receive would spin otherwise).
  virtual void SleepUntil(TimePoint t) const = 0;
};

// The real clock (std::chrono::steady_clock).
class SteadyClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  void SleepUntil(TimePoint t) const override { std::this_thread::sleep_until(t); }
};

}  // namespace ina::host::internal
