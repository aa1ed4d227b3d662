// The switch loop (see ina/dp/switchd/switch.h).
#include "ina/dp/switchd/switch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>

namespace ina::dp::switchd {

namespace p = ::ina::proto;

namespace {
// INA_UDP_GSO=0 turns GSO and GRO off; anything else (or unset) leaves them on when the kernel
// has them.
bool GsoWanted() {
  const char* v = std::getenv("INA_UDP_GSO");
  return v == nullptr || std::string_view(v) != "0";
}
}  // namespace

Switch::Switch(const Config& config, std::unique_ptr<Engine> engine)
    : config_(config),
      engine_(std::move(engine)),
      rx_faults_(config.drop_rate, config.dup_rate, config.reorder_rate, config.seed),
      tx_faults_(config.drop_rate, config.dup_rate, config.reorder_rate,
                 config.seed ^ 0x5DEECE66Dull) {}

Switch::~Switch() {
  if (fd_ >= 0) close(fd_);
}

Result<std::unique_ptr<Switch>> Switch::Create(const Config& config,
                                               std::unique_ptr<Engine> engine) {
  if (engine == nullptr) return InvalidArgument("Switch::Create: no engine");
  std::unique_ptr<Switch> s(new Switch(config, std::move(engine)));
  INA_RETURN_IF_ERROR(s->Init());
  return s;
}

Status Switch::Init() {
  ControlConfig cc;
  cc.max_jobs = config_.max_jobs;
  cc.job_timeout = std::chrono::milliseconds(config_.job_timeout_ms);
  INA_ASSIGN_OR_RETURN(control_, ControlPlane::Create(*engine_, cc));

  // Buffers, all of them now: the loop never allocates.
  rx_bufs_.resize(kBurst);
  rx_peers_.resize(kBurst);
  rx_msgs_.resize(kBurst);
  rx_iov_.resize(kBurst);
  for (auto& bank : held_rx_) bank.resize(kBurst);
  items_.resize(kItemCap);
  data_burst_.resize(kItemCap);
  tx_q_.resize(kTxCap);
  tx_held_.resize(kBurst);
  tx_held_next_.resize(kBurst);
  tx_msgs_.resize(kBurst);
  tx_iov_.resize(kBurst);
  tx_out_.resize(kBurst);
  rx_lens_.resize(kBurst);
  rx_trunc_.resize(kBurst);
  rx_ptrs_.resize(kBurst);
  for (size_t i = 0; i < kBurst; ++i) rx_ptrs_[i] = rx_bufs_[i].data();

  if (config_.io == "dpdk") {
    DpdkPortsConfig dc;
    dc.eal_args = config_.dpdk_eal;
    dc.ip = config_.bind;
    dc.udp_port = config_.port;
    dc.backoff_max_us = config_.dpdk_backoff_us;
    INA_ASSIGN_OR_RETURN(dpdk_, DpdkPorts::Open(dc));
    start_ = last_tick_ = now_ = Clock::now();
    return Status::Ok();
  }

  sockaddr_storage ss{};
  socklen_t sl = 0;
  auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, config_.bind.c_str(), &s4->sin_addr) == 1) {
    s4->sin_family = AF_INET;
    s4->sin_port = htons(config_.port);
    sl = sizeof(*s4);
  } else if (inet_pton(AF_INET6, config_.bind.c_str(), &s6->sin6_addr) == 1) {
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(config_.port);
    sl = sizeof(*s6);
  } else {
    return InvalidArgument("--bind: not an address: " + config_.bind);
  }
  fd_ = socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return ErrnoStatus("socket", errno);
  // Large socket buffers absorb bursts from many workers. The *FORCE variants (root only) pass
  // net.core.{r,w}mem_max; otherwise the kernel caps the plain request there.
  const int buf_bytes = 8 << 20;
  if (setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &buf_bytes, sizeof(buf_bytes)) != 0) {
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &buf_bytes, sizeof(buf_bytes));
  }
  if (setsockopt(fd_, SOL_SOCKET, SO_SNDBUFFORCE, &buf_bytes, sizeof(buf_bytes)) != 0) {
    setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &buf_bytes, sizeof(buf_bytes));
  }
  if (bind(fd_, reinterpret_cast<sockaddr*>(&ss), sl) != 0) {
    return ErrnoStatus("bind " + config_.bind + ":" + std::to_string(config_.port), errno);
  }
  if (GsoWanted()) {
    int v = 0;
    socklen_t vl = sizeof(v);
    gso_ = getsockopt(fd_, SOL_UDP, UDP_SEGMENT, &v, &vl) == 0;
    const int one = 1;
    gro_ = setsockopt(fd_, SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0;
  }
  if (gro_) {
    gro_buf_.resize(kBurst * kGroBufBytes);
    gro_peers_.resize(kBurst);
    rx_cmsg_.resize(kBurst);
    gro_pend_.resize(kBurst);
  }
  if (gso_) {
    tx_order_.resize(kTxCap);
    tx_link_.resize(kTxCap);
    tx_group_.resize(kTxCap);
    gso_iov_.resize(kBurst * kMaxSegs);
    tx_cmsg_.resize(kBurst);
    tx_counts_.resize(kBurst);
  }
  start_ = last_tick_ = now_ = Clock::now();
  return Status::Ok();
}

