// ina-bench's coordinator: the parent's end of the TCP coordination protocol (coord_wire.h) for
// workers that do not share its memory: workers on other hosts (--listen) and workers in network
// namespaces (--worker-netns). It hands every rank the run's options, checks the options a worker
// was given against its own, holds the barriers and Gloo's rendezvous store, and collects each
// rank's report (timings, errors, fingerprint; rank 0's results) into a SharedView laid out as in
// the fork mode, so that the verification and the report are the same code.
//
// Failures, each named with the rank and its peer address: a rank that closes its connection
// without reporting (its process died, or its host: TCP keep-alive notices a silent host within
// about 11 s), a rank that does not connect within the join timeout, a rank refused for options
// that differ from the coordinator's, a rank that reports an error. After the first one, every
// barrier and store request fails at once with its description, so ranks waiting there stop
// instead of hanging. A connection that names a rank out of range, a rank already connected, or
// speaks another protocol version is refused (the worker is told why) and logged.
//
// Threading: Start runs the service on a thread of its own; done, first_failure and Stop may be
// called from any one other thread; outcomes and the view are for after Stop.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "coord_wire.h"
#include "ina/base/status.h"
#include "worker.h"

namespace ina::bench {

struct CoordinatorSetup {
  int workers = 1;
  int iters = 1;
  size_t elements = 0;
  Args run_args;            // the run's options (RunArgs of the parent's Options), sent to all
  std::string switch_addr;  // HOST:PORT the workers use unless they name their own --switch
  std::chrono::milliseconds join_timeout{60000};  // every rank must have connected by then
  // Lines about ranks joining (stdout, unless --quiet) and refused connections (stderr).
  std::function<void(const std::string&)> say = [](const std::string&) {};
  std::function<void(const std::string&)> warn = [](const std::string&) {};
};

struct RankOutcome {
  enum class State { kNotJoined, kJoined, kReported, kLost };
  State state = State::kNotJoined;
  int exit_code = -1;  // kReported: the worker's exit code
  std::string peer;    // "ip:port (host HOST, pid P)"
  std::string why;     // kLost: what happened
};

class Coordinator {
 public:
  // Listens on `listen` (HOST:PORT, port 0: ephemeral) for every rank, or, when `netns` names
  // one network namespace per rank, on 127.0.0.1 inside each (rank r connects to address(r)).
  // Errors: a bad address, the socket calls, entering a namespace.
  static Result<std::unique_ptr<Coordinator>> Create(CoordinatorSetup setup,
                                                     const std::string& listen,
                                                     const std::vector<std::string>& netns);
  ~Coordinator();  // Stop("coordinator stopped") if still running
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // HOST:PORT that rank r connects to (the listening address; in a namespace, its own).
  std::string address(int rank) const;

  // Serves on a new thread; reports land in `view` (REQUIRES: MapBytes of the run). on_change is
  // called on that thread after every join, failure and report (keep it short and thread-safe).
  void Start(SharedView view, std::function<void()> on_change);
  // Every rank reported or was lost.
  bool done() const { return done_.load(); }
  // When the first failure happened, if one did (a lost, refused or failed rank).
  std::optional<std::chrono::steady_clock::time_point> first_failure() const;
  // Stops serving and closes every connection (the workers still connected see it and exit);
  // ranks not yet resolved become kLost with `why`. Idempotent.
  void Stop(const std::string& why);
  // After Stop.
  const std::vector<RankOutcome>& outcomes() const { return outcomes_; }

 private:
  struct Conn;
  explicit Coordinator(CoordinatorSetup setup);
  void Loop();
  void Accept(int listener);
  bool ReadFrom(Conn& c);  // false: the connection is finished
  bool Handle(Conn& c, Msg type, std::string_view body);
  bool HandleHello(Conn& c, std::string_view body);
  void Send(Conn& c, const std::string& frame);
  void Refuse(Conn& c, const std::string& why);
  void Lose(int rank, const std::string& why);  // rank resolved as lost, a failure
  void Fail(const std::string& why);            // the run's first failure
  void Settle();  // answers barriers and store requests that can be answered now
  void CheckJoinDeadline();
  bool AllResolved() const;
  std::string Describe(int rank) const;

  CoordinatorSetup setup_;
  std::vector<int> listeners_;
  std::vector<std::string> addresses_;
  int wake_[2] = {-1, -1};  // Stop writes here to end Loop
  std::thread thread_;
  std::function<void()> on_change_;
  SharedView view_{};
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<RankOutcome> outcomes_;
  std::chrono::steady_clock::time_point join_deadline_;
  std::atomic<bool> done_{false};
  bool stopped_ = false;
  mutable std::mutex mu_;  // guards failed_at_
  std::optional<std::chrono::steady_clock::time_point> failed_at_;
  std::string failure_;  // the first failure, for the answers that refuse
  // Barriers: seq -> ranks arrived. Store: key -> value, and requests waiting for keys.
  std::vector<std::pair<uint64_t, std::vector<int>>> barriers_;
  std::vector<std::pair<std::string, std::string>> store_;
  struct Pending {
    int rank;
    uint64_t id;
    bool get;  // kGet (answers kValue) or kWait (answers kDone)
    std::vector<std::string> keys;
  };
  std::vector<Pending> pending_;
};

}  // namespace ina::bench
