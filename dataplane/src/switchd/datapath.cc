// One switch core's data path: classify and dispatch, the send queue (see datapath.h).
#include "datapath.h"

#include <algorithm>
#include <cstring>

#include "core_handoff.h"
#include "hierarchy.h"
#include "ina/proto/crc32c.h"

namespace ina::dp::switchd {

namespace p = ::ina::proto;

namespace {

constexpr auto kTxWait = std::chrono::milliseconds(20);  // per full-queue wait
constexpr int kTxMaxWaits = 5;                           // then the rest of the flush is dropped

// Peer equality (control.h) on endpoints: family, address and port (IPv6: and scope).
bool SameEndpoint(const net::Endpoint& a, const net::Endpoint& b) {
  return SameAddress(a.addr, a.len, b.addr, b.len);
}

}  // namespace

void CopyTo(Peer* p, const net::Endpoint& e) {
  std::memcpy(&p->addr, &e.addr, net::kEndpointBytes);
  p->len = e.len;
}
void CopyTo(net::Endpoint* e, const Peer& p) {
  std::memcpy(&e->addr, &p.addr, net::kEndpointBytes);
  e->len = p.len;
}

void SendBurst(net::Port& port, std::span<const net::TxPacket> descs, CoreCounters& counters) {
  const size_t n = descs.size();
  size_t done = 0;
  int waits = 0;
  while (done < n) {
    auto r = port.TxBurst(descs.subspan(done));
    if (!r.ok()) {
      // Belongs to the first packet (bad address, ICMP feedback): count it and go on.
      counters.Bump(SwitchCounter::kTxErrors);
      ++done;
      continue;
    }
    done += *r;
    if (done == n) break;
    if (waits++ == kTxMaxWaits) {
      counters.Bump(SwitchCounter::kTxErrors, n - done);  // give up on the rest of this flush
      break;
    }
    counters.Bump(SwitchCounter::kTxWaits);
    (void)port.WaitTx(kTxWait);
  }
}

TxQueue::TxQueue(CorePlace place, const PortList& ports, CoreCounters& counters)
    : place_(place),
      ports_(ports),
      counters_(counters),
      q_(kCap),
      bufs_(kCap),
      desc_(kCap),
      order_(kCap),
      link_(kCap) {}

void TxQueue::Add(std::span<const Peer> to, std::span<const uint8_t> packet, uint32_t flags) {
  if (n_ + to.size() > kCap) Flush();
  // A buffer is free whenever a slot is.
  auto& b = bufs_[bufs_used_];
  const uint32_t len = static_cast<uint32_t>(std::min(packet.size(), b.size()));
  std::memcpy(b.data(), packet.data(), len);
  for (const Peer& peer : to) {
    Slot& s = q_[n_++];
    s.buf = static_cast<uint32_t>(bufs_used_);
    s.len = len;
    s.flags = flags;
    CopyTo(&s.to, peer);
  }
  ++bufs_used_;
}

void TxQueue::Flush() {
  if (n_ == 0) return;
  if (handoff_ != nullptr) {
    // What leaves through another core's port goes to that core; the rest below, per port.
    for (size_t i = 0; i < n_; ++i) {
      const Slot& s = q_[i];
      handoff_->PassTx({bufs_[s.buf].data(), s.len}, s.to, s.flags);
    }
  }
  if (ports_.size() == 1 && handoff_ == nullptr) {
    if (ports_[0]->coalesces()) {
      GroupByPeer(n_);
    } else {
      for (size_t i = 0; i < n_; ++i) order_[i] = static_cast<uint32_t>(i);
    }
    size_t k = 0;
    for (size_t i = 0; i < n_; ++i) {
      const Slot& s = q_[order_[i]];
      desc_[k++] = {bufs_[s.buf].data(), s.len, &s.to, s.flags};
    }
    SendBurst(*ports_[0], {desc_.data(), k}, counters_);
  } else {
    for (size_t pi = 0; pi < ports_.size(); ++pi) {
      size_t k = 0;
      for (size_t i = 0; i < n_; ++i) {
        const Slot& s = q_[i];
        if (net::GetVia(s.to) == place_.GlobalPort(pi))
          desc_[k++] = {bufs_[s.buf].data(), s.len, &s.to, s.flags};
      }
      if (k > 0) SendBurst(*ports_[pi], {desc_.data(), k}, counters_);
    }
  }
  n_ = 0;
  bufs_used_ = 0;
}

void TxQueue::GroupByPeer(size_t n) {
  size_t ng = 0;
  for (size_t i = 0; i < n; ++i) {
    const net::Endpoint& to = q_[i].to;
    size_t g = 0;
    while (g < ng && !SameEndpoint(*group_peer_[g], to)) ++g;
    if (g == ng && ng < kGroups) {
      group_peer_[ng] = &to;
      group_head_[ng] = static_cast<uint32_t>(i);
      ++ng;
    } else {
      if (g == ng) g = kGroups - 1;
      link_[group_tail_[g]] = static_cast<uint32_t>(i);
    }
    group_tail_[g] = static_cast<uint32_t>(i);
  }
  size_t k = 0;
  for (size_t g = 0; g < ng; ++g) {
    for (uint32_t i = group_head_[g];; i = link_[i]) {
      order_[k++] = i;
      if (i == group_tail_[g]) break;
    }
  }
}

DataPath::DataPath(Engine& engine, ControlPlane& control, TxQueue& tx, CoreCounters& counters)
    : engine_(engine),
      control_(control),
      tx_(tx),
      counters_(counters),
      peers_(kItemCap),
      items_(kItemCap),
      burst_(kItemCap) {}

void DataPath::Handle(Clock::time_point now) {
  const size_t n = n_;
  n_ = 0;
  burst_n_ = 0;
  now_ = now;
  for (size_t i = 0; i < n; ++i) {
    const Item& it = items_[i];
    std::span<const uint8_t> pkt(it.data, it.len);
    if (leaf_ != nullptr) {
      switch (leaf_->Classify(pkt, *it.from)) {
        case CoreLeaf::Route::kUpstream:
          FlushData();
          leaf_->leaf().HandleUpstream(pkt, now);
          continue;
        case CoreLeaf::Route::kWorkerControl:
          FlushData();
          leaf_->leaf().HandleWorkerControl(pkt, *it.from, now);
          continue;
        case CoreLeaf::Route::kData: {
          // The worker's global rank becomes the leaf's local one (a copy, resealed; a keyed
          // job's opened).
          const Leaf::MappedData m = leaf_->MapData(pkt, *it.from, i);
          if (m.packet.empty()) {
            if (m.foreign) counters_.Bump(SwitchCounter::kDropForeignSrc);
            continue;  // else the leaf counted it
          }
          pkt = m.packet;
          break;
        }
      }
    }
    if (it.len >= p::kHeaderBytes && p::GetVersion(it.data) == p::kVersion) {
      const p::MsgType type = p::GetType(it.data);
      if (ControlPlane::IsControlType(type)) {
        FlushData();  // keep arrival order between data and control
        control_.HandleControl(pkt, *it.from, now, *this);
        continue;
      }
      if (type == p::MsgType::kData) {
        const SourceCheck sc = control_.CheckDataSource(
            p::GetJob(pkt.data()), p::GetRank(pkt.data()), p::GetSlot(pkt.data()), *it.from, now);
        // A damaged header can name another rank or slot: such a packet goes on to the engine,
        // which counts it as drop_bad_crc (the check runs twice only on this rare path). A keyed
        // packet (sec != 0: a tag, no CRC) from the wrong address is dropped here unopened, so a
        // genuine copy of a member's packet sent from elsewhere never counts as the member's; a
        // damaged one naming another rank counts here too, not as drop_forged.
        if (sc == SourceCheck::kForeign && (p::GetSec(pkt.data()) != 0 || p::MessageCrcOk(pkt))) {
          counters_.Bump(SwitchCounter::kDropForeignSrc);
          continue;
        }
        // Still counted by the engine (drop_unknown_job); its sender is told.
        if (sc == SourceCheck::kUnknownJob) AnswerUnknownJob(pkt, *it.from);
      }
    }
    // Data, and everything the engine must count as malformed / bad version.
    burst_[burst_n_++] = pkt;
  }
  FlushData();
  tx_.Flush();
}

void DataPath::AnswerUnknownJob(std::span<const uint8_t> packet, const Peer& from) {
  Answered* slot = nullptr;
  for (Answered& a : answered_) {
    if (a.peer == from) {
      slot = &a;
      break;
    }
  }
  if (slot != nullptr && now_ - slot->at < kUnknownJobGap) return;
  // A CRC-only packet must be whole (a damaged one is only counted); a keyed one cannot be
  // opened without its job's key, and a damaged job id is echoed to a sender that ignores it.
  if (p::GetSec(packet.data()) == 0 && !p::MessageCrcOk(packet)) return;
  if (slot == nullptr) {
    slot = &answered_[answered_next_];
    answered_next_ = (answered_next_ + 1) % kAnsweredCap;
    slot->peer = from;
  }
  slot->at = now_;
  const ControlMessage e = MakeControl(p::ErrorMsg{.job = p::GetJob(packet.data()),
                                                   .rank = p::GetRank(packet.data()),
                                                   .slot = p::GetSlot(packet.data()),
                                                   .gen = p::GetGen(packet.data()),
                                                   .code = p::ErrorCode::kUnknownJob});
  counters_.Bump(SwitchCounter::kErrUnknownJob);
  tx_.Add(from, e, 0);
}

void DataPath::FlushData() {
  if (burst_n_ == 0) return;
  engine_.ProcessBurst({burst_.data(), burst_n_}, *this);
  burst_n_ = 0;
  // A job the engine ended (its ranks disagree): every rank hears at once, not at a timeout.
  (void)control_.HandleEngineFailures(Replies());
}

ReplySink& DataPath::Replies() {
  return leaf_ != nullptr ? leaf_->leaf().replies() : static_cast<ReplySink&>(*this);
}

void DataPath::OnResult(uint16_t job_id, uint16_t dest_rank, std::span<const uint8_t> packet) {
  if (leaf_ != nullptr) {
    leaf_->leaf().OnEngineResult(job_id, dest_rank, packet, now_);
    return;
  }
  const auto peers = control_.Destinations(job_id, dest_rank, p::GetSlot(packet.data()));
  if (peers.empty()) return;
  tx_.Add(peers, packet, net::kTxPayloadChecked);
}

void DataPath::Send(const Peer& to, std::span<const uint8_t> packet) {
  tx_.Add(to, packet, 0);  // control: the UDP checksum guards its address
}

void DataPath::SendTo(const Peer& to, std::span<const uint8_t> packet, bool payload_checked) {
  tx_.Add(to, packet, payload_checked ? net::kTxPayloadChecked : 0);
}

}  // namespace ina::dp::switchd