std::string Switch::local_address() const {
  if (dpdk_)
    return config_.bind + ":" + std::to_string(config_.port) + " (dpdk: " + dpdk_->Describe() + ")";
  sockaddr_storage ss{};
  socklen_t sl = sizeof(ss);
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &sl) != 0) return "?";
  return PeerToString(Peer::From(reinterpret_cast<sockaddr*>(&ss), sl));
}

Status Switch::Run(const volatile std::sig_atomic_t* stop) {
  auto next_stats = start_ + std::chrono::milliseconds(config_.stats_interval_ms);
  while (!*stop) {
    now_ = Clock::now();
    const bool held = held_rx_n_[0] + held_rx_n_[1] + tx_held_n_ + tx_held_next_n_ > 0;
    int timeout_ms = kMaxPollMs;
    if (held) timeout_ms = 1;  // held packets wait for one more burst, not for ever
    const int pr = WaitRx(timeout_ms);
    if (pr < 0 && errno != EINTR) return ErrnoStatus("poll", errno);
    now_ = Clock::now();
    if (pr > 0) {
      // Drain what is queued, a bounded number of bursts before ticking again.
      for (int i = 0; i < 64; ++i) {
        INA_ASSIGN_OR_RETURN(size_t n, RxBurst(now_));
        if (n < kBurst) break;
      }
    } else if (held) {
      ReleaseHeldRx(now_);
      FlushTx();
      // Send what was held for reordering: nothing newer is coming to pass it.
      SendRange(tx_held_, tx_held_n_);
      tx_held_n_ = 0;
      SendRange(tx_held_next_, tx_held_next_n_);
      tx_held_next_n_ = 0;
    }
    if (now_ - last_tick_ >= kTickInterval) Tick(now_);
    if (config_.stats_interval_ms > 0 && now_ >= next_stats) {
      PrintStatsLine(stdout);
      std::fflush(stdout);
      next_stats = now_ + std::chrono::milliseconds(config_.stats_interval_ms);
    }
  }
  // Whatever is still queued or held goes out before the summary.
  ReleaseHeldRx(Clock::now());
  FlushTx();
  SendRange(tx_held_, tx_held_n_);
  tx_held_n_ = 0;
  SendRange(tx_held_next_, tx_held_next_n_);
  tx_held_next_n_ = 0;
  return Status::Ok();
}

void Switch::Tick(Clock::time_point now) {
  last_tick_ = now;
  Bump(SwitchCounter::kJobsFreed, control_->Tick(now, *this));
  FlushTx();
}

int Switch::WaitRx(int timeout_ms) {
  if (dpdk_) return dpdk_->Wait(timeout_ms) ? 1 : 0;
  if (gro_next_ < gro_n_) return 1;  // segments of a GRO train still to hand out
  pollfd pfd{fd_, POLLIN, 0};
  return poll(&pfd, 1, timeout_ms);
}

