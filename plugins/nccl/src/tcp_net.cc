#include "tcp_net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "coll_net.h"  // kHandleBytes
#include "ina/base/tcp_frame.h"
#include "ina/host/config.h"

namespace ina::nccl {
namespace {

constexpr uint8_t kMagic[4] = {'I', 'N', 'A', 'T'};
constexpr size_t kStateOffset = 64;
constexpr size_t kHeaderBytes = kTcpFrameHeadBytes;

void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
uint32_t Get32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
void Put64(uint8_t* p, uint64_t v) {
  Put32(p, static_cast<uint32_t>(v >> 32));
  Put32(p + 4, static_cast<uint32_t>(v));
}
uint64_t Get64(const uint8_t* p) { return (uint64_t{Get32(p)} << 32) | Get32(p + 4); }

std::string AddrString(uint32_t ipv4, uint16_t port) {
  in_addr a{htonl(ipv4)};
  char buf[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &a, buf, sizeof(buf));
  return std::string(buf) + ":" + std::to_string(port);
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

void NetHandle::Encode(uint8_t* out) const {
  std::memset(out, 0, kHandleBytes);
  std::memcpy(out, kMagic, 4);
  Put32(out + 4, ipv4);
  out[8] = static_cast<uint8_t>(port >> 8);
  out[9] = static_cast<uint8_t>(port);
}

Result<NetHandle> NetHandle::Decode(const uint8_t* in) {
  if (std::memcmp(in, kMagic, 4) != 0) return InvalidArgument("net handle: bad magic");
  NetHandle h;
  h.ipv4 = Get32(in + 4);
  h.port = static_cast<uint16_t>((in[8] << 8) | in[9]);
  if (h.port == 0) return InvalidArgument("net handle: port 0");
  return h;
}

void* NetHandle::GetState(const uint8_t* in) {
  void* p;
  std::memcpy(&p, in + kStateOffset, sizeof(p));
  return p;
}

void NetHandle::SetState(uint8_t* in, void* state) {
  std::memcpy(in + kStateOffset, &state, sizeof(state));
}

Result<uint32_t> ListenAddress() {
  if (const char* s = std::getenv("INA_NCCL_NET_ADDR"); s != nullptr && *s != '\0') {
    in_addr a{};
    if (inet_pton(AF_INET, s, &a) != 1) {
      return InvalidArgument(std::string("INA_NCCL_NET_ADDR: '") + s + "' is not an IPv4 address");
    }
    return ntohl(a.s_addr);
  }
  auto config = host::CommConfig::FromEnv(host::CommConfig{});
  if (config.ok() && std::getenv("INA_SWITCH") != nullptr) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo* res = nullptr;
    if (getaddrinfo(config->switch_host.c_str(), nullptr, &hints, &res) == 0 && res != nullptr) {
      sockaddr_in to = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
      freeaddrinfo(res);
      to.sin_port = htons(config->switch_port);
      int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      sockaddr_in local{};
      socklen_t len = sizeof(local);
      // A connected UDP socket sends nothing; it only asks the kernel for the route's source.
      if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0 &&
          getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
        close(fd);
        return ntohl(local.sin_addr.s_addr);
      }
      if (fd >= 0) close(fd);
    }
  }
  return uint32_t{INADDR_LOOPBACK};
}

// ---- TcpComm ----

TcpComm::TcpComm(int fd, Dir dir) : fd_(fd), dir_(dir) {
  for (auto& r : pool_) r.owner = this;
}

TcpComm::~TcpComm() {
  if (fd_ >= 0) close(fd_);
}

Status TcpComm::Fail(Status st) {
  if (error_.ok()) error_ = std::move(st);
  return error_;
}

Result<TcpRequest*> TcpComm::Post(void* data, size_t size, int tag, Dir dir) {
  if (!error_.ok()) return error_;
  if (dir != dir_) {
    return FailedPrecondition(dir_ == Dir::kSend ? "net: irecv on a send comm"
                                                 : "net: isend on a recv comm");
  }
  if (size > 0 && data == nullptr) return InvalidArgument("net: null buffer");
  if (count_ == kMaxRequests) return static_cast<TcpRequest*>(nullptr);
  int idx = -1;
  for (int i = 0; i < kMaxRequests; ++i) {
    if (!pool_[i].queued) {
      idx = i;
      break;
    }
  }
  TcpRequest& r = pool_[idx];
  r.in_use = true;
  r.queued = true;
  r.done = false;
  r.data = static_cast<uint8_t*>(data);
  r.size = size;
  r.progress = 0;
  r.tag = tag;
  if (dir_ == Dir::kSend) EncodeTcpFrameHead({size, static_cast<uint32_t>(tag)}, r.header);
  queue_[(head_ + count_) % kMaxRequests] = idx;
  ++count_;
  // Start moving bytes now; completion is reported by Test.
  Status st = Progress();
  if (!st.ok()) return st;
  return &r;
}

Status TcpComm::ProgressSend(TcpRequest& r, bool* blocked) {
  const size_t total = kHeaderBytes + r.size;
  while (r.progress < total) {
    iovec iov[2];
    int n = 0;
    if (r.progress < kHeaderBytes) {
      iov[n++] = {r.header + r.progress, kHeaderBytes - r.progress};
      if (r.size > 0) iov[n++] = {r.data, r.size};
    } else {
      iov[n++] = {r.data + (r.progress - kHeaderBytes), total - r.progress};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    ssize_t sent = sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        *blocked = true;
        return Status::Ok();
      }
      if (errno == EINTR) continue;
      return Fail(ErrnoStatus("net: send", errno));
    }
    r.progress += static_cast<size_t>(sent);
  }
  r.done = true;
  return Status::Ok();
}

