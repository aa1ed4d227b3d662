// Cycle-accurate simulation of rtl/top/ina_core.sv (Verilator model Vina_core): frames in,
// result frames out, and the register bus as an ina::drv::RegisterAccess (the simulation backend;
// program its job table with ina/drv/job_table.h, as a card's).
//
// Frames are whole Ethernet frames (42 bytes of Ethernet/IPv4/UDP, then the ina packet). The
// harness drives s_axis with random idle cycles and m_axis with random backpressure (probabilities
// in Options, from a seeded generator) and checks the AXI-stream rules on both sides: once valid,
// data/keep/last/user hold until the beat is taken; a violation is reported by Run().
//
// Waveforms: the model is verilated with FST tracing compiled in; Options::trace.path turns it on
// for a window of cycles (off by default; what the support costs when off is in
// docs/rtl/debugging.md). Cycle c is dumped at time 2c (clock low) and 2c+1 (clock high);
// cycle 0 is the first of the power-on reset.
// Stimulus recording (Options::record): every call that drives the model is kept, so Rerun can
// replay the run exactly (the model and the harness's generator are deterministic) into a fresh
// model with a trace window, e.g. around a mismatch found after the run.
//
// Threading: single-threaded. Nothing blocks beyond the simulated cycles asked for.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "ina/base/status.h"
#include "ina/dp/engine.h"
#include "ina/drv/regs.h"

class Vina_core;
class VerilatedContext;
class VerilatedFstC;

namespace ina::sim {

// RTL build parameters of the model: PoolSlots and MaxK as verilated (CMake INA_RTL_SIM_POOL_SLOTS
// and INA_RTL_SIM_MAX_K, both 2048 by default; the RTL defaults are 1024 and 256), NumJobs the
// rtl/top/ina_core.sv default. The model's params register reports the same (log2_slots, k64);
// a job's K must be at most kRtlMaxK.
#if !defined(INA_RTL_POOL_SLOTS) || !defined(INA_RTL_MAX_K)
#error "INA_RTL_POOL_SLOTS and INA_RTL_MAX_K come from the ina::sim target"
#endif
inline constexpr uint32_t kRtlPoolSlots = INA_RTL_POOL_SLOTS;
inline constexpr uint32_t kRtlMaxK = INA_RTL_MAX_K;
inline constexpr uint32_t kRtlJobs = 8;

struct OutFrame {
  std::vector<uint8_t> bytes;  // the whole frame
  uint16_t group = 0;          // m_axis tuser[15:0]
  uint16_t dest_rank = 0;      // m_axis tuser[31:16]
  uint64_t cycle = 0;          // the cycle its last beat was taken
};

// A waveform window: cycles [from, from + cycles) of the model go to an FST file at path
// (cycles 0: to the end of the run). An empty path: no trace.
struct TraceOptions {
  std::string path;
  uint64_t from = 0;
  uint64_t cycles = 0;
};

// The tests' trace request from the environment: INA_TRACE=FILE.fst (unset or empty: no trace),
// INA_TRACE_FROM=CYCLE, INA_TRACE_CYCLES=N (decimal). InvalidArgument names the variable and the
// value for a number that does not parse, or for FROM/CYCLES without INA_TRACE.
Result<TraceOptions> TraceOptionsFromEnv();
// True when INA_TRACE_FROM or INA_TRACE_CYCLES is set (the window was asked for explicitly).
bool TraceWindowFromEnv();

// What an FST file holds, read back with Verilator's bundled FST reader: the first and last
// dumped times (cycle c is times 2c and 2c + 1) and how many signals. For tests and tools that
// check a trace. Errors: NotFound / InvalidArgument (not an FST file).
struct TraceInfo {
  uint64_t start_time = 0;
  uint64_t end_time = 0;
  uint64_t signals = 0;
};
Result<TraceInfo> ReadTraceInfo(const std::string& path);

class CoreSim final : public drv::RegisterAccess {
 public:
  struct Options {
    double idle = 0.0;   // probability that s_axis has no beat in a cycle (between beats)
    double stall = 0.0;  // probability that m_axis_tready is low in a cycle
    uint64_t seed = 1;
    // Waveform window (off when trace.path is empty). Several models of one process tracing to
    // the same path write PATH, then PATH with ".1", ".2", ... before its extension; each says
    // where on stderr. A file that cannot be written makes every Run fail with Internal.
    TraceOptions trace = {};
    bool record = false;  // keep the stimulus for Rerun
  };

