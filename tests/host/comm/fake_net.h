// A fake clock, a fake transport and a fake network around the in-process Fabric (real control
// plane + reference engine), for unit tests of the progress engine: no sockets, no threads, no
// sleeps, every packet visible to the test.
//
// FakeNet holds the packets in flight: `up` (endpoints -> fabric, tagged with the sender) and one
// `down` queue per endpoint (fabric -> endpoint). Packets move only when the test calls Pump():
// every queued up packet goes through the filter (drop / duplicate / hold), then through the
// fabric, whose replies and results go through the filter again into the down queues. Held
// packets wait in `held` until Release(). FakeTransport is an endpoint's Transport: SendBurst
// appends to `up` (up to send_capacity packets per call, or fails with send_error), RecvBurst takes
// from its down queue and never blocks (it records the timeout it was asked to wait).
//
// Threading: single-threaded, like the engine under test.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "clock.h"
#include "ina/base/status.h"
#include "ina/host/transport.h"
#include "test_fabric.h"

namespace ina::testing {

class FakeClock final : public host::internal::Clock {
 public:
  // Starts at an arbitrary, fixed epoch (not zero, so "time 0" bugs show).
  FakeClock() : now_(std::chrono::seconds(1000)) {}
  host::internal::TimePoint Now() const override { return now_; }
  // Jumps to `t` (never back): what the engine waits for passes at once.
  void SleepUntil(host::internal::TimePoint t) const override { now_ = std::max(now_, t); }
  void Advance(std::chrono::microseconds d) { now_ += d; }
  void Set(host::internal::TimePoint t) { now_ = t; }

 private:
  mutable host::internal::TimePoint now_;
};

struct NetPacket {
  int endpoint = 0;  // sender (up) or receiver (down)
  bool up = true;
  std::vector<uint8_t> bytes;

  proto::Header header() const;  // REQUIRES: bytes.size() >= kHeaderBytes
  proto::MsgType type() const;   // 0xFF (no message type) when shorter than a header
};

// What the filter does with one packet.
struct Verdict {
  int copies = 1;     // 0: drop, 2: duplicate
  bool hold = false;  // keep in FakeNet::held until Release()
};

class FakeTransport;

class FakeNet {
 public:
  FakeNet(const FakeClock& clock, const FabricConfig& config = {});
  ~FakeNet();

  // The transport of endpoint `id` (peer 10.0.0.1:(10000 + id)). Owned by the net.
  FakeTransport& Endpoint(int id);

  // Moves every up packet through the fabric; returns how many packets moved (up and down).
  size_t Pump();
  // Moves held packets to where they were going (down queues, or the fabric for up packets):
  // in order, or reversed.
  void Release(bool reversed = false);
  // Fabric job timeout.
  void Tick();

  std::function<Verdict(const NetPacket&)> filter;  // default: deliver everything once
  std::deque<NetPacket> up;
  std::deque<NetPacket> held;
  std::deque<NetPacket>& down(int id);

  Fabric& fabric() { return *fabric_; }
  uint64_t moved() const { return moved_; }  // packets taken by the fabric or by a RecvBurst

 private:
  friend class FakeTransport;
  class Sink;
  void ToFabric(const NetPacket& pkt);
  void ToEndpoint(NetPacket pkt);

  const FakeClock& clock_;
  std::unique_ptr<Fabric> fabric_;
  std::vector<std::unique_ptr<FakeTransport>> endpoints_;
  std::vector<std::deque<NetPacket>> down_;
  uint64_t moved_ = 0;
};

class FakeTransport final : public host::Transport {
 public:
  FakeTransport(FakeNet& net, int id) : net_(net), id_(id) {}

  Result<size_t> SendBurst(std::span<const host::TxMessage> packets) override;
  Result<size_t> RecvBurst(std::span<host::RxMessage> packets,
                           std::chrono::microseconds timeout) override;
  std::string_view name() const override { return "fake"; }

  size_t send_capacity = SIZE_MAX;  // packets accepted per SendBurst call
  Status send_error;                // when not OK, every SendBurst fails with it
  Status recv_error;                // when not OK, every RecvBurst fails with it
  std::chrono::microseconds last_timeout{-1};
  uint64_t sent = 0;
  uint64_t received = 0;

 private:
  FakeNet& net_;
  int id_;
};

}  // namespace ina::testing
