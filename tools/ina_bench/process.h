// Child processes for benchmarks and end-to-end tests: start a program, read its stdout line by
// line with a deadline, stop it. A Process kills its child (SIGKILL) when destroyed unless the
// child was already reaped, so a failing test never leaves a switch running.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "ina/base/status.h"

namespace ina::bench {

class Process {
 public:
  // Starts argv[0] with arguments argv[1..]; the child's stdout is readable through ReadLine,
  // its stderr goes to ours.
  static Result<Process> Start(const std::vector<std::string>& argv);
  Process(Process&& o) noexcept;
  Process& operator=(Process&& o) noexcept;
  Process(const Process&) = delete;
  ~Process();

  // Next line of the child's stdout (without '\n'); DeadlineExceeded after `timeout`,
  // Unavailable at end of output.
  Result<std::string> ReadLine(std::chrono::milliseconds timeout);
  // Reads lines until one starts with `prefix`; returns it.
  Result<std::string> WaitForLine(const std::string& prefix, std::chrono::milliseconds timeout);
  // Sends `sig`, then waits up to `timeout` for exit (SIGKILL after that). Returns the exit
  // status as from waitpid. Lines the child printed meanwhile stay readable.
  Result<int> Stop(int sig, std::chrono::milliseconds timeout);
  // Reads all remaining output until EOF (bounded by timeout).
  std::vector<std::string> Drain(std::chrono::milliseconds timeout);
  pid_t pid() const { return pid_; }

 private:
  Process(pid_t pid, int out_fd) : pid_(pid), out_fd_(out_fd) {}
  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool reaped_ = false;
  std::string buf_;
};

// Directory holding the running executable (to find sibling binaries such as ina-switchd).
std::string SelfDir();

}  // namespace ina::bench
