// Harness for the per-module RTL tests: the Vina_units_tb model (rtl/tb/ina_units_tb.sv, the leaf
// modules side by side), the seed, and bit access to Verilator's wide signals (model_tb.h).
//
// Clocking: a test sets a cycle's inputs, calls Settle() (clock low, combinational outputs valid
// for those inputs), checks them, then calls Edge() (rising edge: registers take the cycle's
// inputs). Every module shares clk_i/rst_ni; each test drives only its own module's ports.
#pragma once

#include <cstdint>

#include "Vina_units_tb.h"
#include "model_tb.h"

namespace ina::rtl_units {

using Tb = ModelTb<Vina_units_tb>;

// MaxK of ina_units_tb (its parameter, passed to ina_ingress, ina_regs and ina_agg) and the payload
// beats of a K = MaxK packet.
inline constexpr uint32_t kMaxK = 512;
inline constexpr uint32_t kMaxBeats = kMaxK / 16;

// ina_rtl_pkg::desc_t, packed (first member in the most significant bits).
inline constexpr unsigned kStoredBeatsBits = 10;  // ina_rtl_pkg::StoredBeatsBits
struct Desc {
  uint8_t version = 0, mtype = 0, flags = 0, exp = 0, next_exp = 0, sec = 0;
  uint16_t job = 0, rank = 0, slot = 0, gen = 0, count = 0;
  uint32_t offset = 0;
  uint32_t frame_bytes = 0;   // 20 bits
  uint16_t stored_beats = 0;  // kStoredBeatsBits
  bool mac_err = false;
  bool operator==(const Desc&) const = default;
};
inline constexpr unsigned kDescBits = 181 + kStoredBeatsBits;
inline constexpr unsigned kFrameBytesMax = (1u << 20) - 1;

template <typename W>
Desc UnpackDesc(const W& w) {
  Desc d;
  d.mac_err = GetBits(w, 0, 1);
  d.stored_beats = static_cast<uint16_t>(GetBits(w, 1, kStoredBeatsBits));
  d.frame_bytes = static_cast<uint32_t>(GetBits(w, 1 + kStoredBeatsBits, 20));
  d.offset = static_cast<uint32_t>(GetBits(w, 21 + kStoredBeatsBits, 32));
  d.count = static_cast<uint16_t>(GetBits(w, 53 + kStoredBeatsBits, 16));
  d.gen = static_cast<uint16_t>(GetBits(w, 69 + kStoredBeatsBits, 16));
  d.slot = static_cast<uint16_t>(GetBits(w, 85 + kStoredBeatsBits, 16));
  d.rank = static_cast<uint16_t>(GetBits(w, 101 + kStoredBeatsBits, 16));
  d.job = static_cast<uint16_t>(GetBits(w, 117 + kStoredBeatsBits, 16));
  d.sec = static_cast<uint8_t>(GetBits(w, 133 + kStoredBeatsBits, 8));
  d.next_exp = static_cast<uint8_t>(GetBits(w, 141 + kStoredBeatsBits, 8));
  d.exp = static_cast<uint8_t>(GetBits(w, 149 + kStoredBeatsBits, 8));
  d.flags = static_cast<uint8_t>(GetBits(w, 157 + kStoredBeatsBits, 8));
  d.mtype = static_cast<uint8_t>(GetBits(w, 165 + kStoredBeatsBits, 8));
  d.version = static_cast<uint8_t>(GetBits(w, 173 + kStoredBeatsBits, 8));
  return d;
}

template <typename W>
void PackDesc(const Desc& d, W& w) {
  SetBits(w, 0, 1, d.mac_err);
  SetBits(w, 1, kStoredBeatsBits, d.stored_beats);
  SetBits(w, 1 + kStoredBeatsBits, 20, d.frame_bytes);
  SetBits(w, 21 + kStoredBeatsBits, 32, d.offset);
  SetBits(w, 53 + kStoredBeatsBits, 16, d.count);
  SetBits(w, 69 + kStoredBeatsBits, 16, d.gen);
  SetBits(w, 85 + kStoredBeatsBits, 16, d.slot);
  SetBits(w, 101 + kStoredBeatsBits, 16, d.rank);
  SetBits(w, 117 + kStoredBeatsBits, 16, d.job);
  SetBits(w, 133 + kStoredBeatsBits, 8, d.sec);
  SetBits(w, 141 + kStoredBeatsBits, 8, d.next_exp);
  SetBits(w, 149 + kStoredBeatsBits, 8, d.exp);
  SetBits(w, 157 + kStoredBeatsBits, 8, d.flags);
  SetBits(w, 165 + kStoredBeatsBits, 8, d.mtype);
  SetBits(w, 173 + kStoredBeatsBits, 8, d.version);
}

}  // namespace ina::rtl_units
