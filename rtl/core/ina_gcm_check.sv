// The tag check of a keyed frame (sec mode mac or mac_encrypt), in the form a pipeline can use before it knows
// which nonce the frame must carry: ina_gcm_hash computes S and takes the received tag, and
// ina_aes128 (Inverse) decrypts tag ^ S under the job's key. For a genuine frame that is J0, the GCM
// counter block of its nonce (rank | slot | use | 0x00000001); ina_agg compares it with the J0 of
// the use its slot expects (and of that use - 65536: a replay). Forging a frame whose J0 comes out
// as expected is forging the GCM tag.
//
// The key and the powers of H are given with the frame's first beat (in_last_key_i: round key 10;
// in_hpow_i: H .. H^4; both from ina_gcm_key), and the frame's mode (in_enc_i: mac_encrypt, whose
// GHASH takes the payload as ciphertext), with user bits that come out with the result, as does
// the key itself (out_key_o: what the inverse cipher's schedule ends at), which a mac_encrypt
// frame's keystream needs (ina_gcm_ctr).
// Latency: out_valid_o 14 cycles after the frame's last beat (3 hash, 11 AES). Throughput: one
// beat per cycle, frames back to back. No backpressure. Datasheet: docs/rtl/ina_gcm_hash.md.
module ina_gcm_check
#(
  parameter int unsigned UserBits = 1
) (
  input  logic                clk_i,
  input  logic                rst_ni,
  input  logic                in_valid_i,
  input  logic [ina_rtl_pkg::BeatBits-1:0] in_data_i,
  input  logic                in_last_i,
  input  logic [511:0]        in_hpow_i,
  input  logic [127:0]        in_last_key_i,
  input  logic                in_enc_i,
  input  logic [UserBits-1:0] in_user_i,
  output logic                out_valid_o,
  output logic [127:0]        out_j0_o,    // AES_K^-1(tag ^ S)
  output logic [127:0]        out_key_o,   // K (round key 0)
  output logic [UserBits-1:0] out_user_o,
  output logic                busy_o       // a frame's result is in flight
);
  logic                         h_valid;
  logic [127:0]                 h_hash, h_tag;
  logic [128+UserBits-1:0]      h_user;
  logic [10:0]                  inflight_q;  // results in the AES, one bit per stage
  logic [2:0]                   hash_q;

  ina_gcm_hash #(.Check(1'b1), .UserBits(128 + UserBits)) u_hash (
    .clk_i,
    .rst_ni,
    .in_valid_i,
    .in_data_i,
    .in_last_i,
    .in_hpow_i,
    .in_enc_i,
    .in_user_i  ({in_last_key_i, in_user_i}),
    .out_valid_o(h_valid),
    .out_hash_o (h_hash),
    .out_tag_o  (h_tag),
    .out_user_o (h_user)
  );

  ina_aes128 #(.Inverse(1'b1), .UserBits(UserBits)) u_aes (
    .clk_i,
    .rst_ni,
    .in_valid_i (h_valid),
    .in_block_i (h_tag ^ h_hash),
    .in_key_i   (h_user[UserBits +: 128]),  // the last round key
    .in_user_i  (h_user[UserBits-1:0]),
    .out_valid_o,
    .out_block_o(out_j0_o),
    .out_key_o,
    .out_user_o
  );

  // busy_o: a beat was taken whose frame's result has not come out (the hash's 3 stages after the
  // last beat, then the AES's 11), or a frame is part way in.
  logic in_frame_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      in_frame_q <= 1'b0;
      hash_q     <= '0;
      inflight_q <= '0;
    end else begin
      if (in_valid_i) in_frame_q <= !in_last_i;
      hash_q     <= {hash_q[1:0], in_valid_i && in_last_i};
      inflight_q <= {inflight_q[9:0], h_valid};
    end
  end
  assign busy_o = in_frame_q || |hash_q || h_valid || |inflight_q;

endmodule
