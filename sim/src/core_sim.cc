#include "ina/sim/core_sim.h"

#include <cstring>

#include "Vina_core.h"
#include "ina/proto/wire.h"
#include "verilated.h"

namespace ina::sim {

CoreSim::CoreSim(const Options& opt)
    : ctx_(std::make_unique<VerilatedContext>()), opt_(opt), rng_(opt.seed) {
  top_ = std::make_unique<Vina_core>(ctx_.get());
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

CoreSim::~CoreSim() { top_->final(); }

void CoreSim::SendFrame(std::span<const uint8_t> frame, bool mac_err) {
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
  // s_axis: a beat once presented holds until taken.
  bool present = in_presenting_ || (!in_.empty() && !(u(rng_) < opt_.idle));
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
  bool ready = !(u(rng_) < opt_.stall);
  t.m_axis_tready_i = ready;
  t.reg_req_i = reg_req_;
  t.reg_we_i = reg_we_;
  t.reg_addr_i = reg_addr_;
  t.reg_wdata_i = reg_wdata_;
  t.clk_i = 0;
  t.eval();

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
                              static_cast<uint16_t>(user >> 16)});
      cur_out_.clear();
    }
  }
}

Status CoreSim::Run(uint64_t max_cycles, uint64_t quiet) {
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
