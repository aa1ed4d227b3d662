// The kernel UDP port (see ina/net/udp.h). Socket calls are wrapped here once: errno becomes
// Status at this file's boundary.
#include <arpa/inet.h>
#include <linux/filter.h>
#include <linux/sock_diag.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ina/net/udp.h"

namespace ina::net {
namespace {

// GSO/GRO limits: at most kMaxSegs segments and kMaxGsoBytes payload bytes per sendmsg (the
// kernel's UDP_MAX_SEGMENTS is 64 or more; 65507 is the largest UDP/IPv4 payload).
constexpr size_t kMaxSegs = 64;
constexpr size_t kMaxGsoBytes = 65507;
constexpr size_t kGroBufBytes = 65536;  // one GRO'd datagram (train of segments)

Result<Endpoint> Resolve(const std::string& host, uint16_t port, std::string_view what) {
  if (auto e = MakeEndpoint(host, port); e.ok()) return e;
  Endpoint e;
  auto* sa = reinterpret_cast<sockaddr_in*>(&e.addr);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return InvalidArgument("udp: resolve " + std::string(what) + " '" + host +
                           "': " + gai_strerror(rc));
  }
  sa->sin_family = AF_INET;
  sa->sin_port = htons(port);
  sa->sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  e.len = sizeof(sockaddr_in);
  freeaddrinfo(res);
  return e;
}

// Sets a socket buffer size: the FORCE variant first (root may exceed the sysctl cap).
void SetBuffer(int fd, int force_opt, int opt, int bytes) {
  if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof(bytes)) == 0) return;
  (void)setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));  // best effort
}

bool IsTransient(int err) {
  return err == EAGAIN || err == EWOULDBLOCK || err == EINTR || err == ENOBUFS;
}
bool IsIcmp(int err) { return err == ECONNREFUSED || err == EHOSTUNREACH || err == ENETUNREACH; }

bool SameDest(const TxPacket& a, const TxPacket& b) {
  if (a.to == b.to) return true;
  if (a.to == nullptr || b.to == nullptr || a.to->len != b.to->len) return false;
  return std::memcmp(&a.to->addr, &b.to->addr, a.to->len) == 0;
}

// The socket's receive buffer in the kernel's accounting (SO_RCVBUF read back: twice what was
// set, for the kernel's overhead), 0 if it cannot be read.
size_t ReceiveBufferBytes(int fd) {
  int v = 0;
  socklen_t len = sizeof(v);
  if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &len) != 0 || v < 0) return 0;
  return static_cast<size_t>(v);
}

class UdpPort final : public Port {
 public:
  UdpPort(int fd, bool connected, bool gso, bool gro)
      : fd_(fd), connected_(connected), gso_(gso), gro_(gro), rcvbuf_(ReceiveBufferBytes(fd)) {
    if (gso_) tx_iov_.resize(kBurst * kMaxSegs);
    if (gro_) {
      gro_buf_.resize(kBurst * kGroBufBytes);
      gro_from_.resize(kBurst);
    }
  }
  ~UdpPort() override { close(fd_); }

  int fd() const { return fd_; }

