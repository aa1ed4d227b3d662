#include "ina/sim/rtl_engine.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "ina/drv/job_table.h"
#include "ina/proto/wire.h"

namespace ina::sim {

namespace p = ::ina::proto;

RtlEngine::RtlEngine(const CoreSim::Options& options) : sim_(std::make_unique<CoreSim>(options)) {
  // The RTL's largest K as built, from its params register (k64 = MaxK / 64); 0 when the read
  // fails, which then refuses every job (AddJob says why).
  if (auto params = sim_->Read32(p::reg::kParams); params.ok()) {
    max_k_ =
        static_cast<uint16_t>(std::min<uint32_t>(64 * p::reg::params::GetK64(*params), p::kMaxK));
  }
  frame_.reserve(p::kFramePrefixBytes + p::MessageBytes(std::max<uint32_t>(max_k_, 256)));
}

RtlEngine::~RtlEngine() = default;

Status RtlEngine::AddJob(const dp::JobConfig& job) {
  if (!p::IsValidK(job.k)) return InvalidArgument("rtl engine: K not supported");
  if (job.k > max_k_) {
    return InvalidArgument("rtl engine: K " + std::to_string(job.k) + " exceeds the RTL's MaxK " +
                           std::to_string(max_k_) + " (params.k64; the model's INA_RTL_SIM_MAX_K)");
  }
  if (job.world_size < 1 || job.world_size > p::kMaxWorkers) {
    return InvalidArgument("rtl engine: world size out of range");
  }
  if (job.window == 0 || job.slot_base >= kRtlPoolSlots ||
      job.window > kRtlPoolSlots - job.slot_base) {
    return InvalidArgument("rtl engine: slot range outside the pool");
  }
  Entry* free_entry = nullptr;
  for (Entry& e : entries_) {
    if (!e.used) {
      if (free_entry == nullptr) free_entry = &e;
      continue;
    }
    if (e.job.job_id == job.job_id) return AlreadyExists("rtl engine: job installed");
    const uint32_t a0 = e.job.slot_base, a1 = a0 + e.job.window;
    const uint32_t b0 = job.slot_base, b1 = b0 + job.window;
    if (a0 < b1 && b0 < a1) return AlreadyExists("rtl engine: slot range overlaps another job");
  }
  if (free_entry == nullptr) return ResourceExhausted("rtl engine: job table full");
  const auto index = static_cast<uint32_t>(free_entry - entries_.data());
  // The multicast group is the job id: the shell (here, the caller's Emitter) maps it to ranks.
  INA_RETURN_IF_ERROR(drv::ProgramJob(*sim_, index, job, job.job_id));
  free_entry->used = true;
  free_entry->job = job;
  return Status::Ok();
}

Status RtlEngine::RemoveJob(uint16_t job_id) {
  for (Entry& e : entries_) {
    if (e.used && e.job.job_id == job_id) {
      INA_RETURN_IF_ERROR(drv::ClearJob(*sim_, static_cast<uint32_t>(&e - entries_.data())));
      e.used = false;
      return Status::Ok();
    }
  }
  return NotFound("rtl engine: job not installed");
}

void RtlEngine::Process(std::span<const uint8_t> packet, dp::Emitter& out) {
  const std::span<const uint8_t> one[1] = {packet};
  ProcessBurst(one, out);
}

void RtlEngine::ProcessBurst(std::span<const std::span<const uint8_t>> packets, dp::Emitter& out) {
  size_t beats = 0;
  for (std::span<const uint8_t> pkt : packets) {
    // The frame prefix as MakeFrame writes it, into a reused buffer.
    frame_.assign(p::kFramePrefixBytes + pkt.size(), 0);
    frame_[12] = 0x08;  // IPv4
    frame_[14] = 0x45;
    const size_t udp_len = 8 + pkt.size();
    p::Store16(&frame_[16], static_cast<uint16_t>(udp_len + 20));
    frame_[22] = 64;
    frame_[23] = 17;
    p::Store16(&frame_[34], p::kDefaultUdpPort);
    p::Store16(&frame_[36], p::kDefaultUdpPort);
    p::Store16(&frame_[38], static_cast<uint16_t>(udp_len));
    if (!pkt.empty()) std::memcpy(frame_.data() + p::kFramePrefixBytes, pkt.data(), pkt.size());
    sim_->SendFrame(frame_);
    beats += (frame_.size() + 63) / 64;
  }
  Drain(beats, out);
}

void RtlEngine::Drain(size_t beats, dp::Emitter& out) {
  // Each frame costs at most 1 + its beats cycles in the stage, plus the pipeline and output
  // FIFO; the harness's idle and backpressure stretch that, hence the generous factor.
  const uint64_t bound = 10000 + 64 * static_cast<uint64_t>(beats);
  if (Status s = sim_->RunUntilIdle(bound); !s.ok()) {
    if (sim_errors_++ == 0) std::fprintf(stderr, "rtl engine: %s\n", s.ToString().c_str());
  }
  for (const OutFrame& f : sim_->TakeOutput()) {
    if (f.bytes.size() < p::kFramePrefixBytes + p::kHeaderBytes) {
      if (sim_errors_++ == 0) std::fprintf(stderr, "rtl engine: short result frame\n");
      continue;
    }
    std::span<const uint8_t> pkt(f.bytes.data() + p::kFramePrefixBytes,
                                 f.bytes.size() - p::kFramePrefixBytes);
    const uint16_t job = p::Load16(pkt.data() + p::kJobOffset);
    out.OnResult(job, f.dest_rank, pkt);
  }
}

size_t RtlEngine::PollFailures(std::span<dp::JobFailure> out) {
  const uint32_t addr = p::reg::kCounterBase + 4 * static_cast<uint32_t>(p::Counter::kDropMismatch);
  auto seen = sim_->Read32(addr);
  if (seen.ok() && *seen != mismatches_seen_) {
    mismatches_seen_ = *seen;
    auto last = drv::ReadLastFailure(*sim_);
    for (Entry& e : entries_) {
      if (!e.used) continue;
      const auto index = static_cast<uint32_t>(&e - entries_.data());
      auto failed = drv::EntryFailed(*sim_, index);
      if (!failed.ok() || !*failed) continue;
      dp::JobFailure f{e.job.job_id, p::ErrorCode::kRankMismatch, 0xFFFF, 0xFFFF, 0xFFFF};
      if (last.ok() && last->any && last->entry == index) {
        f.slot = last->slot;
        f.gen = last->gen;
        f.rank = last->rank;
      }
      if (Status s = drv::ClearJob(*sim_, index); !s.ok() && sim_errors_++ == 0) {
        std::fprintf(stderr, "rtl engine: %s\n", s.ToString().c_str());
      }
      e.used = false;
      failures_.push_back(f);
    }
  }
  const size_t n = std::min(out.size(), failures_.size());
  std::copy_n(failures_.begin(), n, out.begin());
  failures_.erase(failures_.begin(), failures_.begin() + static_cast<ptrdiff_t>(n));
  return n;
}

dp::CounterSnapshot RtlEngine::counters() const {
  auto raw = drv::ReadCounters(*sim_);
  if (!raw.ok()) return wide_;
  for (size_t i = 0; i < p::kNumCounters; ++i) {
    const auto v = static_cast<uint32_t>((*raw)[i]);
    wide_[i] += static_cast<uint32_t>(v - last_raw_[i]);
    last_raw_[i] = v;
  }
  return wide_;
}

}  // namespace ina::sim
