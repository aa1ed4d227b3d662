// Counter is bumped from several threads (the communicator's ops_completed: the caller's thread
// for empty ops, the progress thread for the others); no increment may be lost. A load + store
// counter loses increments here as soon as two writers really run at the same time. On a loaded
// machine the threads may rarely overlap, so each writer keeps going (up to a bound) until it has
// seen the others' increments land between two of its own a few thousand times.
#include "counter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace ina::host::internal {
namespace {

TEST(Counter, NoIncrementIsLostWithSeveralWriters) {
  constexpr int kThreads = 4;
  constexpr uint64_t kMinEach = 200000;
  constexpr uint64_t kMaxEach = 20000000;
  constexpr uint64_t kWantOverlaps = 5000;
  Counter c;
  std::atomic<int> ready{0};
  std::atomic<uint64_t> overlaps{0}, total{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      const uint64_t n = t == 0 ? 2 : 1;
      ready.fetch_add(1);
      while (ready.load() < kThreads) {
      }  // start together, so the writers overlap
      uint64_t mine = 0, seen = 0, last = c.Get();
      while (mine < kMinEach ||
             (mine < kMaxEach && overlaps.load(std::memory_order_relaxed) + seen < kWantOverlaps)) {
        c.Inc(n);
        ++mine;
        const uint64_t now = c.Get();
        if (now != last + n) ++seen;  // someone else's increment landed in between
        last = now;
      }
      overlaps.fetch_add(seen);
      total.fetch_add(mine * n);
    });
  }
  for (auto& t : ts) t.join();
  std::printf("increments=%llu overlaps=%llu\n", static_cast<unsigned long long>(total.load()),
              static_cast<unsigned long long>(overlaps.load()));
  EXPECT_EQ(c.Get(), total.load());
}

}  // namespace
}  // namespace ina::host::internal