  size_t max_datagram_bytes() const override {
    if (!connected_) return kMaxDatagramBytes;
    // The route's MTU towards the peer (the interface's, or a learnt path MTU).
    int mtu = 0;
    socklen_t len = sizeof(mtu);
    sockaddr_storage local{};
    socklen_t local_len = sizeof(local);
    if (getsockname(fd_, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) {
      return kMaxDatagramBytes;
    }
    const bool v6 = local.ss_family == AF_INET6;
    if (getsockopt(fd_, v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_MTU : IP_MTU, &mtu, &len) != 0 ||
        mtu <= 0) {
      return kMaxDatagramBytes;
    }
    const int headers = (v6 ? 40 : 20) + 8;
    return std::min<size_t>(kMaxDatagramBytes, static_cast<size_t>(std::max(mtu - headers, 0)));
  }

  Result<size_t> RxBurst(std::span<Packet> pkts) override {
    if (pkts.empty()) return size_t{0};
    if (gro_) return RecvGro(pkts);
    const size_t n = std::min(kBurst, pkts.size());
    for (size_t i = 0; i < n; ++i) {
      iov_[i] = {pkts[i].data, pkts[i].cap};
      msgs_[i] = mmsghdr{};
      msgs_[i].msg_hdr.msg_iov = &iov_[i];
      msgs_[i].msg_hdr.msg_iovlen = 1;
      if (pkts[i].from != nullptr) {
        msgs_[i].msg_hdr.msg_name = &pkts[i].from->addr;
        msgs_[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
      }
    }
    const int rc = recvmmsg(fd_, msgs_.data(), static_cast<unsigned>(n), MSG_DONTWAIT, nullptr);
    if (rc < 0) return RecvError(errno);
    for (size_t i = 0; i < static_cast<size_t>(rc); ++i) {
      Packet& p = pkts[i];
      const msghdr& h = msgs_[i].msg_hdr;
      p.len = std::min<uint32_t>(msgs_[i].msg_len, p.cap);
      p.flags = (h.msg_flags & MSG_TRUNC) ? kPacketTruncated : 0;
      if (p.flags != 0) ++st_.rx_truncated;
      if (p.from != nullptr) p.from->len = h.msg_namelen;
    }
    st_.rx_frames += static_cast<uint64_t>(rc);
    st_.rx_packets += static_cast<uint64_t>(rc);
    return static_cast<size_t>(rc);
  }

  Result<size_t> TxBurst(std::span<const TxPacket> pkts) override {
    size_t sent = 0;
    while (sent < pkts.size()) {
      // One message per run of equal-length packets to one destination (a shorter last one may
      // close the run): the kernel cuts it back into datagrams (UDP_SEGMENT). Without GSO: 1.
      size_t m = 0;
      size_t iov_n = 0;
      for (size_t pos = sent; pos < pkts.size() && m < kBurst; ++m) {
        const TxPacket& first = pkts[pos];
        const size_t seg = first.len;
        size_t count = 1;
        if (gso_ && seg > 0) {
          const size_t max_segs = std::min(kMaxSegs, kMaxGsoBytes / seg);
          while (pos + count < pkts.size() && count < max_segs) {
            const TxPacket& q = pkts[pos + count];
            if (q.len > seg || q.len == 0 || !SameDest(first, q)) break;
            ++count;
            if (q.len < seg) break;  // a shorter segment ends the train
          }
        }
        iovec* iov = gso_ ? &tx_iov_[iov_n] : &iov_[m];
        for (size_t i = 0; i < count; ++i) {
          iov[i].iov_base = const_cast<uint8_t*>(pkts[pos + i].data);
          iov[i].iov_len = pkts[pos + i].len;
        }
        iov_n += count;
        msgs_[m] = mmsghdr{};
        msghdr& h = msgs_[m].msg_hdr;
        h.msg_iov = iov;
        h.msg_iovlen = count;
        if (first.to != nullptr) {
          h.msg_name = const_cast<sockaddr_storage*>(&first.to->addr);
          h.msg_namelen = first.to->len;
        }
        if (count > 1) {
          cmsghdr* cm = reinterpret_cast<cmsghdr*>(cmsg_[m].b);
          cm->cmsg_level = SOL_UDP;
          cm->cmsg_type = UDP_SEGMENT;
          cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
          const uint16_t seg16 = static_cast<uint16_t>(seg);
          std::memcpy(CMSG_DATA(cm), &seg16, sizeof(seg16));
          h.msg_control = cm;
          h.msg_controllen = CMSG_SPACE(sizeof(uint16_t));
        }
        counts_[m] = count;
        pos += count;
      }
      const int rc = sendmmsg(fd_, msgs_.data(), static_cast<unsigned>(m), MSG_DONTWAIT);
      if (rc < 0) {
        const int err = errno;
        if (IsTransient(err)) return sent;  // queue full: the caller retries the rest later
        if (counts_[0] > 1 &&
            (err == EIO || err == EINVAL || err == ENOPROTOOPT || err == EOPNOTSUPP)) {
          gso_ = false;  // the kernel or route refuses GSO: one datagram per packet from now on
          continue;
        }
        if (sent > 0) return sent;  // the error is reported by the next call
        return ErrnoStatus(connected_ ? "udp: send" : "udp: sendmmsg", err);
      }
      for (int i = 0; i < rc; ++i) {
        sent += counts_[i];
        if (counts_[i] > 1) ++st_.tx_trains;
      }
      if (static_cast<size_t>(rc) < m) break;
    }
    st_.tx_packets += sent;
    return sent;
  }

  Result<bool> WaitRx(std::chrono::microseconds timeout) override {
    if (pend_next_ < pend_n_) return true;
    return Wait(POLLIN, timeout);
  }
  Result<bool> WaitTx(std::chrono::microseconds timeout) override { return Wait(POLLOUT, timeout); }
  bool coalesces() const override { return gso_; }
  PortStats stats() const override {
    PortStats s = st_;
    s.rx_kernel_drops = rx_kernel_drops();
    return s;
  }

  uint64_t rx_kernel_drops() const override {
    uint32_t mem[SK_MEMINFO_VARS] = {};
    socklen_t len = sizeof(mem);
    if (getsockopt(fd_, SOL_SOCKET, SO_MEMINFO, mem, &len) != 0 ||
        len <= SK_MEMINFO_DROPS * sizeof(uint32_t)) {
      return 0;
    }
    return mem[SK_MEMINFO_DROPS];
  }

  size_t rx_buffer_bytes() const override { return rcvbuf_; }
  // Measured on loopback (docs/host.md, "Socket buffers"): a queued datagram costs its length
  // plus 3% (a GRO train) to 12%, or the next power of two of it plus the skb when it came alone.
  // With GRO, 5/4 of the length + 256 covers the trains with a margin; without, a datagram may
  // come alone.
  size_t rx_queue_datagrams(size_t datagram_bytes) const override {
    if (rcvbuf_ == 0 || datagram_bytes == 0) return 0;
    const size_t cost =
        gro_ ? datagram_bytes * 5 / 4 + 256 : std::bit_ceil(datagram_bytes + 320) + 640;
    return rcvbuf_ / cost;
  }
  std::string Describe() const override {
    Endpoint e;
    e.len = sizeof(e.addr);
    if (getsockname(fd_, reinterpret_cast<sockaddr*>(&e.addr), &e.len) != 0) return "?";
    return EndpointToString(e);
  }
  std::string_view kind() const override { return "udp"; }

 private:
  struct Pending {  // a received GRO train not yet handed out in full
    size_t off = 0, len = 0, seg = 0;
    bool trunc = false;
  };

  Result<bool> Wait(short events, std::chrono::microseconds timeout) {
    pollfd pfd{fd_, events, 0};
    const long long us = std::max<long long>(timeout.count(), 0);
    timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>((us % 1000000) * 1000)};
    const int rc = ppoll(&pfd, 1, &ts, nullptr);
    if (rc < 0) {
      if (errno == EINTR) return false;
      return ErrnoStatus("udp: ppoll", errno);
    }
    return rc > 0;
  }

  Result<size_t> RecvError(int err) {
    if (IsTransient(err)) return size_t{0};
    if (IsIcmp(err) && !connected_) {  // feedback about an earlier send: not ours to fail on
      ++st_.rx_icmp;
      return size_t{0};
    }
    return ErrnoStatus("udp: recvmmsg", err);
  }

  Result<size_t> RecvGro(std::span<Packet> pkts) {
    if (pend_next_ == pend_n_) {
      const size_t n = std::min(kBurst, pkts.size());
      for (size_t i = 0; i < n; ++i) {
        iov_[i] = {gro_buf_.data() + i * kGroBufBytes, kGroBufBytes};
        msgs_[i] = mmsghdr{};
        msghdr& h = msgs_[i].msg_hdr;
        h.msg_iov = &iov_[i];
        h.msg_iovlen = 1;
        h.msg_control = cmsg_[i].b;
        h.msg_controllen = sizeof(cmsg_[i].b);
        if (!connected_) {
          h.msg_name = &gro_from_[i].addr;
          h.msg_namelen = sizeof(sockaddr_storage);
        }
      }
      const int rc = recvmmsg(fd_, msgs_.data(), static_cast<unsigned>(n), MSG_DONTWAIT, nullptr);
      if (rc < 0) return RecvError(errno);
      pend_n_ = static_cast<size_t>(rc);
      pend_next_ = 0;
      st_.rx_frames += pend_n_;
      for (size_t i = 0; i < pend_n_; ++i) {
        msghdr& h = msgs_[i].msg_hdr;
        if (!connected_) gro_from_[i].len = h.msg_namelen;
        Pending& p = pend_[i];
        p.off = i * kGroBufBytes;
        p.len = msgs_[i].msg_len;
        p.seg = p.len;
        p.trunc = (h.msg_flags & MSG_TRUNC) != 0;
        for (cmsghdr* cm = CMSG_FIRSTHDR(&h); cm != nullptr; cm = CMSG_NXTHDR(&h, cm)) {
          if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
            int seg = 0;
            std::memcpy(&seg, CMSG_DATA(cm), sizeof(seg));
            if (seg > 0 && !p.trunc) p.seg = static_cast<size_t>(seg);
          }
        }
        if (p.len == 0) p.seg = 0;
      }
    }
    // Hand out segments: pointers into gro_buf_, valid until the next call.
    size_t got = 0;
    while (got < pkts.size() && pend_next_ < pend_n_) {
      Pending& p = pend_[pend_next_];
      const size_t len = std::min(p.seg, p.len);
      Packet& out = pkts[got++];
      out.data = gro_buf_.data() + p.off;
      out.len = static_cast<uint32_t>(std::min<size_t>(len, out.cap));
      out.flags = (p.trunc || len > out.cap) ? kPacketTruncated : 0;
      if (out.flags != 0) ++st_.rx_truncated;
      if (out.from != nullptr) {
        if (connected_) {
          out.from->len = 0;
        } else {
          *out.from = gro_from_[pend_next_];
        }
      }
      p.off += len;
      p.len -= len;
      if (p.len == 0) ++pend_next_;  // an empty datagram is one (empty) packet too
    }
    st_.rx_packets += got;
    return got;
  }

