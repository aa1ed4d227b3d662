#include "test_fabric.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "ina/dp/ref_engine.h"
#include "ina/proto/wire.h"

namespace ina::testing {

class TestFabric::Out final : public dp::Emitter {
 public:
  explicit Out(TestFabric* f) : f_(f) {}
  void OnResult(uint16_t job_id, uint16_t dest_rank, std::span<const uint8_t> packet) override {
    auto it = f_->jobs_.find(job_id);
    if (it == f_->jobs_.end()) return;
    for (const auto& [rank, addr] : it->second.ranks) {
      if (dest_rank != proto::kRankAll && dest_rank != rank) continue;
      if (f_->Chance(f_->options_.drop)) {
        ++f_->dropped_;
        continue;
      }
      f_->SendTo(addr, packet.data(), packet.size());
      if (f_->Chance(f_->options_.dup)) {
        ++f_->duplicated_;
        f_->SendTo(addr, packet.data(), packet.size());
      }
    }
  }

 private:
  TestFabric* f_;
};

Result<std::unique_ptr<TestFabric>> TestFabric::Start(const FabricOptions& options) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("fabric: socket", errno);
  int buf = 8 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
  setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    Status s = ErrnoStatus("fabric: bind", errno);
    close(fd);
    return s;
  }
  socklen_t len = sizeof(sa);
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  std::unique_ptr<TestFabric> f(new TestFabric(fd, ntohs(sa.sin_port), options));
  f->thread_ = std::thread([p = f.get()] { p->Run(); });
  return f;
}

TestFabric::TestFabric(int fd, uint16_t port, const FabricOptions& options)
    : fd_(fd),
      port_(port),
      options_(options),
      rng_(options.seed),
      engine_(dp::MakeReferenceEngine(dp::EngineLimits{options.pool_slots, 64})) {}

TestFabric::~TestFabric() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  close(fd_);
}

dp::CounterSnapshot TestFabric::counters() {
  std::lock_guard<std::mutex> lk(mu_);
  return engine_->counters();
}

bool TestFabric::Chance(double p) {
  if (p <= 0) return false;
  return std::uniform_real_distribution<double>(0, 1)(rng_) < p;
}

void TestFabric::SendTo(const sockaddr_in& to, const uint8_t* p, size_t len) {
  // Blocking socket: loopback sends only fail when the receiver is gone; that is a loss.
  (void)sendto(fd_, p, len, 0, reinterpret_cast<const sockaddr*>(&to), sizeof(to));
}

void TestFabric::SendControl(const sockaddr_in& to, uint8_t type, uint16_t job, uint16_t rank,
                             uint16_t count, uint32_t offset, uint16_t aux) {
  uint8_t b[proto::kHeaderBytes] = {};
  proto::Header h;
  h.version = proto::kVersion;
  h.type = type;
  h.job = job;
  h.rank = rank;
  h.count = count;
  h.offset = offset;
  h.aux = aux;
  proto::EncodeHeader(h, b);
  SendTo(to, b, sizeof(b));
}

void TestFabric::Run() {
  std::vector<uint8_t> buf(4096);
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 10) <= 0) continue;
    for (int i = 0; i < 64; ++i) {
      sockaddr_in from{};
      socklen_t fl = sizeof(from);
      ssize_t n = recvfrom(fd_, buf.data(), buf.size(), MSG_DONTWAIT,
                           reinterpret_cast<sockaddr*>(&from), &fl);
      if (n < 0) break;
      OnPacket(buf.data(), static_cast<size_t>(n), from);
    }
  }
}

void TestFabric::OnPacket(const uint8_t* p, size_t len, const sockaddr_in& from) {
  if (len >= proto::kHeaderBytes && proto::GetVersion(p) == proto::kVersion) {
    auto type = static_cast<proto::MsgType>(proto::GetType(p));
    if (type == proto::MsgType::kJoin) return OnJoin(p, from);
    if (type == proto::MsgType::kLeave) return OnLeave(p);
  }
  if (Chance(options_.drop)) {
    ++dropped_;
    return;
  }
  std::lock_guard<std::mutex> lk(mu_);
  Out out(this);
  int times = 1;
  if (Chance(options_.dup)) {
    ++duplicated_;
    times = 2;
  }
  for (int t = 0; t < times; ++t) engine_->Process(std::span(p, len), out);
}

