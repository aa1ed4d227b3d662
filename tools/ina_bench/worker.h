// One rank of ina-bench: its all-reduces through ina and then Gloo, timed between barriers, with
// what the parent needs (times, errors, fingerprint, rank 0's results) written to the rank's part
// of a SharedView (shared.h).
//
// Two ways to meet the other ranks and the parent (Peers):
//   - fork mode: the region is shared memory inherited from the parent, the barrier is
//     process-shared in it, Gloo meets through files in a directory (ForkPeers);
//   - --role worker (in a network namespace the parent made, or on another host): the rank connects
//     to the parent's coordinator over TCP (coord_client.h), takes the run's options from it, meets
//     the others at its barriers and its Gloo store, and sends its report at the end (WorkerMain).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "ina/base/status.h"
#include "options.h"
#include "shared.h"

namespace ina::bench {

class GlooRing;

// How a rank meets the others.
class Peers {
 public:
  virtual ~Peers() = default;
  // Returns once every rank is there. Errors: another rank failed, the parent is gone.
  virtual Status Barrier() = 0;
  // Gloo's ring between the ranks (collective: every rank calls it).
  virtual Result<std::unique_ptr<GlooRing>> Gloo(int rank, int world,
                                                 std::chrono::milliseconds timeout,
                                                 const std::string& host) = 0;
};

// Fork mode: the process-shared barrier of `view` and Gloo's file store in `store_dir`.
std::unique_ptr<Peers> ForkPeers(SharedView view, const std::string& store_dir);

// Runs rank `rank` against the switch at host:port (Gloo binds gloo_host). Blocks in barriers
// until every rank is there. Returns the process exit code (0: every call succeeded; with
// --kill-rank: 0 when the call failed, as it must).
int Worker(const Options& o, int rank, const std::string& host, uint16_t port,
           const std::string& gloo_host, Peers& peers, SharedView view);

// --role worker: connects to o.coordinator (within --join-timeout-s), runs rank o.rank with the
// run's options from it, reports. Returns the exit code; exits the process (1) at once if the
// coordinator's connection is lost before the report went through.
int WorkerMain(Options o);

}  // namespace ina::bench
