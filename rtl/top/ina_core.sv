// ina aggregation core: the dataplane an FPGA SmartNIC runs between its MAC and its multicast
// replication logic.
//
//   s_axis -+-> ina_ingress -> payload FIFO / descriptor FIFO -+-> ina_agg -> ina_egress -> m_axis
//           +-> ina_crc32c (check) ----------> CRC-ok FIFO ----+   (output FIFO, CRC32C trailer)
//                                                   ina_regs (job table, counters) <-> reg bus
//
// s_axis: frames (Ethernet + IPv4 + UDP + ina header in the first 64-byte beat, then payload
//   beats, then the ina message's 4-byte CRC32C trailer; tdata byte 0 = frame byte 0; tkeep
//   contiguous; tuser = MAC error). The trailer is checked as the frame streams in; the verdict
//   joins the frame's descriptor (a frame's descriptor goes to ina_agg only with it), and a frame
//   whose trailer does not match is dropped (drop_bad_crc) before it touches any slot.
// m_axis: result frames, same layout, trailer appended by ina_egress; tuser [15:0] = the job's
//   multicast group, [31:16] = destination rank (0xFFFF: every rank of the group; else re-send to
//   that rank only). The L2-L4 addresses, ports and checksums of result frames are zero: the shell
//   fills them per destination (the CRC32C covers the ina message only, so it needs no update).
// reg bus: see ina_regs.
// Throughput: one beat per cycle in and out; a frame of n payload beats (its trailer included)
// costs n + 1 cycles.
// Latency: store-and-forward; a result's first beat leaves 5 cycles after the completing frame's
// CRC verdict (4 cycles after its last beat: ingress, descriptor FIFO, issue, S1, S2, output FIFO),
// its last beat once its own CRC is known (ina_egress).
// Backpressure: m_axis_tready low fills the output FIFO; the aggregation stage then waits between
// packets and the input FIFOs fill; s_axis_tready_o falls when they are full.
module ina_core
#(
  parameter int unsigned NumJobs   = 8,
  parameter int unsigned PoolSlots = 1024,
  parameter int unsigned PayDepth  = 64,  // payload FIFO beats (>= 2 * MaxPayloadBeats)
  parameter int unsigned DescDepth = 8,
  parameter int unsigned OutDepth  = 32   // output FIFO beats (> MaxPayloadBeats + 3)
) (
  input  logic                   clk_i,
  input  logic                   rst_ni,
  input  logic                   s_axis_tvalid_i,
  output logic                   s_axis_tready_o,
  input  logic [ina_rtl_pkg::BeatBits-1:0]    s_axis_tdata_i,
  input  logic [ina_rtl_pkg::BeatBytes-1:0]   s_axis_tkeep_i,
  input  logic                   s_axis_tlast_i,
  input  logic                   s_axis_tuser_i,
  output logic                   m_axis_tvalid_o,
  input  logic                   m_axis_tready_i,
  output logic [ina_rtl_pkg::BeatBits-1:0]    m_axis_tdata_o,
  output logic [ina_rtl_pkg::BeatBytes-1:0]   m_axis_tkeep_o,
  output logic                   m_axis_tlast_o,
  output logic [ina_rtl_pkg::OutUserBits-1:0] m_axis_tuser_o,
  input  logic                   reg_req_i,
  input  logic                   reg_we_i,
  input  logic [11:0]            reg_addr_i,
  input  logic [31:0]            reg_wdata_i,
  output logic                   reg_rvalid_o,
  output logic [31:0]            reg_rdata_o,
  // Nothing in flight: no frame half-received, FIFOs empty, aggregation stage and slot reset idle
  // (registered state only; for simulation harnesses and a shell's drain logic).
  output logic                   idle_o
);
  localparam int unsigned OutFreeW = $clog2(OutDepth) + 1;

  if (ina_rtl_pkg::InaHdrByte != ina_proto_pkg::FramePrefixBytes ||
      ina_rtl_pkg::Lanes * ina_proto_pkg::ElemBytes != ina_rtl_pkg::BeatBytes) begin : gen_bad_pkg
    $error("ina_core: ina_rtl_pkg disagrees with ina_proto_pkg");
  end
  if ($bits(desc_in) != ina_rtl_pkg::DescBits) begin : gen_bad_desc
    $error("ina_core: ina_rtl_pkg::DescBits is not $bits(desc_t)");
  end
  if (PayDepth < 2 * ina_rtl_pkg::MaxPayloadBeats) begin : gen_bad_pay
    $error("ina_core: PayDepth must hold two maximal frames");
  end
  if (OutDepth < ina_rtl_pkg::MaxPayloadBeats + 4) begin : gen_bad_out
    $error("ina_core: OutDepth must hold a result frame plus the pipeline");
  end

  logic                pay_in_valid, pay_in_ready, pay_out_valid, pay_out_ready;
  logic [ina_rtl_pkg::BeatBits-1:0] pay_in_data, pay_out_data;
  logic                desc_in_valid, desc_in_ready, desc_out_valid, desc_out_ready;
  ina_rtl_pkg::desc_t               desc_in, desc_out;
  logic                out_valid;
  logic [ina_rtl_pkg::BeatBits-1:0] out_data;
  logic [ina_rtl_pkg::BeatBytes-1:0] out_keep;
  logic                out_last;
  logic [ina_rtl_pkg::OutUserBits-1:0] out_user;
  logic [OutFreeW-1:0] out_free;
  logic [$clog2(PayDepth):0]  unused_pay_free;
  logic [$clog2(DescDepth):0] unused_desc_free;

  logic [NumJobs-1:0]       job_valid;
  logic [NumJobs*16-1:0]    job_id;  // entry j at [16j +: 16]
  logic [NumJobs*32-1:0]    job_slots, job_world;  // entry j at [32j +: 32]
  logic        commit, commit_valid;
  logic [31:0] commit_slots;
  logic        fail;  // ina_agg ended a job (ranks disagree): ina_regs marks its entry failed
  logic [7:0]  fail_entry;
  logic [15:0] fail_slot, fail_gen, fail_rank;
  logic [ina_proto_pkg::NumCounters-1:0] cnt_inc;
  logic        agg_busy, in_frame, egress_busy;
  // The trailer check beside ingress, and its verdicts in frame order.
  logic        crc_valid, crc_ok, crc_busy, crc_unused_ready;
  logic [31:0] crc_unused_value;
  logic        ok_valid, ok_ready, ok_data;
  logic [$clog2(DescDepth):0] unused_ok_free;

  ina_crc32c #(.Check(1'b1)) u_crc_rx (
    .clk_i,
    .rst_ni,
    .s_axis_tvalid_i(s_axis_tvalid_i && s_axis_tready_o),
    .s_axis_tdata_i,
    .s_axis_tkeep_i,
    .s_axis_tlast_i,
    .crc_valid_o    (crc_valid),
    .crc_o          (crc_unused_value),
    .crc_ok_o       (crc_ok),
    .busy_o         (crc_busy)
  );

  // One verdict per descriptor, pushed a few cycles after it and popped with it, so it holds no
  // more than the descriptor FIFO does.
  ina_fifo #(.Width(1), .Depth(DescDepth)) u_ok_fifo (
    .clk_i,
    .rst_ni,
    .in_valid_i (crc_valid),
    .in_ready_o (crc_unused_ready),
    .in_data_i  (crc_ok),
    .out_valid_o(ok_valid),
    .out_ready_i(ok_ready),
    .out_data_o (ok_data),
    .free_o     (unused_ok_free)
  );

  ina_ingress u_ingress (
    .clk_i,
    .rst_ni,
    .s_axis_tvalid_i,
    .s_axis_tready_o,
    .s_axis_tdata_i,
    .s_axis_tkeep_i,
    .s_axis_tlast_i,
    .s_axis_tuser_i,
    .pay_valid_o (pay_in_valid),
    .pay_ready_i (pay_in_ready),
    .pay_data_o  (pay_in_data),
    .desc_valid_o(desc_in_valid),
    .desc_ready_i(desc_in_ready),
    .desc_o      (desc_in),
    .in_frame_o  (in_frame)
  );

  ina_fifo #(.Width(ina_rtl_pkg::BeatBits), .Depth(PayDepth)) u_pay_fifo (
    .clk_i,
    .rst_ni,
    .in_valid_i (pay_in_valid),
    .in_ready_o (pay_in_ready),
    .in_data_i  (pay_in_data),
    .out_valid_o(pay_out_valid),
    .out_ready_i(pay_out_ready),
    .out_data_o (pay_out_data),
    .free_o     (unused_pay_free)
  );

  ina_fifo #(.Width(ina_rtl_pkg::DescBits), .Depth(DescDepth)) u_desc_fifo (
    .clk_i,
    .rst_ni,
    .in_valid_i (desc_in_valid),
    .in_ready_o (desc_in_ready),
    .in_data_i  (desc_in),
    .out_valid_o(desc_out_valid),
    .out_ready_i(desc_out_ready),
    .out_data_o (desc_out),
    .free_o     (unused_desc_free)
  );

  logic agg_desc_ready;
  assign desc_out_ready = agg_desc_ready;
  assign ok_ready       = agg_desc_ready;

  ina_agg #(
    .NumJobs  (NumJobs),
    .PoolSlots(PoolSlots),
    .OutFreeW (OutFreeW)
  ) u_agg (
    .clk_i,
    .rst_ni,
    .desc_valid_i  (desc_out_valid && ok_valid),
    .desc_ready_o  (agg_desc_ready),
    .desc_i        (desc_out),
    .desc_crc_ok_i (ok_data),
    .pay_valid_i   (pay_out_valid),
    .pay_ready_o   (pay_out_ready),
    .pay_data_i    (pay_out_data),
    .job_valid_i   (job_valid),
    .job_id_i      (job_id),
    .job_slots_i   (job_slots),
    .job_world_i   (job_world),
    .commit_i      (commit),
    .commit_slots_i(commit_slots),
    .commit_valid_i(commit_valid),
    .out_valid_o   (out_valid),
    .out_data_o    (out_data),
    .out_keep_o    (out_keep),
    .out_last_o    (out_last),
    .out_user_o    (out_user),
    .out_free_i    (out_free),
    .cnt_inc_o     (cnt_inc),
    .fail_o        (fail),
    .fail_entry_o  (fail_entry),
    .fail_slot_o   (fail_slot),
    .fail_gen_o    (fail_gen),
    .fail_rank_o   (fail_rank),
    .busy_o        (agg_busy)
  );

  // The aggregation stage reserves room before each packet, so the output FIFO always takes a push.
  ina_egress #(.Depth(OutDepth)) u_egress (
    .clk_i,
    .rst_ni,
    .in_valid_i     (out_valid),
    .in_data_i      (out_data),
    .in_keep_i      (out_keep),
    .in_last_i      (out_last),
    .in_user_i      (out_user),
    .free_o         (out_free),
    .m_axis_tvalid_o,
    .m_axis_tready_i,
    .m_axis_tdata_o,
    .m_axis_tkeep_o,
    .m_axis_tlast_o,
    .m_axis_tuser_o,
    .busy_o         (egress_busy)
  );

  assign idle_o = !in_frame && !desc_out_valid && !pay_out_valid && !agg_busy && !crc_busy &&
                  !ok_valid && !egress_busy;

  logic unused_crc;
  assign unused_crc = ^{crc_unused_ready, crc_unused_value, unused_ok_free};

  ina_regs #(
    .NumJobs  (NumJobs),
    .PoolSlots(PoolSlots)
  ) u_regs (
    .clk_i,
    .rst_ni,
    .req_i         (reg_req_i),
    .we_i          (reg_we_i),
    .addr_i        (reg_addr_i),
    .wdata_i       (reg_wdata_i),
    .rvalid_o      (reg_rvalid_o),
    .rdata_o       (reg_rdata_o),
    .job_valid_o   (job_valid),
    .job_id_o      (job_id),
    .job_slots_o   (job_slots),
    .job_world_o   (job_world),
    .commit_o      (commit),
    .commit_slots_o(commit_slots),
    .commit_valid_o(commit_valid),
    .cnt_inc_i     (cnt_inc),
    .fail_i        (fail),
    .fail_entry_i  (fail_entry),
    .fail_slot_i   (fail_slot),
    .fail_gen_i    (fail_gen),
    .fail_rank_i   (fail_rank)
  );

`ifndef SYNTHESIS
  // Invariants (docs/rtl/assertions.md).
  // The shell's side of s_axis (AXI-Stream): a beat once presented holds until taken. Checked, so
  // a shell or testbench that breaks it is named here rather than as a wrong sum later.
  a_core_in_hold: assert property (@(posedge clk_i) disable iff (!rst_ni)
      s_axis_tvalid_i && !s_axis_tready_o |=> s_axis_tvalid_i &&
      $stable({s_axis_tdata_i, s_axis_tkeep_i, s_axis_tlast_i, s_axis_tuser_i}))
    else $error("ina_core: s_axis changed while stalled (the shell must hold a presented beat)");
  // One CRC verdict per descriptor: never more verdicts than the descriptor FIFO can hold.
  a_core_ok_room: assert property (@(posedge clk_i) disable iff (!rst_ni)
      crc_valid |-> crc_unused_ready)
    else $error("ina_core: a CRC verdict pushed into the full verdict FIFO");
`endif

endmodule
