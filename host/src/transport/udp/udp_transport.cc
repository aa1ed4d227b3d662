// The UDP transport: a thin adapter over a connected ina::net UDP port (net/include/ina/net/udp.h).
#include "udp/udp_transport.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "faults.h"
#include "ina/net/udp.h"

namespace ina::host::udp {
namespace {

constexpr size_t kChunk = 256;  // packets converted per port call (GSO trains are at most 64)

class UdpTransport final : public Transport {
 public:
  explicit UdpTransport(std::unique_ptr<net::Port> port) : port_(std::move(port)) {}

  Result<size_t> SendBurst(std::span<const TxPacket> packets) override {
    size_t sent = 0;
    while (sent < packets.size()) {
      const size_t n = std::min(kChunk, packets.size() - sent);
      for (size_t i = 0; i < n; ++i) {
        tx_[i] = {packets[sent + i].data, static_cast<uint32_t>(packets[sent + i].len), nullptr};
      }
      auto r = port_->TxBurst({tx_.data(), n});
      if (!r.ok()) {
        if (sent > 0) return sent;  // the error comes again on the next call
        return r.status();
      }
      sent += *r;
      if (*r < n) break;  // queue full: the caller retries the rest later
    }
    return sent;
  }

  Result<size_t> RecvBurst(std::span<RxPacket> packets,
                           std::chrono::microseconds timeout) override {
    if (packets.empty()) return size_t{0};
    INA_ASSIGN_OR_RETURN(size_t got, RecvNow(packets));
    if (got > 0 || timeout.count() <= 0) return got;
    INA_ASSIGN_OR_RETURN(bool ready, port_->WaitRx(timeout));
    if (!ready) return size_t{0};
    return RecvNow(packets);
  }

  std::string_view name() const override { return "udp"; }

 private:
  // The port may hand out GRO segments from its own buffer: those are copied to the caller's.
  Result<size_t> RecvNow(std::span<RxPacket> packets) {
    const size_t n = std::min(net::kBurst, packets.size());
    for (size_t i = 0; i < n; ++i) {
      rx_[i] = {packets[i].data, static_cast<uint32_t>(packets[i].cap), 0, 0, nullptr};
    }
    INA_ASSIGN_OR_RETURN(size_t got, port_->RxBurst({rx_.data(), n}));
    for (size_t i = 0; i < got; ++i) {
      RxPacket& out = packets[i];
      if (rx_[i].flags & net::kPacketTruncated) {
        out.len = 0;  // callers drop packets shorter than a header
        continue;
      }
      if (rx_[i].data != out.data) std::memcpy(out.data, rx_[i].data, rx_[i].len);
      out.len = rx_[i].len;
    }
    return got;
  }

  std::unique_ptr<net::Port> port_;
  std::array<net::TxPacket, kChunk> tx_{};
  std::array<net::Packet, net::kBurst> rx_{};
};

}  // namespace

Result<std::unique_ptr<Transport>> OpenUdpTransport(const TransportConfig& config) {
  net::UdpPortConfig pc;
  pc.bind_ip = config.bind_host;
  pc.peer_ip = config.fabric_host;
  pc.peer_port = config.fabric_port;
  pc.socket_buffer_bytes = config.socket_buffer_bytes;
  pc.gso_gro = net::UdpGsoFromEnv();
  INA_ASSIGN_OR_RETURN(std::unique_ptr<net::Port> port, net::OpenUdpPort(pc));
  INA_ASSIGN_OR_RETURN(port, net::WrapWithFaults(std::move(port), ToFaultConfig(config.faults)));
  return std::unique_ptr<Transport>(new UdpTransport(std::move(port)));
}

}  // namespace ina::host::udp
