// The DPDK transport: a thin adapter over a connected ina::net DPDK port (see dpdk_transport.h).
#include "dpdk/dpdk_transport.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "faults.h"
#include "ina/net/dpdk.h"

namespace ina::host::dpdk {

const bool kBuilt = net::kDpdkBuilt;

namespace {

class DpdkTransport final : public Transport {
 public:
  explicit DpdkTransport(std::unique_ptr<net::Port> port) : port_(std::move(port)) {}

  Result<size_t> SendBurst(std::span<const TxPacket> packets) override {
    size_t sent = 0;
    while (sent < packets.size()) {
      const size_t n = std::min(net::kBurst, packets.size() - sent);
      for (size_t i = 0; i < n; ++i) {
        tx_[i] = {packets[sent + i].data, static_cast<uint32_t>(packets[sent + i].len), nullptr};
      }
      auto r = port_->TxBurst({tx_.data(), n});
      if (!r.ok()) {
        if (sent > 0) return sent;
        return r.status();
      }
      sent += *r;
      if (*r < n) break;  // the ring is full: the caller retries the rest later
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

  std::string_view name() const override { return "dpdk"; }

 private:
  Result<size_t> RecvNow(std::span<RxPacket> packets) {
    const size_t n = std::min(net::kBurst, packets.size());
    for (size_t i = 0; i < n; ++i) {
      rx_[i] = {packets[i].data, static_cast<uint32_t>(packets[i].cap), 0, 0, nullptr};
    }
    INA_ASSIGN_OR_RETURN(size_t got, port_->RxBurst({rx_.data(), n}));
    for (size_t i = 0; i < got; ++i) {
      RxPacket& out = packets[i];
      if (rx_[i].flags & net::kPacketTruncated) {
        out.len = 0;  // like a truncated datagram: the caller drops it
        continue;
      }
      if (rx_[i].data != out.data) std::memcpy(out.data, rx_[i].data, rx_[i].len);
      out.len = rx_[i].len;
    }
    return got;
  }

  std::unique_ptr<net::Port> port_;
  std::array<net::TxPacket, net::kBurst> tx_{};
  std::array<net::Packet, net::kBurst> rx_{};
};

}  // namespace

Result<std::unique_ptr<Transport>> OpenDpdkTransport(const TransportConfig& tc) {
  const DpdkConfig& c = tc.dpdk;
  if (c.local_ip.empty() || c.local_port == 0) {
    return InvalidArgument("dpdk: local_ip and local_port (INA_DPDK_LOCAL=ip:port) are required");
  }
  if (c.backoff_max_us < 0) return InvalidArgument("dpdk: backoff_max_us < 0");
  net::DpdkPortConfig pc;
  pc.name = c.port;
  pc.ip = c.local_ip;
  pc.udp_port = c.local_port;
  pc.mac = c.local_mac;
  pc.peer_ip = tc.fabric_host;
  pc.peer_port = tc.fabric_port;
  pc.peer_mac = c.fabric_mac;
  pc.zero_copy = c.zero_copy;
  pc.backoff_max_us = c.backoff_max_us;
  if (!net::kDpdkBuilt) return net::OpenDpdkPort(pc).status();
  INA_RETURN_IF_ERROR(net::StartEal(c.eal_args));
  INA_ASSIGN_OR_RETURN(std::unique_ptr<net::Port> port, net::OpenDpdkPort(pc));
  INA_ASSIGN_OR_RETURN(port, net::WrapWithFaults(std::move(port), ToFaultConfig(tc.faults)));
  return std::unique_ptr<Transport>(new DpdkTransport(std::move(port)));
}

}  // namespace ina::host::dpdk
