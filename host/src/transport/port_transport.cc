#include "port_transport.h"

#include <algorithm>

namespace ina::host {

Result<size_t> PortTransport::SendBurst(std::span<const TxMessage> packets) {
  size_t sent = 0;
  while (sent < packets.size()) {
    const size_t n = std::min(kChunk, packets.size() - sent);
    for (size_t i = 0; i < n; ++i) {
      const TxMessage& p = packets[sent + i];
      if (p.body != nullptr) {  // sends_body() is false: a caller's bug, not a packet to cut
        return InvalidArgument(std::string(name()) +
                               ": a packet with a device-memory body (this transport sends "
                               "from host memory only)");
      }
      tx_[i] = {p.data, static_cast<uint32_t>(p.len), nullptr,
                p.payload_checked ? net::kTxPayloadChecked : 0u};
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

Result<size_t> PortTransport::RecvBurst(std::span<RxMessage> packets,
                                        std::chrono::microseconds timeout) {
  if (packets.empty()) return size_t{0};
  INA_ASSIGN_OR_RETURN(size_t got, RecvNow(packets));
  if (got > 0 || timeout.count() <= 0) return got;
  INA_ASSIGN_OR_RETURN(bool ready, port_->WaitRx(timeout));
  if (!ready) return size_t{0};
  return RecvNow(packets);
}

Result<size_t> PortTransport::RecvNow(std::span<RxMessage> packets) {
  const size_t n = std::min(net::kBurst, packets.size());
  for (size_t i = 0; i < n; ++i) {
    rx_[i] = {packets[i].data, static_cast<uint32_t>(packets[i].cap), 0, 0, nullptr};
  }
  INA_ASSIGN_OR_RETURN(size_t got, port_->RxBurst({rx_.data(), n}));
  for (size_t i = 0; i < got; ++i) {
    RxMessage& out = packets[i];
    out.data = rx_[i].data;  // the caller's buffer, or the port's own memory
    out.len = (rx_[i].flags & net::kPacketTruncated) ? 0 : rx_[i].len;
  }
  return got;
}

}  // namespace ina::host
