#include "ina/sim/core_sim.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "Vina_core.h"
#include "coverage.h"
#include "gtkwave/fstapi.h"
#include "ina/base/parse.h"
#include "ina/proto/wire.h"
#include "verilated.h"
#include "verilated_fst_c.h"

namespace ina::sim {

namespace {

bool EnvSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

// A cycle count from the environment (base/parse.h); unset or empty: 0.
Result<uint64_t> EnvCycles(const char* name) {
  uint64_t x = 0;
  if (EnvSet(name)) INA_RETURN_IF_ERROR(EnvUint(name, 0, UINT64_MAX, &x));
  return x;
}

// PATH for the first model of this process tracing to PATH, then PATH.1.fst, PATH.2.fst...
std::string UniqueTracePath(const std::string& path) {
  static std::map<std::string, int> uses;
  const int n = uses[path]++;
  if (n == 0) return path;
  const size_t slash = path.find_last_of('/');
  size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) dot = path.size();
  return path.substr(0, dot) + "." + std::to_string(n) + path.substr(dot);
}

}  // namespace

Result<TraceOptions> TraceOptionsFromEnv() {
  TraceOptions t;
  if (const char* p = std::getenv("INA_TRACE"); p != nullptr) t.path = p;
  INA_ASSIGN_OR_RETURN(t.from, EnvCycles("INA_TRACE_FROM"));
  INA_ASSIGN_OR_RETURN(t.cycles, EnvCycles("INA_TRACE_CYCLES"));
  if (t.path.empty() && TraceWindowFromEnv()) {
    return InvalidArgument("INA_TRACE_FROM / INA_TRACE_CYCLES need INA_TRACE=FILE.fst");
  }
  return t;
}

Result<TraceInfo> ReadTraceInfo(const std::string& path) {
  if (std::FILE* f = std::fopen(path.c_str(), "rb"); f != nullptr) {
    std::fclose(f);
  } else {
    return NotFound("trace " + path + ": " + std::strerror(errno));
  }
  void* r = fstReaderOpen(path.c_str());
  if (r == nullptr) return InvalidArgument("trace " + path + ": not an FST file");
  TraceInfo t{fstReaderGetStartTime(r), fstReaderGetEndTime(r), fstReaderGetVarCount(r)};
  fstReaderClose(r);
  return t;
}

bool TraceWindowFromEnv() { return EnvSet("INA_TRACE_FROM") || EnvSet("INA_TRACE_CYCLES"); }

CoreSim::CoreSim(const Options& opt)
    : ctx_(std::make_unique<VerilatedContext>()), opt_(opt), rng_(opt.seed) {
  // Allowed always: the model's cost is the same (its trace activity flags are compiled in).
  ctx_->traceEverOn(true);
  top_ = std::make_unique<Vina_core>(ctx_.get());
  if (!opt.trace.path.empty()) StartTrace(opt.trace);
  top_->clk_i = 0;
  top_->rst_ni = 0;
  top_->eval();
  top_->clk_i = 1;
  top_->eval();
  top_->clk_i = 0;
  top_->rst_ni = 1;
  top_->eval();
  // Out of reset the core walks its slot pool (one slot per cycle); let it finish.
  for (uint64_t c = 0; c < 4 * uint64_t{kRtlPoolSlots} + 64 && !top_->idle_o; ++c) Tick();
}

CoreSim::~CoreSim() {
  if (fst_ != nullptr) fst_->close();
  top_->final();
  WriteCoverage(*ctx_);
}

void CoreSim::StartTrace(const TraceOptions& trace) {
  trace_path_ = UniqueTracePath(trace.path);
  // VerilatedFstC aborts the process on a file it cannot create: check first.
  if (std::FILE* f = std::fopen(trace_path_.c_str(), "wb"); f != nullptr) {
    std::fclose(f);
  } else {
    violation_ = "cannot write the trace file " + trace_path_ + ": " + std::strerror(errno);
    trace_path_.clear();
    return;
  }
  trace_from_ = trace.from;
  trace_end_ = trace.cycles == 0 ? UINT64_MAX : trace.from + trace.cycles;
  fst_ = std::make_unique<VerilatedFstC>();
  top_->trace(fst_.get(), 99);
  fst_->open(trace_path_.c_str());
  std::fprintf(stderr, "core sim: tracing cycles %llu..%s to %s\n",
               static_cast<unsigned long long>(trace_from_),
               trace.cycles == 0 ? "end" : std::to_string(trace_end_ - 1).c_str(),
               trace_path_.c_str());
}

