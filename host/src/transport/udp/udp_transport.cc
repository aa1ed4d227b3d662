#include "udp/udp_transport.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string>

namespace ina::host::udp {
namespace {

constexpr size_t kBurst = 32;

Result<sockaddr_in> Resolve(const std::string& host, uint16_t port, std::string_view what) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) == 1) return sa;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return InvalidArgument("udp: resolve " + std::string(what) + " '" + host +
                           "': " + gai_strerror(rc));
  }
  sa.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return sa;
}

std::string AddrString(const sockaddr_in& sa) {
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof(buf));
  return std::string(buf) + ":" + std::to_string(ntohs(sa.sin_port));
}

// Sets a socket buffer size: the FORCE variant first (root may exceed the sysctl cap).
void SetBuffer(int fd, int force_opt, int opt, int bytes) {
  if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof(bytes)) == 0) return;
  // Not root or not allowed: best effort within net.core.{r,w}mem_max. Failure is not fatal.
  (void)setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
}

bool IsTransient(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

class UdpTransport final : public Transport {
 public:
  UdpTransport(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
  ~UdpTransport() override { close(fd_); }

  Result<size_t> SendBurst(std::span<const TxPacket> packets) override {
    size_t sent = 0;
    while (sent < packets.size()) {
      size_t n = std::min(kBurst, packets.size() - sent);
      for (size_t i = 0; i < n; ++i) {
        iov_[i].iov_base = const_cast<uint8_t*>(packets[sent + i].data);
        iov_[i].iov_len = packets[sent + i].len;
        msgs_[i] = mmsghdr{};
        msgs_[i].msg_hdr.msg_iov = &iov_[i];
        msgs_[i].msg_hdr.msg_iovlen = 1;
      }
      int rc = sendmmsg(fd_, msgs_.data(), static_cast<unsigned>(n), MSG_DONTWAIT);
      if (rc < 0) {
        int err = errno;
        if (IsTransient(err)) return sent;  // queue full: the caller retries the rest later
        if (sent > 0) return sent;          // report the error on the next call
        return ErrnoStatus("udp: sendmmsg to " + peer_, err);
      }
      sent += static_cast<size_t>(rc);
      if (static_cast<size_t>(rc) < n) return sent;
    }
    return sent;
  }

  Result<size_t> RecvBurst(std::span<RxPacket> packets,
                           std::chrono::microseconds timeout) override {
    if (packets.empty()) return size_t{0};
    INA_ASSIGN_OR_RETURN(size_t got, RecvNow(packets));
    if (got > 0 || timeout.count() <= 0) return got;
    pollfd pfd{fd_, POLLIN, 0};
    timespec ts{static_cast<time_t>(timeout.count() / 1000000),
                static_cast<long>((timeout.count() % 1000000) * 1000)};
    int rc = ppoll(&pfd, 1, &ts, nullptr);
    if (rc < 0) {
      if (errno == EINTR) return size_t{0};
      return ErrnoStatus("udp: ppoll", errno);
    }
    if (rc == 0) return size_t{0};
    return RecvNow(packets);
  }

  std::string_view name() const override { return "udp"; }

 private:
  Result<size_t> RecvNow(std::span<RxPacket> packets) {
    size_t n = std::min(kBurst, packets.size());
    for (size_t i = 0; i < n; ++i) {
      iov_[i].iov_base = packets[i].data;
      iov_[i].iov_len = packets[i].cap;
      msgs_[i] = mmsghdr{};
      msgs_[i].msg_hdr.msg_iov = &iov_[i];
      msgs_[i].msg_hdr.msg_iovlen = 1;
    }
    int rc = recvmmsg(fd_, msgs_.data(), static_cast<unsigned>(n), MSG_DONTWAIT, nullptr);
    if (rc < 0) {
      int err = errno;
      if (IsTransient(err)) return size_t{0};
      return ErrnoStatus("udp: recvmmsg from " + peer_, err);
    }
    // A datagram larger than the caller's buffer comes back with len 0 (callers drop packets
    // shorter than a header), so buffer pointers stay where the caller put them.
    for (size_t i = 0; i < static_cast<size_t>(rc); ++i) {
      packets[i].len = (msgs_[i].msg_hdr.msg_flags & MSG_TRUNC) ? 0 : msgs_[i].msg_len;
    }
    return static_cast<size_t>(rc);
  }

  int fd_;
  std::string peer_;
  std::array<mmsghdr, kBurst> msgs_{};
  std::array<iovec, kBurst> iov_{};
};

}  // namespace

Result<std::unique_ptr<Transport>> OpenUdpTransport(const TransportConfig& config) {
  INA_ASSIGN_OR_RETURN(sockaddr_in peer,
                       Resolve(config.fabric_host, config.fabric_port, "fabric host"));
  INA_ASSIGN_OR_RETURN(sockaddr_in local, Resolve(config.bind_host, 0, "bind host"));
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("udp: socket", errno);
  if (config.socket_buffer_bytes > 0) {
    SetBuffer(fd, SO_RCVBUFFORCE, SO_RCVBUF, config.socket_buffer_bytes);
    SetBuffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, config.socket_buffer_bytes);
  }
  if (bind(fd, reinterpret_cast<const sockaddr*>(&local), sizeof(local)) != 0) {
    Status s = ErrnoStatus("udp: bind " + AddrString(local), errno);
    close(fd);
    return s;
  }
  if (connect(fd, reinterpret_cast<const sockaddr*>(&peer), sizeof(peer)) != 0) {
    Status s = ErrnoStatus("udp: connect " + AddrString(peer), errno);
    close(fd);
    return s;
  }
  return std::unique_ptr<Transport>(new UdpTransport(fd, AddrString(peer)));
}

}  // namespace ina::host::udp