  int fd_;
  bool connected_;
  bool gso_;
  bool gro_;
  size_t rcvbuf_;  // ReceiveBufferBytes at open
  PortStats st_;
  std::array<mmsghdr, kBurst> msgs_{};
  std::array<iovec, kBurst> iov_{};
  std::array<size_t, kBurst> counts_{};
  struct alignas(cmsghdr) CmsgBuf {
    uint8_t b[CMSG_SPACE(sizeof(int))];
  };
  std::array<CmsgBuf, kBurst> cmsg_{};
  std::vector<iovec> tx_iov_;       // kBurst * kMaxSegs when gso_
  std::vector<uint8_t> gro_buf_;    // kBurst * kGroBufBytes when gro_
  std::vector<Endpoint> gro_from_;  // kBurst: each train's sender
  std::array<Pending, kBurst> pend_{};
  size_t pend_n_ = 0;
  size_t pend_next_ = 0;
};

}  // namespace

Result<std::unique_ptr<Port>> OpenUdpPort(const UdpPortConfig& c) {
  INA_ASSIGN_OR_RETURN(Endpoint local, Resolve(c.bind_ip, c.bind_port, "bind address"));
  Endpoint peer;
  const bool connected = !c.peer_ip.empty();
  if (connected) {
    INA_ASSIGN_OR_RETURN(peer, Resolve(c.peer_ip, c.peer_port, "peer"));
  }
  const int fd = socket(local.addr.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("udp: socket", errno);
  auto fail = [fd](std::string what, int err) {
    Status s = ErrnoStatus(what, err);
    close(fd);
    return s;
  };
  if (c.socket_buffer_bytes > 0) {
    SetBuffer(fd, SO_RCVBUFFORCE, SO_RCVBUF, c.socket_buffer_bytes);
    SetBuffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, c.socket_buffer_bytes);
  }
  if (c.reuse_port) {
    const int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
      return fail("udp: SO_REUSEPORT", errno);
    }
  }
  if (bind(fd, reinterpret_cast<const sockaddr*>(&local.addr), local.len) != 0) {
    return fail("udp: bind " + EndpointToString(local), errno);
  }
  if (connected && connect(fd, reinterpret_cast<const sockaddr*>(&peer.addr), peer.len) != 0) {
    return fail("udp: connect " + EndpointToString(peer), errno);
  }
  if (connected) {
    // Never fragment: a datagram longer than the path MTU fails to send (EMSGSIZE) rather than
    // crossing the network in IP fragments (a lost fragment loses the whole message, and a
    // fabric does not reassemble). max_datagram_bytes() says what fits.
    const int v6 = local.addr.ss_family == AF_INET6;
    const int dont = v6 ? IPV6_PMTUDISC_DO : IP_PMTUDISC_DO;
    if (setsockopt(fd, v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_MTU_DISCOVER : IP_MTU_DISCOVER,
                   &dont, sizeof(dont)) != 0) {
      return fail("udp: IP_MTU_DISCOVER", errno);
    }
  }
  // GSO needs no socket option (UDP_SEGMENT goes with each train); getsockopt tells whether this
  // kernel knows it. GRO is best effort: a kernel that refuses it delivers plain datagrams.
  bool gso = false, gro = false;
  if (c.gso_gro) {
    int v = 0;
    socklen_t vl = sizeof(v);
    gso = getsockopt(fd, SOL_UDP, UDP_SEGMENT, &v, &vl) == 0;
    const int one = 1;
    gro = setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0;
  }
  return std::unique_ptr<Port>(new UdpPort(fd, connected, gso, gro));
}