void CoreSim::Dump(uint64_t time) {
  if (fst_ != nullptr && cycles_ >= trace_from_ && cycles_ < trace_end_) fst_->dump(time);
}

Result<std::vector<OutFrame>> CoreSim::Rerun(const TraceOptions& trace) const {
  if (!opt_.record) return FailedPrecondition("core sim: Rerun needs Options::record");
  Options o = opt_;
  o.trace = trace;
  o.record = false;
  CoreSim again(o);
  if (!again.violation_.empty()) return Internal("core sim: " + again.violation_);
  std::vector<OutFrame> all;
  for (const Call& c : calls_) {
    switch (c.kind) {
      case Call::kSend:
        again.SendFrame(c.frame, c.a != 0);
        break;
      case Call::kRun:
        (void)again.Run(c.a, c.b);
        break;
      case Call::kRunUntilIdle:
        (void)again.RunUntilIdle(c.a);
        break;
      case Call::kRead:
        (void)again.Read32(static_cast<uint32_t>(c.a));
        break;
      case Call::kWrite:
        (void)again.Write32(static_cast<uint32_t>(c.a), static_cast<uint32_t>(c.b));
        break;
    }
    for (OutFrame& f : again.TakeOutput()) all.push_back(std::move(f));
  }
  return all;
}

void CoreSim::SendFrame(std::span<const uint8_t> frame, bool mac_err) {
  if (opt_.record)
    calls_.push_back({Call::kSend, mac_err ? 1u : 0u, 0, {frame.begin(), frame.end()}});
  size_t n = frame.size();
  size_t off = 0;
  do {
    Beat b{};
    size_t take = std::min<size_t>(64, n - off);
    std::memcpy(b.data, frame.data() + off, take);
    b.keep = take == 64 ? ~uint64_t{0} : ((uint64_t{1} << take) - 1);
    off += take;
    b.last = off >= n;
    b.user = b.last && mac_err;
    in_.push_back(b);
  } while (off < n);
}

void CoreSim::Tick() {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Vina_core& t = *top_;
  // With neither idle cycles nor stalls asked for, no draw (they would all come out "go"): the
  // generator is used for nothing else, so this changes no cycle, and the saturated benchmark
  // (ina-rtl-bench) does not time two draws per cycle.
  const bool random = opt_.idle > 0 || opt_.stall > 0;
  // s_axis: a beat once presented holds until taken.
  bool present = in_presenting_ || (!in_.empty() && !(random && u(rng_) < opt_.idle));
  if (in_.empty()) present = false;
  t.s_axis_tvalid_i = present;
  if (present) {
    const Beat& b = in_.front();
    for (int w = 0; w < 16; ++w) {
      uint32_t v;
      std::memcpy(&v, b.data + 4 * w, 4);  // little-endian host: byte 4w in bits [7:0]
      t.s_axis_tdata_i[w] = v;
    }
    t.s_axis_tkeep_i = b.keep;
    t.s_axis_tlast_i = b.last;
    t.s_axis_tuser_i = b.user;
  }
  bool ready = !(random && u(rng_) < opt_.stall);
  t.m_axis_tready_i = ready;
  t.reg_req_i = reg_req_;
  t.reg_we_i = reg_we_;
  t.reg_addr_i = reg_addr_;
  t.reg_wdata_i = reg_wdata_;
  t.clk_i = 0;
  t.eval();
  Dump(2 * cycles_);

  bool in_fire = t.s_axis_tvalid_i && t.s_axis_tready_o;
  bool out_valid = t.m_axis_tvalid_o;
  bool out_fire = out_valid && ready;
  uint8_t data[64];
  for (int w = 0; w < 16; ++w) {
    uint32_t v = t.m_axis_tdata_o[w];
    std::memcpy(data + 4 * w, &v, 4);
  }
  uint64_t keep = t.m_axis_tkeep_o;
  uint32_t user = t.m_axis_tuser_o;
  bool last = t.m_axis_tlast_o;
  if (out_was_stalled_ && violation_.empty()) {
    if (!out_valid || std::memcmp(data, out_prev_data_, 64) != 0 || keep != out_prev_keep_ ||
        user != out_prev_user_ || last != out_prev_last_) {
      violation_ = "m_axis changed while stalled at cycle " + std::to_string(cycles_);
    }
  }
  out_was_stalled_ = out_valid && !ready;
  std::memcpy(out_prev_data_, data, 64);
  out_prev_keep_ = keep;
  out_prev_user_ = user;
  out_prev_last_ = last;

  t.clk_i = 1;
  t.eval();
  Dump(2 * cycles_ + 1);
  ++cycles_;
  in_presenting_ = present && !in_fire;
  if (in_fire) {
    in_.pop_front();
    ++in_beats_;
    last_in_cycle_ = cycles_;
  }
  if (out_fire) {
    ++out_beats_;
    for (int i = 0; i < 64; ++i) {
      if (keep >> i & 1) cur_out_.push_back(data[i]);
    }
    if (last) {
      out_.push_back(OutFrame{std::move(cur_out_), static_cast<uint16_t>(user & 0xFFFF),
                              static_cast<uint16_t>(user >> 16), cycles_ - 1});
      cur_out_.clear();
    }
  }
}

