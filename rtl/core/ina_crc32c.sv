// CRC32C over 512-bit AXI-stream beats, one beat per cycle, pipelined: the trailer check of every
// received frame (Check = 1) and the trailer value of every result frame (Check = 0).
// proto/ina.toml [crc]; datasheet docs/rtl/ina_crc32c.md.
//
// Frames: beats up to and including one with tlast; tkeep marks a beat's valid bytes, contiguous
// from byte 0, never none (only the last beat may be partial). The CRC covers a frame's bytes from
// byte StartByte (ina_proto_pkg::CrcStartByte = 42, the ina header after Ethernet, IPv4 and UDP)
// to its last valid byte. The module observes a stream: every cycle s_axis_tvalid_i is high it
// takes that beat (there is no ready: the caller raises tvalid when its own handshake fires).
//
// Check = 1: crc_ok_o = the frame's last 4 bytes are the little-endian CRC32C of its covered
//   bytes before them. The register is run over every covered byte, trailer included, and compared
//   with the residue, which holds for a good frame whatever its contents.
// Check = 0: crc_o = the CRC32C of all the frame's covered bytes (the trailer to append).
//   REQUIRES: the last beat's byte count is a multiple of 4 (ina payloads are whole int32 lanes).
// Icrc = 1: the same for the RoCEv2 ICRC (zlib's CRC-32, proto/ina.toml [roce] icrc_*) with the
//   Icrc* maps of ina_proto_pkg: covered from byte IcrcStartByte (14, the IPv4 header; StartByte is
//   then ignored) after 8 bytes of 0xFF, and the first beat's bytes in IcrcFirstZero (IP TOS, TTL,
//   header checksum, UDP checksum, BTH byte 4) taken as all-ones (they are zeroed here and their
//   ones are in IcrcFirstState). Check = 1 then checks a frame whose last 4 bytes are its ICRC.
//
// How: a beat taken whole from register r leaves A^64 r ^ D(beat), A the register's step over one
// zero byte and D linear in the beat's 512 bits (ina_proto_pkg::CrcAdvMat, CrcBeatMat, generated
// by proto/gen.py). Uncovered bytes (before StartByte, beyond tkeep) are zeroed; a first beat leaves
// CrcFirstState ^ D(beat), CrcFirstState being the initial register carried over the 64 - StartByte
// bytes the beat covers (it stands for A^64 r, with nothing before the frame). A last beat of n
// bytes was taken as if 64 - n zero bytes followed: Check compares with A^(64-n) residue (a table,
// CrcResidueAt), Check = 0 undoes them with A^-(64-n) (CrcRewindMat, in two stages of 4 choices).
//
// Pipeline: S1 mask the beat and XOR it within eight 64-bit chunks; S2 XOR the chunks; S3 the
// register (the only loop: one 32 x 32 matrix and two XORs); S4 check, or S4 and S5 rewind.
// Latency: crc_valid_o is high for one cycle, Latency cycles after the cycle that took the last
// beat (4 with Check, 5 without); results come in frame order.
// Throughput: one beat per cycle, any mix of frame lengths (one-beat frames included).
// Backpressure: none (an observer); the output is a one-cycle pulse the caller must take.
module ina_crc32c
#(
  parameter bit          Check     = 1'b1,
  parameter int unsigned StartByte = ina_proto_pkg::CrcStartByte,
  parameter bit          Icrc      = 1'b0
) (
  input  logic                               clk_i,
  input  logic                               rst_ni,
  input  logic                               s_axis_tvalid_i,
  input  logic [ina_rtl_pkg::BeatBits-1:0]   s_axis_tdata_i,
  input  logic [ina_rtl_pkg::BeatBytes-1:0]  s_axis_tkeep_i,
  input  logic                               s_axis_tlast_i,
  output logic                               crc_valid_o,
  output logic [31:0]                        crc_o,      // Check = 0: the frame's CRC32C
  output logic                               crc_ok_o,   // Check = 1: its trailer matched
  output logic                               busy_o      // a beat or result in the pipeline
);
  localparam int unsigned NB = ina_rtl_pkg::BeatBytes;
  localparam int unsigned Chunks = NB / 8;
  // The CRC's maps (CRC32C, or the ICRC's CRC-32).
  localparam int unsigned Start = Icrc ? ina_proto_pkg::IcrcStartByte : StartByte;
  localparam logic [NB-1:0] FirstZero = Icrc ? ina_proto_pkg::IcrcFirstZero : '0;
  localparam logic [32*8*NB-1:0] BeatMat =
      Icrc ? ina_proto_pkg::IcrcBeatMat : ina_proto_pkg::CrcBeatMat;
  localparam logic [32*32-1:0] AdvMat = Icrc ? ina_proto_pkg::IcrcAdvMat : ina_proto_pkg::CrcAdvMat;
  localparam logic [31:0] FirstState =
      Icrc ? ina_proto_pkg::IcrcFirstState : ina_proto_pkg::CrcFirstState;
  localparam logic [NB*32-1:0] ResidueAt =
      Icrc ? ina_proto_pkg::IcrcResidueAt : ina_proto_pkg::CrcResidueAt;
  localparam logic [NB/4*1024-1:0] RewindMat =
      Icrc ? ina_proto_pkg::IcrcRewindMat : ina_proto_pkg::CrcRewindMat;

  if (ina_proto_pkg::CrcBeatBytes != NB || NB != 64) begin : gen_bad_beat
    $error("ina_crc32c: the generated CRC maps are for 64-byte beats");
  end
  if (Start >= NB) begin : gen_bad_start
    $error("ina_crc32c: StartByte must fall in the first beat");
  end

  // Each stage's logic is written where its registers load (functions called in always_ff, under
  // the stage's valid): the same logic in synthesis, but a simulator (Verilator) evaluates it once
  // per beat taken, at the clock edge, instead of on every change of the inputs (as combinational
  // logic driven by s_axis, S1 would be evaluated several times per cycle, docs/rtl/benchmarks.md).

  // ---------------------------------------------------------------------------------------------
  // S1: mask, partial XOR per 64-bit chunk.
  logic                        in_frame_q;
  logic [Chunks*32-1:0]        part_q;
  logic                        s1_valid_q, s1_first_q, s1_last_q;
  logic [6:0]                  s1_n_q;

  // The beat's 8 x 32 partial bits: the bytes it covers (from StartByte in a frame's first beat,
  // those tkeep marks) through the chunks of CrcBeatMat.
  function automatic logic [Chunks*32-1:0] beat_part(logic [ina_rtl_pkg::BeatBits-1:0] data,
                                                     logic [NB-1:0] keep, logic in_frame);
    logic [Chunks*32-1:0] part;
    logic [63:0]          x;  // a chunk, masked (one 64-bit word: a popcount per parity)
    logic [31:0]          p;
    for (int unsigned c = 0; c < Chunks; c++) begin
      for (int unsigned b = 0; b < 8; b++) begin
        x[8*b +: 8] = (keep[8*c + b] && (in_frame || (8*c + b >= Start && !FirstZero[8*c + b]))) ? data[64*c + 8*b +: 8]
                                                                             : 8'd0;
      end
      for (int unsigned o = 0; o < 32; o++) p[o] = ^(x & BeatMat[8*NB*o + 64*c +: 64]);
      part[32*c +: 32] = p;
    end
    beat_part = part;
  endfunction

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      in_frame_q <= 1'b0;
      s1_valid_q <= 1'b0;
    end else begin
      if (s_axis_tvalid_i) in_frame_q <= !s_axis_tlast_i;
      s1_valid_q <= s_axis_tvalid_i;
    end
  end

  always_ff @(posedge clk_i) begin
    if (s_axis_tvalid_i) begin
      part_q     <= beat_part(s_axis_tdata_i, s_axis_tkeep_i, in_frame_q);
      s1_first_q <= !in_frame_q;
      s1_last_q  <= s_axis_tlast_i;
      s1_n_q     <= 7'($countones(s_axis_tkeep_i));
    end
  end

  // ---------------------------------------------------------------------------------------------
  // S2: the beat's contribution D.
  logic [31:0] d_q;
  logic        s2_valid_q, s2_first_q, s2_last_q;
  logic [6:0]  s2_n_q;

  function automatic logic [31:0] fold(logic [Chunks*32-1:0] part);
    logic [31:0] d;
    d = '0;
    for (int unsigned c = 0; c < Chunks; c++) d ^= part[32*c +: 32];
    fold = d;
  endfunction

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      s2_valid_q <= 1'b0;
    end else begin
      s2_valid_q <= s1_valid_q;
    end
  end

  always_ff @(posedge clk_i) begin
    if (s1_valid_q) begin
      d_q        <= fold(part_q);
      s2_first_q <= s1_first_q;
      s2_last_q  <= s1_last_q;
      s2_n_q     <= s1_n_q;
    end
  end

  // ---------------------------------------------------------------------------------------------
  // S3: the register, A^64 r ^ D (a first beat: CrcFirstState ^ D).
  logic [31:0] reg_q;
  logic        s3_done_q;
  logic [5:0]  s3_back_q;  // 64 - n: zero bytes the last beat was taken with

  // m x (m a 32 x 32 matrix, row o at [32o +: 32]).
  function automatic logic [31:0] mat32(logic [32*32-1:0] m, logic [31:0] x);
    logic [31:0] y;
    for (int unsigned o = 0; o < 32; o++) y[o] = ^(x & m[32*o +: 32]);
    mat32 = y;
  endfunction

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      s3_done_q <= 1'b0;
    end else begin
      s3_done_q <= s2_valid_q && s2_last_q;
    end
  end

  // Datapath: a frame's first beat always loads it.
  always_ff @(posedge clk_i) begin
    if (s2_valid_q) begin
      reg_q     <= (s2_first_q ? FirstState : mat32(AdvMat, reg_q)) ^ d_q;
      s3_back_q <= 6'(7'd64 - s2_n_q);
    end
  end

  // ---------------------------------------------------------------------------------------------
  // S4 (and S5): the result.
  if (Check) begin : gen_check
    logic ok_q, valid_q;

    always_ff @(posedge clk_i or negedge rst_ni) begin
      if (!rst_ni) begin
        valid_q <= 1'b0;
      end else begin
        valid_q <= s3_done_q;
      end
    end

    always_ff @(posedge clk_i) begin
      if (s3_done_q) ok_q <= reg_q == ResidueAt[32*s3_back_q +: 32];
    end

    assign crc_valid_o = valid_q;
    assign crc_ok_o    = ok_q;
    assign crc_o       = '0;
    assign busy_o      = in_frame_q || s1_valid_q || s2_valid_q || s3_done_q || valid_q;
  end else begin : gen_value
    // Rewind by 4k bytes, k = (64 - n) / 4 = 4 k_hi + k_lo: S4 by 4 k_lo, S5 by 16 k_hi (each a
    // choice of four matrices, CrcRewindMat[k_lo] and CrcRewindMat[4 k_hi]).
    logic [31:0] lo_q, out_q;
    logic [1:0]  k_hi_q;
    logic        v4_q, v5_q;

    always_ff @(posedge clk_i or negedge rst_ni) begin
      if (!rst_ni) begin
        v4_q <= 1'b0;
        v5_q <= 1'b0;
      end else begin
        v4_q <= s3_done_q;
        v5_q <= v4_q;
      end
    end

    always_ff @(posedge clk_i) begin
      if (s3_done_q) begin
        unique case (s3_back_q[3:2])
          2'd0:    lo_q <= mat32(RewindMat[1024*0 +: 1024], reg_q);
          2'd1:    lo_q <= mat32(RewindMat[1024*1 +: 1024], reg_q);
          2'd2:    lo_q <= mat32(RewindMat[1024*2 +: 1024], reg_q);
          default: lo_q <= mat32(RewindMat[1024*3 +: 1024], reg_q);
        endcase
        k_hi_q <= s3_back_q[5:4];
      end
      if (v4_q) begin
        unique case (k_hi_q)
          2'd0:    out_q <= ~mat32(RewindMat[1024*0 +: 1024], lo_q);
          2'd1:    out_q <= ~mat32(RewindMat[1024*4 +: 1024], lo_q);
          2'd2:    out_q <= ~mat32(RewindMat[1024*8 +: 1024], lo_q);
          default: out_q <= ~mat32(RewindMat[1024*12 +: 1024], lo_q);
        endcase
      end
    end

    assign crc_valid_o = v5_q;
    assign crc_o       = out_q;
    assign crc_ok_o    = 1'b0;
    assign busy_o      = in_frame_q || s1_valid_q || s2_valid_q || s3_done_q || v4_q || v5_q;
    // The byte count is a multiple of 4 (REQUIRES above): the low bits of 64 - n are zero.
    logic [1:0] unused_back_low;
    assign unused_back_low = s3_back_q[1:0];
  end

endmodule
