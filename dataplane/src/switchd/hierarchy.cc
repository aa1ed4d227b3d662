// The leaf hierarchy's part of a switch core (see hierarchy.h).
#include "hierarchy.h"

#include <algorithm>
#include <string>

#include "ina/net/port.h"
#include "ina/proto/wire.h"

namespace ina::dp::switchd {

namespace p = ::ina::proto;

Result<std::unique_ptr<CoreLeaf>> CoreLeaf::Create(const Config& config, uint32_t core,
                                                   const ControlConfig& cc, ControlPlane& control,
                                                   LeafSink& out, size_t items) {
  auto up = net::ParseEndpoint(config.upstream);
  if (!up.ok()) return up.status().WithContext("--upstream " + config.upstream);
  LeafConfig lc;
  if (config.cores > 1 && config.upstream_core_ports == 0) {  // lane `core` at one spine port
    lc.lane = static_cast<uint16_t>(core);
    lc.lanes = static_cast<uint16_t>(config.cores);
  } else if (config.cores > 1) {  // --core-ports 1: this core's share to the spine's core `core`
    const uint32_t port = net::EndpointPort(*up) + core;
    if (port > 65535) {  // the config's validation refuses it first
      return InvalidArgument("--upstream " + config.upstream + ": core " + std::to_string(core) +
                             " would go to the spine's port " + std::to_string(port));
    }
    net::SetEndpointPort(&*up, static_cast<uint16_t>(port));
  }
  lc.upstream = Peer::From(reinterpret_cast<const sockaddr*>(&up->addr), up->len);
  lc.index = static_cast<uint16_t>(config.leaf_index);
  lc.leaves = static_cast<uint16_t>(config.leaves);
  lc.job_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(cc.job_timeout);
  if (!config.upstream_admin_key_file.empty()) {
    INA_ASSIGN_OR_RETURN(lc.upstream_admin, proto::LoadSecretFile(config.upstream_admin_key_file,
                                                                  "--upstream-admin-key-file"));
  }
  lc.log = cc.log;
  std::unique_ptr<CoreLeaf> c(new CoreLeaf());
  c->leaf_ = std::make_unique<Leaf>(lc, control, out);
  std::fill(lc.upstream_admin.begin(), lc.upstream_admin.end(), uint8_t{0});  // the leaf's copy
  c->scratch_.resize(items * proto::kMaxPacketBytes);
  return c;
}

CoreLeaf::Route CoreLeaf::Classify(std::span<const uint8_t> packet, const Peer& from) const {
  if (leaf_->FromUpstream(from)) return Route::kUpstream;
  if (packet.size() >= p::kHeaderBytes && p::GetVersion(packet.data()) == p::kVersion &&
      ControlPlane::IsControlType(p::GetType(packet.data()))) {
    return Route::kWorkerControl;
  }
  return Route::kData;
}

std::chrono::microseconds CoreLeaf::Wait(std::chrono::microseconds most) const {
  const auto d = leaf_->NextDeadline();
  if (d == Clock::time_point::max()) return most;
  const auto now = Clock::now();
  if (d <= now) return std::chrono::microseconds(0);
  return std::chrono::duration_cast<std::chrono::microseconds>(d - now) +
         std::chrono::microseconds(1);
}

}  // namespace ina::dp::switchd
