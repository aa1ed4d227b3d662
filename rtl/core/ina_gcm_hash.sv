// GHASH of a keyed data or result frame (docs/security.md), in either keyed mode, chosen per frame:
//   mac (in_enc_i 0): the associated data A is the ina header, with the retx flag bit cleared, and
//     the payload (count elements); there is no ciphertext.
//     S = GHASH_H(A || 0-pad || [len(A)]_64 || [0]_64).
//   mac_encrypt (in_enc_i 1): A is the header alone (22 bytes, retx cleared) and the ciphertext C
//     the payload. S = GHASH_H(A || 0-pad || C || 0-pad || [len(A)]_64 || [len(C)]_64).
// AES-GCM's tag masks S: tag = AES_K(J0) ^ S.
//
// Frames stream in as ina_ingress sees them (frame byte 0 in in_data_i[7:0]; the ina header at
// byte 42 of the first beat, the payload from the second beat).
//   mac: A's length is 22 + 4 count bytes, count from the header: A's 16-byte blocks start at frame
//     bytes 42 + 16 i, six bytes before the beat boundaries, so each beat after the first completes
//     four blocks (the six bytes kept from the beat before and 58 of its own) and the first beat
//     completes block 0; the partial last block is folded after the frame's last beat.
//   mac_encrypt: the first beat completes A's two blocks (bytes 42 .. 57, and 58 .. 63 padded);
//     C starts at the second beat, so its blocks are beat-aligned and each beat completes up to
//     four of them, the last one zero-padded within its beat.
// Each beat folds all the blocks it completes in one step, Y' = Y H^m ^ X_1 H^m ^ X_2 H^(m-1) ^ ...
// ^ X_m H, with the powers H .. H^4 that ina_gcm_key computed for the key, given with the first
// beat (in_hpow_i). The length block is folded after the frame's last beat.
// Check = 1 (a received frame): the 16 bytes after the payload are the received tag, captured
// wherever they fall (in one beat or across two) and given with S. Check = 0 (a frame to seal):
// the frame ends with the payload; out_tag_o is 0.
// A frame whose length disagrees with its count still gives one result (of no meaning): the
// caller drops such a frame by its length anyway.
//
// Latency: out_valid_o 3 cycles after the frame's last beat, with the first beat's user bits.
// Throughput: one beat per cycle, frames back to back. No backpressure: in_valid_i is a beat
// taken; the caller keeps room for the results in flight. Datasheet: docs/rtl/ina_gcm_hash.md.
module ina_gcm_hash
#(
  parameter bit          Check    = 1'b1,
  parameter int unsigned UserBits = 1
) (
  input  logic                clk_i,
  input  logic                rst_ni,
  input  logic                in_valid_i,
  input  logic [ina_rtl_pkg::BeatBits-1:0] in_data_i,
  input  logic                in_last_i,
  input  logic [511:0]        in_hpow_i,   // H^i at [128 * (i - 1) +: 128]; read at a first beat
  input  logic                in_enc_i,    // mode mac_encrypt (else mac); read at a first beat
  input  logic [UserBits-1:0] in_user_i,   // read at a first beat
  output logic                out_valid_o,
  output logic [127:0]        out_hash_o,  // S
  output logic [127:0]        out_tag_o,   // Check: the frame's tag (the 16 bytes after A)
  output logic [UserBits-1:0] out_user_o
);
  localparam int unsigned HdrByte = ina_rtl_pkg::InaHdrByte;  // 42: where A starts
  localparam int unsigned Shift = 64 - (HdrByte + 16) % 64;   // 6: bytes a block takes from the beat before
  localparam int unsigned RetxByte = HdrByte + ina_proto_pkg::FlagsOffset;

  if (ina_rtl_pkg::BeatBytes != 64 || HdrByte + 16 != 58) begin : gen_bad_layout
    $error("ina_gcm_hash: written for 64-byte beats and the ina header at byte 42");
  end

  // ---------------------------------------------------------------------------------------------
  // Input: the beat's place in its frame.
  logic        in_frame_q;
  logic [15:0] in_beat_q;  // beat index of the next beat within its frame (saturating)

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      in_frame_q <= 1'b0;
      in_beat_q  <= '0;
    end else if (in_valid_i) begin
      in_frame_q <= !in_last_i;
      in_beat_q  <= in_last_i ? '0 : (in_beat_q == 16'hFFFF ? in_beat_q : in_beat_q + 16'd1);
    end
  end

  // The beat's geometry: which of its bytes are A's, which blocks it completes, where the tag's
  // bytes fall. It depends only on the frame's count and the beat's index, so it is computed as the
  // beat comes in and registered with it: the fold's cycle then holds only byte selects, the
  // products and their XOR, not the length arithmetic's carry chains in front of them (synthesis:
  // docs/rtl/synthesis.md, "The AES-GCM blocks").
  //   blk_valid[j]  window block j (A's block 4 b - 3 + j, at A-offset 64 b - 48 + 16 j) is
  //                 complete in this beat; inc[16 j + t]: its byte t is A's (else zero padding)
  //   msel, psel[4 j +: 4]  the power of H for Y (H^m, m the blocks completed) and for block j
  //                 (H^(blocks from j on)), one-hot: bit i for H^(i + 1), none for H^0
  //   cvalid, cinc[t]  the block starting at A-offset 64 b + 16 (of which this beat holds the
  //                 first Shift bytes) is A's, and its byte t is
  //   tag_hit[k], tag_at[6 k +: 6]  (Check) the tag's byte k (frame byte 42 + len(A) + k) is in
  //                 this beat, at that byte
  function automatic logic [2:0] ones4(input logic [3:0] v);  // bits set in v
    case (v)
      4'b0000: ones4 = 3'd0;
      4'b0001, 4'b0010, 4'b0100, 4'b1000: ones4 = 3'd1;
      4'b0111, 4'b1011, 4'b1101, 4'b1110: ones4 = 3'd3;
      4'b1111: ones4 = 3'd4;
      default: ones4 = 3'd2;
    endcase
  endfunction
  function automatic logic [3:0] onehot(input logic [2:0] n);  // bit n - 1 (none for 0)
    onehot = n == 3'd0 ? 4'b0000 : 4'(4'b0001 << (n - 3'd1));
  endfunction
  typedef struct packed {
    logic [3:0]       blk_valid;
    logic [63:0]      inc;
    logic [3:0]       msel;
    logic [15:0]      psel;
    logic             cvalid;
    logic [Shift-1:0] cinc;
    logic [15:0]      tag_hit;
    logic [95:0]      tag_at;
  } geom_t;
  task automatic geometry(input logic [15:0] count, input logic [15:0] beat, input logic enc,
                          output geom_t g);
    logic [3:0]       blk_valid;
    logic [63:0]      inc;
    logic [3:0]       msel;
    logic [15:0]      psel;
    logic             cvalid;
    logic [Shift-1:0] cinc;
    logic [15:0]      tag_hit;
    logic [95:0]      tag_at;
    logic [18:0] alen;                  // mac: len(A) in bytes, 22 + 4 count; mac_encrypt: len(C)
    logic signed [23:0] pos, rem;
    logic [20:0] at;
    alen = enc ? {1'b0, count, 2'b00} : 19'd22 + {1'b0, count, 2'b00};
    cvalid = 1'b0;
    cinc   = '0;
    if (!enc) begin
      for (int unsigned j = 0; j < 4; j++) begin
        pos = $signed({2'b0, beat, 6'b0}) - 24'sd48 + $signed(24'(16 * j));
        rem = $signed({5'd0, alen}) - pos;
        blk_valid[j] = pos >= 0 && rem > 0;
        for (int unsigned t = 0; t < 16; t++) inc[16*j + t] = rem > $signed(24'(t));
      end
      pos = $signed({2'b0, beat, 6'b0}) + 24'sd16;
      rem = $signed({5'd0, alen}) - pos;
      cvalid = rem > 0;
      for (int unsigned t = 0; t < Shift; t++) cinc[t] = rem > $signed(24'(t));
    end else if (beat == '0) begin
      // A's two blocks: 16 header bytes, then its last 6 and zero padding.
      blk_valid = 4'b0011;
      for (int unsigned t = 0; t < 64; t++) inc[t] = t < 16 + (64 - HdrByte - 16);
    end else begin
      // C's blocks 4 (b - 1) .. 4 b - 1, at the beat's bytes 16 j.
      for (int unsigned j = 0; j < 4; j++) begin
        pos = $signed({2'b0, beat - 16'd1, 6'b0}) + $signed(24'(16 * j));
        rem = $signed({5'd0, alen}) - pos;
        blk_valid[j] = rem > 0;
        for (int unsigned t = 0; t < 16; t++) inc[16*j + t] = rem > $signed(24'(t));
      end
    end
    // The blocks valid are consecutive and end at the window's end or at A's (C's) end: the powers
    // of H count down from m to the last valid block's 1. (Counts of 4 bits as lookups, one LUT
    // level, not adders.)
    msel = onehot(ones4(blk_valid));
    for (int unsigned j = 0; j < 4; j++) psel[4*j +: 4] = onehot(ones4(blk_valid & (4'hF << j)));
    for (int unsigned k = 0; k < 16; k++) begin
      // The tag follows A (mac) or C, which starts at the second beat (mac_encrypt).
      at = (enc ? 21'(64) : 21'(HdrByte)) + {2'b0, alen} + 21'(k);
      tag_hit[k] = {1'b0, at[20:6]} == beat;
      tag_at[6*k +: 6] = at[5:0];
    end
    // (Built from plain variables, as fold's result: yosys 0.23 assigns no struct members.)
    g = {blk_valid, inc, msel, psel, cvalid, cinc, tag_hit, tag_at};  // geom_t's fields in order
  endtask

  // The frame's count: from the header of its first beat, then held.
  localparam int unsigned CountByte = HdrByte + ina_proto_pkg::CountOffset;
  logic [15:0] cnt_q, in_count;
  logic        enc_q, in_enc;  // the frame's mode: mac_encrypt (from its first beat, then held)
  assign in_count = in_frame_q ? cnt_q
                              : {in_data_i[8*CountByte +: 8], in_data_i[8*(CountByte + 1) +: 8]};
  assign in_enc   = in_frame_q ? enc_q : in_enc_i;

  // Stage A: the beat and its geometry, registered.
  logic                a_valid_q, a_last_q, a_first_q, a_enc_q;
  logic [15:0]         a_count_q;
  logic [ina_rtl_pkg::BeatBits-1:0] a_data_q;
  geom_t               a_geom_q;
  logic [511:0]        hpow_q;    // the frame's powers of H
  logic [UserBits-1:0] user_q;    // the frame's user bits

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      a_valid_q <= 1'b0;
    end else begin
      a_valid_q <= in_valid_i;
    end
  end
  always_ff @(posedge clk_i) begin
    if (in_valid_i) begin
      geom_t g;
      geometry(in_count, in_beat_q, in_enc, g);
      a_data_q  <= in_data_i;
      a_last_q  <= in_last_i;
      a_first_q <= !in_frame_q;
      a_enc_q   <= in_enc;
      a_count_q <= in_count;
      a_geom_q  <= g;
      if (!in_frame_q) begin
        cnt_q  <= in_count;
        enc_q  <= in_enc_i;
        hpow_q <= in_hpow_i;
        user_q <= in_user_i;
      end
    end
  end

  // ---------------------------------------------------------------------------------------------
  // Stage A's fold.

  // The fold of one beat, as a task of the beat, its geometry and the registers, called only for a
  // beat (a simulator then does nothing in idle cycles; in hardware the registers' enables). A
  // task, as it calls the GF(2^128) product (a task: ina_gcm_pkg), which a function may not; its
  // result is built from plain variables, as yosys 0.23 cannot assign the members of a struct
  // variable.
  typedef struct packed {
    logic [15:0]  count;   // the frame's count (from its first beat)
    logic [127:0] y;       // Y after the beat
    logic [127:0] cblk;    // the partial block after the beat (its first 6 bytes), if it ends A
    logic         cvalid;
    logic [127:0] tag;     // the tag bytes seen so far (Check)
  } fold_t;

  task automatic fold(
      input logic [ina_rtl_pkg::BeatBits-1:0] data, input logic first, input logic enc,
      input logic [15:0] count,
      input logic [47:0] carry, input logic [127:0] y_prev, input logic [127:0] tag_prev,
      input logic [511:0] hp, input logic [3:0] blk_valid, input logic [63:0] inc,
      input logic [3:0] msel, input logic [15:0] psel, input logic cvalid,
      input logic [Shift-1:0] cinc,
      input logic [15:0] tag_hit, input logic [95:0] tag_at, output fold_t r);
    logic [127:0] y, cblk, tag;
    logic [7:0]   w[64];                // the window (mac: 6 carried bytes, then beat bytes 0 .. 57)
    logic [127:0] blk[4];               // the blocks this beat completes (window blocks 0 .. 3)
    logic [127:0] prod;                 // one product of GF(2^128)
    logic [127:0] hm;                   // a power of H, selected one-hot
    // (Part-selects of `data` rather than ina_rtl_pkg's helpers: each call of a helper would copy
    // the 512-bit beat into a local that a simulator initializes in every cycle.)
    for (int unsigned t = 0; t < 64; t++) begin
      if (enc) begin
        // mac_encrypt: the header from byte 42 at the first beat (its blocks 0 and 1), else the beat.
        if (first) w[t] = t < 64 - HdrByte ? data[8*((HdrByte + t) % 64) +: 8] : 8'h00;
        else w[t] = data[8*t +: 8];
      end else begin
        if (t < Shift) w[t] = carry[8*t +: 8];
        else w[t] = data[8*(t - Shift) +: 8];
      end
    end
    // The retx flag is not covered by the tag (a retransmission carries the same one).
    if (first && enc) begin
      w[ina_proto_pkg::FlagsOffset] = w[ina_proto_pkg::FlagsOffset] &
                                      ~(8'd1 << ina_proto_pkg::FlagRetxBit);
    end
    if (first && !enc) w[RetxByte + Shift] = w[RetxByte + Shift] & ~(8'd1 << ina_proto_pkg::FlagRetxBit);
    for (int unsigned j = 0; j < 4; j++) begin
      for (int unsigned t = 0; t < 16; t++) begin
        blk[j][127 - 8*t -: 8] = inc[16*j + t] ? w[16*j + t] : 8'h00;
      end
    end
    y = first ? '0 : y_prev;
    // (The one-hot selects as parallel cases: one AND-OR level in hardware, a branch in
    // simulation.)
    if (msel != '0) begin
      (* parallel_case *)
      case (1'b1)
        msel[0]: hm = hp[127:0];
        msel[1]: hm = hp[255:128];
        msel[2]: hm = hp[383:256];
        default: hm = hp[511:384];
      endcase
      ina_gcm_pkg::gf128_mul(y, hm, prod);
      y = prod;
    end
    for (int unsigned j = 0; j < 4; j++) begin
      if (blk_valid[j]) begin
        (* parallel_case *)
        case (1'b1)
          psel[4*j]:     hm = hp[127:0];
          psel[4*j + 1]: hm = hp[255:128];
          psel[4*j + 2]: hm = hp[383:256];
          default:       hm = hp[511:384];
        endcase
        ina_gcm_pkg::gf128_mul(blk[j], hm, prod);
        y = y ^ prod;
      end
    end
    cblk = '0;
    for (int unsigned t = 0; t < Shift; t++) begin
      if (cinc[t]) cblk[127 - 8*t -: 8] = data[8*(64 - Shift + t) +: 8];
    end
    tag = first ? '0 : tag_prev;
    if (Check) begin
      for (int unsigned k = 0; k < 16; k++) begin
        if (tag_hit[k]) tag[127 - 8*k -: 8] = data[8*tag_at[6*k +: 6] +: 8];
      end
    end
    r = {count, y, cblk, cvalid, tag};  // fold_t's fields in their order
  endtask

  fold_t        fold_q;     // after the last beat folded
  logic [47:0]  carry_q;    // frame bytes 64 b - 6 .. 64 b - 1 (byte 0 in [7:0])

  always_ff @(posedge clk_i) begin
    if (a_valid_q) begin
      fold_t f;
      fold(a_data_q, a_first_q, a_enc_q, a_count_q, carry_q, fold_q.y, fold_q.tag, hpow_q,
           a_geom_q.blk_valid, a_geom_q.inc, a_geom_q.msel, a_geom_q.psel, a_geom_q.cvalid,
           a_geom_q.cinc, a_geom_q.tag_hit, a_geom_q.tag_at, f);
      fold_q  <= f;
      carry_q <= a_data_q[8*(64 - Shift) +: 8*Shift];
    end
  end

  // ---------------------------------------------------------------------------------------------
  // Stage F, after a frame's last beat: the partial block and the length block.
  // It reads fold_q in the cycle after the last beat (a next frame's first beat, if any, writes it
  // at the end of that cycle), and H, H^2 and the user bits as they were at the last beat.
  logic                f_valid_q, f_enc_q;
  logic [127:0]        f_len, f_h1_q, f_h2_q;
  logic [UserBits-1:0] f_user_q;
  logic                o_valid_q;
  logic [127:0]        o_hash_q, o_tag_q;
  logic [UserBits-1:0] o_user_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      f_valid_q <= 1'b0;
      o_valid_q <= 1'b0;
    end else begin
      f_valid_q <= a_valid_q && a_last_q;
      o_valid_q <= f_valid_q;
    end
  end
  // [len(A)]_64 [len(C)]_64 in bits. mac: len(A) = 22 + 4 count bytes, C empty; mac_encrypt:
  // len(A) = 22 bytes, len(C) = 4 count.
  assign f_len = f_enc_q ? {64'd176, 43'd0, fold_q.count, 5'd0}
                         : {64'd176 + {43'd0, fold_q.count, 5'd0}, 64'd0};
  always_ff @(posedge clk_i) begin
    if (a_valid_q && a_last_q) begin
      f_h1_q   <= hpow_q[127:0];    // H
      f_h2_q   <= hpow_q[255:128];  // H^2
      f_enc_q  <= a_enc_q;
      f_user_q <= user_q;
    end
    if (f_valid_q) begin
      // (Y ^ C) H^2 ^ L H with the partial block C, else (Y ^ L) H.
      logic [127:0] ych, lh;
      if (fold_q.cvalid) begin
        ina_gcm_pkg::gf128_mul(fold_q.y ^ fold_q.cblk, f_h2_q, ych);
        ina_gcm_pkg::gf128_mul(f_len, f_h1_q, lh);
        o_hash_q <= ych ^ lh;
      end else begin
        ina_gcm_pkg::gf128_mul(fold_q.y ^ f_len, f_h1_q, ych);
        o_hash_q <= ych;
      end
      o_tag_q  <= Check ? fold_q.tag : '0;
      o_user_q <= f_user_q;
    end
  end

  assign out_valid_o = o_valid_q;
  assign out_hash_o  = o_hash_q;
  assign out_tag_o   = o_tag_q;
  assign out_user_o  = o_user_q;

endmodule
