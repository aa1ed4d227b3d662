#include "udp/udp_transport.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace ina::host::udp {
namespace {

constexpr size_t kBurst = 32;
// GSO/GRO limits: at most kMaxSegs segments and kMaxGsoBytes payload bytes per sendmsg (the
// kernel's UDP_MAX_SEGMENTS is 64 or more; 65507 is the largest UDP/IPv4 payload).
constexpr size_t kMaxSegs = 64;
constexpr size_t kMaxGsoBytes = 65507;
constexpr size_t kGroBufBytes = 65536;  // one GRO'd datagram (train of segments)

// INA_UDP_GSO=0 turns GSO and GRO off; anything else (or unset) leaves them on.
bool GsoWanted() {
  const char* v = std::getenv("INA_UDP_GSO");
  return v == nullptr || std::string_view(v) != "0";
}

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
  UdpTransport(int fd, std::string peer, bool gso, bool gro)
      : fd_(fd), peer_(std::move(peer)), gso_(gso), gro_(gro) {
    if (gso_) tx_iov_.resize(kBurst * kMaxSegs);
    if (gro_) gro_buf_.resize(kBurst * kGroBufBytes);
  }
  ~UdpTransport() override { close(fd_); }

  Result<size_t> SendBurst(std::span<const TxPacket> packets) override {
    size_t sent = 0;
    while (sent < packets.size()) {
      // One message per run of equal-length packets (a shorter last one may close the run): the
      // kernel cuts it back into datagrams of run length (UDP_SEGMENT). Without GSO, runs are 1.
      size_t m = 0;
      size_t iov_n = 0;
      for (size_t pos = sent; pos < packets.size() && m < kBurst; ++m) {
        const size_t seg = packets[pos].len;
        size_t count = 1;
        if (gso_ && seg > 0) {
          const size_t max_segs = std::min(kMaxSegs, kMaxGsoBytes / seg);
          while (pos + count < packets.size() && count < max_segs) {
            const size_t len = packets[pos + count].len;
            if (len > seg || len == 0) break;
            ++count;
            if (len < seg) break;  // a shorter segment ends the train
          }
        }
        iovec* iov = gso_ ? &tx_iov_[iov_n] : &iov_[m];
        for (size_t i = 0; i < count; ++i) {
          iov[i].iov_base = const_cast<uint8_t*>(packets[pos + i].data);
          iov[i].iov_len = packets[pos + i].len;
        }
        iov_n += count;
        msgs_[m] = mmsghdr{};
        msgs_[m].msg_hdr.msg_iov = iov;
        msgs_[m].msg_hdr.msg_iovlen = count;
        if (count > 1) {
          cmsghdr* cm = reinterpret_cast<cmsghdr*>(cmsg_[m].b);
          cm->cmsg_level = SOL_UDP;
          cm->cmsg_type = UDP_SEGMENT;
          cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
          const uint16_t seg16 = static_cast<uint16_t>(seg);
          std::memcpy(CMSG_DATA(cm), &seg16, sizeof(seg16));
          msgs_[m].msg_hdr.msg_control = cm;
          msgs_[m].msg_hdr.msg_controllen = CMSG_SPACE(sizeof(uint16_t));
        }
        counts_[m] = count;
        pos += count;
      }
      int rc = sendmmsg(fd_, msgs_.data(), static_cast<unsigned>(m), MSG_DONTWAIT);
      if (rc < 0) {
        int err = errno;
        if (IsTransient(err)) return sent;  // queue full: the caller retries the rest later
        if (counts_[0] > 1 && (err == EIO || err == EINVAL || err == ENOPROTOOPT ||
                               err == EOPNOTSUPP)) {
          gso_ = false;  // the kernel or route refuses GSO: go on one datagram per packet
          continue;
        }
        if (sent > 0) return sent;  // report the error on the next call
        return ErrnoStatus("udp: sendmmsg to " + peer_, err);
      }
      for (int i = 0; i < rc; ++i) sent += counts_[i];
      if (static_cast<size_t>(rc) < m) return sent;
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
  // A received GRO datagram not yet handed out in full: segments of seg bytes (the last may be
  // shorter) from off to len of gro_buf_ slot `msg`.
  struct Pending {
    size_t off = 0;
    size_t len = 0;
    size_t seg = 0;
  };

  Result<size_t> RecvNow(std::span<RxPacket> packets) {
    if (gro_) return RecvGro(packets);
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

  // Copies pending segments into the caller's packets, then, when all are handed out and there
  // is room, receives more (up to one datagram or GRO train per remaining packet).
  Result<size_t> RecvGro(std::span<RxPacket> packets) {
    size_t got = Drain(packets, 0);
    if (got == packets.size() || pend_next_ < pend_n_) return got;
    const size_t n = std::min(kBurst, packets.size() - got);
    for (size_t i = 0; i < n; ++i) {
      iov_[i].iov_base = gro_buf_.data() + i * kGroBufBytes;
      iov_[i].iov_len = kGroBufBytes;
      msgs_[i] = mmsghdr{};
      msgs_[i].msg_hdr.msg_iov = &iov_[i];
      msgs_[i].msg_hdr.msg_iovlen = 1;
      msgs_[i].msg_hdr.msg_control = cmsg_[i].b;
      msgs_[i].msg_hdr.msg_controllen = sizeof(cmsg_[i].b);
    }
    int rc = recvmmsg(fd_, msgs_.data(), static_cast<unsigned>(n), MSG_DONTWAIT, nullptr);
    if (rc < 0) {
      int err = errno;
      if (IsTransient(err) || got > 0) return got;
      return ErrnoStatus("udp: recvmmsg from " + peer_, err);
    }
    pend_n_ = static_cast<size_t>(rc);
    pend_next_ = 0;
    for (size_t i = 0; i < pend_n_; ++i) {
      const msghdr& h = msgs_[i].msg_hdr;
      Pending& p = pend_[i];
      p.off = i * kGroBufBytes;
      p.len = msgs_[i].msg_len;
      p.seg = p.len;
      for (cmsghdr* cm = CMSG_FIRSTHDR(&h); cm != nullptr;
           cm = CMSG_NXTHDR(const_cast<msghdr*>(&h), cm)) {
        if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
          int seg = 0;
          std::memcpy(&seg, CMSG_DATA(cm), sizeof(seg));
          if (seg > 0) p.seg = static_cast<size_t>(seg);
        }
      }
      if (h.msg_flags & MSG_TRUNC) p.seg = p.len = 0;  // one packet, reported with len 0
    }
    return Drain(packets, got);
  }

  // Hands out pending segments into packets[got...]; returns the new count.
  size_t Drain(std::span<RxPacket> packets, size_t got) {
    while (got < packets.size() && pend_next_ < pend_n_) {
      Pending& p = pend_[pend_next_];
      const size_t len = std::min(p.seg, p.len);
      RxPacket& out = packets[got++];
      if (len <= out.cap) {
        std::memcpy(out.data, gro_buf_.data() + p.off, len);
        out.len = len;
      } else {
        out.len = 0;  // too large for the caller's buffer
      }
      p.off += len;
      p.len -= len;
      if (p.len == 0) ++pend_next_;
    }
    return got;
  }

  int fd_;
  std::string peer_;
  bool gso_;
  bool gro_;
  std::array<mmsghdr, kBurst> msgs_{};
  std::array<iovec, kBurst> iov_{};
  std::array<size_t, kBurst> counts_{};
  struct alignas(cmsghdr) CmsgBuf {
    uint8_t b[CMSG_SPACE(sizeof(int))];
  };
  std::array<CmsgBuf, kBurst> cmsg_{};
  std::vector<iovec> tx_iov_;     // kBurst * kMaxSegs when gso_
  std::vector<uint8_t> gro_buf_;  // kBurst * kGroBufBytes when gro_
  std::array<Pending, kBurst> pend_{};
  size_t pend_n_ = 0;
  size_t pend_next_ = 0;
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
  // GSO needs no socket option (UDP_SEGMENT goes with each train); getsockopt tells whether this
  // kernel knows it. GRO is best effort: a kernel that refuses it delivers plain datagrams.
  bool gso = false;
  bool gro = false;
  if (GsoWanted()) {
    int v = 0;
    socklen_t vl = sizeof(v);
    gso = getsockopt(fd, SOL_UDP, UDP_SEGMENT, &v, &vl) == 0;
    const int one = 1;
    gro = setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0;
  }
  return std::unique_ptr<Transport>(new UdpTransport(fd, AddrString(peer), gso, gro));
}

}  // namespace ina::host::udp
