#include "coordinator.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ina::bench {

using Clock = std::chrono::steady_clock;
using State = RankOutcome::State;

struct Coordinator::Conn {
  int fd = -1;
  int rank = -1;  // after its HELLO
  std::string peer;
  std::string in, out;
  bool reported = false;
};

namespace {

constexpr uint64_t kSmallBody = 1 << 16;  // every message but a REPORT

std::string Seconds(std::chrono::milliseconds d) {
  return std::to_string(d.count() / 1000) + "." + std::to_string(d.count() % 1000 / 100) + " s";
}

}  // namespace

Coordinator::Coordinator(CoordinatorSetup setup) : setup_(std::move(setup)) {
  outcomes_.resize(static_cast<size_t>(setup_.workers));
}

Result<std::unique_ptr<Coordinator>> Coordinator::Create(CoordinatorSetup setup,
                                                         const std::string& listen,
                                                         const std::vector<std::string>& netns) {
  std::unique_ptr<Coordinator> c(new Coordinator(std::move(setup)));
  if (pipe2(c->wake_, O_CLOEXEC | O_NONBLOCK) != 0) return ErrnoStatus("pipe2", errno);
  if (netns.empty()) {
    INA_ASSIGN_OR_RETURN(TcpAddress a, ParseTcpAddress(listen));
    INA_ASSIGN_OR_RETURN(int fd, ListenTcp(a));
    c->listeners_.push_back(fd);
    std::string bound = LocalAddress(fd);
    // Listening on every address: the port is what matters; keep the host as asked.
    if (a.host == "0.0.0.0") bound = "0.0.0.0" + bound.substr(bound.rfind(':'));
    c->addresses_.assign(static_cast<size_t>(c->setup_.workers), bound);
  } else {
    for (const std::string& ns : netns) {
      INA_ASSIGN_OR_RETURN(int fd, ListenTcpInNetns(ns));
      c->listeners_.push_back(fd);
      c->addresses_.push_back(LocalAddress(fd));
    }
  }
  return c;
}

Coordinator::~Coordinator() {
  Stop("coordinator stopped");
  for (int fd : listeners_) close(fd);
  for (int fd : wake_) {
    if (fd >= 0) close(fd);
  }
}

std::string Coordinator::address(int rank) const { return addresses_[static_cast<size_t>(rank)]; }

void Coordinator::Start(SharedView view, std::function<void()> on_change) {
  view_ = view;
  on_change_ = std::move(on_change);
  join_deadline_ = Clock::now() + setup_.join_timeout;
  thread_ = std::thread([this] { Loop(); });
}

std::optional<Clock::time_point> Coordinator::first_failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_at_;
}

void Coordinator::Stop(const std::string& why) {
  if (stopped_) return;
  stopped_ = true;
  if (thread_.joinable()) {
    const char b = 1;
    (void)!write(wake_[1], &b, 1);
    thread_.join();
  }
  for (int r = 0; r < setup_.workers; ++r) {
    RankOutcome& o = outcomes_[static_cast<size_t>(r)];
    if (o.state == State::kNotJoined || o.state == State::kJoined) {
      o.state = State::kLost;
      o.why = why;
    }
  }
  for (auto& c : conns_) close(c->fd);
  conns_.clear();
  done_ = true;
}

std::string Coordinator::Describe(int rank) const {
  const RankOutcome& o = outcomes_[static_cast<size_t>(rank)];
  return "rank " + std::to_string(rank) + (o.peer.empty() ? "" : " (" + o.peer + ")");
}

bool Coordinator::AllResolved() const {
  return std::all_of(outcomes_.begin(), outcomes_.end(), [](const RankOutcome& o) {
    return o.state == State::kReported || o.state == State::kLost;
  });
}

void Coordinator::Fail(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_at_) return;
  failed_at_ = Clock::now();
  failure_ = why;
}

void Coordinator::Lose(int rank, const std::string& why) {
  RankOutcome& o = outcomes_[static_cast<size_t>(rank)];
  if (o.state == State::kReported || o.state == State::kLost) return;
  o.state = State::kLost;
  o.why = why;
  Fail(Describe(rank) + ": " + why);
}

void Coordinator::Send(Conn& c, const std::string& frame) {
  if (c.out.empty()) {
    const ssize_t n = send(c.fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(frame.size())) return;
    c.out = frame.substr(n > 0 ? static_cast<size_t>(n) : 0);
    return;
  }
  c.out += frame;
}

