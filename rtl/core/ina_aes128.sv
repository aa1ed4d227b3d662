// AES-128 (FIPS-197), one block per cycle, each block under its own key: the key schedule runs
// beside the rounds, one step per stage, so a pipeline of blocks may mix keys (the jobs of keyed
// traffic) with no key memory and no setup.
//   Inverse = 0: encryption; in_key_i is the key (round key 0), out_key_o its round key 10.
//   Inverse = 1: the inverse cipher (FIPS-197, 5.3); in_key_i is the last round key (round key 10:
//                an encryption's out_key_o, or ina_gcm_key's), the schedule runs backwards, and
//                out_key_o is round key 0, the key itself.
//
//   Blocks > 1: that many blocks per cycle under the one key (block b at [128 b +: 128]), the
//                schedule shared by them (ina_gcm_ctr's four counter blocks of a beat).
//
// Latency: 11 cycles (AddRoundKey of the input, then one stage per round). Throughput: one block
// (Blocks blocks) per cycle. No backpressure: a block entering at cycle t leaves at t + 11 with its
// user bits; the caller keeps room for what is in flight. Datasheet: docs/rtl/ina_aes128.md.
module ina_aes128
#(
  parameter bit          Inverse  = 1'b0,
  parameter int unsigned UserBits = 1,
  parameter int unsigned Blocks   = 1
) (
  input  logic                    clk_i,
  input  logic                    rst_ni,
  input  logic                    in_valid_i,
  input  logic [128*Blocks-1:0]   in_block_i,
  input  logic [127:0]            in_key_i,
  input  logic [UserBits-1:0]     in_user_i,
  output logic                    out_valid_o,
  output logic [128*Blocks-1:0]   out_block_o,
  output logic [127:0]            out_key_o,
  output logic [UserBits-1:0]     out_user_o
);
  localparam int unsigned Rounds = 10;
  // The round constants rcon(1) .. rcon(10) (FIPS-197, 5.2) at [8 (r - 1) +: 8]: constants of the
  // stages, not ina_gcm_pkg::round_const calls (a simulator would compute one in every stage that
  // loads, and set up its locals in every cycle).
  localparam logic [8*Rounds-1:0] Rcon = 80'h36_1b_80_40_20_10_08_04_02_01;

  // Stage r (0 .. 10) holds the state after r rounds and its round key (r, or 10 - r inverse), in
  // registers of its own (a generate block each, not an array: a simulator then updates a stage
  // only when it loads).
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
    logic [128*Blocks-1:0] state_q;
    logic [127:0]          key_q;
    logic [UserBits-1:0]   user_q;
    if (r == 0) begin : gen_in
      always_ff @(posedge clk_i) begin
        if (in_valid_i) begin
          state_q <= in_block_i ^ {Blocks{in_key_i}};
          key_q   <= in_key_i;
          user_q  <= in_user_i;
        end
      end
    end else begin : gen_round
      // rcon of the round key this stage makes (r), or of the one it undoes (11 - r).
      localparam logic [7:0] Rc = Rcon[8*(Inverse ? Rounds - r : r - 1) +: 8];
      always_ff @(posedge clk_i) begin
        if (valid_q[r-1]) begin
          logic [127:0] k, b;
          if (Inverse) begin  // round key 10 - r from round key 11 - r
            ina_gcm_pkg::aes_prev_key(gen_stage[r-1].key_q, Rc, k);
          end else begin      // round key r from round key r - 1
            ina_gcm_pkg::aes_next_key(gen_stage[r-1].key_q, Rc, k);
          end
          for (int unsigned j = 0; j < Blocks; j++) begin
            if (Inverse) begin
              ina_gcm_pkg::aes_inv_round(gen_stage[r-1].state_q[128*j +: 128], k, r == Rounds, b);
            end else begin
              ina_gcm_pkg::aes_round(gen_stage[r-1].state_q[128*j +: 128], k, r == Rounds, b);
            end
            state_q[128*j +: 128] <= b;
          end
          key_q   <= k;
          user_q  <= gen_stage[r-1].user_q;
        end
      end
    end
  end

  assign out_valid_o = valid_q[Rounds];
  assign out_block_o = gen_stage[Rounds].state_q;
  assign out_key_o   = gen_stage[Rounds].key_q;
  assign out_user_o  = gen_stage[Rounds].user_q;

endmodule
