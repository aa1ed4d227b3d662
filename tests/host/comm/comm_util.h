// Helpers shared by the communicator tests that run over the in-process fabric (test_fabric.h):
// starting it, a config aimed at it, a parallel loop, and creating every rank's communicator at
// once.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "ina/host/communicator.h"
#include "test_fabric.h"

namespace ina::testing {

using host::CommConfig;
using host::Communicator;

// A communicator config for the fabric: job `job`, `world` ranks, K and window; rank 0.
inline CommConfig FabricConfig(const TestFabric& f, uint16_t job, uint16_t world, uint16_t k,
                               uint16_t window) {
  CommConfig c;
  c.switch_host = "127.0.0.1";
  c.switch_port = f.port();
  c.job_id = job;
  c.world_size = world;
  c.k = k;
  c.window = window;
  c.join_timeout_ms = 5000;
  return c;
}

// The in-process fabric, dropping (and duplicating) packets at those rates with `seed` (a test
// binary's seed mixed with a salt of its own); a test failure and null when it does not start.
inline std::unique_ptr<TestFabric> StartFabric(uint64_t seed, double drop = 0, double dup = 0) {
  FabricOptions o;
  o.drop = drop;
  o.dup = dup;
  o.seed = seed;
  auto f = TestFabric::Start(o);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? std::move(f).value() : nullptr;
}

// True when every rank's communicator was created (CreateAll left no null entry).
inline bool AllCreated(const std::vector<std::unique_ptr<Communicator>>& comms) {
  for (const auto& c : comms) {
    if (c == nullptr) return false;
  }
  return true;
}

inline void ParallelFor(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i) ts.emplace_back(fn, i);
  for (auto& t : ts) t.join();
}

// One communicator per rank of base.world_size (Create blocks until every rank joined, so in
// parallel); per_rank may adjust each rank's config. A rank that fails is a test failure naming it
// and a null entry.
inline std::vector<std::unique_ptr<Communicator>> CreateAll(
    const CommConfig& base, const std::function<void(CommConfig&)>& per_rank = nullptr) {
  std::vector<std::unique_ptr<Communicator>> comms(base.world_size);
  std::vector<Status> errs(base.world_size);
  ParallelFor(base.world_size, [&](int r) {
    CommConfig c = base;
    c.rank = static_cast<uint16_t>(r);
    if (per_rank) per_rank(c);
    auto cr = Communicator::Create(c);
    if (cr.ok()) {
      comms[r] = std::move(cr).value();
    } else {
      errs[r] = cr.status();
    }
  });
  for (int r = 0; r < base.world_size; ++r) {
    EXPECT_TRUE(errs[r].ok()) << "rank " << r << ": " << errs[r].ToString();
  }
  return comms;
}

}  // namespace ina::testing