void Coordinator::Refuse(Conn& c, const std::string& why) {
  setup_.warn("coordinator: refused the worker at " + c.peer + ": " + why);
  Send(c, Writer(Msg::kRefuse).Str(why).Frame());
}

bool Coordinator::HandleHello(Conn& c, std::string_view body) {
  Reader r(body);
  uint32_t version = 0, rank = 0, marker = 0;
  uint64_t pid = 0;
  std::string host;
  Args given;
  if (!r.U32(&version) || version != kCoordVersion) {
    Refuse(c, "it speaks coordination protocol " + std::to_string(version) + ", this one " +
                  std::to_string(kCoordVersion) + " (run the same ina-bench build everywhere)");
    return false;
  }
  if (!r.U32(&rank) || !r.U32(&marker) || !r.Str(&host) || !r.U64(&pid) || !r.ArgList(&given) ||
      !r.done()) {
    Refuse(c, "malformed HELLO");
    return false;
  }
  if (rank >= static_cast<uint32_t>(setup_.workers)) {
    Refuse(c, "rank " + std::to_string(rank) + " is out of range: this run has " +
                  std::to_string(setup_.workers) + " workers");
    return false;
  }
  const int rk = static_cast<int>(rank);
  RankOutcome& o = outcomes_[rank];
  if (o.state != State::kNotJoined) {
    Refuse(c, "rank " + std::to_string(rank) + " has already " +
                  (o.state == State::kLost ? "been given up (" + o.why + ")"
                                           : "connected from " + o.peer));
    return false;
  }
  o.peer = c.peer + " (host " + host + ", pid " + std::to_string(pid) + ")";
  if (marker != kByteOrderMarker) {
    const std::string why = "its byte order differs from the coordinator's";
    Refuse(c, why);
    Lose(rk, why);
    return false;
  }
  // Every run option the worker's own command line gives must agree with ours.
  for (const auto& [flag, value] : given) {
    std::string ours;
    for (const auto& [f, v] : setup_.run_args) {
      if (f == flag) ours = v;
    }
    if (ours != value) {
      const std::string why = flag + " is " + (value.empty() ? "unset" : "'" + value + "'") +
                              " on its command line but " +
                              (ours.empty() ? "unset" : "'" + ours + "'") + " at the coordinator";
      Refuse(c, why);
      Lose(rk, why);
      return false;
    }
  }
  o.state = State::kJoined;
  c.rank = rk;
  setup_.say("  coordinator: rank " + std::to_string(rank) + " joined from " + o.peer);
  Send(c, Writer(Msg::kWelcome).ArgList(setup_.run_args).Str(setup_.switch_addr).Frame());
  return true;
}