Status TcpComm::ProgressRecv(TcpRequest& r, bool* blocked) {
  while (true) {
    size_t want;
    uint8_t* to;
    if (r.progress < kHeaderBytes) {
      want = kHeaderBytes - r.progress;
      to = r.header + r.progress;
    } else {
      const uint64_t msg_size = DecodeTcpFrameHead(r.header).body;
      if (r.progress == kHeaderBytes) {
        if (msg_size > r.size) {
          return Fail(Status(StatusCode::kDataLoss, "net: message of " + std::to_string(msg_size) +
                                                        " bytes does not fit the " +
                                                        std::to_string(r.size) +
                                                        "-byte receive buffer"));
        }
        r.size = msg_size;
      }
      if (r.progress == kHeaderBytes + r.size) break;
      want = kHeaderBytes + r.size - r.progress;
      to = r.data + (r.progress - kHeaderBytes);
    }
    ssize_t got = recv(fd_, to, want, MSG_DONTWAIT);
    if (got == 0) return Fail(Unavailable("net: peer closed the connection"));
    if (got < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        *blocked = true;
        return Status::Ok();
      }
      if (errno == EINTR) continue;
      return Fail(ErrnoStatus("net: recv", errno));
    }
    r.progress += static_cast<size_t>(got);
  }
  r.tag = static_cast<int>(DecodeTcpFrameHead(r.header).tag);
  r.done = true;
  return Status::Ok();
}

Status TcpComm::Progress() {
  if (!error_.ok()) return error_;
  // Requests complete in posting order; the first not yet done is the one on the wire.
  for (int i = 0; i < count_; ++i) {
    TcpRequest& r = pool_[queue_[(head_ + i) % kMaxRequests]];
    if (r.done) continue;
    bool blocked = false;
    INA_RETURN_IF_ERROR(dir_ == Dir::kSend ? ProgressSend(r, &blocked) : ProgressRecv(r, &blocked));
    if (blocked) break;
  }
  return Status::Ok();
}

Status TcpComm::Test(TcpRequest* request, bool* done, size_t* bytes) {
  *done = false;
  if (request == nullptr || request->owner != this || !request->in_use) {
    return FailedPrecondition("net test: not a request in flight on this comm");
  }
  INA_RETURN_IF_ERROR(Progress());
  if (!request->done) return Status::Ok();
  *done = true;
  *bytes = request->size;
  request->in_use = false;
  // Drop finished requests from the head of the ring (a request tested out of order stays
  // queued, marked free, until those before it are done).
  while (count_ > 0 && !pool_[queue_[head_]].in_use) {
    pool_[queue_[head_]].queued = false;
    head_ = (head_ + 1) % kMaxRequests;
    --count_;
  }
  return Status::Ok();
}