static bool SameAddr(const sockaddr_in& a, const sockaddr_in& b) {
  return a.sin_addr.s_addr == b.sin_addr.s_addr && a.sin_port == b.sin_port;
}

void TestFabric::OnJoin(const uint8_t* p, const sockaddr_in& from) {
  const proto::Header h = proto::DecodeHeader(p);
  const auto kAck = static_cast<uint8_t>(proto::MsgType::kJoinAck);
  const auto kErr = static_cast<uint8_t>(proto::MsgType::kError);
  auto error = [&](proto::ErrorCode c) {
    SendControl(from, kErr, h.job, h.rank, 0, 0, static_cast<uint16_t>(c));
  };
  if (h.aux < 1 || h.aux > proto::kMaxWorkers || !proto::IsValidK(h.count) || h.offset < 1 ||
      h.rank >= h.aux) {
    return error(proto::ErrorCode::kBadParams);
  }
  auto [it, fresh] = jobs_.try_emplace(h.job);
  Job& job = it->second;
  if (fresh) {
    job.world = h.aux;
    job.k = h.count;
    job.window = static_cast<uint16_t>(std::min<uint32_t>(h.offset, 0xFFFF));
  } else if (job.world != h.aux || job.k != h.count || job.window != h.offset) {
    return error(proto::ErrorCode::kBadParams);
  }
  auto r = job.ranks.find(h.rank);
  if (r != job.ranks.end() && !SameAddr(r->second, from)) {
    return error(proto::ErrorCode::kRankTaken);
  }
  job.ranks[h.rank] = from;
  if (job.installed) return SendControl(from, kAck, h.job, h.rank, job.k, job.granted, 0);
  if (job.ranks.size() < job.world) return;
  uint16_t granted = std::min<uint16_t>(job.window, options_.max_window);
  if (next_slot_base_ + granted > options_.pool_slots) next_slot_base_ = 0;
  dp::JobConfig jc{h.job, job.world, job.k, next_slot_base_, granted};
  Status s;
  {
    std::lock_guard<std::mutex> lk(mu_);
    s = engine_->AddJob(jc);
  }
  if (!s.ok()) {
    jobs_.erase(it);
    return error(proto::ErrorCode::kNoSlots);
  }
  next_slot_base_ += granted;
  job.installed = true;
  job.granted = granted;
  for (const auto& [rank, addr] : job.ranks) SendControl(addr, kAck, h.job, rank, job.k, granted, 0);
}

void TestFabric::OnLeave(const uint8_t* p) {
  const proto::Header h = proto::DecodeHeader(p);
  auto it = jobs_.find(h.job);
  if (it == jobs_.end() || !it->second.ranks.count(h.rank)) return;
  // aux 0: the rank is done; the job stays (for resends) until every rank is done.
  if (h.aux == 0 && it->second.installed) {
    it->second.done.insert(h.rank);
    if (it->second.done.size() < it->second.ranks.size()) {
      for (const auto& [rank, addr] : it->second.ranks) {  // as ina-switchd: error(rank_left)
        if (it->second.done.count(rank)) continue;
        uint8_t b[proto::kHeaderBytes] = {};
        proto::Header e;
        e.version = proto::kVersion;
        e.type = static_cast<uint8_t>(proto::MsgType::kError);
        e.job = h.job;
        e.rank = rank;
        e.count = h.rank;
        e.offset = h.offset;
        e.aux = static_cast<uint16_t>(proto::ErrorCode::kRankLeft);
        proto::EncodeHeader(e, b);
        sendto(fd_, b, sizeof(b), 0, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
      }
      return;
    }
    std::lock_guard<std::mutex> lk(mu_);
    (void)engine_->RemoveJob(h.job);
    jobs_.erase(it);
    return;
  }
  if (it->second.installed) {
    std::lock_guard<std::mutex> lk(mu_);
    (void)engine_->RemoveJob(h.job);
  }
  for (const auto& [rank, addr] : it->second.ranks) {
    if (rank == h.rank || it->second.done.count(rank)) continue;
    SendControl(addr, static_cast<uint8_t>(proto::MsgType::kError), h.job, rank, 0, 0,
                static_cast<uint16_t>(proto::ErrorCode::kJobAborted));
  }
  jobs_.erase(it);
}

}  // namespace ina::testing
