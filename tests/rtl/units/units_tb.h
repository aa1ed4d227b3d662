// Harness for the per-module RTL tests: the Vina_units_tb model (rtl/tb/ina_units_tb.sv, the leaf
// modules side by side), the seed, and bit access to Verilator's wide signals.
//
// Clocking: a test sets a cycle's inputs, calls Settle() (clock low, combinational outputs valid
// for those inputs), checks them, then calls Edge() (rising edge: registers take the cycle's
// inputs). Every module shares clk_i/rst_ni; each test drives only its own module's ports.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>

#include "Vina_units_tb.h"
#include "support/seed.h"
#include "verilated.h"

namespace ina::rtl_units {

// Fixed unless INA_SEED says otherwise (support/seed.h); printed so that a failure can be replayed.
inline uint64_t Seed() { return tests::Seed(); }

class Tb {
 public:
  Tb()
      : ctx_(std::make_unique<VerilatedContext>()),
        m_(std::make_unique<Vina_units_tb>(ctx_.get())) {
    // A falling edge of rst_ni (the asynchronous reset) with a clock edge inside the reset.
    m_->clk_i = 0;
    m_->rst_ni = 1;
    m_->eval();
    m_->rst_ni = 0;
    m_->eval();
    m_->clk_i = 1;
    m_->eval();
    m_->clk_i = 0;
    m_->eval();
    m_->rst_ni = 1;
    m_->eval();
  }
  Vina_units_tb& operator*() { return *m_; }
  Vina_units_tb* operator->() { return m_.get(); }
  void Settle() {
    m_->clk_i = 0;
    m_->eval();
  }
  void Edge() {
    m_->clk_i = 1;
    m_->eval();
    ++cycle_;
  }
  uint64_t cycle() const { return cycle_; }

 private:
  std::unique_ptr<VerilatedContext> ctx_;
  std::unique_ptr<Vina_units_tb> m_;
  uint64_t cycle_ = 0;
};

// Bits [lsb, lsb + width) of a Verilator wide signal (array of 32-bit words, word 0 = bits 31:0).
// REQUIRES: width <= 64.
template <typename W>
uint64_t GetBits(const W& w, unsigned lsb, unsigned width) {
  uint64_t v = 0;
  for (unsigned i = 0; i < width; ++i) {
    unsigned b = lsb + i;
    v |= static_cast<uint64_t>((w[b / 32] >> (b % 32)) & 1u) << i;
  }
  return v;
}

template <typename W>
void SetBits(W& w, unsigned lsb, unsigned width, uint64_t v) {
  for (unsigned i = 0; i < width; ++i) {
    unsigned b = lsb + i;
    uint32_t bit = 1u << (b % 32);
    if ((v >> i) & 1) {
      w[b / 32] |= bit;
    } else {
      w[b / 32] &= ~bit;
    }
  }
}

// A 512-bit beat as 64 bytes (byte 0 = bits 7:0) <-> the model's 16 words.
template <typename W>
void SetBeat(W& w, const uint8_t* bytes) {
  for (int i = 0; i < 16; ++i) {
    w[i] = static_cast<uint32_t>(bytes[4 * i]) | static_cast<uint32_t>(bytes[4 * i + 1]) << 8 |
           static_cast<uint32_t>(bytes[4 * i + 2]) << 16 |
           static_cast<uint32_t>(bytes[4 * i + 3]) << 24;
  }
}
template <typename W>
void GetBeat(const W& w, uint8_t* bytes) {
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 4; ++j) bytes[4 * i + j] = static_cast<uint8_t>(w[i] >> (8 * j));
  }
}

// MaxK of ina_units_tb (its parameter, passed to ina_ingress, ina_regs and ina_agg) and the payload
// beats of a K = MaxK packet.
inline constexpr uint32_t kMaxK = 512;
inline constexpr uint32_t kMaxBeats = kMaxK / 16;

// ina_rtl_pkg::desc_t, packed (first member in the most significant bits).
inline constexpr unsigned kStoredBeatsBits = 10;  // ina_rtl_pkg::StoredBeatsBits
struct Desc {
  uint8_t version = 0, mtype = 0, flags = 0, exp = 0, next_exp = 0;
  uint16_t job = 0, rank = 0, slot = 0, gen = 0, count = 0;
  uint32_t offset = 0;
  uint32_t frame_bytes = 0;   // 20 bits
  uint16_t stored_beats = 0;  // kStoredBeatsBits
  bool mac_err = false;
  bool operator==(const Desc&) const = default;
};
inline constexpr unsigned kDescBits = 173 + kStoredBeatsBits;
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
  d.next_exp = static_cast<uint8_t>(GetBits(w, 133 + kStoredBeatsBits, 8));
  d.exp = static_cast<uint8_t>(GetBits(w, 141 + kStoredBeatsBits, 8));
  d.flags = static_cast<uint8_t>(GetBits(w, 149 + kStoredBeatsBits, 8));
  d.mtype = static_cast<uint8_t>(GetBits(w, 157 + kStoredBeatsBits, 8));
  d.version = static_cast<uint8_t>(GetBits(w, 165 + kStoredBeatsBits, 8));
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
  SetBits(w, 133 + kStoredBeatsBits, 8, d.next_exp);
  SetBits(w, 141 + kStoredBeatsBits, 8, d.exp);
  SetBits(w, 149 + kStoredBeatsBits, 8, d.flags);
  SetBits(w, 157 + kStoredBeatsBits, 8, d.mtype);
  SetBits(w, 165 + kStoredBeatsBits, 8, d.version);
}

}  // namespace ina::rtl_units
