// A switch core's published stats (see publisher.h).
#include "publisher.h"

#include <array>
#include <cstring>

namespace ina::dp::switchd {

namespace p = ::ina::proto;

namespace {

constexpr size_t kNumAll = p::kNumCounters + kNumControlCounters + kNumSwitchCounters;

}  // namespace

StatsPublisher::StatsPublisher(size_t ports, bool leaf, bool job_list)
    : job_list_enabled_(job_list),
      counters_(kNumAll + (leaf ? kNumLeafCounters : 0)),
      ports_(ports * kPortWords) {}

void StatsPublisher::Publish(const Engine& engine, const ControlPlane& control,
                             const PortList& ports, const CoreCounters& counters,
                             const Leaf* leaf) {
  const CounterSnapshot e = engine.counters();
  const ControlCounters& c = control.counters();
  size_t k = 0;
  for (size_t i = 0; i < p::kNumCounters; ++i) {
    counters_[k++].store(e[i], std::memory_order_relaxed);
  }
  for (size_t i = 0; i < kNumControlCounters; ++i) {
    counters_[k++].store(c[i], std::memory_order_relaxed);
  }
  // Port-derived switch counters, summed over this core's ports.
  net::PortStats sum;
  for (size_t pi = 0; pi < ports.size(); ++pi) {
    const net::PortStats s = ports[pi]->stats();
    std::array<uint64_t, kPortWords> w;
    std::memcpy(w.data(), &s, sizeof(s));
    for (size_t j = 0; j < kPortWords; ++j) {
      ports_[pi * kPortWords + j].store(w[j], std::memory_order_relaxed);
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
    sum.rx_kernel_drops += s.rx_kernel_drops;
  }
  std::array<uint64_t, kNumSwitchCounters> sw = counters.v;
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
  set(SwitchCounter::kRxSocketDrops, sum.rx_kernel_drops);
  set(SwitchCounter::kTxErrors,
      counters.v[static_cast<size_t>(SwitchCounter::kTxErrors)] + sum.tx_dropped);
  // Every way a job is freed: an aborting LEAVE, the last graceful LEAVE, the timeout, the
  // engine ending it (ranks disagree).
  set(SwitchCounter::kJobsFreed,
      Get(c, ControlCounter::kJobsLeft) + Get(c, ControlCounter::kJobsDone) +
          Get(c, ControlCounter::kJobsTimedOut) + Get(c, ControlCounter::kJobsFailed));
  for (size_t i = 0; i < kNumSwitchCounters; ++i) {
    counters_[k++].store(sw[i], std::memory_order_relaxed);
  }
  if (leaf != nullptr) {
    for (size_t i = 0; i < kNumLeafCounters; ++i) {
      counters_[k++].store(leaf->counters()[i], std::memory_order_relaxed);
    }
  }
  jobs_.store(control.num_jobs(), std::memory_order_relaxed);
  // The job table for --metrics: a copy under a lock, on the tick path only.
  if (job_list_enabled_) {
    std::vector<JobInfo> jobs = control.Jobs();
    uint32_t in_use = 0;
    for (const JobInfo& j : jobs) in_use += j.active ? j.window : 0;
    in_use_.store(in_use, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(job_list_mu_);
    job_list_.swap(jobs);
  }
}

NamedCounters StatsPublisher::Counters() const {
  NamedCounters v;
  size_t k = 0;
  for (size_t i = 0; i < p::kNumCounters; ++i) {
    v.emplace_back(p::kCounterNames[i], counters_[k++].load(std::memory_order_relaxed));
  }
  for (size_t i = 0; i < kNumControlCounters; ++i) {
    v.emplace_back(kControlCounterNames[i], counters_[k++].load(std::memory_order_relaxed));
  }
  for (size_t i = 0; i < kNumSwitchCounters; ++i) {
    v.emplace_back(kSwitchCounterNames[i], counters_[k++].load(std::memory_order_relaxed));
  }
  for (size_t i = 0; k < counters_.size(); ++i) {  // a leaf's own (leaf.h)
    v.emplace_back(kLeafCounterNames[i], counters_[k++].load(std::memory_order_relaxed));
  }
  return v;
}

std::vector<JobInfo> StatsPublisher::job_list() const {
  std::lock_guard<std::mutex> lock(job_list_mu_);
  return job_list_;
}

net::PortStats StatsPublisher::port(size_t pi) const {
  std::array<uint64_t, kPortWords> w;
  for (size_t j = 0; j < kPortWords; ++j) {
    w[j] = ports_[pi * kPortWords + j].load(std::memory_order_relaxed);
  }
  net::PortStats s;
  std::memcpy(static_cast<void*>(&s), w.data(), sizeof(s));  // every field is a uint64_t
  return s;
}

}  // namespace ina::dp::switchd
