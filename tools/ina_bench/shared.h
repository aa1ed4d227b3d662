// What ina-bench's ranks report to the parent, laid out as one region: the process-shared memory
// of the fork mode, or the parent's own copy that the coordinator (coordinator.h) fills from the
// reports of workers elsewhere. Plain data.
#pragma once

#include <pthread.h>

#include <cstddef>
#include <cstdint>

#include "options.h"

namespace ina::bench {

// What one rank reports.
struct RankSlot {
  int ina_code;  // StatusCode of the first failed ina call (0: all fine)
  char ina_error[256];
  double ina_ms[kMaxIters];
  double error_ms;  // with --kill-rank: time from the call's start to its error
  uint64_t fingerprint;
  uint64_t retransmissions, packets_sent, bad_crc;
  uint64_t packets_from_device;  // CommStats::packets_from_device (--memory host-async)
  uint64_t socket_drops;         // CommStats::socket_drops (a full socket receive buffer)
  uint32_t window;               // the window the fabric granted (Communicator::window)
  uint32_t k;                    // the K its communicator resolved (0: none was created)
  int gloo_code;
  char gloo_error[256];
  double gloo_ms[kMaxIters];
};

struct Shared {
  pthread_barrier_t barrier;  // fork mode: process-shared, o.workers parties
  RankSlot ranks[kMaxWorkers];
};

// Bytes of the region: Shared, rank 0's ina result, rank 0's Gloo result.
inline size_t MapBytes(const Options& o) { return sizeof(Shared) + 2 * o.elements * 4 + 64; }

// The region's parts. REQUIRES: `mem` holds MapBytes(o) bytes.
struct SharedView {
  Shared* shared;
  uint8_t* result0;  // o.elements * 4 bytes
  uint8_t* gloo0;    // o.elements * 4 bytes
};
inline SharedView ViewOf(void* mem, const Options& o) {
  auto* result0 = static_cast<uint8_t*>(mem) + sizeof(Shared);
  return SharedView{static_cast<Shared*>(mem), result0, result0 + o.elements * 4};
}

}  // namespace ina::bench
