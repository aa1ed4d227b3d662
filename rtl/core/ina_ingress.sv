// Ingress: splits AXI-stream frames into a descriptor (parsed ina header + frame length) and
// payload beats.
//
// Frames: Ethernet (14) + IPv4 (20) + UDP (8) + ina (22) = the first 64-byte beat, then payload
// beats. Beat bytes are little-endian in tdata (frame byte 0 = tdata[7:0]); tkeep marks valid bytes
// (only the last beat may be partial). The L2-L4 headers are not checked here: the shell steers
// only ina UDP traffic to this core. The frame length (sum of tkeep bits, saturating) is carried to
// the aggregation stage, which checks it against the header's count.
//
// Parameter: MaxK, the largest K (elements per packet; a power of two, 64 ..
// ina_rtl_pkg::MaxKLimit = 8192; ina_core's). MaxK / Lanes is the most payload beats a frame keeps.
// Outputs: the first MaxK / Lanes payload beats of each frame are pushed to the payload FIFO
// (later beats of an over-long frame are dropped: such a frame is malformed anyway); at tlast one
// descriptor is pushed, after the frame's payload beats.
// Latency: the descriptor is pushed in the cycle of the tlast beat.
// Throughput: one beat per cycle. Backpressure: s_axis_tready_o = both FIFOs can take a word (it
// depends on FIFO state only, never on tvalid).
module ina_ingress
#(
  parameter int unsigned MaxK = 256
) (
  input  logic                clk_i,
  input  logic                rst_ni,
  // Frames in.
  input  logic                s_axis_tvalid_i,
  output logic                s_axis_tready_o,
  input  logic [ina_rtl_pkg::BeatBits-1:0] s_axis_tdata_i,
  input  logic [ina_rtl_pkg::BeatBytes-1:0] s_axis_tkeep_i,
  input  logic                s_axis_tlast_i,
  input  logic                s_axis_tuser_i,   // MAC error on this beat
  // Payload beats out (wire byte order).
  output logic                pay_valid_o,
  input  logic                pay_ready_i,
  output logic [ina_rtl_pkg::BeatBits-1:0] pay_data_o,
  // Descriptors out.
  output logic                desc_valid_o,
  input  logic                desc_ready_i,
  output ina_rtl_pkg::desc_t               desc_o,
  // Between the first and the last beat of a frame.
  output logic                in_frame_o
);
  logic                      in_frame_q, in_frame_d;
  ina_rtl_pkg::desc_t                     hdr_q, hdr_d, hdr_now;
  logic [ina_rtl_pkg::FrameBytesBits-1:0] bytes_sum;
  logic [6:0]                keep_cnt;
  logic                      beat;
  logic [ina_rtl_pkg::FrameBytesBits:0]   bytes_wide;

  localparam int unsigned MaxBeats = MaxK / ina_rtl_pkg::Lanes;
  if (MaxK < 64 || MaxK > ina_rtl_pkg::MaxKLimit || (MaxK & (MaxK - 1)) != 0) begin : gen_bad_max_k
    $error("ina_ingress: MaxK must be a power of two in 64..ina_rtl_pkg::MaxKLimit");
  end

  assign s_axis_tready_o = pay_ready_i && desc_ready_i;
  assign beat            = s_axis_tvalid_i && s_axis_tready_o;

  assign keep_cnt = 7'($countones(s_axis_tkeep_i));

  // Header fields of this beat if it is a first beat, else what was captured.
  always_comb begin
    hdr_now = hdr_q;
    if (!in_frame_q) begin
      hdr_now.version  = ina_rtl_pkg::beat_byte(s_axis_tdata_i, ina_rtl_pkg::InaHdrByte + ina_proto_pkg::VersionOffset);
      hdr_now.mtype    = ina_rtl_pkg::beat_byte(s_axis_tdata_i, ina_rtl_pkg::InaHdrByte + ina_proto_pkg::TypeOffset);
      hdr_now.flags    = ina_rtl_pkg::beat_byte(s_axis_tdata_i, ina_rtl_pkg::InaHdrByte + ina_proto_pkg::FlagsOffset);
      hdr_now.exp      = ina_rtl_pkg::beat_byte(s_axis_tdata_i, ina_rtl_pkg::InaHdrByte + ina_proto_pkg::ExpOffset);
      hdr_now.next_exp = ina_rtl_pkg::beat_byte(s_axis_tdata_i, ina_rtl_pkg::InaHdrByte + ina_proto_pkg::NextExpOffset);
      hdr_now.sec      = ina_rtl_pkg::beat_byte(s_axis_tdata_i, ina_rtl_pkg::InaHdrByte + ina_proto_pkg::SecOffset);
      hdr_now.job      = ina_rtl_pkg::be16(s_axis_tdata_i, ina_rtl_pkg::InaHdrByte + ina_proto_pkg::JobOffset);
      hdr_now.rank     = ina_rtl_pkg::be16(s_axis_tdata_i, ina_rtl_pkg::InaHdrByte + ina_proto_pkg::RankOffset);
      hdr_now.slot     = ina_rtl_pkg::be16(s_axis_tdata_i, ina_rtl_pkg::InaHdrByte + ina_proto_pkg::SlotOffset);
      hdr_now.gen      = ina_rtl_pkg::be16(s_axis_tdata_i, ina_rtl_pkg::InaHdrByte + ina_proto_pkg::GenOffset);
      hdr_now.count    = ina_rtl_pkg::be16(s_axis_tdata_i, ina_rtl_pkg::InaHdrByte + ina_proto_pkg::CountOffset);
      hdr_now.offset   = ina_rtl_pkg::be32(s_axis_tdata_i, ina_rtl_pkg::InaHdrByte + ina_proto_pkg::OffsetOffset);
      hdr_now.frame_bytes  = '0;
      hdr_now.stored_beats = '0;
      hdr_now.mac_err      = 1'b0;
    end
    bytes_wide = {1'b0, hdr_now.frame_bytes} + {{(ina_rtl_pkg::FrameBytesBits - 6) {1'b0}}, keep_cnt};
    bytes_sum  = bytes_wide[ina_rtl_pkg::FrameBytesBits] ? '1 : bytes_wide[ina_rtl_pkg::FrameBytesBits-1:0];
  end

  // A payload beat is kept while fewer than MaxBeats were kept for this frame.
  assign pay_valid_o = beat && in_frame_q &&
                       (hdr_q.stored_beats < ina_rtl_pkg::StoredBeatsBits'(MaxBeats));
  assign pay_data_o  = s_axis_tdata_i;

  always_comb begin
    hdr_d = hdr_now;
    hdr_d.frame_bytes = bytes_sum;
    hdr_d.mac_err = hdr_now.mac_err | s_axis_tuser_i;
    if (pay_valid_o) hdr_d.stored_beats = hdr_now.stored_beats + ina_rtl_pkg::StoredBeatsBits'(1);
  end

  assign desc_valid_o = beat && s_axis_tlast_i;
  assign desc_o       = hdr_d;
  assign in_frame_d   = beat ? !s_axis_tlast_i : in_frame_q;
  assign in_frame_o   = in_frame_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      in_frame_q <= 1'b0;
    end else begin
      in_frame_q <= in_frame_d;
    end
  end

  // Header fields are datapath: not reset (a frame's first beat always loads them).
  always_ff @(posedge clk_i) begin
    if (beat) hdr_q <= hdr_d;
  end

endmodule
