// A statistics counter that any thread may bump and read.
//
// The communicator's counters used to be "single-writer" (load + store), but ops_completed was
// bumped both by the caller's thread (an empty op completes in Submit) and by the progress
// thread, so an increment could be lost and LEAVE would carry a wrong call count. fetch_add makes
// every counter safe with any number of writers; relaxed order is enough because a counter orders
// nothing else (readers want a snapshot, LEAVE reads after the writers are joined or serialised).
#pragma once

#include <atomic>
#include <cstdint>

namespace ina::host::internal {

class Counter {
 public:
  void Inc(uint64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t Get() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

}  // namespace ina::host::internal
