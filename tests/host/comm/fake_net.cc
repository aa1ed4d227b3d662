#include "fake_net.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace ina::testing {

namespace {

dp::Peer PeerOf(int id) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(0x0A000001);  // 10.0.0.1
  sa.sin_port = htons(static_cast<uint16_t>(10000 + id));
  return dp::Peer::From(reinterpret_cast<const sockaddr*>(&sa), sizeof(sa));
}

int IdOf(const dp::Peer& p) {
  const auto& sa = reinterpret_cast<const sockaddr_in&>(p.addr);
  return ntohs(sa.sin_port) - 10000;
}

}  // namespace

proto::Header NetPacket::header() const { return proto::DecodeHeader(bytes.data()); }

proto::MsgType NetPacket::type() const {
  return bytes.size() >= proto::kHeaderBytes ? proto::GetType(bytes.data())
                                             : static_cast<proto::MsgType>(0xFF);
}

class FakeNet::Sink final : public dp::ReplySink {
 public:
  explicit Sink(FakeNet& net) : net_(net) {}
  void Send(const dp::Peer& to, std::span<const uint8_t> packet) override {
    NetPacket p;
    p.endpoint = IdOf(to);
    p.up = false;
    p.bytes.assign(packet.begin(), packet.end());
    const Verdict v = net_.filter ? net_.filter(p) : Verdict{};
    if (v.hold) {
      net_.held.push_back(std::move(p));
      return;
    }
    for (int c = 0; c < v.copies; ++c) net_.ToEndpoint(p);
  }

 private:
  FakeNet& net_;
};

FakeNet::FakeNet(const FakeClock& clock, const FabricConfig& config) : clock_(clock) {
  auto f = Fabric::Create(config);
  if (f.ok()) fabric_ = std::move(f).value();
}

FakeNet::~FakeNet() = default;

FakeTransport& FakeNet::Endpoint(int id) {
  if (static_cast<size_t>(id) >= endpoints_.size()) {
    endpoints_.resize(id + 1);
    down_.resize(id + 1);
  }
  if (!endpoints_[id]) endpoints_[id] = std::make_unique<FakeTransport>(*this, id);
  return *endpoints_[id];
}

std::deque<NetPacket>& FakeNet::down(int id) {
  Endpoint(id);
  return down_[id];
}

void FakeNet::ToFabric(const NetPacket& pkt) {
  Sink sink(*this);
  fabric_->Receive(pkt.bytes, PeerOf(pkt.endpoint), clock_.Now(), sink);
  ++moved_;
}

void FakeNet::ToEndpoint(NetPacket pkt) {
  if (pkt.endpoint < 0 || static_cast<size_t>(pkt.endpoint) >= down_.size()) return;
  down_[pkt.endpoint].push_back(std::move(pkt));
}

size_t FakeNet::Pump() {
  size_t n = 0;
  while (!up.empty()) {
    NetPacket p = std::move(up.front());
    up.pop_front();
    ++n;
    const Verdict v = filter ? filter(p) : Verdict{};
    if (v.hold) {
      held.push_back(std::move(p));
      continue;
    }
    for (int c = 0; c < v.copies; ++c) ToFabric(p);
  }
  return n;
}

void FakeNet::Release(bool reversed) {
  std::deque<NetPacket> h;
  h.swap(held);
  if (reversed) std::reverse(h.begin(), h.end());
  for (auto& p : h) {
    if (p.up) {
      ToFabric(p);
    } else {
      ToEndpoint(std::move(p));
    }
  }
}

void FakeNet::Tick() {
  Sink sink(*this);
  fabric_->Tick(clock_.Now(), sink);
}

Result<size_t> FakeTransport::SendBurst(std::span<const host::TxMessage> packets) {
  if (!send_error.ok()) return send_error;
  const size_t n = std::min(packets.size(), send_capacity);
  for (size_t i = 0; i < n; ++i) {
    NetPacket p;
    p.endpoint = id_;
    p.up = true;
    p.bytes.assign(packets[i].data, packets[i].data + packets[i].len);
    net_.up.push_back(std::move(p));
  }
  sent += n;
  return n;
}

Result<size_t> FakeTransport::RecvBurst(std::span<host::RxMessage> packets,
                                        std::chrono::microseconds timeout) {
  last_timeout = timeout;
  if (!recv_error.ok()) return recv_error;
  auto& q = net_.down_[id_];
  size_t n = 0;
  while (n < packets.size() && !q.empty()) {
    const NetPacket& p = q.front();
    const size_t len = std::min(p.bytes.size(), packets[n].cap);
    std::memcpy(packets[n].data, p.bytes.data(), len);
    packets[n].len = len;
    q.pop_front();
    ++n;
  }
  received += n;
  net_.moved_ += n;
  return n;
}

}  // namespace ina::testing
