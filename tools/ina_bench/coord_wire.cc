#include "coord_wire.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "ina/base/tcp_frame.h"
#include "worker.h"

namespace ina::bench {
namespace {

using Clock = std::chrono::steady_clock;

Status DataLoss(std::string m) { return Status(StatusCode::kDataLoss, std::move(m)); }

void PutBe(std::string& b, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) b.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

uint64_t GetBe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

std::string SockName(const sockaddr_in& a) {
  char ip[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip));
  return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
}

Result<sockaddr_in> Resolve(const TcpAddress& a) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(a.port);
  if (inet_pton(AF_INET, a.host.c_str(), &sa.sin_addr) == 1) return sa;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(a.host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return Unavailable("cannot resolve '" + a.host + "': " + gai_strerror(rc));
  }
  sa.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return sa;
}

}  // namespace

Writer::Writer(Msg type) : b_(kFrameHead, '\0'), type_(type) {}
Writer& Writer::U8(uint8_t v) {
  b_.push_back(static_cast<char>(v));
  return *this;
}
Writer& Writer::U32(uint32_t v) {
  PutBe(b_, v, 4);
  return *this;
}
Writer& Writer::U64(uint64_t v) {
  PutBe(b_, v, 8);
  return *this;
}
Writer& Writer::F64(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return U64(bits);
}
Writer& Writer::Str(std::string_view s) { return Bytes(s.data(), s.size()); }
Writer& Writer::Bytes(const void* data, size_t n) {
  U64(n);
  b_.append(static_cast<const char*>(data), n);
  return *this;
}
Writer& Writer::ArgList(const Args& args) {
  U32(static_cast<uint32_t>(args.size()));
  for (const auto& [flag, value] : args) Str(flag).Str(value);
  return *this;
}
std::string Writer::Frame() const {
  std::string f = b_;
  EncodeTcpFrameHead({f.size() - kFrameHead, static_cast<uint32_t>(type_)},
                     reinterpret_cast<uint8_t*>(f.data()));
  return f;
}

bool Reader::Take(size_t n, const char** p) {
  if (!ok_ || b_.size() - at_ < n) return ok_ = false;
  *p = b_.data() + at_;
  at_ += n;
  return true;
}
bool Reader::U8(uint8_t* v) {
  const char* p;
  if (!Take(1, &p)) return false;
  *v = static_cast<uint8_t>(*p);
  return true;
}
bool Reader::U32(uint32_t* v) {
  const char* p;
  if (!Take(4, &p)) return false;
  *v = static_cast<uint32_t>(GetBe(p, 4));
  return true;
}
bool Reader::U64(uint64_t* v) {
  const char* p;
  if (!Take(8, &p)) return false;
  *v = GetBe(p, 8);
  return true;
}
bool Reader::I32(int32_t* v) {
  uint32_t u;
  if (!U32(&u)) return false;
  *v = static_cast<int32_t>(u);
  return true;
}
bool Reader::F64(double* v) {
  uint64_t bits;
  if (!U64(&bits)) return false;
  std::memcpy(v, &bits, sizeof(bits));
  return true;
}
bool Reader::Bytes(std::string_view* v, uint64_t max) {
  uint64_t n;
  const char* p;
  if (!U64(&n) || n > max || n > b_.size() - at_ || !Take(n, &p)) return ok_ = false;
  *v = std::string_view(p, n);
  return true;
}
bool Reader::Str(std::string* s) {
  std::string_view v;
  if (!Bytes(&v)) return false;
  s->assign(v);
  return true;
}
bool Reader::ArgList(Args* args) {
  uint32_t n;
  if (!U32(&n) || n > 1024) return ok_ = false;
  args->clear();
  for (uint32_t i = 0; i < n; ++i) {
    std::string flag, value;
    if (!Str(&flag) || !Str(&value)) return false;
    args->emplace_back(std::move(flag), std::move(value));
  }
  return true;
}

void EncodeSlot(Writer& w, const RankSlot& s, int iters) {
  w.I32(s.ina_code).Str(s.ina_error).F64(s.error_ms).U64(s.fingerprint);
  w.U64(s.retransmissions).U64(s.packets_sent).U64(s.bad_crc).U64(s.packets_from_device);
  w.U64(s.socket_drops).U32(s.window).U32(s.k);
  w.I32(s.gloo_code).Str(s.gloo_error);
  w.U32(static_cast<uint32_t>(iters));
  for (int i = 0; i < iters; ++i) w.F64(s.ina_ms[i]).F64(s.gloo_ms[i]);
}

bool DecodeSlot(Reader& r, RankSlot* s, int iters) {
  std::string ina_error, gloo_error;
  uint32_t n = 0;
  bool ok = r.I32(&s->ina_code) && r.Str(&ina_error) && r.F64(&s->error_ms) &&
            r.U64(&s->fingerprint) && r.U64(&s->retransmissions) && r.U64(&s->packets_sent) &&
            r.U64(&s->bad_crc) && r.U64(&s->packets_from_device) && r.U64(&s->socket_drops) &&
            r.U32(&s->window) && r.U32(&s->k) && r.I32(&s->gloo_code) && r.Str(&gloo_error) &&
            r.U32(&n) && n == static_cast<uint32_t>(iters);
  for (uint32_t i = 0; ok && i < n; ++i) ok = r.F64(&s->ina_ms[i]) && r.F64(&s->gloo_ms[i]);
  if (!ok) return false;
  std::snprintf(s->ina_error, sizeof(s->ina_error), "%s", ina_error.c_str());
  std::snprintf(s->gloo_error, sizeof(s->gloo_error), "%s", gloo_error.c_str());
  return true;
}

