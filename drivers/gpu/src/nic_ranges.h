// The address ranges of a CUDA domain's live NIC buffers (memory_domain.cc): which calls get a
// `wire` inside one (read or written in place) and which get staging. Private to drivers/gpu;
// header-only so the unit tests check it without a device.
// Threading: thread-safe (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <string>

#include "ina/base/status.h"

namespace ina::gpu::internal {

class NicRanges {
 public:
  // REQUIRES: [start, start + bytes) overlaps no range added and not yet removed.
  void Add(uintptr_t start, size_t bytes) {
    std::lock_guard<std::mutex> lk(mu_);
    ranges_[start] = bytes;
  }
  void Remove(uintptr_t start) {
    std::lock_guard<std::mutex> lk(mu_);
    ranges_.erase(start);
  }

  // True when [p, p + bytes) lies inside one range, false when it touches none (bytes 0: false
  // unless p is inside one); InvalidArgument (naming `what`) when it runs past a range's end or
  // into a range.
  Result<bool> Contains(const void* p, size_t bytes, const std::string& what) const {
    const auto a = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lk(mu_);
    auto next = ranges_.upper_bound(a);  // the first range starting after a
    if (next != ranges_.begin()) {
      auto it = std::prev(next);
      if (a - it->first < it->second) {
        if (bytes <= it->second - (a - it->first)) return true;
        return InvalidArgument(what + ": " + std::to_string(bytes) +
                               " bytes run past the end of a NIC buffer");
      }
    }
    if (next != ranges_.end() && bytes > next->first - a) {
      return InvalidArgument(what + ": " + std::to_string(bytes) + " bytes run into a NIC buffer");
    }
    return false;
  }

 private:
  mutable std::mutex mu_;
  std::map<uintptr_t, size_t> ranges_;  // start -> bytes
};

}  // namespace ina::gpu::internal
