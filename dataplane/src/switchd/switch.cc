// The switch: cores of classify-and-dispatch over ina::net ports (see ina/dp/switchd/switch.h).
// Here: opening the ports, the cores' threads, and each core's loop; the loop calls its parts,
// each in a file of its own: datapath.h (classify and dispatch, the send queue), core_handoff.h
// (packets between cores), hierarchy.h (a leaf's part), recorder.h (--record), publisher.h
// (the stats Snapshot reads).
#include "ina/dp/switchd/switch.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "core_handoff.h"
#include "datapath.h"
#include "handoff.h"
#include "hierarchy.h"
#include "ina/base/log_line.h"
#include "ina/dp/switchd/reporter.h"
#include "ina/net/backoff.h"
#include "ina/net/dpdk.h"
#include "ina/net/fault.h"
#include "ina/net/roce.h"
#include "ina/net/udp.h"
#include "ina/proto/sec.h"
#include "ina/proto/wire.h"
#include "publisher.h"
#include "recorder.h"

namespace ina::dp::switchd {

namespace p = ::ina::proto;

// One core: its ports and the loop that waits, receives a round from every port, hands the
// packets to its parts (recorder, handoff, data path with the leaf) and ticks.
class Switch::Core final {
 public:
  using Clock = std::chrono::steady_clock;
  // > proto::kMaxPacketBytes, so an oversize packet is seen as one (and dropped as malformed).
  static constexpr size_t kRxBufBytes = (proto::kMaxPacketBytes / 64 + 2) * 64;
  static constexpr auto kTickInterval = std::chrono::milliseconds(10);
  static constexpr auto kMaxWait = std::chrono::milliseconds(100);
  static constexpr auto kHoldWait = std::chrono::milliseconds(1);

  Core(unsigned index, const Config& config, std::unique_ptr<Engine> engine)
      : place_{index, config.cores},
        config_(config),
        engine_(std::move(engine)),
        backoff_(static_cast<int>(config.dpdk_backoff_us)),
        tx_(place_, ports_, counters_) {}

  Status Init(std::vector<std::unique_ptr<net::Port>> ports) {
    ControlConfig cc;
    cc.max_jobs = config_.max_jobs;
    cc.job_timeout = std::chrono::milliseconds(config_.job_timeout_ms);
    cc.min_window = static_cast<uint16_t>(config_.min_window);
    // A leaf's own control plane: no leases; its workers get the spine's (leaf.h, "Leases").
    cc.lease_calls = config_.upstream.empty() ? config_.lease_calls : 0;
    // Nor idle releases: a leaf's grant is its spine's (leaf.h).
    cc.idle_release =
        std::chrono::milliseconds(config_.upstream.empty() ? config_.idle_release_ms : 0);
    // A leaf opens and seals its keyed jobs' messages itself (leaf.h): its engine sees local
    // ranks, the workers' tags their global ones.
    cc.engine_keys = config_.upstream.empty();
    cc.doom_unknown = config_.upstream.empty();  // a leaf refuses its workers' JOINs itself
    // Packets reach core (job % cores): hand out only ids this core owns.
    cc.alloc_stride = static_cast<uint16_t>(config_.cores);
    cc.alloc_residue = static_cast<uint16_t>(place_.index);
    // A job's K must fit every port's frames (no IP fragmentation on the way back).
    size_t max_datagram = net::kMaxDatagramBytes;
    for (const auto& port : ports)
      max_datagram = std::min(max_datagram, port->max_datagram_bytes());
    cc.max_k = proto::LargestKFor(max_datagram);
    cc.require_keys = config_.require_job_keys;
    // hello_ack: how many cores take a job's lanes, each at --port + c (--core-ports 1).
    cc.core_ports = static_cast<uint16_t>(config_.core_ports != 0 ? config_.cores : 1);
    // Grants fit this core's socket (a kernel UDP port; DPDK ports answer 0: no cap). The port
    // outlives the control plane (both are this core's).
    if (!ports.empty()) {
      cc.rx_queue = [port = ports.front().get()](size_t bytes) {
        return port->rx_queue_datagrams(bytes);
      };
    }
    if (!config_.admin_key_file.empty()) {
      INA_ASSIGN_OR_RETURN(cc.admin_secret,
                           proto::LoadSecretFile(config_.admin_key_file, "--admin-key-file"));
      // A SET_KEY sealed before this start (a recording replayed after a restart) is refused.
      cc.admin_seq_floor = proto::SetKeySequence(std::chrono::system_clock::now());
    }
    cc.log = [core = place_.index](const std::string& line) {
      LogLinef("ina-switchd: core %u: %s", core, line.c_str());  // one write: cores share stderr
    };
    auto control = ControlPlane::Create(*engine_, cc);
    std::fill(cc.admin_secret.begin(), cc.admin_secret.end(), uint8_t{0});
    INA_ASSIGN_OR_RETURN(control_, std::move(control));
    data_ = std::make_unique<DataPath>(*engine_, *control_, tx_, counters_);
    if (!config_.upstream.empty()) {  // --upstream: this core is a leaf (leaf.h)
      INA_ASSIGN_OR_RETURN(
          leaf_, CoreLeaf::Create(config_, place_.index, cc, *control_, *data_, kItemCap));
      data_->SetLeaf(leaf_.get());
    }
    net::FaultConfig fc;
    fc.drop = config_.drop_rate;
    fc.dup = config_.dup_rate;
    fc.reorder = config_.reorder_rate;
    fc.corrupt = config_.corrupt_rate;
    for (size_t pi = 0; pi < ports.size(); ++pi) {
      // Core 0's first port keeps --seed's streams; every other port has streams of its own.
      fc.seed = config_.seed + place_.index + (uint64_t{pi} << 32);
      INA_ASSIGN_OR_RETURN(std::unique_ptr<net::Port> w,
                           net::WrapWithFaults(std::move(ports[pi]), fc));
      ports_.push_back(std::move(w));
    }
    if (!config_.record.empty()) {
      INA_ASSIGN_OR_RETURN(
          record_,
          Recorder::Open(config_.record, ports_.empty() ? "" : ports_[0]->Describe(), kRxBufBytes));
    }
    pub_ =
        std::make_unique<StatsPublisher>(ports_.size(), leaf_ != nullptr, !config_.metrics.empty());
    rx_bufs_.resize(kRxCap);
    rx_from_.resize(kRxCap);
    rx_pk_.resize(kRxCap);
    last_tick_ = Clock::now();
    Publish();
    return Status::Ok();
  }

