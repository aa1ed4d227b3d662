// An ina::dp::Engine whose aggregation is done entirely by the verilated RTL core (CoreSim over
// rtl/top/ina_core.sv): the fabric behind ina-rtlsim.
//
// AddJob/RemoveJob program the core only through the ina::drv::RegisterAccess interface (job_sel,
// job_id, job_slots, job_world, job_commit) with ina::drv's ProgramJob/ClearJob
// (ina/drv/job_table.h), the same code that programs the hardware; the engine only keeps the job
// id -> job table entry map and the checks the RTL cannot make (K and window ranges, overlaps, a
// full table; a K beyond the RTL's MaxK, which the constructor reads from the params register).
// Process/ProcessBurst wrap each packet (UDP payload) in an Ethernet/IPv4/UDP frame, queue the
// frames on s_axis, clock the model until it is idle (every result frame out), strip the 42-byte
// prefix of each result frame and emit it: m_axis tuser[31:16] is the destination rank
// (proto::kRankAll for the whole multicast group), the job id comes from the result's header.
// PollFailures: when the core's drop_mismatch counter moved, every used entry's failed bit is read
// (job_id); a failed entry is cleared (ClearJob: its job is removed, as the reference engine
// removes it) and reported with the slot, generation and rank of fail_where / fail_who when the
// entry is the latest failure's (else 0xFFFF: several jobs failed within one burst).
// counters() reads the core's counter registers (32-bit, wrapping) and extends them to 64 bits in
// software (deltas mod 2^32 between reads; each read costs kNumCounters bus cycles).
//
// Cost: about 1 + payload beats cycles per packet plus a few cycles of pipeline drain per burst;
// the model runs at about 1 M cycles/s (docs/rtl/benchmarks.md).
// Threading: single-threaded, like every Engine. Nothing blocks beyond the simulated cycles.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ina/dp/engine.h"
#include "ina/sim/core_sim.h"

namespace ina::sim {

class RtlEngine final : public dp::Engine {
 public:
  // options: the harness's random input idle / output backpressure (0 for a switch process: the
  // results are the same, only slower) and its seed.
  explicit RtlEngine(const CoreSim::Options& options = {});
  ~RtlEngine() override;

  // Errors as in dp::Engine: InvalidArgument (K not in proto::kKValues, K above max_k() (the
  // message names the RTL's MaxK), world size not in 1..kMaxWorkers, window 0, slot range outside
  // [0, kRtlPoolSlots)), AlreadyExists (job id
  // installed or slot range overlaps another job's), ResourceExhausted (all kRtlJobs entries used),
  // or the register access's error.
  Status AddJob(const dp::JobConfig& job) override;
  Status RemoveJob(uint16_t job_id) override;

  void Process(std::span<const uint8_t> packet, dp::Emitter& out) override;
  void ProcessBurst(std::span<const std::span<const uint8_t>> packets, dp::Emitter& out) override;

  size_t PollFailures(std::span<dp::JobFailure> out) override;

  dp::CounterSnapshot counters() const override;
  uint32_t pool_slots() const override { return kRtlPoolSlots; }
  // The largest K the RTL was built for (MaxK, read from its params register: kRtlMaxK; 0 when
  // the read failed, so that a control plane over it holds every JOIN out of range). It runs
  // every sec mode (crc, mac and mac_encrypt: docs/security.md, "The RTL").
  uint16_t max_k() const override { return max_k_; }

  // Simulation statistics: cycles clocked, and harness failures (the model not idle within its
  // cycle bound, or an AXI-stream rule broken; each is also printed to stderr once).
  uint64_t cycles() const { return sim_->cycles(); }
  uint64_t sim_errors() const { return sim_errors_; }
  CoreSim& sim() { return *sim_; }

 private:
  struct Entry {
    bool used = false;
    dp::JobConfig job;
  };

  void Drain(size_t frames_beats, dp::Emitter& out);

  std::unique_ptr<CoreSim> sim_;
  std::array<Entry, kRtlJobs> entries_{};
  std::vector<uint8_t> frame_;  // reused frame buffer
  uint16_t max_k_ = 0;          // the RTL's MaxK (params.k64 x 64)
  uint64_t sim_errors_ = 0;
  uint32_t mismatches_seen_ = 0;  // the core's drop_mismatch counter at the last PollFailures
  std::vector<dp::JobFailure> failures_;  // found, not yet polled
  // counters(): the last 32-bit readings and their 64-bit extensions (const reads mutate the sim).
  mutable std::array<uint32_t, proto::kNumCounters> last_raw_{};
  mutable dp::CounterSnapshot wide_{};
};

}  // namespace ina::sim