Status SteerByField16(Port& port, uint32_t offset, uint32_t n) {
  auto* udp = dynamic_cast<UdpPort*>(&port);
  if (udp == nullptr) return InvalidArgument("net: SteerByField16 needs a UDP port");
  if (n == 0) return InvalidArgument("net: SteerByField16 over 0 sockets");
  // At the reuseport hook the skb's data starts at the UDP payload.
  sock_filter code[] = {
      {BPF_LD | BPF_H | BPF_ABS, 0, 0, offset},
      {BPF_ALU | BPF_MOD | BPF_K, 0, 0, n},
      {BPF_RET | BPF_A, 0, 0, 0},
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof(code) / sizeof(code[0])), code};
  if (setsockopt(udp->fd(), SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)) != 0) {
    return ErrnoStatus("udp: SO_ATTACH_REUSEPORT_CBPF", errno);
  }
  return Status::Ok();
}

std::string SmallReceiveBuffer(size_t got, int requested) {
  if (got == 0 || requested <= 0 || got >= 2 * static_cast<size_t>(requested)) return "";
  auto kib = [](size_t b) { return std::to_string(b / 1024) + " KiB"; };
  return "the kernel gave the UDP socket a receive buffer of " + kib(got / 2) + ", not the " +
         kib(static_cast<size_t>(requested)) +
         " asked: net.core.rmem_max caps it for a process without CAP_NET_ADMIN; raise it (sysctl "
         "-w net.core.rmem_max=" +
         std::to_string(requested) + " net.core.wmem_max=" + std::to_string(requested) +
         ") or grant CAP_NET_ADMIN";
}

uint16_t UdpLocalPort(const Port& port) {
  const auto* udp = dynamic_cast<const UdpPort*>(&port);
  if (udp == nullptr) return 0;
  Endpoint local;
  local.len = sizeof(local.addr);
  if (getsockname(udp->fd(), reinterpret_cast<sockaddr*>(&local.addr), &local.len) != 0) return 0;
  return EndpointPort(local);
}

}  // namespace ina::net
