// The switch: cores of classify-and-dispatch over ina::net ports (see ina/dp/switchd/switch.h).
#include "ina/dp/switchd/switch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "handoff.h"
#include "ina/dp/switchd/leaf.h"
#include "ina/dp/switchd/reporter.h"
#include "ina/net/backoff.h"
#include "ina/net/dpdk.h"
#include "ina/net/fault.h"
#include "ina/net/frame.h"
#include "ina/net/pcap.h"
#include "ina/net/roce.h"
#include "ina/net/udp.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/wire.h"

namespace ina::dp::switchd {

namespace p = ::ina::proto;

namespace {

constexpr size_t kNumAll = p::kNumCounters + kNumControlCounters + kNumSwitchCounters;
constexpr size_t kPortWords = sizeof(net::PortStats) / sizeof(uint64_t);
static_assert(sizeof(net::PortStats) == kPortWords * sizeof(uint64_t));

std::array<uint64_t, kPortWords> PortWords(const net::PortStats& s) {
  std::array<uint64_t, kPortWords> w;
  std::memcpy(w.data(), &s, sizeof(s));
  return w;
}
net::PortStats FromWords(const uint64_t* w) {
  net::PortStats s;
  std::memcpy(static_cast<void*>(&s), w, sizeof(s));  // every field is a uint64_t
  return s;
}

// Peer and Endpoint are both a sockaddr_storage and a length: copy the address and its L2 extras
// (port.h: a DPDK port's MAC, the port index; kEndpointBytes), not the whole storage per packet.
void CopyTo(Peer* p, const net::Endpoint& e) {
  std::memcpy(&p->addr, &e.addr, net::kEndpointBytes);
  p->len = e.len;
}
void CopyTo(net::Endpoint* e, const Peer& p) {
  std::memcpy(&e->addr, &p.addr, net::kEndpointBytes);
  e->len = p.len;
}
// Peer equality (control.h) on endpoints: family, address and port (IPv6: and scope).
bool SameEndpoint(const net::Endpoint& a, const net::Endpoint& b) {
  return SameAddress(a.addr, a.len, b.addr, b.len);
}

}  // namespace

class Switch::Core final : private Emitter, private ReplySink, private LeafSink {
 public:
  using Clock = std::chrono::steady_clock;
  // > proto::kMaxPacketBytes, so an oversize packet is seen as one (and dropped as malformed).
  static constexpr size_t kRxBufBytes = (proto::kMaxPacketBytes / 64 + 2) * 64;
  static constexpr size_t kRxCap = 2 * kBurst;    // a burst and its duplicates (FaultPort)
  static constexpr size_t kItemCap = 4 * kBurst;  // packets of one RxBurst round
  static constexpr size_t kTxCap = 4096;          // queued sends before a forced flush
  static constexpr auto kTickInterval = std::chrono::milliseconds(10);
  static constexpr auto kMaxWait = std::chrono::milliseconds(100);
  static constexpr auto kHoldWait = std::chrono::milliseconds(1);
  static constexpr auto kTxWait = std::chrono::milliseconds(20);  // per full-queue wait
  static constexpr int kTxMaxWaits = 5;    // then the rest of the flush is dropped
  static constexpr size_t kTxGroups = 64;  // distinct peers grouped per flush (last: the rest)

  Core(unsigned index, const Config& config, std::unique_ptr<Engine> engine)
      : index_(index),
        config_(config),
        engine_(std::move(engine)),
        backoff_(static_cast<int>(config.dpdk_backoff_us)),
        pub_(kNumAll) {}

  Status Init(std::vector<std::unique_ptr<net::Port>> ports) {
    ControlConfig cc;
    cc.max_jobs = config_.max_jobs;
    cc.job_timeout = std::chrono::milliseconds(config_.job_timeout_ms);
    cc.min_window = static_cast<uint16_t>(config_.min_window);
    cc.lease_calls = config_.upstream.empty() ? config_.lease_calls : 0;  // a leaf: no leases
    // Packets reach core (job % cores): hand out only ids this core owns.
    cc.alloc_stride = static_cast<uint16_t>(config_.cores);
    cc.alloc_residue = static_cast<uint16_t>(index_);
    // A job's K must fit every port's frames (no IP fragmentation on the way back).
    size_t max_datagram = net::kMaxDatagramBytes;
    for (const auto& port : ports)
      max_datagram = std::min(max_datagram, port->max_datagram_bytes());
    cc.max_k = proto::LargestKFor(max_datagram);
    cc.require_keys = config_.require_job_keys;
    if (!config_.admin_key_file.empty()) {
      INA_ASSIGN_OR_RETURN(cc.admin_secret,
                           proto::LoadSecretFile(config_.admin_key_file, "--admin-key-file"));
    }
    cc.log = [core = index_](const std::string& line) {
      std::fprintf(stderr, "ina-switchd: core %u: %s\n", core, line.c_str());
    };
    auto control = ControlPlane::Create(*engine_, cc);
    std::fill(cc.admin_secret.begin(), cc.admin_secret.end(), uint8_t{0});
    INA_ASSIGN_OR_RETURN(control_, std::move(control));
    if (!config_.upstream.empty()) INA_RETURN_IF_ERROR(InitLeaf(cc));
    net::FaultConfig fc;
    fc.drop = config_.drop_rate;
    fc.dup = config_.dup_rate;
    fc.reorder = config_.reorder_rate;
    fc.corrupt = config_.corrupt_rate;
    for (size_t pi = 0; pi < ports.size(); ++pi) {
      // Core 0's first port keeps --seed's streams; every other port has streams of its own.
      fc.seed = config_.seed + index_ + (uint64_t{pi} << 32);
      INA_ASSIGN_OR_RETURN(std::unique_ptr<net::Port> w,
                           net::WrapWithFaults(std::move(ports[pi]), fc));
      ports_.push_back(std::move(w));
    }
    if (!config_.record.empty()) INA_RETURN_IF_ERROR(OpenRecord());
    pub_ports_ = std::vector<std::atomic<uint64_t>>(ports_.size() * kPortWords);
    rx_bufs_.resize(kRxCap);
    rx_from_.resize(kRxCap);
    rx_pk_.resize(kRxCap);
    rx_peers_.resize(kItemCap);
    items_.resize(kItemCap);
    data_burst_.resize(kItemCap);
    tx_q_.resize(kTxCap);
    tx_bufs_.resize(kTxCap);
    tx_desc_.resize(kTxCap);
    tx_order_.resize(kTxCap);
    tx_link_.resize(kTxCap);
    last_tick_ = Clock::now();
    Publish();
    return Status::Ok();
  }

