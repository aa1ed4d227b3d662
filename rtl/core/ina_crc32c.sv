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

  // ---------------------------------------------------------------------------------------------
  // S1: mask, partial XOR per 64-bit chunk.
  logic                        in_frame_q;
  logic [ina_rtl_pkg::BeatBits-1:0] masked;
  logic [6:0]                  nbytes;
  logic [Chunks*32-1:0]        part_d, part_q;
  logic                        s1_valid_q, s1_first_q, s1_last_q;
  logic [6:0]                  s1_n_q;

  always_comb begin
    nbytes = '0;
    for (int unsigned i = 0; i < NB; i++) nbytes += {6'b0, s_axis_tkeep_i[i]};
    for (int unsigned i = 0; i < NB; i++) begin
      masked[8*i +: 8] = (s_axis_tkeep_i[i] && (in_frame_q || (i >= Start && !FirstZero[i])))
                         ? s_axis_tdata_i[8*i +: 8] : 8'd0;
    end
    for (int unsigned c = 0; c < Chunks; c++) begin
      for (int unsigned o = 0; o < 32; o++) begin
        part_d[32*c + o] = ^(masked[64*c +: 64] & BeatMat[8*NB*o + 64*c +: 64]);
      end
    end
  end

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
    part_q     <= part_d;
    s1_first_q <= !in_frame_q;
    s1_last_q  <= s_axis_tlast_i;
    s1_n_q     <= nbytes;
  end

  // ---------------------------------------------------------------------------------------------
  // S2: the beat's contribution D.
  logic [31:0] d_d, d_q;
  logic        s2_valid_q, s2_first_q, s2_last_q;
  logic [6:0]  s2_n_q;

  always_comb begin
    d_d = '0;
    for (int unsigned c = 0; c < Chunks; c++) d_d ^= part_q[32*c +: 32];
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      s2_valid_q <= 1'b0;
    end else begin
      s2_valid_q <= s1_valid_q;
    end
  end

  always_ff @(posedge clk_i) begin
    d_q        <= d_d;
    s2_first_q <= s1_first_q;
    s2_last_q  <= s1_last_q;
    s2_n_q     <= s1_n_q;
  end

  // ---------------------------------------------------------------------------------------------
  // S3: the register, A^64 r ^ D (a first beat: CrcFirstState ^ D).
  logic [31:0] reg_q, adv;
  logic        s3_done_q;
  logic [5:0]  s3_back_q;  // 64 - n: zero bytes the last beat was taken with

  always_comb begin
    for (int unsigned o = 0; o < 32; o++) adv[o] = ^(reg_q & AdvMat[32*o +: 32]);
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      s3_done_q <= 1'b0;
    end else begin
      s3_done_q <= s2_valid_q && s2_last_q;
    end
  end

  // Datapath: a frame's first beat always loads it.
  always_ff @(posedge clk_i) begin
    if (s2_valid_q) reg_q <= (s2_first_q ? FirstState : adv) ^ d_q;
    s3_back_q <= 6'(7'd64 - s2_n_q);
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
      ok_q <= reg_q == ResidueAt[32*s3_back_q +: 32];
    end

    assign crc_valid_o = valid_q;
    assign crc_ok_o    = ok_q;
    assign crc_o       = '0;
    assign busy_o      = in_frame_q || s1_valid_q || s2_valid_q || s3_done_q || valid_q;
  end else begin : gen_value
    // Rewind by 4k bytes, k = (64 - n) / 4 = 4 k_hi + k_lo: S4 by 4 k_lo, S5 by 16 k_hi.
    logic [31:0] lo_opt[4], hi_opt[4];
    logic [31:0] lo_q, out_q;
    logic [1:0]  k_hi_q;
    logic        v4_q, v5_q;

    always_comb begin
      for (int unsigned k = 0; k < 4; k++) begin
        for (int unsigned o = 0; o < 32; o++) begin
          lo_opt[k][o] = ^(reg_q & RewindMat[1024*k + 32*o +: 32]);
          hi_opt[k][o] = ^(lo_q & RewindMat[1024*4*k + 32*o +: 32]);
        end
      end
    end

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
      lo_q   <= lo_opt[s3_back_q[3:2]];
      k_hi_q <= s3_back_q[5:4];
      out_q  <= ~hi_opt[k_hi_q];
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
