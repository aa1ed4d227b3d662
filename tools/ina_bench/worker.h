// One rank of ina-bench: its all-reduces through ina and then Gloo, timed between process-shared
// barriers, with what the parent needs (times, errors, fingerprint, rank 0's results) written to a
// region shared with the parent (an anonymous mapping inherited by fork, or a file the exec'd
// multi-host workers map).
#pragma once

#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "options.h"

namespace ina::bench {

// What one rank reports. Plain data: it lives in shared memory.
struct RankSlot {
  int ina_code;  // StatusCode of the first failed ina call (0: all fine)
  char ina_error[256];
  double ina_ms[kMaxIters];
  double error_ms;  // with --kill-rank: time from the call's start to its error
  uint64_t fingerprint;
  uint64_t retransmissions, packets_sent, bad_crc;
  int gloo_code;
  char gloo_error[256];
  double gloo_ms[kMaxIters];
};

struct Shared {
  pthread_barrier_t barrier;  // process-shared, o.workers parties
  RankSlot ranks[kMaxWorkers];
};

// Bytes of the shared region: Shared, rank 0's ina result, rank 0's Gloo result.
size_t MapBytes(const Options& o);

// The region's parts. REQUIRES: `mem` holds MapBytes(o) bytes.
struct SharedView {
  Shared* shared;
  uint8_t* result0;  // o.elements * 4 bytes
  uint8_t* gloo0;    // o.elements * 4 bytes
};
SharedView ViewOf(void* mem, const Options& o);

// Runs rank `rank` against the switch at host:port (Gloo binds gloo_host and meets in store_dir).
// Blocks in the shared barrier until every rank is there. Returns the process exit code (0: every
// call succeeded; with --kill-rank: 0 when the call failed, as it must).
int Worker(const Options& o, int rank, const std::string& host, uint16_t port,
           const std::string& gloo_host, const std::string& store_dir, SharedView view);

// --role worker: maps the parent's file (o.shm_path) and runs rank o.rank. Returns the exit code.
int WorkerMain(const Options& o);

}  // namespace ina::bench