  const std::vector<std::unique_ptr<net::Port>>& ports() const { return ports_; }

  // --upstream: this core is a leaf of two-level aggregation (leaf.h).
  Status InitLeaf(const ControlConfig& cc) {
    auto up = net::ParseEndpoint(config_.upstream);
    if (!up.ok()) return up.status().WithContext("--upstream " + config_.upstream);
    LeafConfig lc;
    lc.upstream = Peer::From(reinterpret_cast<const sockaddr*>(&up->addr), up->len);
    lc.index = static_cast<uint16_t>(config_.leaf_index);
    lc.leaves = static_cast<uint16_t>(config_.leaves);
    lc.job_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(cc.job_timeout);
    leaf_ = std::make_unique<Leaf>(lc, *control_, static_cast<LeafSink&>(*this));
    leaf_scratch_.resize(kItemCap * proto::kMaxPacketBytes);
    pub_ = std::vector<std::atomic<uint64_t>>(kNumAll + kNumLeafCounters);
    return Status::Ok();
  }

  // Several cores over DPDK ports: this core owns ports index_, index_ + N, ... (global port g is
  // local port g / N of core g % N) and the jobs j with j % N == index_; packets of other cores'
  // jobs, and sends through other cores' ports, go through `h`.
  void SetHandoff(Handoff* h) { handoff_ = h; }
  // The CPUs this core's thread runs on (set by Run on a thread of its own): the EAL pins the
  // main thread to its main lcore, and a thread started from it would inherit that one CPU.
  void SetCpus(const cpu_set_t& cpus) {
    cpus_ = cpus;
    set_cpus_ = true;
  }

  // Until *stop (a signal) or *abort (another core failed).
  Status Run(const volatile std::sig_atomic_t* stop, const std::atomic<bool>* abort,
             const std::function<void()>& every_tick) {
    if (set_cpus_) (void)pthread_setaffinity_np(pthread_self(), sizeof(cpus_), &cpus_);
    while (!*stop && !abort->load(std::memory_order_relaxed)) {
      bool holding = false;
      for (auto& port : ports_) holding = holding || port->holding();
      std::chrono::microseconds wait = holding ? kHoldWait : kMaxWait;
      if (leaf_ != nullptr) wait = std::min(wait, LeafWait());
      INA_ASSIGN_OR_RETURN(bool ready, WaitRx(wait));
      if (ready || holding) {
        // Drain what is queued, a bounded number of bursts before ticking again. A port that
        // holds reordered packets releases them on an RxBurst that brings nothing newer.
        for (int i = 0; i < 64; ++i) {
          INA_ASSIGN_OR_RETURN(size_t n, RxRound());
          if (n < kBurst) break;
        }
        if (holding) {
          FlushTx();
          INA_RETURN_IF_ERROR(ReleaseHeldTx());
        }
      }
      const Clock::time_point now = Clock::now();
      if (leaf_ != nullptr && now >= leaf_->NextDeadline()) {
        leaf_->Tick(now);  // upstream retransmissions, JOIN resends
        FlushTx();
      }
      if (now - last_tick_ >= kTickInterval) {
        Tick(now);
        if (every_tick) every_tick();
      }
    }
    // Whatever is still queued or held goes out before the summary.
    for (int i = 0; i < 4; ++i) {
      INA_ASSIGN_OR_RETURN(size_t n, RxRound());
      if (n == 0) break;
    }
    FlushTx();
    INA_RETURN_IF_ERROR(ReleaseHeldTx());
    Publish();
    return Status::Ok();
  }