Result<size_t> Switch::ReceiveRaw() {
  if (dpdk_) {
    const size_t n =
        dpdk_->Recv(rx_ptrs_.data(), kRxBufBytes, rx_lens_.data(), rx_peers_.data(), kBurst);
    for (size_t i = 0; i < n; ++i) rx_trunc_[i] = rx_lens_[i] > kRxBufBytes;
    return n;
  }
  if (gro_) {
    if (gro_next_ < gro_n_) return DrainGro();
    for (size_t i = 0; i < kBurst; ++i) {
      rx_iov_[i] = {gro_buf_.data() + i * kGroBufBytes, kGroBufBytes};
      rx_msgs_[i] = {};
      rx_msgs_[i].msg_hdr.msg_iov = &rx_iov_[i];
      rx_msgs_[i].msg_hdr.msg_iovlen = 1;
      rx_msgs_[i].msg_hdr.msg_name = &gro_peers_[i].addr;
      rx_msgs_[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
      rx_msgs_[i].msg_hdr.msg_control = rx_cmsg_[i].b;
      rx_msgs_[i].msg_hdr.msg_controllen = sizeof(rx_cmsg_[i].b);
    }
    const int n = recvmmsg(fd_, rx_msgs_.data(), kBurst, MSG_DONTWAIT, nullptr);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return size_t{0};
      if (errno == ECONNREFUSED || errno == EHOSTUNREACH || errno == ENETUNREACH) return size_t{0};
      return ErrnoStatus("recvmmsg", errno);
    }
    for (int i = 0; i < n; ++i) {
      msghdr& h = rx_msgs_[i].msg_hdr;
      gro_peers_[i].len = h.msg_namelen;
      GroPending& g = gro_pend_[i];
      g.off = static_cast<size_t>(i) * kGroBufBytes;
      g.len = rx_msgs_[i].msg_len;
      g.seg = g.len;
      g.trunc = (h.msg_flags & MSG_TRUNC) != 0;
      for (cmsghdr* cm = CMSG_FIRSTHDR(&h); cm != nullptr; cm = CMSG_NXTHDR(&h, cm)) {
        if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
          int seg = 0;
          std::memcpy(&seg, CMSG_DATA(cm), sizeof(seg));
          if (seg > 0 && !g.trunc) g.seg = static_cast<size_t>(seg);
        }
      }
      if (g.len == 0) g.seg = 0;
    }
    gro_n_ = static_cast<size_t>(n);
    gro_next_ = 0;
    return DrainGro();
  }
  for (size_t i = 0; i < kBurst; ++i) {
    rx_iov_[i] = {rx_bufs_[i].data(), kRxBufBytes};
    rx_msgs_[i] = {};
    rx_msgs_[i].msg_hdr.msg_iov = &rx_iov_[i];
    rx_msgs_[i].msg_hdr.msg_iovlen = 1;
    rx_msgs_[i].msg_hdr.msg_name = &rx_peers_[i].addr;
    rx_msgs_[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
  }
  const int n = recvmmsg(fd_, rx_msgs_.data(), kBurst, MSG_DONTWAIT, nullptr);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return size_t{0};
    // ICMP errors surfacing on the socket are not fatal for a switch.
    if (errno == ECONNREFUSED || errno == EHOSTUNREACH || errno == ENETUNREACH) return size_t{0};
    return ErrnoStatus("recvmmsg", errno);
  }
  for (int i = 0; i < n; ++i) {
    rx_peers_[i].len = rx_msgs_[i].msg_hdr.msg_namelen;
    rx_lens_[i] = rx_msgs_[i].msg_len;
    rx_trunc_[i] = (rx_msgs_[i].msg_hdr.msg_flags & MSG_TRUNC) != 0;
  }
  return static_cast<size_t>(n);
}

size_t Switch::DrainGro() {
  size_t k = 0;
  while (k < kBurst && gro_next_ < gro_n_) {
    GroPending& g = gro_pend_[gro_next_];
    const size_t len = std::min(g.seg, g.len);
    rx_ptrs_[k] = gro_buf_.data() + g.off;
    rx_lens_[k] = static_cast<uint32_t>(len);
    rx_trunc_[k] = g.trunc;
    rx_peers_[k] = gro_peers_[gro_next_];
    ++k;
    g.off += len;
    g.len -= len;
    if (g.len == 0) ++gro_next_;  // an empty datagram is one (empty) packet too
  }
  return k;
}

