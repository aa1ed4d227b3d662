// Test harness for ina-switchd end-to-end tests: the real binary as a child process, fake workers
// as raw UDP sockets on 127.0.0.1, packets built with the generated wire.h.
//
// Every wait is bounded; the child is SIGKILLed when a SwitchProcess goes out of scope without a
// clean Stop() (a failed ASSERT included).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ina/proto/crc32c.h"
#include "ina/proto/wire.h"

namespace ina::test {

namespace p = ::ina::proto;
using Bytes = std::vector<uint8_t>;
using std::chrono::milliseconds;

// The switch process. Its stdout goes to a temporary file (never a pipe it could block on).
// `binary`: ina-switchd, or ina-rtlsim (the same loop, flags and output around the RTL core).
class SwitchProcess {
 public:
  explicit SwitchProcess(std::vector<std::string> args, const char* binary = INA_SWITCHD_BIN) {
    char path[] = "/tmp/ina-switchd-test-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) {
      ADD_FAILURE() << "mkstemp failed";
      return;
    }
    log_path_ = path;
    args.insert(args.begin(), binary);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fd);
    // Wait (bounded) for the listening line.
    const std::regex re("ina-(switchd|rtlsim) listening on ([0-9.]+):([0-9]+)");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      std::smatch m;
      const std::string out = Output();
      if (std::regex_search(out, m, re)) {
        port_ = static_cast<uint16_t>(std::stoi(m[3]));
        return;
      }
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        ADD_FAILURE() << "ina-switchd exited early:\n" << out;
        return;
      }
      std::this_thread::sleep_for(milliseconds(5));
    }
    ADD_FAILURE() << "ina-switchd did not print its listening line:\n" << Output();
  }

  ~SwitchProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (!log_path_.empty()) unlink(log_path_.c_str());
  }

  bool ok() const { return pid_ > 0 && port_ != 0; }
  uint16_t port() const { return port_; }

  std::string Output() const {
    std::ifstream f(log_path_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  // SIGTERM, wait (bounded) for exit 0, and parse the last line's JSON counters.
  std::map<std::string, uint64_t> Stop() {
    std::map<std::string, uint64_t> counters;
    if (pid_ <= 0) return counters;
    kill(pid_, SIGTERM);
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    pid_t r = 0;
    while ((r = waitpid(pid_, &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    if (r != pid_) {
      ADD_FAILURE() << "ina-switchd did not exit on SIGTERM";
      return counters;  // the destructor kills it
    }
    pid_ = -1;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    const std::string out = Output();
    // The JSON line is the last line.
    size_t end = out.find_last_not_of('\n');
    size_t start = out.rfind('\n', end);
    const std::string last = out.substr(start == std::string::npos ? 0 : start + 1);
    EXPECT_EQ(last.rfind("{\"switch_counters\": {", 0), 0u) << out;
    const std::regex kv("\"([a-z0-9_]+)\": ([0-9]+)");
    for (auto it = std::sregex_iterator(last.begin(), last.end(), kv); it != std::sregex_iterator();
         ++it) {
      counters[(*it)[1]] = std::stoull((*it)[2]);
    }
    return counters;
  }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  std::string log_path_;
};

// A fake worker: one UDP socket on 127.0.0.1, connected to the switch.
class Worker {
 public:
  explicit Worker(uint16_t switch_port) {
    fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
    sa.sin_port = htons(switch_port);
    connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  }
  ~Worker() { close(fd_); }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void Send(const Bytes& b) {
    ASSERT_EQ(send(fd_, b.data(), b.size(), 0), static_cast<ssize_t>(b.size()));
  }
  // The next datagram, or nullopt after `timeout`.
  std::optional<Bytes> Recv(milliseconds timeout = milliseconds(2000)) {
    pollfd pfd{fd_, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
    Bytes b(4096);
    const ssize_t n = recv(fd_, b.data(), b.size(), 0);
    if (n < 0) return std::nullopt;
    b.resize(static_cast<size_t>(n));
    return b;
  }

 private:
  int fd_ = -1;
};

// Appends the CRC32C trailer to a message of header and payload (ina/proto/crc32c.h).
inline Bytes Sealed(Bytes b) {
  b.resize(b.size() + p::kCrcBytes);
  p::SealMessage(b.data(), b.size() - p::kCrcBytes);
  return b;
}

// A typed message's header alone, without its trailer (the builders below seal what they build).
template <class Msg>
Bytes Header(const Msg& m) {
  Bytes b(p::kHeaderBytes);
  m.Encode(b.data());
  return b;
}

inline Bytes Join(uint16_t job, uint16_t rank, uint16_t world, uint16_t k, uint32_t window) {
  return Sealed(
      Header(p::JoinMsg{.job = job, .rank = rank, .k = k, .window = window, .world_size = world}));
}

// An aborting LEAVE (reason job_aborted): the switch tears the job down for every rank.
inline Bytes Leave(uint16_t job, uint16_t rank) {
  return Sealed(Header(p::LeaveMsg{
      .job = job, .rank = rank, .reason = static_cast<uint16_t>(p::ErrorCode::kJobAborted)}));
}

// A data packet as a worker's call sends it on its first use of `slot`: block `slot` at offset
// slot * k (docs/protocol.md, "Slot history"; a job of K = k).
inline Bytes Data(uint16_t job, uint16_t rank, uint16_t slot, uint16_t gen,
                  const std::vector<int32_t>& elems, uint8_t flags = p::flags::kInt32,
                  uint16_t k = 64) {
  Bytes b = Header(p::DataMsg{.flags = flags,
                              .job = job,
                              .rank = rank,
                              .slot = slot,
                              .gen = gen,
                              .count = static_cast<uint16_t>(elems.size()),
                              .offset = uint32_t{slot} * k});
  b.resize(p::kHeaderBytes + 4 * elems.size());
  for (size_t i = 0; i < elems.size(); ++i) {
    p::Store32(b.data() + p::kHeaderBytes + 4 * i, static_cast<uint32_t>(elems[i]));
  }
  return Sealed(std::move(b));
}

// The elements of a received result, between its header and its trailer; none (and a test
// failure) if the trailer does not match.
inline std::vector<int32_t> Payload(const Bytes& b) {
  std::vector<int32_t> v;
  EXPECT_TRUE(p::MessageCrcOk(b)) << "a result without a good CRC32C trailer";
  if (!p::MessageCrcOk(b)) return v;
  for (size_t i = p::kHeaderBytes; i + 4 + p::kCrcBytes <= b.size(); i += 4) {
    v.push_back(static_cast<int32_t>(p::Load32(b.data() + i)));
  }
  return v;
}

}  // namespace ina::test
