// The RTL's assertions (docs/rtl/assertions.md) are compiled into the core model (--assert) and
// fire: a shell that changes a stalled s_axis beat is caught by a_core_in_hold, and the same
// traffic presented correctly raises nothing. (The other assertions are checked by every
// simulation of the core: the core, co-simulation and rtlsim tests.)
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "Vina_core.h"
#include "verilated.h"

namespace {

// Drives back-to-back 8-beat frames with m_axis stalled, so the input FIFOs fill (the slot-reset
// walk also holds packets back) and s_axis_tready_o falls. With `break_protocol`, the first stalled
// beat's data changes before it is taken. Returns whether Verilator saw an error.
bool Drive(bool break_protocol, bool* stalled) {
  auto ctx = std::make_unique<VerilatedContext>();
  ctx->fatalOnError(false);  // record the failed assertion instead of aborting the test
  Vina_core t(ctx.get());
  t.clk_i = 0;
  t.rst_ni = 1;
  t.eval();
  t.rst_ni = 0;  // a falling edge: the asynchronous reset
  t.eval();
  for (int i = 0; i < 2; ++i) {
    t.clk_i = 1;
    t.eval();
    t.clk_i = 0;
    t.eval();
  }
  t.rst_ni = 1;
  t.eval();
  t.m_axis_tready_i = 0;
  t.reg_req_i = 0;
  uint32_t word = 1;
  int beat = 0;
  bool changed = false;
  *stalled = false;
  for (int cyc = 0; cyc < 400 && !ctx->gotError(); ++cyc) {
    t.s_axis_tvalid_i = 1;
    for (int w = 0; w < 16; ++w) t.s_axis_tdata_i[w] = word;
    t.s_axis_tkeep_i = ~uint64_t{0};
    t.s_axis_tlast_i = (beat % 8) == 7;
    t.s_axis_tuser_i = 0;
    t.clk_i = 0;
    t.eval();
    const bool taken = t.s_axis_tready_o;
    if (!taken) *stalled = true;
    t.clk_i = 1;
    t.eval();
    if (taken) {
      ++beat;
      ++word;
    } else if (break_protocol && !changed) {
      ++word;  // the stalled beat's data changes: a broken shell
      changed = true;
    }
  }
  t.final();
  return ctx->gotError();
}

TEST(RtlAssertions, StalledInputThatChangesIsCaught) {
  bool stalled = false;
  EXPECT_TRUE(Drive(/*break_protocol=*/true, &stalled));
  EXPECT_TRUE(stalled) << "s_axis_tready_o never fell: the test did not reach a stall";
}

TEST(RtlAssertions, TheSameTrafficHeldCorrectlyRaisesNothing) {
  bool stalled = false;
  EXPECT_FALSE(Drive(/*break_protocol=*/false, &stalled));
  EXPECT_TRUE(stalled);
}

}  // namespace