Result<size_t> Switch::RxBurst(Clock::time_point now) {
  INA_ASSIGN_OR_RETURN(const size_t n, ReceiveRaw());
  Bump(SwitchCounter::kRxDatagrams, static_cast<uint64_t>(n));
  const int fill = held_fill_;
  const int release = 1 - fill;
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    Peer& from = rx_peers_[i];
    uint32_t len = rx_lens_[i];
    if (rx_trunc_[i] || len > kRxBufBytes) {
      Bump(SwitchCounter::kRxTruncated);
      len = std::min<uint32_t>(len, kRxBufBytes);
    }
    const FaultInjector::Decision d = rx_faults_.Next();
    if (d.drop) {
      Bump(SwitchCounter::kInjRxDrops);
      continue;
    }
    if (d.reorder && held_rx_n_[fill] < kBurst) {
      Bump(SwitchCounter::kInjRxReorders);
      HeldRx& h = held_rx_[fill][held_rx_n_[fill]++];
      std::memcpy(h.buf.data(), rx_ptrs_[i], len);
      h.len = len;
      h.from = from;
      if (d.dup) {  // the copy goes now, the original later
        Bump(SwitchCounter::kInjRxDups);
        items_[k++] = {rx_ptrs_[i], len, &from};
      }
      continue;
    }
    items_[k++] = {rx_ptrs_[i], len, &from};
    if (d.dup) {
      Bump(SwitchCounter::kInjRxDups);
      items_[k++] = {rx_ptrs_[i], len, &from};
    }
  }
  // Packets held back in the previous burst follow this burst's.
  for (size_t i = 0; i < held_rx_n_[release]; ++i) {
    const HeldRx& h = held_rx_[release][i];
    items_[k++] = {h.buf.data(), h.len, &h.from};
  }
  HandleItems(k, now);
  held_rx_n_[release] = 0;
  held_fill_ = release;
  return n;
}

void Switch::ReleaseHeldRx(Clock::time_point now) {
  const int fill = held_fill_;
  const int release = 1 - fill;
  size_t k = 0;
  for (int bank : {release, fill}) {
    for (size_t i = 0; i < held_rx_n_[bank]; ++i) {
      const HeldRx& h = held_rx_[bank][i];
      items_[k++] = {h.buf.data(), h.len, &h.from};
    }
  }
  if (k > 0) HandleItems(k, now);
  held_rx_n_[0] = held_rx_n_[1] = 0;
}

void Switch::HandleItems(size_t n, Clock::time_point now) {
  data_n_ = 0;
  for (size_t i = 0; i < n; ++i) {
    const Item& it = items_[i];
    const std::span<const uint8_t> pkt(it.data, it.len);
    if (it.len >= p::kHeaderBytes && p::GetVersion(it.data) == p::kVersion) {
      const uint8_t type = p::GetType(it.data);
      if (ControlPlane::IsControlType(type)) {
        FlushData();  // keep arrival order between data and control
        const uint64_t freed_before = Get(control_->counters(), ControlCounter::kJobsLeft);
        control_->HandleControl(pkt, *it.from, now, *this);
        Bump(SwitchCounter::kJobsFreed,
             Get(control_->counters(), ControlCounter::kJobsLeft) - freed_before);
        continue;
      }
      if (type == static_cast<uint8_t>(p::MsgType::kData)) {
        const SourceCheck sc = control_->CheckDataSource(p::GetJob(it.data), p::GetRank(it.data),
                                                         p::GetSlot(it.data), *it.from, now);
        if (sc == SourceCheck::kForeign) {
          Bump(SwitchCounter::kDropForeignSrc);
          continue;
        }
      }
    }
    // Data, and everything the engine must count as malformed / bad version.
    data_burst_[data_n_++] = pkt;
  }
  FlushData();
  FlushTx();
}

void Switch::FlushData() {
  if (data_n_ == 0) return;
  engine_->ProcessBurst({data_burst_.data(), data_n_}, *this);
  data_n_ = 0;
}

void Switch::OnResult(uint16_t job_id, uint16_t dest_rank, std::span<const uint8_t> packet) {
  for (const Peer& peer : control_->Destinations(job_id, dest_rank, p::GetSlot(packet.data()))) {
    EnqueueTx(peer, packet);
  }
}

