// PortTransport: the Transport over one connected ina::net port, shared by the udp and dpdk
// backends (their folders only open the port). Sends in chunks of kChunk packets; receives
// without a copy: RxPackets point into the port's memory (a GRO buffer, an mbuf), valid until the
// next RecvBurst (transport.h). A truncated datagram is reported with len 0.
#pragma once

#include <array>
#include <memory>
#include <string_view>

#include "ina/host/transport.h"
#include "ina/net/port.h"

namespace ina::host {

class PortTransport final : public Transport {
 public:
  // `name` must outlive the transport (a literal).
  PortTransport(std::unique_ptr<net::Port> port, std::string_view name)
      : port_(std::move(port)), name_(name) {}

  Result<size_t> SendBurst(std::span<const TxMessage> packets) override;
  Result<size_t> RecvBurst(std::span<RxMessage> packets,
                           std::chrono::microseconds timeout) override;
  std::string_view name() const override { return name_; }
  size_t max_message_bytes() const override { return port_->max_datagram_bytes(); }
  size_t rx_queue_messages(size_t message_bytes) const override {
    return port_->rx_queue_datagrams(message_bytes);
  }
  size_t rx_buffer_bytes() const override { return port_->rx_buffer_bytes(); }
  uint64_t rx_kernel_drops() const override { return port_->rx_kernel_drops(); }

 private:
  static constexpr size_t kChunk = 256;  // packets converted per port call (GSO trains: <= 64)

  Result<size_t> RecvNow(std::span<RxMessage> packets);

  std::unique_ptr<net::Port> port_;
  std::string_view name_;
  std::array<net::TxPacket, kChunk> tx_{};
  std::array<net::Packet, net::kBurst> rx_{};
};

}  // namespace ina::host
