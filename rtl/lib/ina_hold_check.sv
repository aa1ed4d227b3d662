// AXI-Stream hold check, for simulation only (a checker: no outputs, nothing synthesizable): a
// word presented while its reader stalls is presented again, unchanged, in the next cycle.
// Instantiated under `ifndef SYNTHESIS` with the assertion's name as the instance name
// (a_fifo_hold, a_egress_hold, a_core_in_hold, a_core_dec_hold; docs/rtl/assertions.md).
//
// An immediate assertion at the clock edge over last cycle's word, kept here, which is what
// `valid && !ready |=> valid && $stable(data)` checks: as a concurrent assertion Verilator 5.006
// copies the whole word twice on every evaluation to sample it (a tenth of the core model's
// instructions for the 512- to 609-bit beats, docs/rtl/benchmarks.md).
module ina_hold_check
#(
  parameter int unsigned Width = 1,
  parameter string       What  = "ina_hold_check: a word"  // the error names it
) (
  input logic             clk_i,
  input logic             rst_ni,
  input logic             valid_i,
  input logic             ready_i,
  input logic [Width-1:0] data_i
);
  logic             stalled_q;
  logic [Width-1:0] data_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      stalled_q <= 1'b0;
    end else begin
      stalled_q <= valid_i && !ready_i;
    end
  end

  always_ff @(posedge clk_i) begin
    data_q <= data_i;
    if (rst_ni && stalled_q) begin
      a_hold: assert (valid_i && data_i == data_q)
        else $error("%s changed while stalled", What);
    end
  end

endmodule