void Switch::Send(const Peer& to, std::span<const uint8_t> packet) { EnqueueTx(to, packet); }

void Switch::EnqueueTx(const Peer& to, std::span<const uint8_t> packet) {
  const FaultInjector::Decision d = tx_faults_.Next();
  if (d.drop) {
    Bump(SwitchCounter::kInjTxDrops);
    return;
  }
  if (d.reorder && tx_held_next_n_ < tx_held_next_.size()) {
    Bump(SwitchCounter::kInjTxReorders);
    TxSlot& s = tx_held_next_[tx_held_next_n_++];
    std::memcpy(s.buf.data(), packet.data(), packet.size());
    s.len = static_cast<uint32_t>(packet.size());
    s.to = to;
  } else {
    PushTx(to, packet);
  }
  if (d.dup) {
    Bump(SwitchCounter::kInjTxDups);
    PushTx(to, packet);
  }
}

void Switch::PushTx(const Peer& to, std::span<const uint8_t> packet) {
  if (tx_n_ == tx_q_.size()) FlushTx();
  TxSlot& s = tx_q_[tx_n_++];
  const size_t len = std::min(packet.size(), s.buf.size());
  std::memcpy(s.buf.data(), packet.data(), len);
  s.len = static_cast<uint32_t>(len);
  s.to = to;
}

void Switch::FlushTx() {
  if (tx_n_ == 0) return;
  SendRange(tx_q_, tx_n_);
  tx_n_ = 0;
  // Packets held back at the previous flush go after this flush's: reordered.
  SendRange(tx_held_, tx_held_n_);
  tx_held_n_ = 0;
  std::swap(tx_held_, tx_held_next_);
  std::swap(tx_held_n_, tx_held_next_n_);
}

void Switch::SendRange(std::vector<TxSlot>& q, size_t n) {
  if (dpdk_) {
    for (size_t done = 0; done < n;) {
      const size_t m = std::min(kBurst, n - done);
      for (size_t i = 0; i < m; ++i)
        tx_out_[i] = {q[done + i].buf.data(), q[done + i].len, &q[done + i].to};
      const size_t ok = dpdk_->Send(tx_out_.data(), m);
      Bump(SwitchCounter::kTxPackets, ok);
      Bump(SwitchCounter::kTxErrors, m - ok);
      done += m;
    }
    return;
  }
  if (gso_) {
    SendRangeGso(q, n);
    return;
  }
  size_t done = 0;
  int waits = 0;
  while (done < n) {
    const size_t m = std::min(kBurst, n - done);
    for (size_t i = 0; i < m; ++i) {
      TxSlot& s = q[done + i];
      tx_iov_[i] = {s.buf.data(), s.len};
      tx_msgs_[i] = {};
      tx_msgs_[i].msg_hdr.msg_iov = &tx_iov_[i];
      tx_msgs_[i].msg_hdr.msg_iovlen = 1;
      tx_msgs_[i].msg_hdr.msg_name = &s.to.addr;
      tx_msgs_[i].msg_hdr.msg_namelen = s.to.len;
    }
    const int r = sendmmsg(fd_, tx_msgs_.data(), static_cast<unsigned>(m), MSG_DONTWAIT);
    if (r > 0) {
      Bump(SwitchCounter::kTxPackets, static_cast<uint64_t>(r));
      done += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS || errno == EINTR)) {
      if (waits++ < kTxMaxWaits) {
        Bump(SwitchCounter::kTxWaits);
        pollfd pfd{fd_, POLLOUT, 0};
        poll(&pfd, 1, kTxWaitMs);
        continue;
      }
      Bump(SwitchCounter::kTxErrors, n - done);  // give up on the rest of this batch
      return;
    }
    // Any other error belongs to the first packet of the chunk (bad address, ICMP feedback):
    // count it and go on with the next.
    Bump(SwitchCounter::kTxErrors);
    ++done;
  }
}