Status CoreSim::Run(uint64_t max_cycles, uint64_t quiet) {
  if (opt_.record) calls_.push_back({Call::kRun, max_cycles, quiet, {}});
  if (!violation_.empty()) return Internal("core sim: " + violation_);
  uint64_t idle = 0;
  for (uint64_t c = 0; c < max_cycles; ++c) {
    uint64_t before = out_beats_;
    Tick();
    if (!violation_.empty()) return Internal("core sim: " + violation_);
    idle = (out_beats_ == before && in_.empty()) ? idle + 1 : 0;
    if (idle >= quiet) return Status::Ok();
  }
  return DeadlineExceeded("core sim: not idle after " + std::to_string(max_cycles) + " cycles");
}

Status CoreSim::RunUntilIdle(uint64_t max_cycles) {
  if (opt_.record) calls_.push_back({Call::kRunUntilIdle, max_cycles, 0, {}});
  if (!violation_.empty()) return Internal("core sim: " + violation_);
  for (uint64_t c = 0; c < max_cycles; ++c) {
    if (in_.empty() && !in_presenting_ && top_->idle_o) return Status::Ok();
    Tick();
    if (!violation_.empty()) return Internal("core sim: " + violation_);
  }
  return DeadlineExceeded("core sim: not idle after " + std::to_string(max_cycles) + " cycles");
}

std::vector<OutFrame> CoreSim::TakeOutput() { return std::exchange(out_, {}); }

Result<uint32_t> CoreSim::Read32(uint32_t addr) {
  if (addr % 4 != 0 || addr >= 0x1000) return InvalidArgument("core sim: bad register address");
  if (opt_.record) calls_.push_back({Call::kRead, addr, 0, {}});
  reg_req_ = true;
  reg_we_ = false;
  reg_addr_ = addr;
  Tick();
  reg_req_ = false;
  if (!top_->reg_rvalid_o) return Internal("core sim: no read response");
  uint32_t v = top_->reg_rdata_o;
  if (!violation_.empty()) return Internal("core sim: " + violation_);
  return v;
}

Status CoreSim::Write32(uint32_t addr, uint32_t v) {
  if (addr % 4 != 0 || addr >= 0x1000) return InvalidArgument("core sim: bad register address");
  if (opt_.record) calls_.push_back({Call::kWrite, addr, v, {}});
  reg_req_ = true;
  reg_we_ = true;
  reg_addr_ = addr;
  reg_wdata_ = v;
  Tick();
  reg_req_ = false;
  reg_we_ = false;
  if (!violation_.empty()) return Internal("core sim: " + violation_);
  return Status::Ok();
}

std::vector<uint8_t> MakeFrame(std::span<const uint8_t> ina_packet) {
  // Sized once and copied into: growing the vector with insert() trips GCC 12's -Warray-bounds
  // false positive in its memmove.
  std::vector<uint8_t> f(proto::kFramePrefixBytes + ina_packet.size(), 0);
  f[12] = 0x08;  // IPv4
  f[14] = 0x45;
  size_t udp_len = 8 + ina_packet.size();
  proto::Store16(&f[16], static_cast<uint16_t>(udp_len + 20));
  f[22] = 64;
  f[23] = 17;
  proto::Store16(&f[34], proto::kDefaultUdpPort);
  proto::Store16(&f[36], proto::kDefaultUdpPort);
  proto::Store16(&f[38], static_cast<uint16_t>(udp_len));
  if (!ina_packet.empty()) {
    std::memcpy(f.data() + proto::kFramePrefixBytes, ina_packet.data(), ina_packet.size());
  }
  return f;
}

}  // namespace ina::sim
