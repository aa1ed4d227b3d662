// Slot data memory: Words x Width, one synchronous read port and one write port (a simple
// dual-port block RAM).
//
// Read: rdata_o in cycle t+1 holds the word at raddr_i in cycle t, as it was before cycle t's write
// (read-first). Callers forward writes of cycles t and t+1 themselves (see ina_agg).
// Storage is not reset.
module ina_slot_mem #(
  parameter int unsigned Words = 16,
  parameter int unsigned Width = 32
) (
  input  logic                     clk_i,
  input  logic                     re_i,
  input  logic [$clog2(Words)-1:0] raddr_i,
  output logic [Width-1:0]         rdata_o,
  input  logic                     we_i,
  input  logic [$clog2(Words)-1:0] waddr_i,
  input  logic [Width-1:0]         wdata_i
);
  if (Words < 2 || (1 << $clog2(Words)) != Words) begin : gen_bad_words
    $error("ina_slot_mem: Words must be a power of two >= 2");
  end

  logic [Width-1:0] mem_q[Words];

  always_ff @(posedge clk_i) begin
    if (re_i) rdata_o <= mem_q[raddr_i];
    if (we_i) mem_q[waddr_i] <= wdata_i;
  end

endmodule