void Switch::SendRangeGso(std::vector<TxSlot>& q, size_t n) {
  // Stable grouping by destination: one list per peer (the last group takes every peer past
  // kTxGroups - 1; runs there also check the peer), in queue order within a group.
  size_t ng = 0;
  for (size_t i = 0; i < n; ++i) {
    size_t g = 0;
    while (g < ng && !(*group_peer_[g] == q[i].to)) ++g;
    if (g == ng) {
      if (ng < kTxGroups) {
        group_peer_[ng] = &q[i].to;
        group_head_[ng] = static_cast<uint32_t>(i);
        ++ng;
      } else {
        g = kTxGroups - 1;
        tx_link_[group_tail_[g]] = static_cast<uint32_t>(i);
      }
    } else {
      tx_link_[group_tail_[g]] = static_cast<uint32_t>(i);
    }
    group_tail_[g] = static_cast<uint32_t>(i);
    tx_group_[i] = static_cast<uint16_t>(g);
  }
  size_t k = 0;
  for (size_t g = 0; g < ng; ++g) {
    for (uint32_t i = group_head_[g];; i = tx_link_[i]) {
      tx_order_[k++] = i;
      if (i == group_tail_[g]) break;
    }
  }

  size_t done = 0;  // packets of tx_order_ sent or given up on
  int waits = 0;
  while (done < n) {
    // Messages from `done`: runs of packets to one peer, all seg bytes but a shorter last one.
    size_t m = 0;
    size_t iov_n = 0;
    for (size_t pos = done; pos < n && m < kBurst; ++m) {
      TxSlot& first = q[tx_order_[pos]];
      const size_t seg = first.len;
      const uint16_t group = tx_group_[tx_order_[pos]];
      size_t count = 1;
      if (gso_ && seg > 0) {
        const size_t max_segs = std::min(kMaxSegs, kMaxGsoBytes / seg);
        while (pos + count < n && count < max_segs) {
          const TxSlot& s = q[tx_order_[pos + count]];
          if (tx_group_[tx_order_[pos + count]] != group) break;
          if (group == kTxGroups - 1 && !(s.to == first.to)) break;
          if (s.len > seg || s.len == 0) break;
          ++count;
          if (s.len < seg) break;  // a shorter segment ends the train
        }
      }
      iovec* iov = &gso_iov_[iov_n];
      for (size_t i = 0; i < count; ++i) {
        TxSlot& s = q[tx_order_[pos + i]];
        iov[i] = {s.buf.data(), s.len};
      }
      iov_n += count;
      tx_msgs_[m] = {};
      msghdr& h = tx_msgs_[m].msg_hdr;
      h.msg_iov = iov;
      h.msg_iovlen = count;
      h.msg_name = &first.to.addr;
      h.msg_namelen = first.to.len;
      if (count > 1) {
        cmsghdr* cm = reinterpret_cast<cmsghdr*>(tx_cmsg_[m].b);
        cm->cmsg_level = SOL_UDP;
        cm->cmsg_type = UDP_SEGMENT;
        cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        const uint16_t seg16 = static_cast<uint16_t>(seg);
        std::memcpy(CMSG_DATA(cm), &seg16, sizeof(seg16));
        h.msg_control = cm;
        h.msg_controllen = CMSG_SPACE(sizeof(uint16_t));
      }
      tx_counts_[m] = count;
      pos += count;
    }
    const int r = sendmmsg(fd_, tx_msgs_.data(), static_cast<unsigned>(m), MSG_DONTWAIT);
    if (r > 0) {
      size_t pkts = 0;
      for (int i = 0; i < r; ++i) pkts += tx_counts_[i];
      Bump(SwitchCounter::kTxPackets, pkts);
      done += pkts;
      continue;
    }
    const int err = r < 0 ? errno : 0;
    if (r < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS || err == EINTR)) {
      if (waits++ < kTxMaxWaits) {
        Bump(SwitchCounter::kTxWaits);
        pollfd pfd{fd_, POLLOUT, 0};
        poll(&pfd, 1, kTxWaitMs);
        continue;
      }
      Bump(SwitchCounter::kTxErrors, n - done);  // give up on the rest of this batch
      return;
    }
    if (tx_counts_[0] > 1 &&
        (err == EIO || err == EINVAL || err == ENOPROTOOPT || err == EOPNOTSUPP)) {
      gso_ = false;  // the kernel or route refuses GSO: one datagram per packet from now on
      continue;
    }
    // Any other error belongs to the first message (bad address, ICMP feedback): count its
    // packets and go on with the next.
    Bump(SwitchCounter::kTxErrors, tx_counts_[0]);
    done += tx_counts_[0];
  }
}