  // Resets the core and clocks it through its power-on slot reset (about kRtlPoolSlots cycles).
  explicit CoreSim(const Options& opt);
  ~CoreSim() override;
  CoreSim(const CoreSim&) = delete;
  CoreSim& operator=(const CoreSim&) = delete;

  // Queues a frame for s_axis. mac_err sets tuser on its last beat.
  void SendFrame(std::span<const uint8_t> frame, bool mac_err = false);
  // Runs until every queued frame went in and no output appeared for `quiet` cycles, or
  // max_cycles passed (DeadlineExceeded). Internal if an AXI rule was broken.
  Status Run(uint64_t max_cycles, uint64_t quiet = 64);
  // Runs until every queued frame went in and the core reports idle_o (nothing in flight, every
  // result beat taken), or max_cycles passed (DeadlineExceeded). Unlike Run, it stops as soon as
  // the work is done: the harness of a switch process (RtlEngine) uses it per burst.
  Status RunUntilIdle(uint64_t max_cycles);
  // Result frames seen so far, in order; clears the list.
  std::vector<OutFrame> TakeOutput();

  Result<uint32_t> Read32(uint32_t addr) override;
  Status Write32(uint32_t addr, uint32_t v) override;

  // Replays the recorded stimulus (REQUIRES: Options::record) into a fresh model with the same
  // options and the trace window `trace`, to the end of what was recorded; the same cycles
  // happen. Returns every result frame the fresh model emitted (equal to this model's, cycles
  // included), or its trace file's error.
  Result<std::vector<OutFrame>> Rerun(const TraceOptions& trace) const;
  // The path the trace goes to ("" when not tracing).
  const std::string& trace_path() const { return trace_path_; }

  // Statistics since construction.
  uint64_t cycles() const { return cycles_; }
  uint64_t in_beats() const { return in_beats_; }            // s_axis handshakes
  uint64_t out_beats() const { return out_beats_; }          // m_axis handshakes
  uint64_t last_in_cycle() const { return last_in_cycle_; }  // cycle of the last s_axis beat

 private:
  void Tick();
  void StartTrace(const TraceOptions& trace);
  void Dump(uint64_t time);

  // One recorded call (Options::record).
  struct Call {
    enum Kind : uint8_t { kSend, kRun, kRunUntilIdle, kRead, kWrite } kind;
    uint64_t a = 0, b = 0;       // Run: max_cycles, quiet; Read/Write: addr, value; Send: mac_err
    std::vector<uint8_t> frame;  // Send
  };

  std::unique_ptr<VerilatedContext> ctx_;
  std::unique_ptr<Vina_core> top_;
  std::unique_ptr<VerilatedFstC> fst_;
  std::string trace_path_;
  uint64_t trace_from_ = 0, trace_end_ = 0;  // the window [from, end) in cycles
  std::vector<Call> calls_;
  Options opt_;
  std::mt19937_64 rng_;
  struct Beat {
    uint8_t data[64];
    uint64_t keep;
    bool last;
    bool user;
  };
  std::deque<Beat> in_;
  bool in_presenting_ = false;
  std::vector<uint8_t> cur_out_;
  std::vector<OutFrame> out_;
  bool out_was_stalled_ = false;
  uint8_t out_prev_data_[64] = {};
  uint64_t out_prev_keep_ = 0;
  uint32_t out_prev_user_ = 0;
  bool out_prev_last_ = false;
  std::string violation_;
  bool reg_req_ = false, reg_we_ = false;
  uint32_t reg_addr_ = 0, reg_wdata_ = 0;
  uint64_t cycles_ = 0, in_beats_ = 0, out_beats_ = 0, last_in_cycle_ = 0;
};

// Wraps an ina packet (UDP payload) in a 42-byte Ethernet/IPv4/UDP prefix.
std::vector<uint8_t> MakeFrame(std::span<const uint8_t> ina_packet);

}  // namespace ina::sim
