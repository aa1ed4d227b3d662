// TestFabric: an in-process stand-in for ina-switchd, for the communicator's end-to-end tests.
//
// One thread with a UDP socket on 127.0.0.1:<ephemeral> runs ina::dp_ref's engine on data packets
// and a minimal control plane: JOIN (all ranks with the same world/K/window -> install the job and
// JOIN_ACK everyone; repeated JOIN -> JOIN_ACK again; differing params -> ERROR(bad_params); a
// rank joined from another address -> ERROR(rank_taken)) and LEAVE (remove the job, ERROR
// (job_aborted) to the other ranks). Optional seeded loss and duplication, applied independently
// to every packet in and every result copy out (control packets are never dropped).
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "ina/base/status.h"
#include "ina/dp/engine.h"

namespace ina::testing {

struct FabricOptions {
  double drop = 0.0;  // probability of dropping a data packet in / a result copy out
  double dup = 0.0;   // probability of delivering one twice
  uint64_t seed = 1;
  uint32_t pool_slots = 4096;
  uint16_t max_window = 4096;  // a JOIN asking for more is granted this many
};

class TestFabric {
 public:
  static Result<std::unique_ptr<TestFabric>> Start(const FabricOptions& options);
  ~TestFabric();  // stops and joins the thread

  uint16_t port() const { return port_; }
  dp::CounterSnapshot counters();
  uint64_t dropped() const { return dropped_.load(); }
  uint64_t duplicated() const { return duplicated_.load(); }

 private:
  struct Job {
    uint16_t world = 0, k = 0, window = 0, granted = 0;
    bool installed = false;
    std::map<uint16_t, sockaddr_in> ranks;
    std::set<uint16_t> done;  // ranks that left gracefully
  };
  class Out;

  TestFabric(int fd, uint16_t port, const FabricOptions& options);
  void Run();
  void OnPacket(const uint8_t* p, size_t len, const sockaddr_in& from);
  void OnJoin(const uint8_t* p, const sockaddr_in& from);
  void OnLeave(const uint8_t* p);
  void SendControl(const sockaddr_in& to, uint8_t type, uint16_t job, uint16_t rank,
                   uint16_t count, uint32_t offset, uint16_t aux);
  void SendTo(const sockaddr_in& to, const uint8_t* p, size_t len);
  bool Chance(double p);

  int fd_;
  uint16_t port_;
  FabricOptions options_;
  std::mt19937_64 rng_;
  std::mutex mu_;  // guards engine_ (counters() from the test thread)
  std::unique_ptr<dp::Engine> engine_;
  std::map<uint16_t, Job> jobs_;
  uint32_t next_slot_base_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> dropped_{0}, duplicated_{0};
  std::thread thread_;
};

}  // namespace ina::testing