bool Coordinator::Handle(Conn& c, Msg type, std::string_view body) {
  if (c.rank < 0) {
    if (type != Msg::kHello) {
      Refuse(c, "the first message must be HELLO");
      return false;
    }
    return HandleHello(c, body);
  }
  Reader r(body);
  switch (type) {
    case Msg::kBarrier: {
      uint64_t seq;
      if (!r.U64(&seq) || !r.done()) break;
      auto it = std::find_if(barriers_.begin(), barriers_.end(),
                             [seq](const auto& b) { return b.first == seq; });
      if (it == barriers_.end()) it = barriers_.insert(barriers_.end(), {seq, {}});
      it->second.push_back(c.rank);
      return true;
    }
    case Msg::kSet: {
      uint64_t id;
      std::string key;
      std::string_view value;
      if (!r.U64(&id) || !r.Str(&key) || !r.Bytes(&value) || !r.done()) break;
      auto it = std::find_if(store_.begin(), store_.end(),
                             [&](const auto& kv) { return kv.first == key; });
      if (it == store_.end()) {
        store_.emplace_back(key, std::string(value));
      } else {
        it->second = std::string(value);
      }
      Send(c, Writer(Msg::kDone).U64(id).Frame());
      return true;
    }
    case Msg::kGet:
    case Msg::kWait: {
      Pending p{c.rank, 0, type == Msg::kGet, {}};
      bool ok = r.U64(&p.id);
      if (p.get) {
        p.keys.emplace_back();
        ok = ok && r.Str(&p.keys[0]);
      } else {
        uint32_t n = 0;
        ok = ok && r.U32(&n) && n <= 4096;
        for (uint32_t i = 0; ok && i < n; ++i) {
          p.keys.emplace_back();
          ok = r.Str(&p.keys.back());
        }
      }
      if (!ok || !r.done()) break;
      pending_.push_back(std::move(p));
      return true;
    }
    case Msg::kReport: {
      RankOutcome& o = outcomes_[static_cast<size_t>(c.rank)];
      int32_t code;
      std::string_view result, gloo;
      const uint64_t bytes = setup_.elements * 4;
      RankSlot& slot = view_.shared->ranks[c.rank];
      if (!r.I32(&code) || !DecodeSlot(r, &slot, setup_.iters) || !r.Bytes(&result, bytes) ||
          !r.Bytes(&gloo, bytes) || !r.done() || (!result.empty() && result.size() != bytes) ||
          (!gloo.empty() && gloo.size() != bytes)) {
        break;
      }
      if (c.rank == 0) {
        // (empty vectors' data() may be null, which memcpy must not get)
        if (!result.empty()) std::memcpy(view_.result0, result.data(), result.size());
        if (!gloo.empty()) std::memcpy(view_.gloo0, gloo.data(), gloo.size());
      }
      o.state = State::kReported;
      o.exit_code = code;
      c.reported = true;
      if (code != 0) {
        std::string why = "exited with " + std::to_string(code);
        if (slot.ina_code != 0) why += ": ina: " + std::string(slot.ina_error);
        if (slot.gloo_code != 0) why += ": gloo: " + std::string(slot.gloo_error);
        Fail(Describe(c.rank) + " " + why);
      }
      Send(c, Writer(Msg::kReportAck).Frame());
      return true;
    }
    default:
      break;
  }
  const std::string why = "sent a malformed or unexpected message (type " +
                          std::to_string(static_cast<int>(type)) + ")";
  Refuse(c, why);
  Lose(c.rank, why);
  return false;
}

bool Coordinator::ReadFrom(Conn& c) {
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      c.in.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    // Closed (n == 0) or failed: resolve the rank, after handling what was complete.
    // A process that dies with data unread in its socket (a barrier release on its way) resets
    // the connection instead of closing it: the same event for the run, named the same way.
    const std::string why =
        n == 0 ? "closed its connection to the coordinator without reporting"
        : errno == ECONNRESET
            ? "closed its connection to the coordinator without reporting (reset: the process "
              "ended with data unread)"
            : std::string("lost its connection to the coordinator: ") + std::strerror(errno);
    while (c.in.size() >= kFrameHead) {
      auto h = ParseHead(c.in.data(), UINT64_MAX);
      if (c.in.size() < kFrameHead + h->body) break;
      const bool more = Handle(c, h->type, std::string_view(c.in).substr(kFrameHead, h->body));
      c.in.erase(0, kFrameHead + h->body);
      if (!more) return false;
    }
    if (c.rank >= 0 && !c.reported) Lose(c.rank, why);
    return false;
  }
  while (c.in.size() >= kFrameHead) {
    const uint64_t max =
        c.rank == 0 ? 2 * setup_.elements * 4 + kSmallBody : kSmallBody + 2 * 8 * kMaxIters;
    auto h = ParseHead(c.in.data(), max);
    if (!h.ok()) {
      Refuse(c, h.status().message());
      if (c.rank >= 0) Lose(c.rank, "sent " + h.status().message());
      return false;
    }
    if (c.in.size() < kFrameHead + h->body) break;
    const bool more = Handle(c, h->type, std::string_view(c.in).substr(kFrameHead, h->body));
    c.in.erase(0, kFrameHead + h->body);
    if (!more) return false;
  }
  return true;
}

void Coordinator::Accept(int listener) {
  for (;;) {
    const int fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or a connection that died before we took it
    TuneTcp(fd);
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->peer = PeerAddress(fd);
    conns_.push_back(std::move(c));
  }
}

void Coordinator::CheckJoinDeadline() {
  if (Clock::now() < join_deadline_) return;
  for (int r = 0; r < setup_.workers; ++r) {
    if (outcomes_[static_cast<size_t>(r)].state == State::kNotJoined) {
      Lose(r, "did not connect to the coordinator at " + address(r) + " within " +
                  Seconds(setup_.join_timeout));
    }
  }
}