  // Copies every counter and port's stats to the published atomics (for Snapshot).
  void Publish() {
    const CounterSnapshot e = engine_->counters();
    const ControlCounters& c = control_->counters();
    size_t k = 0;
    for (size_t i = 0; i < p::kNumCounters; ++i) pub_[k++].store(e[i], std::memory_order_relaxed);
    for (size_t i = 0; i < kNumControlCounters; ++i) {
      pub_[k++].store(c[i], std::memory_order_relaxed);
    }
    // Port-derived switch counters, summed over this core's ports.
    net::PortStats sum;
    for (size_t pi = 0; pi < ports_.size(); ++pi) {
      const net::PortStats s = ports_[pi]->stats();
      const auto w = PortWords(s);
      for (size_t j = 0; j < kPortWords; ++j) {
        pub_ports_[pi * kPortWords + j].store(w[j], std::memory_order_relaxed);
      }
      sum.rx_packets += s.rx_packets;
      sum.tx_packets += s.tx_packets;
      sum.tx_dropped += s.tx_dropped;
      sum.inj_rx_drops += s.inj_rx_drops;
      sum.inj_rx_dups += s.inj_rx_dups;
      sum.inj_rx_reorders += s.inj_rx_reorders;
      sum.inj_tx_drops += s.inj_tx_drops;
      sum.inj_tx_dups += s.inj_tx_dups;
      sum.inj_tx_reorders += s.inj_tx_reorders;
      sum.rx_roce_short += s.rx_roce_short;
      sum.rx_roce_bad_icrc += s.rx_roce_bad_icrc;
      sum.rx_roce_bad_opcode += s.rx_roce_bad_opcode;
      sum.rx_roce_wrong_qpn += s.rx_roce_wrong_qpn;
      sum.rx_roce_bad_key += s.rx_roce_bad_key;
      sum.rx_roce_bad_psn += s.rx_roce_bad_psn;
      sum.rx_roce_psn_gaps += s.rx_roce_psn_gaps;
    }
    std::array<uint64_t, kNumSwitchCounters> sw = counters_;
    auto set = [&](SwitchCounter x, uint64_t v) { sw[static_cast<size_t>(x)] = v; };
    set(SwitchCounter::kRxDatagrams, sum.rx_packets);
    set(SwitchCounter::kInjRxDrops, sum.inj_rx_drops);
    set(SwitchCounter::kInjRxDups, sum.inj_rx_dups);
    set(SwitchCounter::kInjRxReorders, sum.inj_rx_reorders);
    set(SwitchCounter::kInjTxDrops, sum.inj_tx_drops);
    set(SwitchCounter::kInjTxDups, sum.inj_tx_dups);
    set(SwitchCounter::kInjTxReorders, sum.inj_tx_reorders);
    set(SwitchCounter::kTxPackets, sum.tx_packets);
    set(SwitchCounter::kRoceShort, sum.rx_roce_short);
    set(SwitchCounter::kRoceBadIcrc, sum.rx_roce_bad_icrc);
    set(SwitchCounter::kRoceBadOpcode, sum.rx_roce_bad_opcode);
    set(SwitchCounter::kRoceWrongQpn, sum.rx_roce_wrong_qpn);
    set(SwitchCounter::kRoceBadKey, sum.rx_roce_bad_key);
    set(SwitchCounter::kRoceBadPsn, sum.rx_roce_bad_psn);
    set(SwitchCounter::kRocePsnGaps, sum.rx_roce_psn_gaps);
    set(SwitchCounter::kTxErrors,
        counters_[static_cast<size_t>(SwitchCounter::kTxErrors)] + sum.tx_dropped);
    // Every way a job is freed: an aborting LEAVE, the last graceful LEAVE, the timeout, the
    // engine ending it (ranks disagree).
    set(SwitchCounter::kJobsFreed,
        Get(c, ControlCounter::kJobsLeft) + Get(c, ControlCounter::kJobsDone) +
            Get(c, ControlCounter::kJobsTimedOut) + Get(c, ControlCounter::kJobsFailed));
    for (size_t i = 0; i < kNumSwitchCounters; ++i) {
      pub_[k++].store(sw[i], std::memory_order_relaxed);
    }
    if (leaf_ != nullptr) {
      for (size_t i = 0; i < kNumLeafCounters; ++i) {
        pub_[k++].store(leaf_->counters()[i], std::memory_order_relaxed);
      }
    }
    pub_jobs_.store(control_->num_jobs(), std::memory_order_relaxed);
    // The job table for --metrics: a copy under a lock, on the tick path only.
    if (!config_.metrics.empty()) {
      std::vector<JobInfo> jobs = control_->Jobs();
      uint32_t in_use = 0;
      for (const JobInfo& j : jobs) in_use += j.active ? j.window : 0;
      pub_in_use_.store(in_use, std::memory_order_relaxed);
      std::lock_guard<std::mutex> lock(pub_jobs_mu_);
      pub_job_list_.swap(jobs);
    }
  }
  std::vector<JobInfo> published_job_list() const {
    std::lock_guard<std::mutex> lock(pub_jobs_mu_);
    return pub_job_list_;
  }
  uint32_t published_in_use() const { return pub_in_use_.load(std::memory_order_relaxed); }
  uint32_t pool_slots() const { return control_->pool_slots(); }

  // The published values, in JSON order.
  NamedCounters Published() const {
    NamedCounters v;
    size_t k = 0;
    for (size_t i = 0; i < p::kNumCounters; ++i) {
      v.emplace_back(p::kCounterNames[i], pub_[k++].load(std::memory_order_relaxed));
    }
    for (size_t i = 0; i < kNumControlCounters; ++i) {
      v.emplace_back(kControlCounterNames[i], pub_[k++].load(std::memory_order_relaxed));
    }
    for (size_t i = 0; i < kNumSwitchCounters; ++i) {
      v.emplace_back(kSwitchCounterNames[i], pub_[k++].load(std::memory_order_relaxed));
    }
    for (size_t i = 0; k < pub_.size(); ++i) {  // a leaf's own (leaf.h)
      v.emplace_back(kLeafCounterNames[i], pub_[k++].load(std::memory_order_relaxed));
    }
    return v;
  }
  size_t published_jobs() const { return pub_jobs_.load(std::memory_order_relaxed); }
  net::PortStats published_port(size_t pi) const {
    std::array<uint64_t, kPortWords> w;
    for (size_t j = 0; j < kPortWords; ++j) {
      w[j] = pub_ports_[pi * kPortWords + j].load(std::memory_order_relaxed);
    }
    return FromWords(w.data());
  }

 private:
  struct Item {  // one packet to classify
    const uint8_t* data;
    uint32_t len;
    const Peer* from;
  };
  // A queued send: one of tx_bufs_ (shared by every destination of one result) to one peer.
  struct TxSlot {
    uint32_t buf;
    uint32_t len;
    uint32_t flags;  // net::kTxPayloadChecked for results (their trailer covers them)
    net::Endpoint to;
  };

