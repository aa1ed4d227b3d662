// One core's side of the handoff between cores (see core_handoff.h).
#include "core_handoff.h"

#include <algorithm>

namespace ina::dp::switchd {

namespace p = ::ina::proto;

CoreHandoff::CoreHandoff(CorePlace place, Handoff& handoff, const PortList& ports,
                         CoreCounters& counters)
    : place_(place), handoff_(handoff), ports_(ports), counters_(counters), desc_(TxQueue::kCap) {}

unsigned CoreHandoff::JobOwner(const uint8_t* data, size_t len) const {
  if (len < p::kJobOffset + 2) return 0;
  return p::Load16(data + p::kJobOffset) % place_.cores;
}

void CoreHandoff::PassRx(unsigned owner, std::span<const uint8_t> packet,
                         const net::Endpoint& from) {
  const bool ok = handoff_.rx(place_.index, owner).Push(packet, from, 0);
  counters_.Bump(ok ? SwitchCounter::kHandoffRx : SwitchCounter::kHandoffDrops);
}

void CoreHandoff::PassTx(std::span<const uint8_t> packet, const net::Endpoint& to, uint32_t flags) {
  const unsigned owner = net::GetVia(to) % place_.cores;
  if (owner == place_.index) return;
  const bool ok = handoff_.tx(place_.index, owner).Push(packet, to, flags);
  counters_.Bump(ok ? SwitchCounter::kHandoffTx : SwitchCounter::kHandoffDrops);
}

size_t CoreHandoff::Drain(DataPath& data) {
  size_t most = 0;
  for (unsigned from = 0; from < place_.cores; ++from) {
    if (from == place_.index) continue;
    PacketRing& rx = handoff_.rx(from, place_.index);
    const size_t nr = std::min(rx.Ready(), kItemCap);
    for (size_t i = 0; i < nr; ++i) {
      const PacketRing::Entry& e = rx.Peek(i);
      data.Add(e.data, e.len, e.peer);
    }
    if (nr > 0) data.Handle(DataPath::Clock::now());  // the engine copies what it keeps
    rx.Pop(nr);
    PacketRing& tx = handoff_.tx(from, place_.index);
    const size_t nt = std::min(tx.Ready(), desc_.size());
    for (size_t pi = 0; nt > 0 && pi < ports_.size(); ++pi) {
      size_t k = 0;
      for (size_t i = 0; i < nt; ++i) {
        const PacketRing::Entry& e = tx.Peek(i);
        if (net::GetVia(e.peer) == place_.GlobalPort(pi))
          desc_[k++] = {e.data, e.len, &e.peer, e.flags};
      }
      if (k > 0) SendBurst(*ports_[pi], {desc_.data(), k}, counters_);
    }
    tx.Pop(nt);
    most = std::max({most, nr, nt});
  }
  return most;
}

}  // namespace ina::dp::switchd