void Coordinator::Settle() {
  std::string failure;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_at_) failure = failure_;
  }
  auto conn_of = [&](int rank) -> Conn* {
    for (auto& c : conns_) {
      if (c->rank == rank) return c.get();
    }
    return nullptr;
  };
  for (auto it = barriers_.begin(); it != barriers_.end();) {
    std::string why = failure;
    for (int r = 0; r < setup_.workers && why.empty(); ++r) {
      const State s = outcomes_[static_cast<size_t>(r)].state;
      const bool here = std::count(it->second.begin(), it->second.end(), r) > 0;
      if (!here && (s == State::kReported || s == State::kLost)) {
        why = Describe(r) + " finished without reaching barrier " + std::to_string(it->first);
      }
    }
    const bool all = static_cast<int>(it->second.size()) == setup_.workers;
    if (!all && why.empty()) {
      ++it;
      continue;
    }
    for (int r : it->second) {
      if (Conn* c = conn_of(r)) {
        Send(*c, why.empty() ? Writer(Msg::kRelease).U64(it->first).Frame()
                             : Writer(Msg::kBarrierFailed).U64(it->first).Str(why).Frame());
      }
    }
    it = barriers_.erase(it);
  }
  for (auto it = pending_.begin(); it != pending_.end();) {
    Conn* c = conn_of(it->rank);
    bool have = true;
    const std::string* value = nullptr;
    for (const std::string& k : it->keys) {
      auto kv =
          std::find_if(store_.begin(), store_.end(), [&](const auto& e) { return e.first == k; });
      have = have && kv != store_.end();
      if (kv != store_.end()) value = &kv->second;
    }
    if (c == nullptr) {
      it = pending_.erase(it);
    } else if (have) {
      Send(*c, it->get ? Writer(Msg::kValue).U64(it->id).Bytes(value->data(), value->size()).Frame()
                       : Writer(Msg::kDone).U64(it->id).Frame());
      it = pending_.erase(it);
    } else if (!failure.empty()) {
      Send(*c, Writer(Msg::kOpFailed).U64(it->id).Str(failure).Frame());
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
}

void Coordinator::Loop() {
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({wake_[0], POLLIN, 0});
    for (int l : listeners_) fds.push_back({l, POLLIN, 0});
    for (auto& c : conns_) {
      fds.push_back({c->fd, static_cast<short>(POLLIN | (c->out.empty() ? 0 : POLLOUT)), 0});
    }
    int timeout_ms = -1;
    const bool joining = std::any_of(outcomes_.begin(), outcomes_.end(),
                                     [](const auto& o) { return o.state == State::kNotJoined; });
    if (joining) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(join_deadline_ - Clock::now());
      timeout_ms = static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, 1 << 30));
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) return;  // Stop
    const size_t nl = listeners_.size();
    for (size_t i = 0; i < nl; ++i) {
      if (fds[1 + i].revents != 0) Accept(listeners_[i]);
    }
    // conns_ may have grown in Accept: walk only the ones polled.
    std::vector<bool> finished(conns_.size(), false);
    for (size_t i = 0; i + 1 + nl < fds.size(); ++i) {
      Conn& c = *conns_[i];
      const short ev = fds[1 + nl + i].revents;
      if ((ev & POLLOUT) != 0 && !c.out.empty()) {
        const ssize_t n = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) c.out.erase(0, static_cast<size_t>(n));
      }
      if ((ev & (POLLIN | POLLHUP | POLLERR)) != 0) finished[i] = !ReadFrom(c);
    }
    CheckJoinDeadline();
    Settle();
    bool changed = false;
    for (size_t i = finished.size(); i-- > 0;) {
      if (!finished[i]) continue;
      Conn& c = *conns_[i];
      // What was queued for it (a refusal) goes out before the close, best effort.
      if (!c.out.empty()) (void)!send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      close(c.fd);
      conns_.erase(conns_.begin() + static_cast<std::ptrdiff_t>(i));
      changed = true;
    }
    // A finished rank may free or fail barriers the others wait in.
    if (changed) Settle();
    if (AllResolved()) {
      // Flush the last acknowledgements before saying we are done.
      for (auto& c : conns_) {
        if (!c->out.empty()) (void)!send(c->fd, c->out.data(), c->out.size(), MSG_NOSIGNAL);
      }
      done_ = true;
    }
    if (on_change_) on_change_();
    if (done_) return;
  }
}

}  // namespace ina::bench
