#include "coord_client.h"

#include <sys/socket.h>
#include <unistd.h>

#include <climits>

#include "worker.h"

namespace ina::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kBarrierKey = uint64_t{1} << 63;
constexpr uint64_t kReportKey = uint64_t{1} << 62;
constexpr uint64_t kMaxAnswer = 1 << 24;  // the coordinator's answers are all small

std::string HostName() {
  char h[HOST_NAME_MAX + 1] = {};
  return gethostname(h, sizeof(h) - 1) == 0 ? h : "?";
}

}  // namespace

Result<std::unique_ptr<CoordClient>> CoordClient::Connect(
    const std::string& address, int rank, const Args& given, std::chrono::milliseconds timeout,
    std::function<void(const Status&)> on_lost) {
  INA_ASSIGN_OR_RETURN(TcpAddress a, ParseTcpAddress(address));
  const auto deadline = Clock::now() + timeout;
  INA_ASSIGN_OR_RETURN(int fd, ConnectTcp(a, timeout));
  std::unique_ptr<CoordClient> c(new CoordClient(fd, "the coordinator at " + address));
  const std::string hello = Writer(Msg::kHello)
                                .U32(kCoordVersion)
                                .U32(static_cast<uint32_t>(rank))
                                .U32(kByteOrderMarker)
                                .Str(HostName())
                                .U64(static_cast<uint64_t>(getpid()))
                                .ArgList(given)
                                .Frame();
  INA_RETURN_IF_ERROR(SendAll(fd, hello, c->address_));
  Msg type;
  std::string body;
  INA_RETURN_IF_ERROR(RecvFrame(fd, deadline, kMaxAnswer, c->address_, &type, &body));
  Reader r(body);
  if (type == Msg::kRefuse) {
    std::string why;
    r.Str(&why);
    return FailedPrecondition(c->address_ + " refused rank " + std::to_string(rank) + ": " + why);
  }
  if (type != Msg::kWelcome || !r.ArgList(&c->run_args_) || !r.Str(&c->switch_addr_) || !r.done()) {
    return Status(StatusCode::kDataLoss, "malformed answer from " + c->address_);
  }
  c->on_lost_ = std::move(on_lost);
  c->reader_ = std::thread([p = c.get()] { p->ReadLoop(); });
  return c;
}

CoordClient::~CoordClient() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
  }
  shutdown(fd_, SHUT_RDWR);
  if (reader_.joinable()) reader_.join();
  close(fd_);
}

void CoordClient::ReadLoop() {
  for (;;) {
    Msg type;
    std::string body;
    Status s = RecvFrame(fd_, Clock::time_point::max(), kMaxAnswer, address_, &type, &body);
    uint64_t key = 0;
    Reader r(body);
    if (s.ok()) {
      if (type == Msg::kReportAck) {
        key = kReportKey;
      } else if (type == Msg::kRefuse) {
        std::string why;
        r.Str(&why);
        s = FailedPrecondition(address_ + " ended the run for this rank: " + why);
      } else if (r.U64(&key)) {
        if (type == Msg::kRelease || type == Msg::kBarrierFailed) key |= kBarrierKey;
      } else {
        s = Status(StatusCode::kDataLoss, "malformed message from " + address_);
      }
    }
    std::function<void(const Status&)> lost_hook;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (s.ok()) {
        // Marked here, before the caller wakes: the coordinator may close the connection right
        // after its acknowledgement, and that is not a loss.
        if (type == Msg::kReportAck) acked_ = true;
        answers_[key] = Answer{type, body.substr(r.ok() && type != Msg::kReportAck ? 8 : 0)};
      } else {
        lost_ = s;
        if (!acked_ && !closing_) lost_hook = on_lost_;
      }
    }
    cv_.notify_all();
    if (!s.ok()) {
      if (lost_hook) lost_hook(s);
      return;
    }
  }
}

Status CoordClient::Call(const std::string& frame, uint64_t key, std::chrono::milliseconds timeout,
                         Msg* type, std::string* body) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!lost_.ok()) return lost_;
  }
  INA_RETURN_IF_ERROR(SendAll(fd_, frame, address_));
  std::unique_lock<std::mutex> lock(mu_);
  const bool answered =
      cv_.wait_for(lock, timeout, [&] { return answers_.count(key) > 0 || !lost_.ok(); });
  auto it = answers_.find(key);
  if (it == answers_.end()) {
    if (!answered) {
      return DeadlineExceeded("no answer from " + address_ + " within " +
                              std::to_string(timeout.count()) + " ms (timed out)");
    }
    return lost_;
  }
  *type = it->second.type;
  *body = std::move(it->second.body);
  answers_.erase(it);
  return Status::Ok();
}

Status CoordClient::Barrier(std::chrono::milliseconds timeout) {
  const uint64_t seq = next_barrier_++;
  Msg type;
  std::string body;
  INA_RETURN_IF_ERROR(
      Call(Writer(Msg::kBarrier).U64(seq).Frame(), kBarrierKey | seq, timeout, &type, &body));
  if (type == Msg::kRelease) return Status::Ok();
  std::string why;
  Reader(body).Str(&why);
  return Aborted("barrier " + std::to_string(seq) + " failed: " + why);
}

Status CoordClient::Set(const std::string& key, const std::vector<char>& value,
                        std::chrono::milliseconds timeout) {
  const uint64_t id = next_id_++;
  Msg type;
  std::string body;
  INA_RETURN_IF_ERROR(
      Call(Writer(Msg::kSet).U64(id).Str(key).Bytes(value.data(), value.size()).Frame(), id,
           timeout, &type, &body));
  if (type == Msg::kDone) return Status::Ok();
  std::string why;
  Reader(body).Str(&why);
  return Aborted("store set '" + key + "': " + why);
}

Result<std::vector<char>> CoordClient::Get(const std::string& key,
                                           std::chrono::milliseconds timeout) {
  const uint64_t id = next_id_++;
  Msg type;
  std::string body;
  INA_RETURN_IF_ERROR(Call(Writer(Msg::kGet).U64(id).Str(key).Frame(), id, timeout, &type, &body));
  Reader r(body);
  std::string_view v;
  if (type == Msg::kValue && r.Bytes(&v)) return std::vector<char>(v.begin(), v.end());
  std::string why;
  r.Str(&why);
  return Aborted("store get '" + key + "': " + why);
}

Status CoordClient::Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const uint64_t id = next_id_++;
  Writer w(Msg::kWait);
  w.U64(id).U32(static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) w.Str(k);
  Msg type;
  std::string body;
  INA_RETURN_IF_ERROR(Call(w.Frame(), id, timeout, &type, &body));
  if (type == Msg::kDone) return Status::Ok();
  std::string why;
  Reader(body).Str(&why);
  return Aborted("store wait: " + why);
}

Status CoordClient::Report(int exit_code, const RankSlot& slot, int iters,
                           std::span<const uint8_t> result, std::span<const uint8_t> gloo_result,
                           std::chrono::milliseconds timeout) {
  Writer w(Msg::kReport);
  w.I32(exit_code);
  EncodeSlot(w, slot, iters);
  w.Bytes(result.data(), result.size()).Bytes(gloo_result.data(), gloo_result.size());
  Msg type;
  std::string body;
  return Call(w.Frame(), kReportKey, timeout, &type, &body);
}

}  // namespace ina::bench
