// A switch core's published stats (private to ina::switchd_loop): the core's thread copies its
// engine, control-plane, switch, leaf and port counters into atomics on its tick (Publish), and
// any thread reads them (Switch::Snapshot) without stopping the core.
//
// Threading: Publish from the core's thread only; the readers from any thread. The job table
// (--metrics) is a copy under a lock, taken on the tick path only.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "datapath.h"
#include "ina/dp/control.h"
#include "ina/dp/engine.h"
#include "ina/dp/switchd/leaf.h"
#include "ina/dp/switchd/switch.h"
#include "ina/net/port.h"

namespace ina::dp::switchd {

class StatsPublisher {
 public:
  // ports: the core's port count; leaf: whether the core is a leaf (its counters follow the
  // switch's); job_list: whether Publish copies the job table (--metrics).
  StatsPublisher(size_t ports, bool leaf, bool job_list);

  // Copies every counter and each port's stats (leaf: null unless the core is a leaf).
  void Publish(const Engine& engine, const ControlPlane& control, const PortList& ports,
               const CoreCounters& counters, const Leaf* leaf);

  // The published values, in JSON order (engine, control, switch, leaf).
  NamedCounters Counters() const;
  size_t jobs() const { return jobs_.load(std::memory_order_relaxed); }
  uint32_t in_use() const { return in_use_.load(std::memory_order_relaxed); }
  std::vector<JobInfo> job_list() const;
  net::PortStats port(size_t pi) const;

 private:
  static constexpr size_t kPortWords = sizeof(net::PortStats) / sizeof(uint64_t);
  static_assert(sizeof(net::PortStats) == kPortWords * sizeof(uint64_t));

  bool job_list_enabled_;
  std::vector<std::atomic<uint64_t>> counters_;
  std::vector<std::atomic<uint64_t>> ports_;  // kPortWords per port
  std::atomic<size_t> jobs_{0};
  std::atomic<uint32_t> in_use_{0};
  mutable std::mutex job_list_mu_;
  std::vector<JobInfo> job_list_;  // guarded by job_list_mu_
};

}  // namespace ina::dp::switchd
