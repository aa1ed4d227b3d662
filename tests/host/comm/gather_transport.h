// GatherTransport: a stand-in for a NIC's gather list where no RDMA device is (GPUDirect RDMA,
// docs/gpu.md). It wraps a real transport (UDP to the fabric), says it sends packets with a body
// (TxMessage::body), checks each body lies in a region registered with RegisterTxBody, reads the
// body as a NIC's DMA would (memcpy for host memory; a GPU test passes cudaMemcpy) and sends
// header, body and trailer as one datagram. By default it refuses dma-bufs, as rxe does; a GPU
// test lets it take them (as a NIC with dma-buf support). GatherLog counts what all of a test's
// transports saw. CreateGathering makes every rank's communicator over them
// (internal::CommunicatorFactory).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm_util.h"
#include "communicator_factory.h"
#include "ina/host/communicator.h"
#include "ina/host/quant.h"
#include "ina/host/transport.h"

namespace ina::testing {

using host::CommConfig;
using host::Communicator;
using host::RxMessage;
using host::Transport;
using host::TransportConfig;
using host::TxMessage;

struct GatherLog {
  std::atomic<uint64_t> gathered{0};      // packets sent with a body
  std::atomic<uint64_t> registered{0};    // RegisterTxBody calls that succeeded
  std::atomic<uint64_t> unregistered{0};  // UnregisterTxBody calls
  std::atomic<uint64_t> refused{0};       // dma-bufs refused
};

struct GatherOptions {
  bool take_dmabuf = false;  // false: a dma-buf is refused (Unimplemented), as by rxe
  // Reads n body bytes into dst, as the NIC's DMA would; OK or the error to return.
  std::function<Status(uint8_t* dst, const uint8_t* body, size_t n)> read_body =
      [](uint8_t* dst, const uint8_t* body, size_t n) {
        std::memcpy(dst, body, n);
        return Status::Ok();
      };
};

class GatherTransport final : public Transport {
 public:
  GatherTransport(std::unique_ptr<Transport> inner, GatherLog* log, GatherOptions options = {})
      : inner_(std::move(inner)), log_(log), opts_(std::move(options)) {}

  Result<size_t> SendBurst(std::span<const TxMessage> packets) override {
    std::vector<TxMessage> out(packets.begin(), packets.end());
    lin_.resize(packets.size());
    for (size_t i = 0; i < packets.size(); ++i) {
      const TxMessage& p = packets[i];
      if (p.body == nullptr) continue;
      if (!InRegion(p.body, p.body_len) || p.split > p.len) {
        return InvalidArgument("gather: a body outside every registered region");
      }
      std::vector<uint8_t>& l = lin_[i];
      l.resize(p.len + p.body_len);
      std::memcpy(l.data(), p.data, p.split);
      INA_RETURN_IF_ERROR(opts_.read_body(l.data() + p.split, p.body, p.body_len));
      std::memcpy(l.data() + p.split + p.body_len, p.data + p.split, p.len - p.split);
      out[i] = {l.data(), l.size(), p.payload_checked};
    }
    INA_ASSIGN_OR_RETURN(const size_t n, inner_->SendBurst(out));
    for (size_t i = 0; i < n; ++i) {
      if (packets[i].body != nullptr) log_->gathered.fetch_add(1);
    }
    return n;
  }
  Result<size_t> RecvBurst(std::span<RxMessage> packets, std::chrono::microseconds t) override {
    return inner_->RecvBurst(packets, t);
  }
  std::string_view name() const override { return "gather(udp)"; }
  Status RegisterTxMemory(const void* data, size_t len) override {
    return inner_->RegisterTxMemory(data, len);
  }
  bool sends_body() const override { return true; }
  Status RegisterTxBody(const void* data, size_t len, int fd, uint64_t) override {
    if (fd >= 0 && !opts_.take_dmabuf) {
      log_->refused.fetch_add(1);
      return Unimplemented("gather: this NIC takes no dma-buf (fd " + std::to_string(fd) + ")");
    }
    regions_.push_back({static_cast<const uint8_t*>(data), len});
    log_->registered.fetch_add(1);
    return Status::Ok();
  }
  Status UnregisterTxBody(const void* data) override {
    for (auto it = regions_.begin(); it != regions_.end(); ++it) {
      if (it->first == data) {
        regions_.erase(it);
        log_->unregistered.fetch_add(1);
        return Status::Ok();
      }
    }
    return NotFound("gather: no such region");
  }

 private:
  bool InRegion(const uint8_t* p, size_t n) const {
    for (const auto& [b, len] : regions_) {
      if (p >= b && p + n <= b + len) return true;
    }
    return false;
  }
  std::unique_ptr<Transport> inner_;
  GatherLog* log_;
  GatherOptions opts_;
  std::vector<std::pair<const uint8_t*, size_t>> regions_;
  std::vector<std::vector<uint8_t>> lin_;
};

// Every rank's communicator over GatherTransports (one per lane) around UDP to the fabric; a
// rank that fails is a test failure and a null entry.
inline std::vector<std::unique_ptr<Communicator>> CreateGathering(
    const CommConfig& base, GatherLog* log, const GatherOptions& options = {}) {
  std::vector<std::unique_ptr<Communicator>> comms(base.world_size);
  ParallelFor(base.world_size, [&](int r) {
    CommConfig c = base;
    c.rank = static_cast<uint16_t>(r);
    std::vector<std::unique_ptr<Transport>> ts;
    for (int l = 0; l < c.progress_threads; ++l) {
      TransportConfig tc;
      tc.fabric_host = c.switch_host;
      tc.fabric_port = c.switch_port;
      auto t = host::MakeTransport(tc);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      ts.push_back(std::make_unique<GatherTransport>(std::move(t).value(), log, options));
    }
    auto cr =
        host::internal::CommunicatorFactory::Create(c, host::quant::ScalarKernels(), std::move(ts));
    ASSERT_TRUE(cr.ok()) << "rank " << r << ": " << cr.status().ToString();
    comms[r] = std::move(cr).value();
  });
  return comms;
}

}  // namespace ina::testing
