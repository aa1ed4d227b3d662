// A worker's end of ina-bench's coordination protocol (coord_wire.h): the connection to the
// coordinator (coordinator.h), which gives this rank the run's options, holds the barriers and
// Gloo's rendezvous store, and takes the rank's report.
//
// A thread of its own reads the connection. When the connection is lost before the report was
// acknowledged (the coordinator died or gave up on the run), every call waiting on it fails at
// once, and `on_lost` (Connect's argument) is called on that thread: the worker process exits
// there, since its results can no longer reach anyone, rather than finish an all-reduce first.
//
// Threading: one caller thread at a time for the calls below (the rank's own thread).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "coord_wire.h"
#include "ina/base/status.h"

namespace ina::bench {

struct RankSlot;

class CoordClient {
 public:
  // Connects to `address` (HOST:PORT; refused connections are retried until `timeout`: the
  // coordinator may start later), says HELLO as `rank` with `given` (the run options on this
  // worker's command line, for the coordinator to check), and waits up to `timeout` for the
  // run's options. Errors: the coordinator unreachable (DeadlineExceeded), a refusal
  // (FailedPrecondition with the coordinator's reason), a lost connection (Unavailable).
  static Result<std::unique_ptr<CoordClient>> Connect(const std::string& address, int rank,
                                                      const Args& given,
                                                      std::chrono::milliseconds timeout,
                                                      std::function<void(const Status&)> on_lost);
  ~CoordClient();
  CoordClient(const CoordClient&) = delete;
  CoordClient& operator=(const CoordClient&) = delete;

  const Args& run_args() const { return run_args_; }
  const std::string& switch_addr() const { return switch_addr_; }
  const std::string& address() const { return address_; }

  // Returns once every rank has entered the same barrier. Errors: another rank failed (Aborted,
  // with the coordinator's description), the connection was lost, or `timeout`.
  Status Barrier(std::chrono::milliseconds timeout);
  // Gloo's rendezvous store: set a key, get one (waits until it is set), wait for keys.
  Status Set(const std::string& key, const std::vector<char>& value,
             std::chrono::milliseconds timeout);
  Result<std::vector<char>> Get(const std::string& key, std::chrono::milliseconds timeout);
  Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  // The rank's report: its exit code, its slot (timings up to `iters`), and (rank 0) its results;
  // waits for the acknowledgement, after which losing the connection is no longer an error.
  Status Report(int exit_code, const RankSlot& slot, int iters, std::span<const uint8_t> result,
                std::span<const uint8_t> gloo_result, std::chrono::milliseconds timeout);

 private:
  CoordClient(int fd, std::string address) : fd_(fd), address_(std::move(address)) {}
  void ReadLoop();
  // Sends `frame` and waits for the answer keyed `key`; returns its type and body.
  Status Call(const std::string& frame, uint64_t key, std::chrono::milliseconds timeout, Msg* type,
              std::string* body);

  int fd_;
  std::string address_;  // "the coordinator at HOST:PORT", for messages
  Args run_args_;
  std::string switch_addr_;
  std::function<void(const Status&)> on_lost_;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  struct Answer {
    Msg type;
    std::string body;
  };
  std::map<uint64_t, Answer> answers_;  // by request id; barriers by kBarrierKey | seq
  Status lost_;                         // set once the connection is gone
  bool acked_ = false;                  // the report was acknowledged
  bool closing_ = false;
  uint64_t next_id_ = 1;
  uint64_t next_barrier_ = 0;
};

}  // namespace ina::bench