  const std::vector<std::unique_ptr<net::Port>>& ports() const { return ports_; }

  // Several cores over DPDK ports: this core owns ports index, index + N, ... (global port g is
  // local port g / N of core g % N) and the jobs j with j % N == index; packets of other cores'
  // jobs, and sends through other cores' ports, go through `h` (core_handoff.h).
  void SetHandoff(Handoff* h) {
    handoff_ = std::make_unique<CoreHandoff>(place_, *h, ports_, counters_);
    tx_.SetHandoff(handoff_.get());
  }
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
      if (leaf_ != nullptr) wait = std::min(wait, leaf_->Wait(kMaxWait));
      INA_ASSIGN_OR_RETURN(bool ready, WaitRx(wait));
      if (ready || holding) {
        // Drain what is queued, a bounded number of bursts before ticking again. A port that
        // holds reordered packets releases them on an RxBurst that brings nothing newer.
        for (int i = 0; i < 64; ++i) {
          INA_ASSIGN_OR_RETURN(size_t n, RxRound());
          if (n < kBurst) break;
        }
        if (holding) {
          tx_.Flush();
          INA_RETURN_IF_ERROR(ReleaseHeldTx());
        }
      }
      const Clock::time_point now = Clock::now();
      if (leaf_ != nullptr && now >= leaf_->leaf().NextDeadline()) {
        leaf_->leaf().Tick(now);  // upstream retransmissions, JOIN resends
        tx_.Flush();
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
    tx_.Flush();
    INA_RETURN_IF_ERROR(ReleaseHeldTx());
    Publish();
    return Status::Ok();
  }

  // Copies every counter and port's stats to the published atomics (for Snapshot).
  void Publish() {
    pub_->Publish(*engine_, *control_, ports_, counters_,
                  leaf_ != nullptr ? &leaf_->leaf() : nullptr);
  }
  const StatsPublisher& published() const { return *pub_; }
  uint32_t pool_slots() const { return control_->pool_slots(); }

  // Closes the capture (when recording), saying what it holds.
  void CloseRecord() {
    if (record_ != nullptr) record_->Close();
  }

