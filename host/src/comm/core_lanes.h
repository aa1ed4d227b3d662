// Lanes on switch cores (CommConfig::switch_cores = N > 1, docs/protocol.md "Lanes on switch
// cores"): lane c carries the slots s and blocks b with s, b = c mod N, and switch core c holds
// them as a job of its own, numbered densely: slot s is that job's slot (s - c) / N, block b its
// block (b - c) / N. A window of W slots is W / N slots at every core (W a multiple of N).
#pragma once

#include <algorithm>
#include <cstdint>

namespace ina::host::internal {

// The window asked of each of `cores` cores for a window of `window` slots in all: at least
// window / cores (rounded up, at least 1), and N times it at most 65535.
inline uint16_t CoreWindow(uint16_t window, uint16_t cores) {
  const uint32_t n = std::max<uint32_t>(cores, 1);
  const uint32_t up = (uint32_t{window} + n - 1) / n;
  return static_cast<uint16_t>(std::clamp<uint32_t>(up, 1, 0xFFFFu / n));
}

}  // namespace ina::host::internal