std::vector<std::pair<std::string_view, uint64_t>> Switch::AllCounters() const {
  std::vector<std::pair<std::string_view, uint64_t>> v;
  const CounterSnapshot e = engine_->counters();
  for (size_t i = 0; i < p::kNumCounters; ++i) v.emplace_back(p::kCounterNames[i], e[i]);
  const ControlCounters& c = control_->counters();
  for (size_t i = 0; i < kNumControlCounters; ++i) v.emplace_back(kControlCounterNames[i], c[i]);
  for (size_t i = 0; i < kNumSwitchCounters; ++i) {
    v.emplace_back(kSwitchCounterNames[i], counters_[i]);
  }
  return v;
}

void Switch::PrintStatsLine(std::FILE* out) const {
  const double t = std::chrono::duration<double>(Clock::now() - start_).count();
  const CounterSnapshot e = engine_->counters();
  uint64_t drops = Ctr(SwitchCounter::kDropForeignSrc);
  for (size_t i = static_cast<size_t>(p::Counter::kDropMalformed); i < p::kNumCounters; ++i) {
    drops += e[i];
  }
  std::fprintf(out,
               "ina-switchd stats: t=%.1fs rx=%llu tx=%llu rx_data=%llu results=%llu "
               "resends=%llu dups=%llu drops=%llu tx_errors=%llu jobs=%zu\n",
               t, static_cast<unsigned long long>(Ctr(SwitchCounter::kRxDatagrams)),
               static_cast<unsigned long long>(Ctr(SwitchCounter::kTxPackets)),
               static_cast<unsigned long long>(Get(e, p::Counter::kRxData)),
               static_cast<unsigned long long>(Get(e, p::Counter::kResults)),
               static_cast<unsigned long long>(Get(e, p::Counter::kResultResends)),
               static_cast<unsigned long long>(Get(e, p::Counter::kDuplicates)),
               static_cast<unsigned long long>(drops),
               static_cast<unsigned long long>(Ctr(SwitchCounter::kTxErrors)),
               control_->num_jobs());
}

void Switch::PrintSummary(std::FILE* out) const {
  const double t = std::chrono::duration<double>(Clock::now() - start_).count();
  std::fprintf(out, "ina-switchd summary: %.1f s, engine %s, %zu job(s) still open\n", t,
               config_.engine.c_str(), control_->num_jobs());
  for (const auto& [name, value] : AllCounters()) {
    if (value != 0) {
      std::fprintf(out, "  %-18.*s %llu\n", static_cast<int>(name.size()), name.data(),
                   static_cast<unsigned long long>(value));
    }
  }
  PrintJson(out);
}

void Switch::PrintJson(std::FILE* out) const {
  if (dpdk_) {
    std::fprintf(out, "{\"port_counters\": [");
    bool first_port = true;
    for (const DpdkPortStats& p : dpdk_->stats()) {
      std::fprintf(
          out,
          "%s{\"name\": \"%s\", \"rx_frames\": %llu, \"rx_other\": %llu, "
          "\"tx_frames\": %llu, \"tx_dropped\": %llu}",
          first_port ? "" : ", ", p.name.c_str(), static_cast<unsigned long long>(p.rx_frames),
          static_cast<unsigned long long>(p.rx_other), static_cast<unsigned long long>(p.tx_frames),
          static_cast<unsigned long long>(p.tx_dropped));
      first_port = false;
    }
    std::fprintf(out, "]}\n");
  }
  std::fprintf(out, "{\"switch_counters\": {");
  bool first = true;
  for (const auto& [name, value] : AllCounters()) {
    std::fprintf(out, "%s\"%.*s\": %llu", first ? "" : ", ", static_cast<int>(name.size()),
                 name.data(), static_cast<unsigned long long>(value));
    first = false;
  }
  std::fprintf(out, "}}\n");
}

}  // namespace ina::dp::switchd
