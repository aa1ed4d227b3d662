// What every RTL unit test harness shares: a Verilator model under a clock and an asynchronous
// reset (ModelTb), the seed, and bit access to Verilator's wide signals (arrays of 32-bit words,
// word 0 = bits 31:0).
//
// Clocking: a test sets a cycle's inputs, calls Settle() (clock low, combinational outputs valid
// for those inputs), checks them, then calls Edge() (rising edge: registers take the cycle's
// inputs). The model's clock and reset are clk_i and rst_ni.
#pragma once

#include <cstdint>
#include <memory>

#include "support/seed.h"
#include "verilated.h"

namespace ina::rtl_units {

// Fixed unless INA_SEED says otherwise (support/seed.h); printed so that a failure can be replayed.
inline uint64_t Seed() { return tests::Seed(); }

template <typename Model>
class ModelTb {
 public:
  ModelTb() : ctx_(std::make_unique<VerilatedContext>()), m_(std::make_unique<Model>(ctx_.get())) {
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
  Model& operator*() { return *m_; }
  Model* operator->() { return m_.get(); }
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
  std::unique_ptr<Model> m_;
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

}  // namespace ina::rtl_units
