// GlooRing: the host-only baseline the benchmark compares ina against. It runs Gloo's ring
// all-reduce (reduce-scatter then all-gather over TCP between the ranks) on float tensors.
//
// One GlooRing per rank (normally one per process; Gloo also allows several in one process, one
// per thread). Ranks meet through files in a shared directory (gloo::rendezvous::FileStore) and
// connect over TCP on 127.0.0.1 (or on the address given to Create, e.g. a worker's own address
// inside a network namespace). Gloo reports errors by throwing; this class is the boundary that
// turns them into Status, so nothing here throws.
//
// Threading: a GlooRing is used by one thread at a time. Every call is collective: all ranks must
// make the same calls in the same order with the same sizes.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>

#include "ina/base/status.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace ina::bench {

class GlooRing {
 public:
  // Rendezvous through files in store_dir (an existing directory shared by all ranks; use a fresh
  // one per run, stale files from an earlier run confuse the rendezvous). Blocks until every rank
  // has connected, or fails with DEADLINE_EXCEEDED / UNAVAILABLE after about `timeout`. The same
  // timeout bounds each later collective. `host` is the local IPv4 address this rank's TCP
  // device binds and announces to the others (they must be able to reach it).
  // REQUIRES: 0 <= rank < world, world >= 1, timeout > 0.
  static Result<std::unique_ptr<GlooRing>> Create(int rank, int world, const std::string& store_dir,
                                                  std::chrono::milliseconds timeout,
                                                  const std::string& host = "127.0.0.1");

  ~GlooRing();
  GlooRing(const GlooRing&) = delete;
  GlooRing& operator=(const GlooRing&) = delete;

  // In-place sum of `data` over all ranks, ring algorithm. Blocks until done or the timeout.
  // Every rank passes the same number of elements (0 is allowed and returns at once).
  Status AllReduce(std::span<float> data);

  // Returns once every rank has entered Barrier(), or fails after the timeout.
  Status Barrier();

  int rank() const { return rank_; }
  int world() const { return world_; }

 private:
  GlooRing(int rank, int world, std::chrono::milliseconds timeout,
           std::shared_ptr<gloo::Context> context);

  int rank_;
  int world_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<gloo::Context> context_;
};

}  // namespace ina::bench