  Result<bool> WaitRx(std::chrono::microseconds timeout) {
    if (ports_.size() == 1 && handoff_ == nullptr) return ports_[0]->WaitRx(timeout);
    // Several (polling) ports, or the rings from other cores: poll each, back off between rounds.
    const auto deadline = Clock::now() + timeout;
    while (true) {
      if (handoff_ != nullptr && handoff_->Pending(index_)) {
        backoff_.Reset();
        return true;
      }
      for (auto& port : ports_) {
        INA_ASSIGN_OR_RETURN(bool r, port->WaitRx(std::chrono::microseconds(0)));
        if (r) {
          backoff_.Reset();
          return true;
        }
      }
      const auto now = Clock::now();
      if (now >= deadline) return false;
      backoff_.Idle(std::chrono::duration_cast<std::chrono::microseconds>(deadline - now));
    }
  }

  // One RxBurst from every port, classified and handled. Returns the most one port gave.
  Result<size_t> RxRound() {
    size_t most = 0;
    for (size_t pi = 0; pi < ports_.size(); ++pi) {
      for (size_t i = 0; i < kRxCap; ++i) {
        rx_pk_[i] = {rx_bufs_[i].data(), kRxBufBytes, 0, 0, &rx_from_[i]};
      }
      INA_ASSIGN_OR_RETURN(size_t n, ports_[pi]->RxBurst({rx_pk_.data(), kRxCap}));
      most = std::max(most, n);
      if (n == 0) continue;
      const bool via = ports_.size() > 1 || handoff_ != nullptr;
      size_t k = 0;
      for (size_t i = 0; i < n; ++i) {
        const net::Packet& pk = rx_pk_[i];
        if (record_ != nullptr) Record(pk, rx_from_[i]);
        if (pk.flags & net::kPacketTruncated) Bump(SwitchCounter::kRxTruncated);
        if (via) net::SetVia(&rx_from_[i], GlobalPort(pi));
        if (handoff_ != nullptr) {
          const unsigned owner = JobOwner(pk.data, pk.len);
          if (owner != index_) {
            const bool ok = handoff_->rx(index_, owner).Push({pk.data, pk.len}, rx_from_[i], 0);
            Bump(ok ? SwitchCounter::kHandoffRx : SwitchCounter::kHandoffDrops);
            continue;
          }
        }
        CopyTo(&rx_peers_[k], rx_from_[i]);
        items_[k] = {pk.data, pk.len, &rx_peers_[k]};
        ++k;
      }
      if (k > 0) HandleItems(k, Clock::now());
    }
    if (handoff_ != nullptr) most = std::max(most, DrainHandoff());
    return most;
  }

  // Global index of local port pi (the Via a packet's peer carries).
  uint16_t GlobalPort(size_t pi) const {
    return static_cast<uint16_t>(pi * config_.cores + index_);
  }
  // The core that owns the job of a packet (job % cores, as the kernel steers UDP: a packet too
  // short for the field goes to core 0, whose engine counts it as malformed).
  unsigned JobOwner(const uint8_t* data, size_t len) const {
    if (len < p::kJobOffset + 2) return 0;
    return p::Load16(data + p::kJobOffset) % config_.cores;
  }

  // Handles what other cores passed to this one: received packets of this core's jobs, then
  // packets to send through this core's ports. Returns the most taken from one ring.
  size_t DrainHandoff() {
    size_t most = 0;
    for (unsigned from = 0; from < config_.cores; ++from) {
      if (from == index_) continue;
      PacketRing& rx = handoff_->rx(from, index_);
      const size_t nr = std::min(rx.Ready(), kItemCap);
      for (size_t i = 0; i < nr; ++i) {
        const PacketRing::Entry& e = rx.Peek(i);
        CopyTo(&rx_peers_[i], e.peer);
        items_[i] = {e.data, e.len, &rx_peers_[i]};
      }
      if (nr > 0) HandleItems(nr, Clock::now());  // the engine copies what it keeps
      rx.Pop(nr);
      PacketRing& tx = handoff_->tx(from, index_);
      const size_t nt = std::min(tx.Ready(), tx_desc_.size());
      for (size_t pi = 0; nt > 0 && pi < ports_.size(); ++pi) {
        size_t k = 0;
        for (size_t i = 0; i < nt; ++i) {
          const PacketRing::Entry& e = tx.Peek(i);
          if (net::GetVia(e.peer) == GlobalPort(pi))
            tx_desc_[k++] = {e.data, e.len, &e.peer, e.flags};
        }
        if (k > 0) SendDescs(*ports_[pi], k);
      }
      tx.Pop(nt);
      most = std::max({most, nr, nt});
    }
    return most;
  }

  // --record: the pcap writer, and the switch's own address for the frames' destination.
  Status OpenRecord() {
    INA_ASSIGN_OR_RETURN(record_, net::PcapWriter::Create(config_.record));
    const std::string local = ports_.empty() ? "" : ports_[0]->Describe();
    const size_t colon = local.rfind(':');
    in_addr a{};
    if (colon != std::string::npos && inet_pton(AF_INET, local.substr(0, colon).c_str(), &a) == 1) {
      record_addrs_.dst_ip = a.s_addr;
      record_addrs_.dst_port = htons(static_cast<uint16_t>(std::atoi(local.c_str() + colon + 1)));
    }
    record_buf_.resize(net::kFrameHeaderBytes + kRxBufBytes);
    return Status::Ok();
  }

  // One received datagram into the capture (IPv4 peers; others, and datagrams too long for one
  // frame, are counted as skipped and reported when the switch stops).
  void Record(const net::Packet& pk, const net::Endpoint& from) {
    if (from.addr.ss_family != AF_INET || pk.len > kRxBufBytes) {
      ++record_skipped_;
      return;
    }
    const auto& sin = reinterpret_cast<const sockaddr_in&>(from.addr);
    net::FrameAddrs a = record_addrs_;
    a.src_ip = sin.sin_addr.s_addr;
    a.src_port = sin.sin_port;
    std::span<const uint8_t> payload(pk.data, pk.len);
    net::BuildUdpHeaders(a, payload, record_buf_.data());
    std::memcpy(record_buf_.data() + net::kFrameHeaderBytes, pk.data, pk.len);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
    const Status st = record_->Write({record_buf_.data(), net::kFrameHeaderBytes + pk.len},
                                     static_cast<uint64_t>(ns));
    if (!st.ok() && record_errors_++ == 0) {
      std::fprintf(stderr, "ina-switchd: --record: %s\n", st.ToString().c_str());
    }
  }

