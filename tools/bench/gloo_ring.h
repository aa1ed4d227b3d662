// GlooRing: the host-only baseline the benchmark compares ina against. It runs Gloo's ring
// all-reduce (reduce-scatter then all-gather over TCP between the ranks) on float tensors.
//
// One GlooRing per rank (normally one per process; Gloo also allows several in one process, one
// per thread). Ranks meet through files in a shared directory (gloo::rendezvous::FileStore) or
// through a RendezvousStore the caller provides (ina-bench's coordinator over TCP), and connect
// over TCP on 127.0.0.1 (or on the address given to Create, e.g. a worker's own address
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
#include <vector>

#include "ina/base/status.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace ina::bench {

// A key-value store every rank reaches: what Gloo's rendezvous (gloo::rendezvous::Store) needs.
// Implementations return errors (a timeout's message says "timed out"); the adapter in
// gloo_ring.cc turns them into the exceptions Gloo expects.
class RendezvousStore {
 public:
  virtual ~RendezvousStore() = default;
  virtual Status Set(const std::string& key, const std::vector<char>& value,
                     std::chrono::milliseconds timeout) = 0;
  // Blocks until `key` is set.
  virtual Result<std::vector<char>> Get(const std::string& key,
                                        std::chrono::milliseconds timeout) = 0;
  // Blocks until every key is set.
  virtual Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
};

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
  // The same, meeting through `store` (used only during Create). The store must be fresh per run.
  static Result<std::unique_ptr<GlooRing>> Create(int rank, int world, RendezvousStore& store,
                                                  std::chrono::milliseconds timeout,
                                                  const std::string& host);

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
