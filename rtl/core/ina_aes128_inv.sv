// AES-128 decryption (FIPS-197, 5.3, the inverse cipher), one block per cycle, each block under
// its own key given as its last round key (round 10; ina_aes128's out_key_o, or ina_gcm_key's):
// the key schedule runs backwards beside the rounds, so no expanded key is stored.
//
// Latency: 11 cycles. Throughput: one block per cycle. No backpressure (the caller keeps room for
// what is in flight). Datasheet: docs/rtl/ina_aes128.md.
module ina_aes128_inv
#(
  parameter int unsigned UserBits = 1
) (
  input  logic                clk_i,
  input  logic                rst_ni,
  input  logic                in_valid_i,
  input  logic [127:0]        in_block_i,
  input  logic [127:0]        in_last_key_i,  // round key 10
  input  logic [UserBits-1:0] in_user_i,
  output logic                out_valid_o,
  output logic [127:0]        out_block_o,
  output logic [UserBits-1:0] out_user_o
);
  localparam int unsigned Rounds = 10;

  // Stage i (0 .. 10) holds the state after i inverse rounds and round key 10 - i, in registers of
  // its own (a generate block each, not an array: a simulator then updates a stage only when it
  // loads). Stage r computes round key 10 - r from round key 11 - r.
  logic [Rounds:0] valid_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      valid_q <= '0;
    end else begin
      valid_q <= {valid_q[Rounds-1:0], in_valid_i};
    end
  end

  // Datapath registers: not reset (valid_q says which hold a block), loaded only with a block (a
  // simulator then computes a round only for a block; in hardware, the stage's enable).
  for (genvar r = 0; r <= Rounds; r++) begin : gen_stage
    logic [127:0]        state_q, key_q;
    logic [UserBits-1:0] user_q;
    if (r == 0) begin : gen_in
      always_ff @(posedge clk_i) begin
        if (in_valid_i) begin
          state_q <= in_block_i ^ in_last_key_i;
          key_q   <= in_last_key_i;
          user_q  <= in_user_i;
        end
      end
    end else begin : gen_round
      // (The key step is written twice rather than as a wire, which a simulator would evaluate
      // in every cycle.)
      always_ff @(posedge clk_i) begin
        if (valid_q[r-1]) begin
          state_q <= ina_gcm_pkg::aes_inv_round(gen_stage[r-1].state_q, ina_gcm_pkg::aes_prev_key(gen_stage[r-1].key_q, ina_gcm_pkg::round_const(Rounds + 1 - r)), r == Rounds);
          key_q   <= ina_gcm_pkg::aes_prev_key(gen_stage[r-1].key_q, ina_gcm_pkg::round_const(Rounds + 1 - r));
          user_q  <= gen_stage[r-1].user_q;
        end
      end
    end
  end

  assign out_valid_o = valid_q[Rounds];
  assign out_block_o = gen_stage[Rounds].state_q;
  assign out_user_o  = gen_stage[Rounds].user_q;

  // The schedule run back to round key 0 is the key itself: not needed past the last round.
  logic unused_key;
  assign unused_key = ^gen_stage[Rounds].key_q;

endmodule
