#include "test_fabric.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "ina/dp/ref_engine.h"

namespace ina::testing {

namespace p = ::ina::proto;

// The engine's results, to the peers the control plane names.
class Fabric::Results final : public dp::Emitter {
 public:
  Results(const dp::ControlPlane& control, dp::ReplySink& out) : control_(control), out_(out) {}
  void OnResult(uint16_t job_id, uint16_t dest_rank, std::span<const uint8_t> packet) override {
    for (const dp::Peer& peer :
         control_.Destinations(job_id, dest_rank, p::GetSlot(packet.data()))) {
      out_.Send(peer, packet);
    }
  }

 private:
  const dp::ControlPlane& control_;
  dp::ReplySink& out_;
};

Result<std::unique_ptr<Fabric>> Fabric::Create(const FabricConfig& config) {
  std::unique_ptr<Fabric> f(new Fabric());
  f->engine_ = dp::MakeReferenceEngine(dp::EngineLimits{config.pool_slots, config.max_jobs});
  dp::ControlConfig cc;
  cc.max_jobs = config.max_jobs;
  cc.job_timeout = config.job_timeout;
  cc.min_window = config.min_window;
  cc.lease_calls = config.lease_calls;
  cc.max_k = config.max_k;
  INA_ASSIGN_OR_RETURN(f->control_, dp::ControlPlane::Create(*f->engine_, cc));
  return f;
}

void Fabric::Receive(std::span<const uint8_t> packet, const dp::Peer& from, TimePoint now,
                     dp::ReplySink& out) {
  const uint8_t* d = packet.data();
  if (packet.size() >= p::kHeaderBytes && p::GetVersion(d) == p::kVersion) {
    const p::MsgType type = p::GetType(d);
    if (dp::ControlPlane::IsControlType(type)) {
      if (type == p::MsgType::kLeave) leaves_.push_back(p::DecodeHeader(d));
      control_->HandleControl(packet, from, now, out);
      return;
    }
    if (type == p::MsgType::kData &&
        control_->CheckDataSource(p::GetJob(d), p::GetRank(d), p::GetSlot(d), from, now) ==
            dp::SourceCheck::kForeign) {
      ++foreign_dropped_;
      return;
    }
  }
  Results results(*control_, out);
  engine_->Process(packet, results);
  control_->HandleEngineFailures(out);  // as ina-switchd after each burst: error(rank_mismatch)
}

// Replies and results of the fabric, out of the UDP socket (results subject to loss/dup).
class TestFabric::Out final : public dp::ReplySink {
 public:
  explicit Out(TestFabric* f) : f_(f) {}
  void Send(const dp::Peer& to, std::span<const uint8_t> packet) override {
    const bool result =
        packet.size() >= p::kHeaderBytes && p::GetType(packet.data()) == p::MsgType::kResult;
    if (result && f_->Chance(f_->options_.drop)) {
      ++f_->dropped_;
      return;
    }
    Send1(to, packet);
    if (result && f_->Chance(f_->options_.dup)) {
      ++f_->duplicated_;
      Send1(to, packet);
    }
  }

 private:
  void Send1(const dp::Peer& to, std::span<const uint8_t> packet) {
    copy_.assign(packet.begin(), packet.end());
    f_->MaybeCorrupt(copy_);
    f_->SendTo(to, copy_);
  }

  TestFabric* f_;
  std::vector<uint8_t> copy_;
};

Result<std::unique_ptr<TestFabric>> TestFabric::Start(const FabricOptions& options) {
  FabricConfig fc;
  fc.pool_slots = options.pool_slots;
  fc.max_k = options.max_k;
  INA_ASSIGN_OR_RETURN(std::unique_ptr<Fabric> fabric, Fabric::Create(fc));
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("fabric: socket", errno);
  int buf = 8 << 20;
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf));
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
  std::unique_ptr<TestFabric> f(new TestFabric(fd, ntohs(sa.sin_port), options, std::move(fabric)));
  f->thread_ = std::thread([t = f.get()] { t->Run(); });
  return f;
}

TestFabric::TestFabric(int fd, uint16_t port, const FabricOptions& options,
                       std::unique_ptr<Fabric> f)
    : fd_(fd), port_(port), options_(options), rng_(options.seed), fabric_(std::move(f)) {}

TestFabric::~TestFabric() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  close(fd_);
}

dp::CounterSnapshot TestFabric::counters() {
  std::lock_guard<std::mutex> lk(mu_);
  return fabric_->counters();
}

dp::ControlCounters TestFabric::control_counters() {
  std::lock_guard<std::mutex> lk(mu_);
  return fabric_->control().counters();
}

std::vector<proto::Header> TestFabric::leaves() {
  std::lock_guard<std::mutex> lk(mu_);
  return fabric_->leaves();
}

bool TestFabric::WaitUntil(const std::function<bool(const Fabric&)>& done,
                           std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  return changed_.wait_for(lk, timeout, [&] { return done(*fabric_); });
}

bool TestFabric::Chance(double prob) {
  if (prob <= 0) return false;
  return std::uniform_real_distribution<double>(0, 1)(rng_) < prob;
}

void TestFabric::MaybeCorrupt(std::span<uint8_t> packet) {
  if (packet.empty() || !Chance(options_.corrupt)) return;
  const uint64_t r = rng_();
  packet[r % packet.size()] ^= static_cast<uint8_t>(1 + (r >> 32) % 255);
  ++corrupted_;
}

void TestFabric::SendTo(const dp::Peer& to, std::span<const uint8_t> packet) {
  // Blocking socket: loopback sends only fail when the receiver is gone; that is a loss.
  (void)sendto(fd_, packet.data(), packet.size(), 0, reinterpret_cast<const sockaddr*>(&to.addr),
               to.len);
}

void TestFabric::Run() {
  std::vector<uint8_t> buf(p::kMaxPacketBytes + 64);  // the largest message, and one longer
  Out out(this);
  auto last_tick = std::chrono::steady_clock::now();
  while (!stop_) {
    pollfd pfd{fd_, POLLIN, 0};
    const int ready = poll(&pfd, 1, 10);
    const auto now = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (now - last_tick >= std::chrono::milliseconds(100)) {
        fabric_->Tick(now, out);
        last_tick = now;
      }
      if (ready > 0) Drain(buf, out, now);
    }
    changed_.notify_all();
  }
}

void TestFabric::Drain(std::vector<uint8_t>& buf, dp::ReplySink& out,
                       std::chrono::steady_clock::time_point now) {
  for (int i = 0; i < 64; ++i) {
    sockaddr_storage from{};
    socklen_t fl = sizeof(from);
    const ssize_t n = recvfrom(fd_, buf.data(), buf.size(), MSG_DONTWAIT,
                               reinterpret_cast<sockaddr*>(&from), &fl);
    if (n < 0) break;
    MaybeCorrupt(std::span(buf.data(), static_cast<size_t>(n)));
    const std::span<const uint8_t> pkt(buf.data(), static_cast<size_t>(n));
    const bool control =
        pkt.size() >= p::kHeaderBytes && dp::ControlPlane::IsControlType(p::GetType(pkt.data()));
    if (!control && Chance(options_.drop)) {
      ++dropped_;
      continue;
    }
    int times = 1;
    if (!control && Chance(options_.dup)) {
      ++duplicated_;
      times = 2;
    }
    const dp::Peer peer = dp::Peer::From(reinterpret_cast<const sockaddr*>(&from), fl);
    for (int t = 0; t < times; ++t) fabric_->Receive(pkt, peer, now, out);
  }
}

}  // namespace ina::testing
