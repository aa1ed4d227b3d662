// In-process fabrics for the communicator's tests, built from the real pieces of ina-switchd:
// the control plane (ina::dp_control: join handshake, slot allocation, LEAVE, rank_left, job
// timeout) programming the reference engine (ina::dp_ref).
//
// Fabric is socket-free and clock-free: packets come in with their source peer and the time,
// replies and results go out to a dp::ReplySink, classified as ina-switchd does it (JOIN/LEAVE to
// the control plane; a data packet from a peer other than the one that joined as its rank is
// dropped; everything else to the engine, whose results go to ControlPlane::Destinations). The
// unit tests plug it behind a fake transport (fake_net.h); TestFabric serves it on a UDP socket.
//
// TestFabric: one thread with a UDP socket on 127.0.0.1:<ephemeral> running a Fabric, for the
// end-to-end tests of communicators in threads (comm_test, capi_test). Optional seeded loss and
// duplication, applied independently to every data packet in and every result copy out; control
// packets (JOIN, LEAVE, join_ack, errors) are never dropped. Optional seeded damage: one byte of
// any packet in or out, control included, XORed with a non-zero value (what the CRC32C trailer
// must catch). Threading: the accessors may be called from any thread.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include "ina/base/status.h"
#include "ina/dp/control.h"
#include "ina/dp/engine.h"
#include "ina/proto/wire.h"

namespace ina::testing {

struct FabricConfig {
  uint32_t pool_slots = 4096;  // the control plane grants min(asked, largest free extent)
  uint16_t max_jobs = 256;
  std::chrono::nanoseconds job_timeout = std::chrono::seconds(30);
  uint16_t min_window = 8;        // dp::ControlConfig's: the least a queued job is admitted with
  uint32_t lease_calls = 0;       // calls a grant lasts before the ranks re-join; 0: unlimited
  uint16_t max_k = proto::kMaxK;  // dp::ControlConfig's: a JOIN asking more is out of range
};

class Fabric {
 public:
  using TimePoint = dp::ControlPlane::TimePoint;

  static Result<std::unique_ptr<Fabric>> Create(const FabricConfig& config);

  // One packet (the UDP payload) from `from` at `now`; replies and results go to `out`.
  void Receive(std::span<const uint8_t> packet, const dp::Peer& from, TimePoint now,
               dp::ReplySink& out);
  // The control plane's job timeout.
  size_t Tick(TimePoint now, dp::ReplySink& out) { return control_->Tick(now, out); }

  // A job's key (docs/security.md), as ina-switchd's set_key installs it (before the job's JOINs).
  Status InstallJobKey(uint16_t job, proto::SecMode mode, std::span<const uint8_t> secret) {
    return control_->InstallJobKey(job, mode, secret);
  }
  dp::CounterSnapshot counters() const { return engine_->counters(); }
  const dp::ControlPlane& control() const { return *control_; }
  uint64_t foreign_dropped() const { return foreign_dropped_; }
  // Every LEAVE the fabric received (header fields), in order, copies included.
  const std::vector<proto::Header>& leaves() const { return leaves_; }

 private:
  class Results;
  Fabric() = default;

  std::unique_ptr<dp::Engine> engine_;
  std::unique_ptr<dp::ControlPlane> control_;
  uint64_t foreign_dropped_ = 0;
  std::vector<proto::Header> leaves_;
};

struct FabricOptions {
  double drop = 0.0;     // probability of dropping a data packet in / a result copy out
  double dup = 0.0;      // probability of delivering one twice
  double corrupt = 0.0;  // probability of damaging one byte of any packet in or out
  uint64_t seed = 1;
  uint32_t pool_slots = 4096;     // a JOIN asking for more gets at most this many slots
  uint16_t max_k = proto::kMaxK;  // the largest K the fabric takes (a JOIN asking more: bad_params)
};

class TestFabric {
 public:
  static Result<std::unique_ptr<TestFabric>> Start(const FabricOptions& options);
  ~TestFabric();  // stops and joins the thread

  uint16_t port() const { return port_; }
  dp::CounterSnapshot counters();
  dp::ControlCounters control_counters();
  std::vector<proto::Header> leaves();
  // Waits until `done(fabric)` holds, re-checked each time the fabric thread has handled what
  // arrived (at least every 10 ms); false after `timeout`. For a test that needs another
  // thread's packets to reach the fabric first: it waits for them instead of sleeping.
  bool WaitUntil(const std::function<bool(const Fabric&)>& done,
                 std::chrono::milliseconds timeout = std::chrono::seconds(10));
  uint64_t dropped() const { return dropped_.load(); }
  uint64_t duplicated() const { return duplicated_.load(); }
  uint64_t corrupted() const { return corrupted_.load(); }

 private:
  class Out;

  TestFabric(int fd, uint16_t port, const FabricOptions& options, std::unique_ptr<Fabric> f);
  void Run();
  // Handles up to 64 packets waiting on the socket. REQUIRES: mu_ held.
  void Drain(std::vector<uint8_t>& buf, dp::ReplySink& out,
             std::chrono::steady_clock::time_point now);
  bool Chance(double p);
  // Damages one byte of `packet` (in place) with probability options_.corrupt.
  void MaybeCorrupt(std::span<uint8_t> packet);
  void SendTo(const dp::Peer& to, std::span<const uint8_t> packet);

  int fd_;
  uint16_t port_;
  FabricOptions options_;
  std::mt19937_64 rng_;              // fabric thread only
  std::mutex mu_;                    // guards fabric_
  std::condition_variable changed_;  // notified after each turn of the fabric thread
  std::unique_ptr<Fabric> fabric_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> dropped_{0}, duplicated_{0}, corrupted_{0};
  std::thread thread_;
};

}  // namespace ina::testing
