// ina-bench's coordination protocol between the parent (the coordinator) and its workers over TCP:
// message framing, the message codec and the socket helpers both ends use (coordinator.h and
// coord_client.h are the two ends). Not on any data path: ina's own traffic never goes here.
//
// Framing: every message is one frame of ina/base/tcp_frame.h, a 12-byte head, the body length
// (u64, big-endian) and the type (u32, big-endian; a Msg), then the body. Body fields are written
// by Writer and read by Reader in the order each message lists below: integers big-endian, strings
// and byte strings as a u64 length then the bytes. Float arrays (results) travel as the worker's
// bytes; HELLO carries a byte-order marker and the coordinator refuses a worker whose byte order
// differs from its own.
//
//   worker -> coordinator                     coordinator -> worker
//   kHello   u32 version, u32 rank,           kWelcome   u32 n, n x (str flag, str value): the
//            u32 order marker, str host,                 run's options (Options::RunArgs), then
//            u64 pid, u32 n, n x (str flag,              str switch "HOST:PORT" (the default)
//            str value): the run options on  kRefuse    str why (the connection is then closed)
//            the worker's own command line   kRelease   u64 seq: barrier seq passed
//   kBarrier u64 seq                          kBarrierFailed u64 seq, str why
//   kSet     u64 id, str key, bytes value     kValue     u64 id, bytes value (answers kGet)
//   kGet     u64 id, str key (waits for key)  kDone      u64 id (answers kSet and kWait)
//   kWait    u64 id, u32 n, n x str key       kOpFailed  u64 id, str why
//   kReport  i32 exit code, RankSlot fields   kReportAck (the worker may close now)
//            (EncodeSlot), bytes ina result,
//            bytes gloo result (rank 0 only;
//            empty otherwise)
//
// Errors are Status values that say which peer and what (a closed connection, a timeout, a
// malformed or oversized message); nothing here throws or exits.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ina/base/status.h"
#include "ina/base/tcp_frame.h"
#include "options.h"  // Args

namespace ina::bench {

struct RankSlot;

inline constexpr uint32_t kCoordVersion = 2;  // 2: ina/base/tcp_frame.h's 12-byte head, a slot's K
// What a HELLO's order marker reads as when both ends share byte order.
inline constexpr uint32_t kByteOrderMarker = 0x01020304;
inline constexpr size_t kFrameHead = kTcpFrameHeadBytes;

enum class Msg : uint8_t {
  kHello = 1,
  kBarrier = 2,
  kSet = 3,
  kGet = 4,
  kWait = 5,
  kReport = 6,
  kWelcome = 11,
  kRefuse = 12,
  kRelease = 13,
  kBarrierFailed = 14,
  kValue = 15,
  kDone = 16,
  kOpFailed = 17,
  kReportAck = 18,
};

// Builds one message: Writer(type).U32(..).Str(..).Frame().
class Writer {
 public:
  explicit Writer(Msg type);
  Writer& U8(uint8_t v);
  Writer& U32(uint32_t v);
  Writer& U64(uint64_t v);
  Writer& I32(int32_t v) { return U32(static_cast<uint32_t>(v)); }
  Writer& F64(double v);
  Writer& Str(std::string_view s);
  Writer& Bytes(const void* data, size_t n);
  Writer& ArgList(const Args& args);
  // The whole frame, head included.
  std::string Frame() const;

 private:
  std::string b_;
  Msg type_;
};

// Reads one message body; every getter returns false once the body is short (and stays false).
class Reader {
 public:
  explicit Reader(std::string_view body) : b_(body) {}
  bool U8(uint8_t* v);
  bool U32(uint32_t* v);
  bool U64(uint64_t* v);
  bool I32(int32_t* v);
  bool F64(double* v);
  bool Str(std::string* s);
  bool ArgList(Args* args);
  // A byte string of at most `max` bytes, returned as a view into the body.
  bool Bytes(std::string_view* v, uint64_t max = UINT64_MAX);
  bool done() const { return ok_ && at_ == b_.size(); }  // everything read, nothing left over
  bool ok() const { return ok_; }

 private:
  bool Take(size_t n, const char** p);
  std::string_view b_;
  size_t at_ = 0;
  bool ok_ = true;
};

// A RankSlot's fields (ina_ms and gloo_ms up to `iters`) as part of a REPORT, and back.
// REQUIRES: iters <= kMaxIters.
void EncodeSlot(Writer& w, const RankSlot& s, int iters);
bool DecodeSlot(Reader& r, RankSlot* s, int iters);

// The head of a frame: body length and type. Errors: a length above max_body.
struct FrameHead {
  uint64_t body = 0;
  Msg type{};
};
Result<FrameHead> ParseHead(const char* head, uint64_t max_body);

// "HOST:PORT" (IPv4 literal or name, resolved once) to connect to or listen on.
// Errors: InvalidArgument for a malformed address, Unavailable when the name does not resolve.
struct TcpAddress {
  std::string host;
  uint16_t port = 0;
};
Result<TcpAddress> ParseTcpAddress(std::string_view hp);

// A listening socket on addr (port 0: an ephemeral one), non-blocking, close-on-exec.
Result<int> ListenTcp(const TcpAddress& addr);
// A listening socket on 127.0.0.1 (ephemeral port) inside network namespace `netns`
// (/var/run/netns/<netns>; needs CAP_SYS_ADMIN): a worker in that namespace reaches it on its own
// loopback. The calling thread's namespace does not change.
Result<int> ListenTcpInNetns(const std::string& netns);
// "ip:port" the socket is bound to.
std::string LocalAddress(int fd);
std::string PeerAddress(int fd);
// Keep-alive tuned so that a peer whose host died silently is noticed within about 11 s
// (TCP_KEEPIDLE 5 s, 3 probes 2 s apart), and TCP_USER_TIMEOUT 15 s for unacknowledged data.
void TuneTcp(int fd);

// Connects to addr, retrying refused connections (the coordinator may not listen yet) until
// `timeout`. Returns a blocking, tuned socket. Errors: DeadlineExceeded naming the address and
// the last error.
Result<int> ConnectTcp(const TcpAddress& addr, std::chrono::milliseconds timeout);

// Blocking send of the whole buffer (MSG_NOSIGNAL). Errors: Unavailable naming `peer`.
Status SendAll(int fd, std::string_view data, const std::string& peer);
// Blocking receive of one whole frame into *type / *body, by `deadline`. Errors: Unavailable
// (peer closed the connection or a socket error), DeadlineExceeded, DataLoss (bad head).
Status RecvFrame(int fd, std::chrono::steady_clock::time_point deadline, uint64_t max_body,
                 const std::string& peer, Msg* type, std::string* body);

}  // namespace ina::bench
