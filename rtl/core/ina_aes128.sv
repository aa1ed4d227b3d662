// AES-128 encryption (FIPS-197), one block per cycle, each block under its own key: the key
// schedule runs beside the rounds, one step per stage, so a pipeline of blocks may mix keys (the
// jobs of keyed traffic) with no key memory and no setup.
//
// Latency: 11 cycles (AddRoundKey of the input, then one stage per round). Throughput: one block
// per cycle. No backpressure: a block entering at cycle t leaves at t + 11 with its user bits;
// the caller keeps room for what is in flight. out_key_o is the block's last round key (round 10),
// from which ina_aes128_inv decrypts. Datasheet: docs/rtl/ina_aes128.md.
module ina_aes128
#(
  parameter int unsigned UserBits = 1
) (
  input  logic                clk_i,
  input  logic                rst_ni,
  input  logic                in_valid_i,
  input  logic [127:0]        in_block_i,
  input  logic [127:0]        in_key_i,
  input  logic [UserBits-1:0] in_user_i,
  output logic                out_valid_o,
  output logic [127:0]        out_block_o,
  output logic [127:0]        out_key_o,
  output logic [UserBits-1:0] out_user_o
);
  localparam int unsigned Rounds = 10;

  // Stage r (0 .. 10) holds the state after round r and round key r.
  logic [Rounds:0]       valid_q;
  logic [127:0]          state_q[Rounds+1];
  logic [127:0]          key_q[Rounds+1];
  logic [UserBits-1:0]   user_q[Rounds+1];

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      valid_q <= '0;
    end else begin
      valid_q <= {valid_q[Rounds-1:0], in_valid_i};
    end
  end

  // Datapath registers: not reset (valid_q says which hold a block).
  always_ff @(posedge clk_i) begin
    state_q[0] <= in_block_i ^ in_key_i;
    key_q[0]   <= in_key_i;
    user_q[0]  <= in_user_i;
  end
  for (genvar r = 1; r <= Rounds; r++) begin : gen_round
    logic [127:0] k;
    assign k = ina_gcm_pkg::aes_next_key(key_q[r-1], ina_gcm_pkg::round_const(r));
    always_ff @(posedge clk_i) begin
      state_q[r] <= ina_gcm_pkg::aes_round(state_q[r-1], k, r == Rounds);
      key_q[r]   <= k;
      user_q[r]  <= user_q[r-1];
    end
  end

  assign out_valid_o = valid_q[Rounds];
  assign out_block_o = state_q[Rounds];
  assign out_key_o   = key_q[Rounds];
  assign out_user_o  = user_q[Rounds];

endmodule
