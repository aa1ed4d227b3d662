// The leaf hierarchy's part of a switch core (--upstream, docs/hierarchy.md; private to
// ina::switchd_loop): the core's Leaf (leaf.h), which of the core's packets it takes, the scratch
// its mapped data packets live in, and how long the core may wait before the leaf's next timer.
//
// Threading: one core's thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ina/base/status.h"
#include "ina/dp/control.h"
#include "ina/dp/switchd/config.h"
#include "ina/dp/switchd/leaf.h"

namespace ina::dp::switchd {

class CoreLeaf {
 public:
  using Clock = std::chrono::steady_clock;

  // A leaf of --upstream (config.leaf_index of config.leaves) over core `core`'s control plane
  // (configured as cc, lease_calls 0), sending through `out`; both outlive it. With several cores
  // (--core-ports 1) core c's share of every job is a job of its own on the spine's core c, at
  // the --upstream port + c, or (--upstream-core-ports 0) lane c of the leaf's rank at the
  // --upstream port. `items`: the most data packets mapped at once. Errors:
  // InvalidArgument for a bad --upstream, or one whose port + cores - 1 is past 65535.
  static Result<std::unique_ptr<CoreLeaf>> Create(const Config& config, uint32_t core,
                                                  const ControlConfig& cc, ControlPlane& control,
                                                  LeafSink& out, size_t items);

  enum class Route : uint8_t {
    kUpstream,       // from the spine: Leaf::HandleUpstream
    kWorkerControl,  // a worker's JOIN, LEAVE or ALLOC_JOB: Leaf::HandleWorkerControl
    kData,           // the rest: MapData, then the core's own classification
  };
  Route Classify(std::span<const uint8_t> packet, const Peer& from) const;
  // Leaf::MapData into scratch of item i (i < items).
  Leaf::MappedData MapData(std::span<const uint8_t> packet, const Peer& from, size_t i) {
    return leaf_->MapData(packet, from, scratch_.data() + i * proto::kMaxPacketBytes);
  }
  // Until the leaf's next deadline (at least 0), at most `most`.
  std::chrono::microseconds Wait(std::chrono::microseconds most) const;

  Leaf& leaf() { return *leaf_; }
  const Leaf& leaf() const { return *leaf_; }

 private:
  CoreLeaf() = default;
  std::unique_ptr<Leaf> leaf_;
  std::vector<uint8_t> scratch_;  // items x kMaxPacketBytes: mapped data packets
};

}  // namespace ina::dp::switchd