Result<FrameHead> ParseHead(const char* head, uint64_t max_body) {
  const TcpFrameHead t = DecodeTcpFrameHead(reinterpret_cast<const uint8_t*>(head));
  if (t.tag > 0xFF) return DataLoss("message of unknown type " + std::to_string(t.tag));
  FrameHead h;
  h.body = t.body;
  h.type = static_cast<Msg>(t.tag);
  if (h.body > max_body) {
    return DataLoss("message of " + std::to_string(h.body) + " bytes (type " +
                    std::to_string(static_cast<int>(h.type)) + "), more than the " +
                    std::to_string(max_body) + " this run can need");
  }
  return h;
}

Result<TcpAddress> ParseTcpAddress(std::string_view hp) {
  const size_t colon = hp.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == hp.size()) {
    return InvalidArgument("'" + std::string(hp) + "' is not HOST:PORT");
  }
  TcpAddress a;
  a.host = std::string(hp.substr(0, colon));
  unsigned long port = 0;
  for (char c : hp.substr(colon + 1)) {
    if (c < '0' || c > '9' || (port = port * 10 + static_cast<unsigned long>(c - '0')) > 65535) {
      return InvalidArgument("'" + std::string(hp) + "': the port is not a number in [0, 65535]");
    }
  }
  a.port = static_cast<uint16_t>(port);
  return a;
}

Result<int> ListenTcp(const TcpAddress& addr) {
  INA_ASSIGN_OR_RETURN(sockaddr_in sa, Resolve(addr));
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("socket", errno);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(fd, 128) != 0) {
    const int err = errno;
    close(fd);
    return ErrnoStatus("listen on " + addr.host + ":" + std::to_string(addr.port), err);
  }
  return fd;
}

Result<int> ListenTcpInNetns(const std::string& netns) {
  // setns changes only the calling thread's namespace: do it in a thread of its own, whose
  // socket keeps the namespace it was made in.
  Result<int> out = Internal("unset");
  std::thread([&] {
    const std::string path = "/var/run/netns/" + netns;
    const int ns = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0) {
      out = ErrnoStatus("coordinator: open " + path, errno);
      return;
    }
    if (setns(ns, CLONE_NEWNET) != 0) {
      out = ErrnoStatus("coordinator: enter network namespace " + netns, errno);
    } else {
      out = ListenTcp(TcpAddress{"127.0.0.1", 0});
    }
    close(ns);
  }).join();
  return out;
}

std::string LocalAddress(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "?";
  return SockName(a);
}

std::string PeerAddress(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "?";
  return SockName(a);
}

void TuneTcp(int fd) {
  const int one = 1, idle = 5, interval = 2, count = 3;
  const unsigned user_timeout_ms = 15000;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof(user_timeout_ms));
}

Result<int> ConnectTcp(const TcpAddress& addr, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const std::string where = addr.host + ":" + std::to_string(addr.port);
  std::string last = "no attempt";
  auto backoff = std::chrono::milliseconds(20);
  for (;;) {
    auto sa = Resolve(addr);
    if (sa.ok()) {
      const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) return ErrnoStatus("socket", errno);
      int rc = connect(fd, reinterpret_cast<const sockaddr*>(&*sa), sizeof(*sa));
      int err = rc == 0 ? 0 : errno;
      if (err == EINPROGRESS) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        pollfd p{fd, POLLOUT, 0};
        rc = poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
        socklen_t len = sizeof(err);
        if (rc == 1) {
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        } else {
          err = rc == 0 ? ETIMEDOUT : errno;
        }
      }
      if (err == 0) {
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        TuneTcp(fd);
        return fd;
      }
      close(fd);
      last = std::strerror(err);
    } else {
      last = sa.status().message();
    }
    if (Clock::now() + backoff >= deadline) {
      return DeadlineExceeded("could not reach the coordinator at " + where + " within " +
                              std::to_string(timeout.count() / 1000) + " s (last: " + last + ")");
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
}

Status SendAll(int fd, std::string_view data, const std::string& peer) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Unavailable("sending to " + peer + ": " + std::strerror(errno));
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status RecvFrame(int fd, std::chrono::steady_clock::time_point deadline, uint64_t max_body,
                 const std::string& peer, Msg* type, std::string* body) {
  auto read_exact = [&](char* dst, size_t n) -> Status {
    while (n > 0) {
      if (deadline != Clock::time_point::max()) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) return DeadlineExceeded("no answer from " + peer + " in time");
        pollfd p{fd, POLLIN, 0};
        const int rc = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
        if (rc < 0 && errno != EINTR) return ErrnoStatus("poll", errno);
        if (rc <= 0) continue;
      }
      const ssize_t got = recv(fd, dst, n, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got == 0) return Unavailable(peer + " closed the connection");
      if (got < 0) return Unavailable("connection to " + peer + ": " + std::strerror(errno));
      dst += got;
      n -= static_cast<size_t>(got);
    }
    return Status::Ok();
  };
  char head[kFrameHead];
  INA_RETURN_IF_ERROR(read_exact(head, sizeof(head)));
  auto h = ParseHead(head, max_body);
  if (!h.ok()) return DataLoss("from " + peer + ": " + h.status().message());
  body->resize(h->body);
  *type = h->type;
  return read_exact(body->data(), body->size());
}

}  // namespace ina::bench