// ---- TcpListener ----

Result<std::unique_ptr<TcpListener>> TcpListener::Listen(uint32_t ipv4) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("net listen: socket", errno);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(ipv4);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    int e = errno;
    close(fd);
    return ErrnoStatus("net listen: bind " + AddrString(ipv4, 0), e);
  }
  if (listen(fd, 128) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    int e = errno;
    close(fd);
    return ErrnoStatus("net listen: listen", e);
  }
  NetHandle h;
  h.ipv4 = ipv4;
  h.port = ntohs(a.sin_port);
  return std::unique_ptr<TcpListener>(new TcpListener(fd, h));
}

TcpListener::~TcpListener() {
  if (pending_fd_ >= 0) close(pending_fd_);
  close(fd_);
}

Result<std::unique_ptr<TcpComm>> TcpListener::TryAccept() {
  if (pending_fd_ < 0) {
    int fd = accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) {
        return std::unique_ptr<TcpComm>();
      }
      return ErrnoStatus("net accept", errno);
    }
    pending_fd_ = fd;
    hello_got_ = 0;
  }
  while (hello_got_ < sizeof(hello_)) {
    ssize_t got = recv(pending_fd_, hello_ + hello_got_, sizeof(hello_) - hello_got_, MSG_DONTWAIT);
    if (got > 0) {
      hello_got_ += static_cast<size_t>(got);
      continue;
    }
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      return std::unique_ptr<TcpComm>();
    }
    Status st = got == 0 ? Unavailable("net accept: peer closed before its hello")
                         : ErrnoStatus("net accept: recv hello", errno);
    close(pending_fd_);
    pending_fd_ = -1;
    return st;
  }
  int fd = pending_fd_;
  pending_fd_ = -1;
  if (Get64(hello_) != kHello) {
    close(fd);
    return InvalidArgument("net accept: the peer is not an ina net plugin (bad hello)");
  }
  SetNoDelay(fd);
  return std::make_unique<TcpComm>(fd, TcpComm::Dir::kRecv);
}

// ---- TcpConnector ----

Result<std::unique_ptr<TcpConnector>> TcpConnector::Start(const NetHandle& h) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("net connect: socket", errno);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(h.ipv4);
  a.sin_port = htons(h.port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 && errno != EINPROGRESS) {
    int e = errno;
    close(fd);
    return ErrnoStatus("net connect " + AddrString(h.ipv4, h.port), e);
  }
  return std::unique_ptr<TcpConnector>(new TcpConnector(fd, h));
}

TcpConnector::~TcpConnector() {
  if (fd_ >= 0) close(fd_);
}

Result<std::unique_ptr<TcpComm>> TcpConnector::TryFinish() {
  if (!connected_) {
    pollfd p{fd_, POLLOUT, 0};
    int n = poll(&p, 1, 0);
    if (n < 0 && errno != EINTR) return ErrnoStatus("net connect: poll", errno);
    if (n <= 0) return std::unique_ptr<TcpComm>();
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) return ErrnoStatus("net connect " + AddrString(to_.ipv4, to_.port), err);
    connected_ = true;
    SetNoDelay(fd_);
  }
  uint8_t hello[8];
  Put64(hello, kHello);
  while (hello_sent_ < sizeof(hello)) {
    ssize_t s =
        send(fd_, hello + hello_sent_, sizeof(hello) - hello_sent_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (s < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        return std::unique_ptr<TcpComm>();
      }
      return ErrnoStatus("net connect: send hello", errno);
    }
    hello_sent_ += static_cast<size_t>(s);
  }
  int fd = fd_;
  fd_ = -1;
  return std::make_unique<TcpComm>(fd, TcpComm::Dir::kSend);
}

}  // namespace ina::nccl
