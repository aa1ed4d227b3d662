// RoCEv2 ingress: recognises RoCEv2 frames (one ina message per UD SEND_ONLY, docs/rdma.md),
// checks them and turns each good one into the plain UDP frame ina_ingress expects; other frames
// pass through unchanged. Datasheet: docs/rtl/ina_roce_rx.md.
//
// Frames in (s_axis, from the shell): as ina_core's s_axis (64-byte beats, frame byte 0 =
// tdata[7:0], tkeep contiguous, only the last beat partial, tuser = MAC error). A frame is RoCEv2
// when its first beat holds EtherType 0x0800, IPv4 version 4, protocol 17 (UDP) and UDP
// destination port 4791 (proto/ina.toml [roce] udp_port):
//   Eth (14) | IPv4 (20) | UDP (8) | BTH (12) | DETH (8) | ina message | pad (0-3) | ICRC (4).
// Any other frame (ina over UDP, or too short to show the port) passes through as it is.
// Frames out (m_axis, to ina_ingress): plain frames unchanged; a RoCEv2 frame without BTH and DETH
// (bytes 42..61: the rest moves down by 20 bytes, across beats) and without its pad and ICRC, so
// that it is exactly the UDP frame of its ina message (its IPv4/UDP lengths and UDP port are left
// as they were: nothing downstream reads them). tuser is set on an out beat when any in beat of the
// frame up to it had tuser set (ina_ingress ORs them).
// Checks of a RoCEv2 frame, in the software port's order (net/src/roce/roce_port.cc), the first
// failing one counted (cnt_inc_o, ina_proto_pkg::roce_counter_e) and the frame dropped:
//   roce_short      IPv4 header length not 5 (options), IPv4 total length != 20 + UDP length,
//                   UDP length < 8 + BTH + DETH + ICRC, pad count > the message bytes, or the
//                   frame not 14 + IPv4 total length bytes long (no trailing bytes either)
//   roce_bad_icrc   the ICRC (ina_crc32c, Icrc = 1, over the raw RoCEv2 frame as it streams in)
//   roce_bad_opcode BTH opcode not UD SEND_ONLY (0x64), or transport version not 0
//   roce_wrong_qpn  BTH destination QP != qpn_i
//   roce_bad_key    DETH Q_Key != qkey_i, or BTH P_Key[14:0] != pkey_i[14:0]
// The PSN is not checked (UD receivers do not; the software port's per-QP PSN check is left to
// the shell). A frame whose first beat shows a header failure (opcode, QP, keys, or a short header)
// is not forwarded at all; a frame forwarded and then found bad (a length that disagrees, a bad
// ICRC: known after its last beat) gets verdict_drop_o, and ina_core drops it whole before it
// reaches the aggregation stage, with its descriptor. Either way the counter is the one the order
// above gives, counted when the ICRC verdict is known.
// Verdicts: verdict_valid_o pulses once per frame sent on m_axis (plain ones included, drop 0), in
// frame order, Latency = 4 cycles after the cycle that took the frame's last in beat: no later
// than the descriptor ina_ingress pushes for it plus 3 cycles, so it is there before the frame's
// CRC32C verdict (which follows its last out beat by 4 cycles).
//
// Datapath: one beat is held (the beat before the current one); an out beat is sent as the next
// in beat arrives (RoCEv2 out beat 0 = in bytes 0..41, 62..63 of beat 0 and 0..19 of beat 1; out
// beat j = bytes 20..63 of in beat j and 0..19 of in beat j+1), and the frame's last out beat, when
// it is left over after the last in beat (always for a plain frame), in the next cycle, together
// with the next frame's first in beat. m_axis_tvalid_o depends combinationally on s_axis_tvalid_i
// (an out beat is formed from the in beat being taken), never on m_axis_tready_i.
// Latency: one beat: a frame's last out beat leaves 1 cycle after its last in beat (or in the same
// cycle, when the RoCEv2 tail removed is at least the beat's bytes beyond 20).
// Throughput: one in beat per cycle, any mix of frames (one out beat per cycle at most).
// Backpressure: s_axis_tready_o = m_axis_tready_i while an out beat goes with the in beat (a middle
// or last beat of a forwarded frame, or a first beat while the previous frame's last out beat
// leaves); 1 for a first beat otherwise and for every beat of a frame not forwarded. It depends
// on state and m_axis_tready_i only, never on s_axis_tvalid_i.
module ina_roce_rx
(
  input  logic                                      clk_i,
  input  logic                                      rst_ni,
  // Frames in.
  input  logic                                      s_axis_tvalid_i,
  output logic                                      s_axis_tready_o,
  input  logic [ina_rtl_pkg::BeatBits-1:0]          s_axis_tdata_i,
  input  logic [ina_rtl_pkg::BeatBytes-1:0]         s_axis_tkeep_i,
  input  logic                                      s_axis_tlast_i,
  input  logic                                      s_axis_tuser_i,
  // Frames out (UDP layout).
  output logic                                      m_axis_tvalid_o,
  input  logic                                      m_axis_tready_i,
  output logic [ina_rtl_pkg::BeatBits-1:0]          m_axis_tdata_o,
  output logic [ina_rtl_pkg::BeatBytes-1:0]         m_axis_tkeep_o,
  output logic                                      m_axis_tlast_o,
  output logic                                      m_axis_tuser_o,
  // One verdict per frame sent on m_axis, in order: drop it (a RoCEv2 frame that failed a check).
  output logic                                      verdict_valid_o,
  output logic                                      verdict_drop_o,
  // Registers (ina_regs: roce_qpn, roce_qkey, roce_pkey).
  input  logic [23:0]                               qpn_i,
  input  logic [31:0]                               qkey_i,
  input  logic [15:0]                               pkey_i,
  // Counter increments (ina_proto_pkg::roce_counter_e order).
  output logic [ina_proto_pkg::NumRoceCounters-1:0] cnt_inc_o,
  // A frame, an out beat, or a verdict in flight (registered state only).
  output logic                                      busy_o
);
  localparam int unsigned NB = ina_rtl_pkg::BeatBytes;
  localparam int unsigned Latency = 4;  // ina_crc32c, Check = 1
  localparam int unsigned BthByte = ina_rtl_pkg::InaHdrByte;  // BTH after Eth, IPv4, UDP
  localparam int unsigned DethByte = BthByte + 12;
  localparam int unsigned Cut = 20;  // BTH + DETH bytes removed

  if (NB != 64 || DethByte + 8 != BthByte + Cut || Cut >= NB - BthByte) begin : gen_bad_layout
    $error("ina_roce_rx: the layout needs 64-byte beats holding Eth..DETH in the first");
  end

  typedef enum logic [1:0] {
    ModePlain = 2'd0,  // not RoCEv2: pass through
    ModeFwd   = 2'd1,  // RoCEv2, header good so far: forward decapsulated
    ModeDrop  = 2'd2   // RoCEv2, header bad: not forwarded
  } mode_e;

  typedef enum logic [1:0] {
    CauseNone   = 2'd0,
    CauseOpcode = 2'd1,
    CauseQpn    = 2'd2,
    CauseKey    = 2'd3
  } cause_e;

  logic        beat, first;
  logic        in_frame_q, in_frame_d;
  assign first = !in_frame_q;

  // ---------------------------------------------------------------------------------------------
  // First beat: the headers.
  mode_e       mode_q, mode_d, mode_now;
  logic        hdr_short_q, hdr_short_d, hdr_short_now;
  cause_e      cause_q, cause_d, cause_now;
  logic [15:0] tot_q, tot_d, tot_now;
  logic [1:0]  pad_q, pad_d, pad_now;
  logic [16:0] bytes_q, bytes_d;  // frame bytes so far (saturating)
  logic        err_q, err_d;      // tuser seen in the frame so far
  logic        outfirst_q, outfirst_d;  // the next out beat of a ModeFwd frame is its first

  logic        is_roce;
  logic [15:0] udp_len;
  logic [7:0]  opcode;
  logic [3:0]  tver;
  logic [15:0] pkey;
  logic [23:0] dqp;
  logic [31:0] qkey;
  logic [6:0]  keep_cnt;

  always_comb begin
    keep_cnt = '0;
    for (int unsigned i = 0; i < NB; i++) keep_cnt += {6'b0, s_axis_tkeep_i[i]};
  end

  assign is_roce = s_axis_tkeep_i[37] &&
                   ina_rtl_pkg::be16(s_axis_tdata_i, 12) == 16'h0800 &&
                   s_axis_tdata_i[8*14+4 +: 4] == 4'd4 &&
                   ina_rtl_pkg::beat_byte(s_axis_tdata_i, 23) == 8'd17 &&
                   ina_rtl_pkg::be16(s_axis_tdata_i, 36) == 16'(ina_proto_pkg::RoceUdpPort);
  assign udp_len = ina_rtl_pkg::be16(s_axis_tdata_i, 38);
  assign opcode  = ina_rtl_pkg::beat_byte(s_axis_tdata_i, BthByte);
  assign tver    = s_axis_tdata_i[8*(BthByte+1) +: 4];
  assign pkey    = ina_rtl_pkg::be16(s_axis_tdata_i, BthByte + 2);
  assign dqp     = {ina_rtl_pkg::beat_byte(s_axis_tdata_i, BthByte + 5),
                    ina_rtl_pkg::be16(s_axis_tdata_i, BthByte + 6)};
  assign qkey    = ina_rtl_pkg::be32(s_axis_tdata_i, DethByte);

  always_comb begin
    mode_now      = mode_q;
    hdr_short_now = hdr_short_q;
    cause_now     = cause_q;
    tot_now       = tot_q;
    pad_now       = pad_q;
    if (first) begin
      tot_now = ina_rtl_pkg::be16(s_axis_tdata_i, 16);
      pad_now = s_axis_tdata_i[8*(BthByte+1)+4 +: 2];
      // A one-beat frame cannot hold the headers, pad and ICRC (66 bytes at least).
      hdr_short_now = s_axis_tlast_i || s_axis_tdata_i[8*14 +: 4] != 4'd5 ||
                      tot_now != udp_len + 16'd20 ||
                      udp_len < 16'(8 + Cut + ina_proto_pkg::RoceIcrcBytes) ||
                      16'(pad_now) > udp_len - 16'(8 + Cut + ina_proto_pkg::RoceIcrcBytes);
      if (opcode != 8'(ina_proto_pkg::RoceOpUdSendOnly) || tver != 4'd0) begin
        cause_now = CauseOpcode;
      end else if (dqp != qpn_i) begin
        cause_now = CauseQpn;
      end else if (qkey != qkey_i || pkey[14:0] != pkey_i[14:0]) begin
        cause_now = CauseKey;
      end else begin
        cause_now = CauseNone;
      end
      mode_now = !is_roce ? ModePlain :
                 (hdr_short_now || cause_now != CauseNone) ? ModeDrop : ModeFwd;
    end
  end

  logic [17:0] bytes_wide;
  assign bytes_wide = {1'b0, first ? 17'd0 : bytes_q} + {11'd0, keep_cnt};

  // ---------------------------------------------------------------------------------------------
  // Out beats.
  logic [ina_rtl_pkg::BeatBits-1:0]  hold_q, hold_d;
  logic [NB-1:0]                     flush_keep_q, flush_keep_d;
  logic                              flush_q, flush_d;
  logic [ina_rtl_pkg::BeatBits-1:0]  joined;
  logic                              left_over;  // the last in beat leaves a last out beat
  logic [NB-1:0]                     last_keep, left_keep;
  logic                              go_out;  // an out beat goes with this in beat
  logic                              err_now;

  assign err_now = (!first && err_q) || s_axis_tuser_i;
  // RoCEv2: out byte k = hold byte k + 20 (k < 44), in byte k - 44; out beat 0 keeps bytes 0..41.
  always_comb begin
    joined = {s_axis_tdata_i[8*Cut-1:0], hold_q[ina_rtl_pkg::BeatBits-1:8*Cut]};
    if (outfirst_q) joined[8*BthByte-1:0] = hold_q[8*BthByte-1:0];
  end
  // The last in beat has r valid bytes (tkeep contiguous). The out frame ends 4 + pad bytes
  // before it and, after the out beat before, 20 bytes later: out byte k of the joined beat is
  // in byte k - 44, valid iff k + 24 + pad < 64 + r. So when in byte 24 + pad is valid
  // (r > 24 + pad) a last out beat of r - 24 - pad bytes (in bytes 20..) is left over, else the
  // joined beat is the last, with 40 + r - pad bytes (at least 38). Both keeps are tkeep shifted
  // by 24 + pad: no byte count on this path.
  logic [2*NB-1:0] keep_ext;
  assign keep_ext  = {s_axis_tkeep_i, {NB{1'b1}}};
  assign left_over = s_axis_tkeep_i[6'd24 + 6'(pad_q)];
  assign last_keep = keep_ext[7'd24 + 7'(pad_q) +: NB];
  assign left_keep = s_axis_tkeep_i >> (6'd24 + 6'(pad_q));

  assign go_out = in_frame_q && mode_q != ModeDrop;
  assign s_axis_tready_o = (flush_q || go_out) ? m_axis_tready_i : 1'b1;
  assign beat = s_axis_tvalid_i && s_axis_tready_o;

  always_comb begin
    m_axis_tvalid_o = 1'b0;
    m_axis_tdata_o  = hold_q;
    m_axis_tkeep_o  = '1;
    m_axis_tlast_o  = 1'b0;
    m_axis_tuser_o  = err_q;
    if (flush_q) begin
      m_axis_tvalid_o = 1'b1;
      m_axis_tkeep_o  = flush_keep_q;
      m_axis_tlast_o  = 1'b1;
    end else if (go_out) begin
      m_axis_tvalid_o = s_axis_tvalid_i;
      m_axis_tuser_o  = err_now;
      if (mode_q == ModeFwd) begin
        m_axis_tdata_o = joined;
        if (s_axis_tlast_i && !left_over) begin
          m_axis_tlast_o = 1'b1;
          m_axis_tkeep_o = last_keep;
        end
      end
    end
  end

  always_comb begin
    in_frame_d   = in_frame_q;
    mode_d       = mode_q;
    hdr_short_d  = hdr_short_q;
    cause_d      = cause_q;
    tot_d        = tot_q;
    pad_d        = pad_q;
    bytes_d      = bytes_q;
    err_d        = err_q;
    outfirst_d   = outfirst_q;
    hold_d       = hold_q;
    flush_keep_d = flush_keep_q;
    // The last out beat leaves when m_axis takes it.
    flush_d      = flush_q && !m_axis_tready_i;
    if (beat) begin
      in_frame_d  = !s_axis_tlast_i;
      mode_d      = mode_now;
      hdr_short_d = hdr_short_now;
      cause_d     = cause_now;
      tot_d       = tot_now;
      pad_d       = pad_now;
      bytes_d     = bytes_wide[17] ? '1 : bytes_wide[16:0];
      err_d       = err_now;
      outfirst_d  = first;
      if (mode_now != ModeDrop) begin
        hold_d = s_axis_tdata_i;
        if (s_axis_tlast_i) begin
          if (mode_now == ModePlain) begin
            flush_d      = 1'b1;
            flush_keep_d = s_axis_tkeep_i;
          end else if (left_over) begin
            flush_d      = 1'b1;
            flush_keep_d = left_keep;
            hold_d       = {{(8*Cut){1'b0}}, s_axis_tdata_i[ina_rtl_pkg::BeatBits-1:8*Cut]};
          end
        end
      end
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      in_frame_q <= 1'b0;
      flush_q    <= 1'b0;
    end else begin
      in_frame_q <= in_frame_d;
      flush_q    <= flush_d;
    end
  end

  // Per-frame fields and beats are datapath: a frame's first beat always loads them.
  always_ff @(posedge clk_i) begin
    mode_q       <= mode_d;
    hdr_short_q  <= hdr_short_d;
    cause_q      <= cause_d;
    tot_q        <= tot_d;
    pad_q        <= pad_d;
    bytes_q      <= bytes_d;
    err_q        <= err_d;
    outfirst_q   <= outfirst_d;
    hold_q       <= hold_d;
    flush_keep_q <= flush_keep_d;
  end

  // ---------------------------------------------------------------------------------------------
  // The ICRC, and the verdict of each frame when its ICRC is known.
  logic icrc_valid, icrc_ok, icrc_busy;
  logic [31:0] unused_icrc;

  // Only RoCEv2 frames go through it (their mode is set at the first beat and held), so a plain
  // frame's beats cost a simulator none of its parities (ina_crc32c evaluates each stage only
  // under that stage's valid).
  ina_crc32c #(.Check(1'b1), .Icrc(1'b1)) u_icrc (
    .clk_i,
    .rst_ni,
    .s_axis_tvalid_i(beat && mode_now != ModePlain),
    .s_axis_tdata_i,
    .s_axis_tkeep_i,
    .s_axis_tlast_i,
    .crc_valid_o    (icrc_valid),
    .crc_o          (unused_icrc),
    .crc_ok_o       (icrc_ok),
    .busy_o         (icrc_busy)
  );

  // A frame's tag (what the verdict needs of it) runs down a line as long as the ICRC pipeline,
  // from its last in beat on; one shift register per field (flat vectors: yosys 0.23 reads no
  // unpacked arrays of structs), stage Latency-1 in the top bit.
  // The length check takes a stage of its own (the frame's byte count, its IPv4 total length and
  // the first beat's short checks registered at the last beat), off the tkeep count's path.
  logic [Latency-1:0]   tv_q, troce_q, tfwd_q;  // valid, RoCEv2, sent on m_axis
  logic [Latency-2:0]   tshort_q;               // roce_short, from stage 1 on
  logic [2*Latency-1:0] tcause_q;               // the header's failure after the ICRC
  logic [16:0]          len_q;
  logic [15:0]          len_tot_q;
  logic                 len_hshort_q;
  logic                 v_valid, v_roce, v_fwd, v_short, bad_icrc;
  logic [1:0]           v_cause;  // cause_e (yosys 0.23 has no casts to a typedef)

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      tv_q <= '0;
    end else begin
      tv_q <= {tv_q[Latency-2:0], beat && s_axis_tlast_i};
    end
  end

  // Datapath: read only where the valid bit beside them is set.
  always_ff @(posedge clk_i) begin
    troce_q  <= {troce_q[Latency-2:0], mode_now != ModePlain};
    tfwd_q   <= {tfwd_q[Latency-2:0], mode_now != ModeDrop};
    len_q        <= bytes_d;
    len_tot_q    <= tot_now;
    len_hshort_q <= hdr_short_now;
    tshort_q     <= {tshort_q[Latency-3:0], len_hshort_q || len_q != 17'd14 + 17'(len_tot_q)};
    tcause_q <= {tcause_q[2*Latency-3:0], cause_now};
  end

  assign v_valid  = tv_q[Latency-1];
  assign v_roce   = troce_q[Latency-1];
  assign v_fwd    = tfwd_q[Latency-1];
  assign v_short  = tshort_q[Latency-2];
  assign v_cause  = tcause_q[2*Latency-1 -: 2];
  assign bad_icrc = !icrc_ok;

  always_comb begin
    cnt_inc_o = '0;
    if (v_valid && v_roce) begin
      if (v_short) begin
        cnt_inc_o[ina_proto_pkg::CntRoceShort] = 1'b1;
      end else if (bad_icrc) begin
        cnt_inc_o[ina_proto_pkg::CntRoceBadIcrc] = 1'b1;
      end else begin
        unique case (v_cause)
          CauseOpcode: cnt_inc_o[ina_proto_pkg::CntRoceBadOpcode] = 1'b1;
          CauseQpn:    cnt_inc_o[ina_proto_pkg::CntRoceWrongQpn] = 1'b1;
          CauseKey:    cnt_inc_o[ina_proto_pkg::CntRoceBadKey] = 1'b1;
          default: ;
        endcase
      end
    end
  end

  assign verdict_valid_o = v_valid && v_fwd;
  assign verdict_drop_o  = v_roce && (v_short || bad_icrc);

  assign busy_o = in_frame_q || flush_q || (|tv_q) || icrc_busy;

  // The P_Key's membership bit is not compared (0xFFFF and 0x7FFF: the default partition).
  logic unused_pkey_msb;
  assign unused_pkey_msb = pkey_i[15] ^ pkey[15];

`ifndef SYNTHESIS
  // Invariants (docs/rtl/assertions.md).
  // The tag line and the ICRC pipeline have the same latency: a verdict is found for each
  // RoCEv2 frame (plain frames do not enter the ICRC).
  a_roce_rx_tag_align: assert property (@(posedge clk_i) disable iff (!rst_ni)
      (v_valid && v_roce) == icrc_valid)
    else $error("ina_roce_rx: a frame's tag and its ICRC verdict are not in the same cycle");
  // The last out beat of a frame is pending only between frames.
  a_roce_rx_flush_between: assert property (@(posedge clk_i) disable iff (!rst_ni)
      flush_q |-> !in_frame_q)
    else $error("ina_roce_rx: a last out beat pending inside a frame");
  // A frame forwarded decapsulated is at least 38 bytes: its last out beat has bytes.
  a_roce_rx_out_keep: assert property (@(posedge clk_i) disable iff (!rst_ni)
      m_axis_tvalid_o |-> m_axis_tkeep_o[0])
    else $error("ina_roce_rx: an out beat without bytes");
`endif

endmodule
