// The CTR keystream of sec mode mac_encrypt (AES-GCM, docs/security.md) at one beat per cycle: a
// beat goes in, and the same beat comes out 11 cycles later, XORed with its keystream when
// in_enc_i. Payload beat in_index_i (0 for the frame's first payload beat) holds the payload's
// blocks c = 4 in_index_i + j at its bytes 16 j .. 16 j + 15 (C is beat-aligned: it starts at the
// frame's second beat), and block c's keystream is AES_K(inc32^(c + 1)(J0)): J0's first 96 bits
// and its last 32 plus c + 1, mod 2^32 (NIST SP 800-38D; J0 = nonce | 1, so block 0 takes counter
// 2). One ina_aes128 of four blocks (one per block of the beat, the key schedule shared), each beat
// under its own key (in_key_i), so consecutive beats may belong to different jobs.
//   ina_core runs two: one before ina_egress encrypts a mac_encrypt job's results (the beats as
//   they leave ina_agg; the header beat passes unchanged); one beside the payload FIFO makes the
//   keystream of each received mac_encrypt frame from the J0 its tag gave (ina_gcm_check), which
//   the payload is XORed with as ina_agg pops it (zero beats in: the keystream out).
// in_user_i comes out with its beat (the caller's frame bits: tkeep, tlast, ...).
// Latency: 11 cycles, every beat (encrypted or not), so beats leave in order. Throughput: one beat
// per cycle. No backpressure: the caller keeps room for what is in flight (inflight_o beats).
// Datasheet: docs/rtl/ina_gcm_hash.md.
module ina_gcm_ctr
#(
  parameter int unsigned UserBits = 1,
  parameter bit          PassData = 1'b1  // 0: in_data_i is ignored, out_data_o is the keystream
) (
  input  logic                clk_i,
  input  logic                rst_ni,
  input  logic                in_valid_i,
  input  logic [ina_rtl_pkg::BeatBits-1:0] in_data_i,
  input  logic                in_enc_i,    // XOR this beat with its keystream
  input  logic [15:0]         in_index_i,  // the payload beat's index in its frame (0: the first)
  input  logic [127:0]        in_j0_i,     // the frame's J0 (nonce | 0x00000001)
  input  logic [127:0]        in_key_i,    // the frame's key (round key 0)
  input  logic [UserBits-1:0] in_user_i,
  output logic                out_valid_o,
  output logic [ina_rtl_pkg::BeatBits-1:0] out_data_o,
  output logic [UserBits-1:0] out_user_o,
  output logic [3:0]          inflight_o,  // beats in (0 .. 11)
  output logic                busy_o
);
  localparam int unsigned Latency = 11;  // ina_aes128's

  if (ina_rtl_pkg::BeatBytes != 64) begin : gen_bad_beat
    $error("ina_gcm_ctr: written for 64-byte beats (4 AES blocks)");
  end

  // The keystream: block j of the beat under its counter (at [128 j +: 128]), whose output lines
  // up with the delayed beat.
  logic         ks_valid, user_unused;
  logic [511:0] ctr, ks;
  logic [127:0] key_unused;
  for (genvar j = 0; j < 4; j++) begin : gen_ctr
    assign ctr[128*j +: 128] = {in_j0_i[127:32], in_j0_i[31:0] + {14'd0, in_index_i, 2'(j)} + 32'd1};
  end
  ina_aes128 #(.UserBits(1), .Blocks(4)) u_aes (
    .clk_i,
    .rst_ni,
    .in_valid_i (in_valid_i && in_enc_i),
    .in_block_i (ctr),
    .in_key_i   (in_key_i),
    .in_user_i  (1'b0),
    .out_valid_o(ks_valid),
    .out_block_o(ks),
    .out_key_o  (key_unused),
    .out_user_o (user_unused)
  );

  // The beats, delayed as the blocks are: each written once into a ring of 16 at its cycle, read
  // into the output register 10 cycles later and presented in the 11th (they leave in order, one
  // per cycle at most), so a beat is copied twice, not once per stage, and nothing is copied in a
  // cycle without a beat (LUTRAM on an FPGA; a simulator's cost).
  localparam int unsigned Slots = 16;
  localparam int unsigned DataBits = PassData ? ina_rtl_pkg::BeatBits : 1;
  logic [Latency-1:0] valid_q;
  logic [3:0]         wr_q, rd_q;
  logic [DataBits+UserBits:0] ring_q[Slots];  // {enc, user, data}
  logic [DataBits-1:0]        out_raw;
  logic                       out_enc;
  logic [UserBits-1:0]        out_user_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      valid_q <= '0;
      wr_q    <= '0;
      rd_q    <= '0;
    end else begin
      valid_q <= {valid_q[Latency-2:0], in_valid_i};
      if (in_valid_i) wr_q <= wr_q + 4'd1;
      if (valid_q[Latency-2]) rd_q <= rd_q + 4'd1;
    end
  end
  always_ff @(posedge clk_i) begin
    if (in_valid_i) ring_q[wr_q] <= {in_enc_i, in_user_i, PassData ? DataBits'(in_data_i) : '0};
    if (valid_q[Latency-2]) {out_enc, out_user_q, out_raw} <= ring_q[rd_q];
  end
  assign out_user_o = out_user_q;

  // Keystream byte t of block j (AES's byte order: byte 0 in the top 8 bits) over beat byte 16 j + t.
  always_comb begin
    out_data_o = '0;
    if (PassData) out_data_o = ina_rtl_pkg::BeatBits'(out_raw);
    if (out_enc) begin
      for (int unsigned j = 0; j < 4; j++) begin
        for (int unsigned t = 0; t < 16; t++) begin
          out_data_o[8*(16*j + t) +: 8] = out_data_o[8*(16*j + t) +: 8] ^ ks[128*j + 127 - 8*t -: 8];
        end
      end
    end
  end
  assign out_valid_o = valid_q[Latency-1];
  assign inflight_o  = 4'($countones(valid_q));
  assign busy_o      = |valid_q;

  logic unused;
  assign unused = ^{key_unused, user_unused, in_data_i};

`ifndef SYNTHESIS
  // The keystream comes out with its beat (the pipelines' latencies agree). An immediate assertion
  // at the clock edge: as a concurrent one, Verilator 5.006 would sample the whole ring word that
  // out_enc is read from on every evaluation (docs/rtl/assertions.md, a_fifo_hold).
  always_ff @(posedge clk_i) begin
    if (rst_ni) begin
      a_ctr_lockstep: assert (ks_valid == (out_valid_o && out_enc))
        else $error("ina_gcm_ctr: a keystream block out of step with its beat");
    end
  end
`endif

endmodule