 private:
  Result<bool> WaitRx(std::chrono::microseconds timeout) {
    if (ports_.size() == 1 && handoff_ == nullptr) return ports_[0]->WaitRx(timeout);
    // Several (polling) ports, or the rings from other cores: poll each, back off between rounds.
    const auto deadline = Clock::now() + timeout;
    while (true) {
      if (handoff_ != nullptr && handoff_->Pending()) {
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
      for (size_t i = 0; i < n; ++i) {
        const net::Packet& pk = rx_pk_[i];
        if (record_ != nullptr) record_->Record(pk, rx_from_[i]);
        if (pk.flags & net::kPacketTruncated) counters_.Bump(SwitchCounter::kRxTruncated);
        if (via) net::SetVia(&rx_from_[i], place_.GlobalPort(pi));
        if (handoff_ != nullptr) {
          const unsigned owner = handoff_->JobOwner(pk.data, pk.len);
          if (owner != place_.index) {
            handoff_->PassRx(owner, {pk.data, pk.len}, rx_from_[i]);
            continue;
          }
        }
        data_->Add(pk.data, pk.len, rx_from_[i]);
      }
      if (data_->pending() > 0) data_->Handle(Clock::now());
    }
    if (handoff_ != nullptr) most = std::max(most, handoff_->Drain(*data_));
    return most;
  }

  void Tick(Clock::time_point now) {
    last_tick_ = now;
    (void)control_->Tick(now, data_->Replies());  // jobs_freed comes from the control counters
    if (leaf_ != nullptr) leaf_->leaf().Tick(now);
    tx_.Flush();
    Publish();
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

  CorePlace place_;
  Config config_;
  cpu_set_t cpus_{};
  bool set_cpus_ = false;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ControlPlane> control_;
  std::vector<std::unique_ptr<net::Port>> ports_;
  net::IdleBackoff backoff_;  // between polls of several ports (WaitRx)
  Clock::time_point last_tick_{};
  CoreCounters counters_;  // this core's thread only

  // The parts.
  TxQueue tx_;
  std::unique_ptr<DataPath> data_;
  std::unique_ptr<CoreLeaf> leaf_;        // --upstream only
  std::unique_ptr<CoreHandoff> handoff_;  // --cores N with DPDK ports only
  std::unique_ptr<Recorder> record_;      // --record only
  std::unique_ptr<StatsPublisher> pub_;

  // Receive side.
  std::vector<std::array<uint8_t, kRxBufBytes>> rx_bufs_;  // kRxCap
  std::vector<net::Endpoint> rx_from_;                     // kRxCap
  std::vector<net::Packet> rx_pk_;                         // kRxCap
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
      if (config.core_ports != 0) {
        // One job on every core: core c owns queue c of every port and listens on --port + c;
        // a worker's lane c sends on its queue c (net_memif pairs queues by index), so nothing
        // passes between cores.
        pc.queues = n;
        for (unsigned c = 0; c < n; ++c) {
          pc.queue = c;
          pc.udp_port = static_cast<uint16_t>(config.port + c);
          auto port = net::OpenDpdkPort(pc);
          if (!port.ok()) {
            return port.status().WithContext("--core-ports: " + name + " queue " +
                                             std::to_string(c));
          }
          ports[c].push_back(std::move(*port));
        }
        continue;
      }
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
    // Every core's socket asked the same: the first one tells whether the kernel capped it.
    const std::string small =
        net::SmallReceiveBuffer(ports[0][0]->rx_buffer_bytes(), pc.socket_buffer_bytes);
    if (!small.empty()) {
      LogLinef(
          "ina-switchd: WARNING: --socket-buffer-bytes: %s. Bursts from several workers overflow "
          "a small buffer: the kernel drops them (counter rx_socket_drops) and the workers "
          "resend after a timeout (docs/switchd.md, \"Socket buffers\")\n",
          small.c_str());
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
      if (config.core_ports == 0) {  // jobs by id: a packet may arrive on another core's port
        if (s->handoff_ == nullptr) s->handoff_ = std::make_unique<Handoff>(n);
        core->SetHandoff(s->handoff_.get());
      }
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
    const StatsPublisher& pub = cores_[c]->published();
    NamedCounters v = pub.Counters();
    if (c == 0) {
      s.counters = v;
    } else {
      for (size_t i = 0; i < v.size(); ++i) s.counters[i].second += v[i].second;
    }
    s.per_core.push_back(std::move(v));
    s.jobs_open += pub.jobs();
    s.pool_slots.push_back(cores_[c]->pool_slots());
    s.slots_in_use.push_back(pub.in_use());
    for (const JobInfo& j : pub.job_list()) {
      s.jobs.push_back({static_cast<unsigned>(c), j});
    }
    const auto& ports = cores_[c]->ports();
    for (size_t pi = 0; pi < ports.size(); ++pi) {
      s.ports.push_back({ports[pi]->name(), static_cast<unsigned>(c), pub.port(pi)});
    }
  }
  return s;
}

void Switch::PrintSummary(std::FILE* out) const { switchd::PrintSummary(Snapshot(), out); }

}  // namespace ina::dp::switchd
