// The net side of the NCCL plugin as plain C++: point-to-point messages over TCP, never blocking.
//
// NCCL's contract (ext-net/net_v11.h): listen gives a handle that NCCL sends to the peer; the
// peer's connect and our accept must not block, they return "not yet" (NULL) and are called
// again; isend/irecv queue a message and return at once (NULL when the comm is full); test
// progresses and reports completion and the size. Messages on one comm complete in order.
//
// Wire: the connector sends an 8-byte hello (kHello) once connected; then every message is one
// frame of ina/base/tcp_frame.h: a 12-byte head (u64 size, u32 tag, big-endian) and its bytes.
// A receive whose buffer is smaller than the message fails the comm (DataLoss).
//
// Errors are sticky: once a comm failed (peer closed, reset, bad message), every later call on it
// returns that error, so a dead peer gives an error from test() instead of a hang.
// Threading: one comm is used by one thread at a time (NCCL's proxy thread); distinct comms are
// independent.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "ina/base/status.h"

namespace ina::nccl {

constexpr uint64_t kHello = 0x494e41746370310aULL;  // "INAtcp1\n"

// The net listen handle: magic, IPv4 address and port (big-endian), and 8 bytes of local state
// that connect keeps in its own copy of the handle between calls (NCCL's net_socket does the
// same: the handle is the only thing NCCL passes again).
struct NetHandle {
  uint32_t ipv4 = 0;  // host order
  uint16_t port = 0;
  void Encode(uint8_t* out) const;  // kHandleBytes (128) bytes; state zeroed
  static Result<NetHandle> Decode(const uint8_t* in);
  static void* GetState(const uint8_t* in);
  static void SetState(uint8_t* in, void* state);
};

// The address a listener binds and advertises: INA_NCCL_NET_ADDR (dotted IPv4) if set, else the
// local address the kernel would use toward INA_SWITCH's host, else 127.0.0.1. Host order.
Result<uint32_t> ListenAddress();

class TcpComm;

struct TcpRequest {
  TcpComm* owner = nullptr;
  bool in_use = false;  // handed out, not yet reported done
  bool queued = false;  // in the posting-order ring (until every earlier request is done)
  bool done = false;
  uint8_t* data = nullptr;
  size_t size = 0;      // send: message bytes; recv: buffer capacity, then message bytes
  size_t progress = 0;  // bytes of header + payload moved so far
  int tag = 0;
  uint8_t header[12] = {};
};

class TcpComm {
 public:
  static constexpr int kMaxRequests = 32;  // NCCL_NET_MAX_REQUESTS
  enum class Dir { kSend, kRecv };

  TcpComm(int fd, Dir dir);  // takes ownership of a connected non-blocking socket
  ~TcpComm();
  TcpComm(const TcpComm&) = delete;
  TcpComm& operator=(const TcpComm&) = delete;

  // Queues a send of data[0..size) (kSend) or a receive into data[0..size) (kRecv). Returns
  // nullptr when kMaxRequests are queued. The buffer stays untouched by the caller until done.
  // Errors: the comm's sticky error, FailedPrecondition on the wrong direction.
  Result<TcpRequest*> Post(void* data, size_t size, int tag, Dir dir);
  // Progresses the comm without blocking; *done when `request` completed, then *bytes is its
  // size and the request is freed. Errors: the comm's sticky error.
  Status Test(TcpRequest* request, bool* done, size_t* bytes);
  Dir dir() const { return dir_; }

 private:
  Status Progress();
  Status ProgressSend(TcpRequest& r, bool* blocked);
  Status ProgressRecv(TcpRequest& r, bool* blocked);
  Status Fail(Status st);

  int fd_;
  Dir dir_;
  Status error_;
  std::array<TcpRequest, kMaxRequests> pool_;
  std::array<int, kMaxRequests> queue_{};  // pool indices in posting order (a ring)
  int head_ = 0, count_ = 0;
};

class TcpListener {
 public:
  // Binds ipv4:ephemeral (host order) and listens. Errors: the socket call's, as ErrnoStatus.
  static Result<std::unique_ptr<TcpListener>> Listen(uint32_t ipv4);
  ~TcpListener();
  const NetHandle& handle() const { return handle_; }
  // The next connection whose hello arrived, or nullptr (none yet: call again). Does not block.
  Result<std::unique_ptr<TcpComm>> TryAccept();

 private:
  TcpListener(int fd, NetHandle h) : fd_(fd), handle_(h) {}
  int fd_;
  NetHandle handle_;
  int pending_fd_ = -1;
  uint8_t hello_[8] = {};
  size_t hello_got_ = 0;
};

class TcpConnector {
 public:
  // Starts a non-blocking connect to `h`. Errors: socket/connect failures other than
  // EINPROGRESS.
  static Result<std::unique_ptr<TcpConnector>> Start(const NetHandle& h);
  ~TcpConnector();
  // The send comm once connected and the hello is out, or nullptr (call again).
  // Errors: the connection failed (refused, unreachable).
  Result<std::unique_ptr<TcpComm>> TryFinish();

 private:
  explicit TcpConnector(int fd, NetHandle h) : fd_(fd), to_(h) {}
  int fd_;
  NetHandle to_;
  bool connected_ = false;
  size_t hello_sent_ = 0;
};

}  // namespace ina::nccl
