#include "process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

namespace ina::bench {

using Clock = std::chrono::steady_clock;

Result<Process> Process::Start(const std::vector<std::string>& argv) {
  if (argv.empty()) return InvalidArgument("Process::Start: empty argv");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", errno);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(fds[0]);
    close(fds[1]);
    return ErrnoStatus("fork", err);
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  return Process(pid, fds[0]);
}

Process::Process(Process&& o) noexcept
    : pid_(o.pid_), out_fd_(o.out_fd_), reaped_(o.reaped_), buf_(std::move(o.buf_)) {
  o.pid_ = -1;
  o.out_fd_ = -1;
}

Process& Process::operator=(Process&& o) noexcept {
  if (this != &o) {
    this->~Process();
    new (this) Process(std::move(o));
  }
  return *this;
}

Process::~Process() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
}

Result<std::string> Process::ReadLine(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    auto nl = buf_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return line;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return DeadlineExceeded("no line from child within timeout");
    pollfd p{out_fd_, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno != EINTR) return ErrnoStatus("poll", errno);
    if (r <= 0) continue;
    char tmp[4096];
    ssize_t n = read(out_fd_, tmp, sizeof(tmp));
    if (n < 0 && errno != EINTR) return ErrnoStatus("read", errno);
    if (n == 0) {
      if (!buf_.empty()) {
        std::string line = std::move(buf_);
        buf_.clear();
        return line;
      }
      return Unavailable("child closed its output");
    }
    if (n > 0) buf_.append(tmp, static_cast<size_t>(n));
  }
}

Result<std::string> Process::WaitForLine(const std::string& prefix,
                                         std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return DeadlineExceeded("no line starting with '" + prefix + "'");
    INA_ASSIGN_OR_RETURN(std::string line, ReadLine(left));
    if (line.rfind(prefix, 0) == 0) return line;
  }
}

std::vector<std::string> Process::Drain(std::chrono::milliseconds timeout) {
  std::vector<std::string> lines;
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    auto line = ReadLine(left);
    if (!line.ok()) break;
    lines.push_back(std::move(*line));
  }
  return lines;
}

Result<int> Process::Stop(int sig, std::chrono::milliseconds timeout) {
  if (reaped_) return InvalidArgument("process already stopped");
  kill(pid_, sig);
  const auto deadline = Clock::now() + timeout;
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (r < 0) return ErrnoStatus("waitpid", errno);
    if (Clock::now() >= deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      reaped_ = true;
      return DeadlineExceeded("child did not exit within timeout; killed");
    }
    usleep(2000);
  }
  reaped_ = true;
  return status;
}

std::string SelfDir() {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  std::string s(path, static_cast<size_t>(n));
  auto slash = s.rfind('/');
  return slash == std::string::npos ? "." : s.substr(0, slash);
}

}  // namespace ina::bench