 public:
  // Closes the capture (when recording), saying what it holds.
  void CloseRecord() {
    if (record_ == nullptr) return;
    (void)record_->Flush();
    std::fprintf(stderr, "ina-switchd: --record %s: %llu frames, %llu skipped\n",
                 config_.record.c_str(), static_cast<unsigned long long>(record_->records()),
                 static_cast<unsigned long long>(record_skipped_));
    record_.reset();
  }

 private:
  std::unique_ptr<net::PcapWriter> record_;
  net::FrameAddrs record_addrs_;
  std::vector<uint8_t> record_buf_;
  uint64_t record_skipped_ = 0, record_errors_ = 0;

  // Until the leaf's next deadline, at least 0.
  std::chrono::microseconds LeafWait() const {
    const auto d = leaf_->NextDeadline();
    if (d == Clock::time_point::max()) return kMaxWait;
    const auto now = Clock::now();
    if (d <= now) return std::chrono::microseconds(0);
    return std::chrono::duration_cast<std::chrono::microseconds>(d - now) +
           std::chrono::microseconds(1);
  }

  void HandleItems(size_t n, Clock::time_point now) {
    data_n_ = 0;
    now_ = now;
    for (size_t i = 0; i < n; ++i) {
      const Item& it = items_[i];
      std::span<const uint8_t> pkt(it.data, it.len);
      if (leaf_ != nullptr) {
        if (leaf_->FromUpstream(*it.from)) {
          FlushData();
          leaf_->HandleUpstream(pkt, now);
          continue;
        }
        if (it.len >= p::kHeaderBytes && p::GetVersion(it.data) == p::kVersion &&
            ControlPlane::IsControlType(p::GetType(it.data))) {
          FlushData();
          leaf_->HandleWorkerControl(pkt, *it.from, now);
          continue;
        }
        // Data: the worker's global rank becomes the leaf's local one (a copy, resealed).
        pkt = leaf_->MapData(pkt, leaf_scratch_.data() + i * proto::kMaxPacketBytes);
        if (pkt.empty()) {
          Bump(SwitchCounter::kDropForeignSrc);
          continue;
        }
      }
      if (it.len >= p::kHeaderBytes && p::GetVersion(it.data) == p::kVersion) {
        const uint8_t type = p::GetType(it.data);
        if (ControlPlane::IsControlType(type)) {
          FlushData();  // keep arrival order between data and control
          control_->HandleControl(pkt, *it.from, now, *this);
          continue;
        }
        if (type == static_cast<uint8_t>(p::MsgType::kData)) {
          const SourceCheck sc = control_->CheckDataSource(
              p::GetJob(pkt.data()), p::GetRank(pkt.data()), p::GetSlot(pkt.data()), *it.from, now);
          // A damaged header can name another rank or slot: such a packet goes on to the engine,
          // which counts it as drop_bad_crc (the check runs twice only on this rare path).
          if (sc == SourceCheck::kForeign && p::MessageCrcOk(pkt)) {
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

  void FlushData() {
    if (data_n_ == 0) return;
    engine_->ProcessBurst({data_burst_.data(), data_n_}, *this);
    data_n_ = 0;
    // A job the engine ended (its ranks disagree): every rank hears at once, not at a timeout.
    (void)control_->HandleEngineFailures(Replies());
  }

  void Tick(Clock::time_point now) {
    last_tick_ = now;
    (void)control_->Tick(now, Replies());  // jobs_freed comes from the control counters
    if (leaf_ != nullptr) leaf_->Tick(now);
    FlushTx();
    Publish();
  }

  // Emitter / ReplySink: queue a packet to peers. A result is copied once, whatever the number
  // of ranks (and lanes) it goes to.
  void OnResult(uint16_t job_id, uint16_t dest_rank, std::span<const uint8_t> packet) override {
    if (leaf_ != nullptr) {
      leaf_->OnEngineResult(job_id, dest_rank, packet, now_);
      return;
    }
    const auto peers = control_->Destinations(job_id, dest_rank, p::GetSlot(packet.data()));
    if (peers.empty()) return;
    if (tx_n_ + peers.size() > tx_q_.size()) FlushTx();
    const uint32_t len = Stage(packet);
    for (const Peer& peer : peers) Enqueue(peer, tx_bufs_used_ - 1, len, net::kTxPayloadChecked);
  }
  void Send(const Peer& to, std::span<const uint8_t> packet) override {
    if (tx_n_ == tx_q_.size()) FlushTx();
    const uint32_t len = Stage(packet);
    Enqueue(to, tx_bufs_used_ - 1, len, 0);  // control: the UDP checksum guards its address
  }

  // LeafSink: one packet to one peer (a worker or the spine).
  void SendTo(const Peer& to, std::span<const uint8_t> packet, bool payload_checked) override {
    if (tx_n_ == tx_q_.size()) FlushTx();
    const uint32_t len = Stage(packet);
    Enqueue(to, tx_bufs_used_ - 1, len, payload_checked ? net::kTxPayloadChecked : 0);
  }
  // Where the control plane's replies go: straight out, or through the leaf (ranks mapped).
  ReplySink& Replies() { return leaf_ != nullptr ? leaf_->replies() : *this; }

  // Copies a packet into the next send buffer (tx_bufs_used_ - 1 afterwards); returns its length.
  // REQUIRES: room for one more send in the queue (a buffer is free whenever a slot is).
  uint32_t Stage(std::span<const uint8_t> packet) {
    auto& b = tx_bufs_[tx_bufs_used_++];
    const size_t len = std::min(packet.size(), b.size());
    std::memcpy(b.data(), packet.data(), len);
    return static_cast<uint32_t>(len);
  }
  void Enqueue(const Peer& to, uint32_t buf, uint32_t len, uint32_t flags) {
    TxSlot& s = tx_q_[tx_n_++];
    s.buf = buf;
    s.len = len;
    s.flags = flags;
    CopyTo(&s.to, to);
  }

  // Sends the queue: to port 0, grouped by destination when it coalesces; with several ports,
  // each port its packets (by the Via recorded at receive time), in queue order.
  void FlushTx() {
    if (tx_n_ == 0) return;
    if (handoff_ != nullptr) {
      // What leaves through another core's port goes to that core; the rest below, per port.
      for (size_t i = 0; i < tx_n_; ++i) {
        const TxSlot& s = tx_q_[i];
        const unsigned owner = net::GetVia(s.to) % config_.cores;
        if (owner == index_) continue;
        const bool ok =
            handoff_->tx(index_, owner).Push({tx_bufs_[s.buf].data(), s.len}, s.to, s.flags);
        Bump(ok ? SwitchCounter::kHandoffTx : SwitchCounter::kHandoffDrops);
      }
    }
    if (ports_.size() == 1 && handoff_ == nullptr) {
      if (ports_[0]->coalesces()) {
        GroupByPeer(tx_n_);
      } else {
        for (size_t i = 0; i < tx_n_; ++i) tx_order_[i] = static_cast<uint32_t>(i);
      }
      size_t k = 0;
      for (size_t i = 0; i < tx_n_; ++i) {
        const TxSlot& s = tx_q_[tx_order_[i]];
        tx_desc_[k++] = {tx_bufs_[s.buf].data(), s.len, &s.to, s.flags};
      }
      SendDescs(*ports_[0], k);
    } else {
      for (size_t pi = 0; pi < ports_.size(); ++pi) {
        size_t k = 0;
        for (size_t i = 0; i < tx_n_; ++i) {
          const TxSlot& s = tx_q_[i];
          if (net::GetVia(s.to) == GlobalPort(pi))
            tx_desc_[k++] = {tx_bufs_[s.buf].data(), s.len, &s.to, s.flags};
        }
        if (k > 0) SendDescs(*ports_[pi], k);
      }
    }
    tx_n_ = 0;
    tx_bufs_used_ = 0;
  }

  // Stable grouping of tx_q_[0, n) by destination into tx_order_ (order within a peer kept; the
  // last group takes every peer past kTxGroups - 1, where runs are split by the port).
  void GroupByPeer(size_t n) {
    size_t ng = 0;
    for (size_t i = 0; i < n; ++i) {
      const net::Endpoint& to = tx_q_[i].to;
      size_t g = 0;
      while (g < ng && !SameEndpoint(*group_peer_[g], to)) ++g;
      if (g == ng && ng < kTxGroups) {
        group_peer_[ng] = &to;
        group_head_[ng] = static_cast<uint32_t>(i);
        ++ng;
      } else {
        if (g == ng) g = kTxGroups - 1;
        tx_link_[group_tail_[g]] = static_cast<uint32_t>(i);
      }
      group_tail_[g] = static_cast<uint32_t>(i);
    }
    size_t k = 0;
    for (size_t g = 0; g < ng; ++g) {
      for (uint32_t i = group_head_[g];; i = tx_link_[i]) {
        tx_order_[k++] = i;
        if (i == group_tail_[g]) break;
      }
    }
  }

  void SendDescs(net::Port& port, size_t n) {
    size_t done = 0;
    int waits = 0;
    while (done < n) {
      auto r = port.TxBurst({tx_desc_.data() + done, n - done});
      if (!r.ok()) {
        // Belongs to the first packet (bad address, ICMP feedback): count it and go on.
        Bump(SwitchCounter::kTxErrors);
        ++done;
        continue;
      }
      done += *r;
      if (done == n) break;
      if (waits++ == kTxMaxWaits) {
        Bump(SwitchCounter::kTxErrors, n - done);  // give up on the rest of this flush
        break;
      }
      Bump(SwitchCounter::kTxWaits);
      (void)port.WaitTx(kTxWait);
    }
  }

  Status ReleaseHeldTx() {
    for (auto& port : ports_) {
      if (port->holding()) {
        INA_ASSIGN_OR_RETURN(size_t n, port->TxBurst({}));
        (void)n;
      }
    }
    return Status::Ok();
  }

  void Bump(SwitchCounter c, uint64_t n = 1) { counters_[static_cast<size_t>(c)] += n; }

  unsigned index_;
  Config config_;
  Handoff* handoff_ = nullptr;  // the switch's, with several cores over DPDK
  cpu_set_t cpus_{};
  bool set_cpus_ = false;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ControlPlane> control_;
  std::unique_ptr<Leaf> leaf_;         // --upstream only
  std::vector<uint8_t> leaf_scratch_;  // kItemCap x kMaxPacketBytes: mapped data packets
  Clock::time_point now_{};            // of the items being handled (leaf timers)
  std::vector<std::unique_ptr<net::Port>> ports_;
  Clock::time_point last_tick_{};
  std::array<uint64_t, kNumSwitchCounters> counters_{};  // this core's thread only

  // Receive side.
  std::vector<std::array<uint8_t, kRxBufBytes>> rx_bufs_;  // kRxCap
  std::vector<net::Endpoint> rx_from_;                     // kRxCap
  std::vector<net::Packet> rx_pk_;                         // kRxCap
  std::vector<Peer> rx_peers_;                             // kItemCap
  std::vector<Item> items_;                                // kItemCap
  std::vector<std::span<const uint8_t>> data_burst_;       // kItemCap
  size_t data_n_ = 0;

  // Send side.
  std::vector<TxSlot> tx_q_;  // kTxCap
  size_t tx_n_ = 0;
  std::vector<std::array<uint8_t, proto::kMaxPacketBytes>> tx_bufs_;  // kTxCap
  size_t tx_bufs_used_ = 0;
  std::vector<net::TxPacket> tx_desc_;  // kTxCap
  net::IdleBackoff backoff_;            // between polls of several ports (WaitRx)
  std::vector<uint32_t> tx_order_;      // kTxCap: slot indices grouped by peer
  std::vector<uint32_t> tx_link_;       // kTxCap: next slot of the same group
  std::array<uint32_t, kTxGroups> group_head_{};
  std::array<uint32_t, kTxGroups> group_tail_{};
  std::array<const net::Endpoint*, kTxGroups> group_peer_{};

  // Published for Snapshot (written by this core's thread, read by any).
  std::vector<std::atomic<uint64_t>> pub_;
  std::vector<std::atomic<uint64_t>> pub_ports_;
  std::atomic<size_t> pub_jobs_{0};
  std::atomic<uint32_t> pub_in_use_{0};
  mutable std::mutex pub_jobs_mu_;
  std::vector<JobInfo> pub_job_list_;  // guarded by pub_jobs_mu_
};

Switch::~Switch() {
  const bool dpdk = config_.uses_eal();
  cores_.clear();  // ports closed first
  if (dpdk) net::StopEal();
}

Result<std::unique_ptr<Switch>> Switch::Create(const Config& config,
                                               std::unique_ptr<Engine> engine) {
  if (engine == nullptr) return InvalidArgument("Switch::Create: no engine");
  if (config.cores != 1) {
    return InvalidArgument("--cores " + std::to_string(config.cores) +
                           ": this program builds one engine (one core)");
  }
  auto holder = std::make_shared<std::unique_ptr<Engine>>(std::move(engine));
  return Create(config, [holder](const EngineLimits&) -> Result<std::unique_ptr<Engine>> {
    if (*holder == nullptr) return Internal("Switch::Create: engine already taken");
    return std::move(*holder);
  });
}

Result<std::unique_ptr<Switch>> Switch::Create(const Config& config,
                                               const EngineFactory& make_engine) {
  if (!make_engine) return InvalidArgument("Switch::Create: no engine factory");
  const unsigned n = config.cores;
  if (n < 1) return InvalidArgument("--cores: at least 1");
  if (n > 1 && config.io != "udp" && !config.uses_eal()) {
    return InvalidArgument("--cores " + std::to_string(n) +
                           " needs --io udp or DPDK ports (RoCE over raw sockets: one core)");
  }
  if (n > kMaxDpdkCores && config.uses_eal()) {
    return InvalidArgument("--cores " + std::to_string(n) + " with DPDK ports: at most " +
                           std::to_string(kMaxDpdkCores));
  }
  std::unique_ptr<Switch> s(new Switch());
  s->config_ = config;
  s->start_ = std::chrono::steady_clock::now();
  // Ports, per core.
  std::vector<std::vector<std::unique_ptr<net::Port>>> ports(n);
  cpu_set_t before_eal;
  CPU_ZERO(&before_eal);
  bool have_before_eal = false;
  if (config.uses_eal()) {
    const bool roce = config.io == "roce";
    net::RoceIdentity me;
    me.qpn = config.roce_qpn;
    me.qkey = config.roce_qkey;
    if (roce && inet_pton(AF_INET, config.bind.c_str(), &me.ip_be) != 1) {
      return InvalidArgument("--io roce --bind " + config.bind + ": not an IPv4 address");
    }
    // The process's CPUs before the EAL pins this thread to its main lcore: cores 1 .. n-1 run on
    // them (not all on the main lcore's CPU).
    if (sched_getaffinity(0, sizeof(before_eal), &before_eal) == 0) have_before_eal = true;
    INA_RETURN_IF_ERROR(net::StartEal(config.dpdk_eal));
    const std::vector<std::string> names = net::DpdkPortNames();
    if (names.empty()) return FailedPrecondition("dpdk: no ethdev port (add them with --vdev)");
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string& name = names[i];
      net::DpdkPortConfig pc;
      pc.name = name;
      pc.ip = config.bind;
      pc.udp_port = config.port;
      pc.backoff_max_us = static_cast<int>(config.dpdk_backoff_us);
      pc.mtu = config.dpdk_mtu;
      pc.zero_copy = false;  // the send queue is reused at once: copy into the mbufs
      pc.tx_mbufs = 2047;
      pc.ipv4_datagrams = roce;  // RoCE over DPDK: the codec around a datagram port
      INA_ASSIGN_OR_RETURN(std::unique_ptr<net::Port> port, net::OpenDpdkPort(pc));
      // Port i belongs to core i % n (Core::GlobalPort).
      ports[i % n].push_back(roce ? net::WrapRoce(std::move(port), me) : std::move(port));
    }
  } else if (config.io == "roce") {
    net::RocePortConfig rc;
    rc.bind_ip = config.bind;
    rc.qpn = config.roce_qpn;
    rc.qkey = config.roce_qkey;
    rc.socket_buffer_bytes = static_cast<int>(config.socket_buffer_bytes);
    auto port = net::OpenRocePort(rc);
    if (!port.ok()) return port.status().WithContext("--io roce --bind " + config.bind);
    ports[0].push_back(std::move(*port));
  } else {
    net::UdpPortConfig pc;
    pc.bind_ip = config.bind;
    pc.bind_port = config.port;
    pc.socket_buffer_bytes = static_cast<int>(config.socket_buffer_bytes);
    pc.gso_gro = config.udp_gso;
    if (config.core_ports != 0) {
      // A port per core, port + c: no reuseport group, no steering. --port 0: core 0's ephemeral
      // port P, then P + c, tried again from a new P if one of those is taken.
      Status last = Status::Ok();
      for (int attempt = 0; attempt < 20; ++attempt) {
        for (auto& v : ports) v.clear();
        last = Status::Ok();
        uint32_t base = config.port;  // core 0's port once bound
        for (unsigned c = 0; c < n && last.ok(); ++c) {
          pc.bind_port = static_cast<uint16_t>(c == 0 ? base : base + c);
          auto port = net::OpenUdpPort(pc);
          if (!port.ok()) {
            last = port.status().WithContext("--bind " + config.bind + " (core " +
                                             std::to_string(c) + ", --core-ports)");
            break;
          }
          if (c == 0) base = net::UdpLocalPort(**port);
          ports[c].push_back(std::move(*port));
          if (base + n - 1 > 65535) {
            last = InvalidArgument("--core-ports: port " + std::to_string(base) + " + " +
                                   std::to_string(n - 1) + " is past 65535");
          }
        }
        if (last.ok() || config.port != 0) break;
      }
      INA_RETURN_IF_ERROR(last);
    } else {
      pc.reuse_port = n > 1;
      for (unsigned c = 0; c < n; ++c) {
        auto port = net::OpenUdpPort(pc);
        if (!port.ok()) return port.status().WithContext("--bind " + config.bind);
        if (c == 0) pc.bind_port = net::UdpLocalPort(**port);  // --port 0: the one it got
        ports[c].push_back(std::move(*port));
      }
      if (n > 1) INA_RETURN_IF_ERROR(net::SteerByField16(*ports[0][0], p::kJobOffset, n));
    }
  }
  EngineLimits limits;
  limits.pool_slots = std::max<uint32_t>(1, config.slots / n);
  limits.max_jobs = config.max_jobs;
  for (unsigned c = 0; c < n; ++c) {
    INA_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, make_engine(limits));
    if (engine == nullptr) return InvalidArgument("Switch::Create: no engine");
    auto core = std::make_unique<Core>(c, config, std::move(engine));
    INA_RETURN_IF_ERROR(core->Init(std::move(ports[c])));
    if (n > 1 && config.uses_eal()) {
      if (s->handoff_ == nullptr) s->handoff_ = std::make_unique<Handoff>(n);
      core->SetHandoff(s->handoff_.get());
      if (c > 0 && have_before_eal) core->SetCpus(before_eal);
    }
    s->cores_.push_back(std::move(core));
  }
  return s;
}

std::string Switch::local_address() const {
  const auto& ports = cores_[0]->ports();
  if (config_.uses_eal()) {
    std::string d;
    for (size_t c = 0; c < cores_.size(); ++c) {
      for (const auto& port : cores_[c]->ports()) {
        d += (d.empty() ? "" : ", ") + port->Describe();
        if (cores_.size() > 1) d += " (core " + std::to_string(c) + ")";
      }
    }
    return config_.bind + ":" + std::to_string(config_.port) + " (dpdk: " + d + ")";
  }
  return ports[0]->Describe();
}

Status Switch::Run(const volatile std::sig_atomic_t* stop, const StatsCallback& on_stats) {
  std::vector<std::thread> threads;
  std::vector<Status> results(cores_.size());
  std::atomic<bool> abort{false};
  // Only core 0 (this thread) reads *stop: a sig_atomic_t set by a signal handler is safe for the
  // thread the handler interrupted, not across threads (TSan reported the race with --cores 2).
  // The other cores are created with every signal blocked, so the handler always runs here, and
  // they stop on `abort`, which core 0 sets when it returns for any reason.
  static const volatile std::sig_atomic_t kNeverStop = 0;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  for (size_t c = 1; c < cores_.size(); ++c) {
    threads.emplace_back([this, c, &results, &abort] {
      results[c] = cores_[c]->Run(&kNeverStop, &abort, {});
      if (!results[c].ok()) abort = true;
    });
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  auto next_stats = start_ + std::chrono::milliseconds(config_.stats_interval_ms);
  auto every_tick = [&] {
    if (config_.stats_interval_ms == 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (now < next_stats) return;
    const SwitchStats s = Snapshot();
    if (on_stats) {
      on_stats(s);
    } else {
      PrintStatsLine(s, stdout);
      std::fflush(stdout);
    }
    next_stats = now + std::chrono::milliseconds(config_.stats_interval_ms);
  };
  results[0] = cores_[0]->Run(stop, &abort, every_tick);
  abort = true;  // stopped or failed: the other cores stop too
  for (auto& t : threads) t.join();
  for (auto& core : cores_) core->CloseRecord();
  for (const Status& st : results) {
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

SwitchStats Switch::Snapshot() const {
  SwitchStats s;
  s.uptime_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  s.engine = config_.engine;
  s.dpdk = config_.uses_eal();
  for (size_t c = 0; c < cores_.size(); ++c) {
    NamedCounters v = cores_[c]->Published();
    if (c == 0) {
      s.counters = v;
    } else {
      for (size_t i = 0; i < v.size(); ++i) s.counters[i].second += v[i].second;
    }
    s.per_core.push_back(std::move(v));
    s.jobs_open += cores_[c]->published_jobs();
    s.pool_slots.push_back(cores_[c]->pool_slots());
    s.slots_in_use.push_back(cores_[c]->published_in_use());
    for (const JobInfo& j : cores_[c]->published_job_list()) {
      s.jobs.push_back({static_cast<unsigned>(c), j});
    }
    const auto& ports = cores_[c]->ports();
    for (size_t pi = 0; pi < ports.size(); ++pi) {
      s.ports.push_back(
          {ports[pi]->name(), static_cast<unsigned>(c), cores_[c]->published_port(pi)});
    }
  }
  return s;
}

void Switch::PrintSummary(std::FILE* out) const { switchd::PrintSummary(Snapshot(), out); }

}  // namespace ina::dp::switchd
