// Synchronous first-word-fall-through FIFO with valid/ready on both sides.
//
// Latency: a word written in cycle t is visible at the output in cycle t+1.
// Throughput: one write and one read per cycle, also when full (a read frees the slot for a write
// in the same cycle only from the next cycle on: in_ready_o depends on the state alone).
// Backpressure: out_data_o and out_valid_o hold while out_ready_i is low. in_ready_o never depends
// combinationally on in_valid_i, and out_valid_o never on out_ready_i.
// free_o: entries free after this cycle's state (before this cycle's write), for callers that
// reserve room ahead of time.
// Storage is a register array (LUTRAM on an FPGA); data is not reset.
module ina_fifo #(
  parameter int unsigned Width = 8,
  parameter int unsigned Depth = 4,  // power of two, >= 2
  // Simulation: check that the head word holds while the reader stalls (a_fifo_hold). 0 for a wide
  // FIFO whose check costs a simulator a copy of the word every cycle and adds nothing (its
  // reader never stalls on it alone).
  parameter bit          HoldCheck = 1'b1
) (
  input  logic                   clk_i,
  input  logic                   rst_ni,
  input  logic                   in_valid_i,
  output logic                   in_ready_o,
  input  logic [Width-1:0]       in_data_i,
  output logic                   out_valid_o,
  input  logic                   out_ready_i,
  output logic [Width-1:0]       out_data_o,
  output logic [$clog2(Depth):0] free_o
);
  localparam int unsigned AW = $clog2(Depth);

  // Parameters checked at elaboration.
  if (Depth < 2 || (1 << AW) != Depth) begin : gen_bad_depth
    $error("ina_fifo: Depth must be a power of two >= 2");
  end
  if (Width < 1) begin : gen_bad_width
    $error("ina_fifo: Width must be >= 1");
  end

  logic [Width-1:0] mem_q[Depth];
  logic [AW:0] wptr_q, rptr_q, wptr_d, rptr_d;
  logic [AW:0] used;
  logic        push, pop;

  assign used        = wptr_q - rptr_q;
  assign in_ready_o  = used != Depth[AW:0];
  assign out_valid_o = used != '0;
  assign out_data_o  = mem_q[rptr_q[AW-1:0]];
  assign free_o      = Depth[AW:0] - used;
  assign push        = in_valid_i && in_ready_o;
  assign pop         = out_valid_o && out_ready_i;
  assign wptr_d      = wptr_q + {{AW{1'b0}}, push};
  assign rptr_d      = rptr_q + {{AW{1'b0}}, pop};

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      wptr_q <= '0;
      rptr_q <= '0;
    end else begin
      wptr_q <= wptr_d;
      rptr_q <= rptr_d;
    end
  end

  always_ff @(posedge clk_i) begin
    if (push) mem_q[wptr_q[AW-1:0]] <= in_data_i;
  end

`ifndef SYNTHESIS
  // Invariants, checked in simulation (Verilator --assert; docs/rtl/assertions.md).
  a_fifo_used: assert property (@(posedge clk_i) disable iff (!rst_ni) used <= Depth[AW:0])
    else $error("ina_fifo: %0d words used of %0d", used, Depth);
  // The head word holds while the reader stalls.
  if (HoldCheck) begin : gen_hold
    ina_hold_check #(.Width(Width), .What("ina_fifo: the head word")) a_fifo_hold (
      .clk_i, .rst_ni, .valid_i(out_valid_o), .ready_i(out_ready_i), .data_i(out_data_o));
  end
`endif

endmodule
