// The fault-injecting port wrapper (see ina/net/fault.h).
#include "ina/net/fault.h"

#include <algorithm>
#include <cstring>

namespace ina::net {
namespace {

constexpr size_t kHeld = 2 * kBurst;  // packets held back per direction
constexpr size_t kBufBytes = 2048;    // > any ina packet
constexpr int kTxWaits = 5;
constexpr auto kTxWait = std::chrono::milliseconds(20);
constexpr auto kHoldWait = std::chrono::microseconds(1000);

struct Held {
  std::array<uint8_t, kBufBytes> buf;
  uint32_t len = 0;
  uint32_t flags = 0;
  uint64_t tag = 0;  // the call that held it back
  Endpoint peer;
  bool has_peer = false;
};

// A FIFO of held packets (fixed capacity, no allocation after construction).
class HeldRing {
 public:
  HeldRing() : slots_(kHeld) {}
  bool full() const { return n_ == kHeld; }
  size_t size() const { return n_; }
  Held& Push() {
    Held& h = slots_[(head_ + n_) % kHeld];
    ++n_;
    return h;
  }
  Held& Front() { return slots_[head_]; }
  Held& Peek(size_t i) { return slots_[(head_ + i) % kHeld]; }
  void Pop() {
    head_ = (head_ + 1) % kHeld;
    --n_;
  }

 private:
  std::vector<Held> slots_;
  size_t head_ = 0, n_ = 0;
};

void CopyInto(Held& h, const uint8_t* data, uint32_t len, uint32_t flags) {
  const uint32_t n = std::min<uint32_t>(len, kBufBytes);
  std::memcpy(h.buf.data(), data, n);
  h.len = n;
  h.flags = flags | (n < len ? kPacketTruncated : 0);
}

class FaultPort final : public Port {
 public:
  FaultPort(std::unique_ptr<Port> inner, const FaultConfig& c)
      : inner_(std::move(inner)),
        rx_(c.drop, c.dup, c.reorder, c.corrupt, c.seed),
        tx_(c.drop, c.dup, c.reorder, c.corrupt, TxFaultSeed(c.seed)),
        kind_("fault(" + std::string(inner_->kind()) + ")"),
        corrupt_bufs_(kBurst),
        staged_(3 * kBurst + kHeld) {}

  Result<size_t> RxBurst(std::span<Packet> pkts) override {
    ++rx_call_;
    const size_t held_before = rx_held_.size();
    // Room: every packet may be doubled, and what was held before follows.
    const size_t room = pkts.size() > held_before ? pkts.size() - held_before : 0;
    size_t want = std::min(kBurst, rx_.enabled() ? room / 2 : room);
    if (want == 0 && room > 0) want = 1;  // a duplicate without room is not made
    size_t got = 0;
    if (want > 0) {
      INA_ASSIGN_OR_RETURN(got, inner_->RxBurst(pkts.first(want)));
    }
    for (size_t i = 0; i < got; ++i) {
      tmp_[i] = pkts[i];
      if (pkts[i].from != nullptr) tmp_peer_[i] = *pkts[i].from;
    }
    size_t out = 0;
    auto emit = [&](const Packet& p, const Endpoint* peer) {
      if (out == pkts.size()) return false;
      Packet& o = pkts[out++];
      o.data = p.data;
      o.len = p.len;
      o.flags = p.flags;
      if (o.from != nullptr && peer != nullptr) *o.from = *peer;
      return true;
    };
    for (size_t i = 0; i < got; ++i) {
      Packet& p = tmp_[i];
      const Endpoint* peer = p.from != nullptr ? &tmp_peer_[i] : nullptr;
      const FaultInjector::Decision d = rx_.Next();
      if (d.drop) {
        ++inj_.inj_rx_drops;
        continue;
      }
      if (d.corrupt && p.len > 0) {
        ++inj_.inj_rx_corrupts;
        p.data[d.where % p.len] ^= d.mask;
      }
      if (d.reorder && !rx_held_.full()) {
        ++inj_.inj_rx_reorders;
        Held& h = rx_held_.Push();
        CopyInto(h, p.data, p.len, p.flags);
        h.tag = rx_call_;
        h.has_peer = peer != nullptr;
        if (peer != nullptr) h.peer = *peer;
        if (d.dup && emit(p, peer)) ++inj_.inj_rx_dups;  // the copy now, the original later
        continue;
      }
      emit(p, peer);
      if (d.dup && emit(p, peer)) ++inj_.inj_rx_dups;
    }
    // Held packets from earlier calls follow; with nothing new from the inner port, all of them.
    while (rx_held_.size() > 0 && out < pkts.size() &&
           (got == 0 || rx_held_.Front().tag < rx_call_)) {
      Held& h = rx_held_.Front();
      Packet& o = pkts[out++];
      o.data = h.buf.data();
      o.len = h.len;
      o.flags = h.flags;
      if (o.from != nullptr && h.has_peer) *o.from = h.peer;
      rx_held_.Pop();  // the slot is reused only by a later call: data stays valid till then
    }
    return out;
  }

