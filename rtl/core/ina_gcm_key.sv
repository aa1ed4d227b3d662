// The per-key constants of AES-GCM for a job's traffic key: the hash key H = AES_K(0^128) and its
// powers H^2 .. H^4 (ina_gcm_hash folds four blocks per beat), and the last round key of K (what
// ina_aes128's inverse decrypts with). Run once per key when a job entry is committed, not per packet.
//
// start_i with key_i: done_o pulses 14 cycles later with the results, which hold until the next
// start. One computation at a time: a start while busy_o restarts it.
// Datasheet: docs/rtl/ina_aes128.md.
module ina_gcm_key (
  input  logic         clk_i,
  input  logic         rst_ni,
  input  logic         start_i,
  input  logic [127:0] key_i,
  output logic         busy_o,
  output logic         done_o,
  output logic [511:0] hpow_o,      // H^i at [128 * (i - 1) +: 128], i = 1 .. 4
  output logic [127:0] last_key_o   // round key 10 of key_i
);
  logic         h_valid, p2_q, p3_q;
  logic [127:0] h, h_key, h1_q, h2_q, h3_q, h4_q, last_q;
  logic [3:0]   inflight_q;  // cycles since start, while computing
  logic         unused_user;

  ina_aes128 #(.UserBits(1)) u_aes (
    .clk_i,
    .rst_ni,
    .in_valid_i (start_i),
    .in_block_i ('0),
    .in_key_i   (key_i),
    .in_user_i  (1'b0),
    .out_valid_o(h_valid),
    .out_block_o(h),
    .out_key_o  (h_key),
    .out_user_o (unused_user)
  );

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      p2_q       <= 1'b0;
      p3_q       <= 1'b0;
      inflight_q <= '0;
    end else begin
      // A restart cancels the products of the block in flight (its H leaves the AES later).
      p2_q <= h_valid && !start_i && inflight_q == 4'd11;
      p3_q <= p2_q && !start_i;
      if (start_i) inflight_q <= 4'd1;
      else if (inflight_q != '0) inflight_q <= inflight_q == 4'd14 ? '0 : inflight_q + 4'd1;
    end
  end

  always_ff @(posedge clk_i) begin
    if (h_valid) begin
      h1_q   <= h;
      last_q <= h_key;
    end
    if (p2_q) begin
      logic [127:0] p2;
      ina_gcm_pkg::gf128_mul(h1_q, h1_q, p2);
      h2_q <= p2;
    end
    if (p3_q) begin
      logic [127:0] p3, p4;
      ina_gcm_pkg::gf128_mul(h2_q, h1_q, p3);
      ina_gcm_pkg::gf128_mul(h2_q, h2_q, p4);
      h3_q <= p3;
      h4_q <= p4;
    end
  end

  assign busy_o     = inflight_q != '0;
  assign done_o     = inflight_q == 4'd14;
  assign hpow_o     = {h4_q, h3_q, h2_q, h1_q};
  assign last_key_o = last_q;

endmodule
