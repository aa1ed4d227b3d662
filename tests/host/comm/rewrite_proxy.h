// An attacker on the path, in-repo (issue #23): a UDP proxy between workers (who send to port())
// and ina-switchd on 127.0.0.1 that rewrites packets both ways, and captures and replays the
// workers' data packets. One upstream socket per worker address, so the switch sees each worker at
// an address of its own, and a replayed packet comes from that member's own address.
//
// A rewritten packet is sealed again as an attacker can: a CRC-only one (sec 0) gets a valid CRC32C
// trailer; a tagged one (sec mac, mac_encrypt) keeps its tag, which nobody without the job's key
// can recompute. One thread; every wait bounded.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "ina/proto/crc32c.h"
#include "ina/proto/wire.h"

namespace ina::testing {

class RewriteProxy {
 public:
  // Called in the proxy thread on every packet from the switch (down) or from a worker (up), with
  // the job and rank that worker last sent; may change the packet in place, returns whether it
  // did.
  using Rewrite = std::function<bool(uint8_t* packet, size_t len, uint16_t job, uint16_t rank)>;

  explicit RewriteProxy(uint16_t switch_port, Rewrite down, Rewrite up = nullptr)
      : down_(std::move(down)), up_(std::move(up)) {
    sw_.sin_family = AF_INET;
    sw_.sin_port = htons(switch_port);
    sw_.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    front_ = Bound();
    sockaddr_in a{};
    socklen_t len = sizeof(a);
    getsockname(front_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~RewriteProxy() {
    stop_ = true;
    thread_.join();
    close(front_);
    for (const Client& c : clients_) close(c.fd);
  }
  uint16_t port() const { return port_; }
  uint64_t rewritten() const { return rewritten_.load(); }

  // From now on (on) or no longer, keeps a copy of every data packet of `job` the workers send.
  void Capture(uint16_t job, bool on) {
    std::lock_guard<std::mutex> l(mu_);
    capture_job_ = job;
    capturing_ = on;
  }
  size_t captured() const {
    std::lock_guard<std::mutex> l(mu_);
    return captured_.size();
  }
  // Sends every captured packet again, each from the upstream socket of the worker that sent it
  // (changed by `change` first, if given: a spoof from a member's own address; a packet it empties
  // is not sent), as one burst; returns how many (0 if the proxy thread did not do it within 2 s).
  size_t ReplayCaptured(std::function<void(std::vector<uint8_t>&)> change = nullptr) {
    {
      std::lock_guard<std::mutex> l(mu_);
      change_ = std::move(change);
    }
    replay_done_ = false;
    replay_ = true;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!replay_done_ && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return replay_done_ ? replayed_.load() : 0;
  }

 private:
  struct Client {
    sockaddr_in addr;
    int fd;
    uint16_t job = 0, rank = 0;
  };

  static int Bound() {
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    return fd;
  }

  size_t ClientOf(const sockaddr_in& from) {
    for (size_t i = 0; i < clients_.size(); ++i) {
      const Client& c = clients_[i];
      if (c.addr.sin_port == from.sin_port && c.addr.sin_addr.s_addr == from.sin_addr.s_addr) {
        return i;
      }
    }
    Client c{from, Bound()};
    EXPECT_EQ(connect(c.fd, reinterpret_cast<const sockaddr*>(&sw_), sizeof(sw_)), 0);
    clients_.push_back(c);
    return clients_.size() - 1;
  }

  // After a rewrite: what an attacker can seal again.
  static void Reseal(uint8_t* pkt, size_t len) {
    if (proto::GetSec(pkt) == 0 && len >= proto::kHeaderBytes + proto::kCrcBytes) {
      proto::SealMessage(pkt, len - proto::kCrcBytes);
    }
  }

  void Run() {
    std::vector<uint8_t> buf(proto::kMaxPacketBytes + 64);
    while (!stop_) {
      if (replay_) {
        std::lock_guard<std::mutex> l(mu_);
        for (const auto& [client, bytes] : captured_) {
          std::vector<uint8_t> b = bytes;
          if (change_) change_(b);
          if (!b.empty()) (void)send(clients_[client].fd, b.data(), b.size(), 0);
        }
        replayed_ = captured_.size();
        replay_ = false;
        replay_done_ = true;
      }
      std::vector<pollfd> fds{{front_, POLLIN, 0}};
      for (const Client& c : clients_) fds.push_back({c.fd, POLLIN, 0});
      if (poll(fds.data(), fds.size(), 5) <= 0) continue;
      if (fds[0].revents & POLLIN) {  // worker -> switch
        sockaddr_in from{};
        socklen_t fl = sizeof(from);
        const ssize_t n =
            recvfrom(front_, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&from), &fl);
        if (n >= static_cast<ssize_t>(proto::kHeaderBytes)) {
          const size_t len = static_cast<size_t>(n);
          const size_t ci = ClientOf(from);
          Client& c = clients_[ci];
          c.job = proto::GetJob(buf.data());
          c.rank = proto::GetRank(buf.data());
          {
            std::lock_guard<std::mutex> l(mu_);
            if (capturing_ && c.job == capture_job_ &&
                proto::GetType(buf.data()) == proto::MsgType::kData) {
              captured_.emplace_back(ci, std::vector<uint8_t>(buf.data(), buf.data() + len));
            }
          }
          if (up_ && up_(buf.data(), len, c.job, c.rank)) {
            Reseal(buf.data(), len);
            ++rewritten_;
          }
          (void)send(c.fd, buf.data(), len, 0);
        }
      }
      for (size_t i = 1; i < fds.size(); ++i) {  // switch -> worker
        if (!(fds[i].revents & POLLIN)) continue;
        const Client& c = clients_[i - 1];
        const ssize_t n = recv(c.fd, buf.data(), buf.size(), 0);
        if (n < static_cast<ssize_t>(proto::kHeaderBytes + proto::kCrcBytes)) continue;
        const size_t len = static_cast<size_t>(n);
        if (down_ && down_(buf.data(), len, c.job, c.rank)) {
          Reseal(buf.data(), len);
          ++rewritten_;
        }
        (void)sendto(front_, buf.data(), len, 0, reinterpret_cast<const sockaddr*>(&c.addr),
                     sizeof(c.addr));
      }
    }
  }

  Rewrite down_, up_;
  sockaddr_in sw_{};
  int front_ = -1;
  uint16_t port_ = 0;
  std::vector<Client> clients_;  // proxy thread only
  mutable std::mutex mu_;        // guards the capture
  bool capturing_ = false;
  uint16_t capture_job_ = 0;
  std::vector<std::pair<size_t, std::vector<uint8_t>>> captured_;  // (client, packet)
  std::function<void(std::vector<uint8_t>&)> change_;              // of the replay asked
  std::atomic<bool> replay_{false}, replay_done_{false};
  std::atomic<size_t> replayed_{0};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> rewritten_{0};
  std::thread thread_;
};

}  // namespace ina::testing