  Result<size_t> TxBurst(std::span<const TxPacket> pkts) override {
    ++tx_call_;
    size_t done = 0;
    do {
      const size_t m = std::min(kBurst, pkts.size() - done);
      size_t k = 0;
      for (size_t i = 0; i < m; ++i) {
        const TxPacket& p = pkts[done + i];
        const FaultInjector::Decision d = tx_.Next();
        if (d.drop) {
          ++inj_.inj_tx_drops;
          continue;
        }
        TxPacket s = p;
        if (d.corrupt && p.len > 0) {
          ++inj_.inj_tx_corrupts;
          auto& b = corrupt_bufs_[i];
          const uint32_t n = std::min<uint32_t>(p.len, kBufBytes);
          std::memcpy(b.data(), p.data, n);
          b[d.where % n] ^= d.mask;
          s.data = b.data();
          s.len = n;
        }
        if (d.reorder && !tx_held_.full()) {
          ++inj_.inj_tx_reorders;
          Held& h = tx_held_.Push();
          CopyInto(h, s.data, s.len, s.flags);
          h.tag = tx_call_;
          h.has_peer = p.to != nullptr;
          if (p.to != nullptr) h.peer = *p.to;
        } else {
          staged_[k++] = s;
        }
        if (d.dup) {
          ++inj_.inj_tx_dups;
          staged_[k++] = s;
        }
      }
      done += m;
      // What earlier calls held back goes after this call's last chunk (all of it on an empty
      // call); popped entries are sent before any new Push can reuse their slots.
      size_t popped = 0;
      if (done == pkts.size()) {
        while (tx_held_.size() > popped && k < staged_.size()) {
          Held& h = tx_held_.Peek(popped);
          if (h.tag >= tx_call_ && !pkts.empty()) break;
          staged_[k++] = {h.buf.data(), h.len, h.has_peer ? &h.peer : nullptr, h.flags};
          ++popped;
        }
      }
      INA_RETURN_IF_ERROR(SendAll(k));
      for (size_t i = 0; i < popped; ++i) tx_held_.Pop();
    } while (done < pkts.size());
    return pkts.size();
  }

  Result<bool> WaitRx(std::chrono::microseconds timeout) override {
    if (rx_held_.size() > 0) {
      INA_ASSIGN_OR_RETURN(bool r, inner_->WaitRx(std::min(timeout, kHoldWait)));
      (void)r;
      return true;  // RxBurst releases what is held when nothing newer came
    }
    return inner_->WaitRx(timeout);
  }
  Result<bool> WaitTx(std::chrono::microseconds timeout) override {
    return inner_->WaitTx(timeout);
  }
  bool holding() const override {
    return rx_held_.size() > 0 || tx_held_.size() > 0 || inner_->holding();
  }
  bool coalesces() const override { return inner_->coalesces(); }

  PortStats stats() const override {
    PortStats s = inner_->stats();
    s.inj_rx_drops = inj_.inj_rx_drops;
    s.inj_rx_dups = inj_.inj_rx_dups;
    s.inj_rx_reorders = inj_.inj_rx_reorders;
    s.inj_rx_corrupts = inj_.inj_rx_corrupts;
    s.inj_tx_drops = inj_.inj_tx_drops;
    s.inj_tx_dups = inj_.inj_tx_dups;
    s.inj_tx_reorders = inj_.inj_tx_reorders;
    s.inj_tx_corrupts = inj_.inj_tx_corrupts;
    s.tx_dropped += tx_dropped_;
    return s;
  }
  std::string Describe() const override { return inner_->Describe(); }
  std::string name() const override { return inner_->name(); }
  std::string_view kind() const override { return kind_; }
  size_t max_datagram_bytes() const override { return inner_->max_datagram_bytes(); }
  size_t rx_queue_datagrams(size_t datagram_bytes) const override {
    return inner_->rx_queue_datagrams(datagram_bytes);
  }
  size_t rx_buffer_bytes() const override { return inner_->rx_buffer_bytes(); }
  uint64_t rx_kernel_drops() const override { return inner_->rx_kernel_drops(); }

 private:
  // Sends staged_[0, k) through the inner port, waiting (bounded) while it is full.
  Status SendAll(size_t k) {
    size_t sent = 0;
    int waits = 0;
    while (sent < k) {
      INA_ASSIGN_OR_RETURN(size_t n, inner_->TxBurst({staged_.data() + sent, k - sent}));
      sent += n;
      if (sent == k) break;
      if (waits++ == kTxWaits) {
        tx_dropped_ += k - sent;
        break;
      }
      INA_ASSIGN_OR_RETURN(bool room, inner_->WaitTx(kTxWait));
      (void)room;
    }
    return Status::Ok();
  }

  std::unique_ptr<Port> inner_;
  FaultInjector rx_, tx_;
  std::string kind_;
  PortStats inj_;
  uint64_t rx_call_ = 0, tx_call_ = 0;
  uint64_t tx_dropped_ = 0;
  HeldRing rx_held_, tx_held_;
  std::array<Packet, kBurst> tmp_{};
  std::array<Endpoint, kBurst> tmp_peer_{};
  std::vector<std::array<uint8_t, kBufBytes>> corrupt_bufs_;
  std::vector<TxPacket> staged_;
};

}  // namespace

Result<std::unique_ptr<Port>> WrapWithFaults(std::unique_ptr<Port> inner, const FaultConfig& c) {
  if (inner == nullptr) return InvalidArgument("net: WrapWithFaults: no port");
  for (double p : {c.drop, c.dup, c.reorder, c.corrupt}) {
    if (!(p >= 0 && p <= 1)) return InvalidArgument("net: fault rate outside [0, 1]");
  }
  if (!c.enabled()) return inner;
  return std::unique_ptr<Port>(new FaultPort(std::move(inner), c));
}

}  // namespace ina::net
