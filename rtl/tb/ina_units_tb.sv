// Test-only top (not synthesized): the core's leaf modules side by side, each with its own ports
// brought out under a prefix, so that one small Verilator model (Vina_units_tb) lets each module be
// tested alone (tests/rtl/units). Only the clock and reset are shared; every other port of a module
// is driven or observed by that module's test alone.
//   ing_*  ina_ingress
//   mem_*  ina_slot_mem (MemWords x MemWidth)
//   add_*  ina_lane_adder
//   regs_* ina_regs (RegsJobs entries, RegsSlots pool slots)
//   agg_*  ina_agg (AggJobs entries, AggSlots pool slots, output FIFO free count AggFreeW bits)
//   crck_* ina_crc32c, Check = 1 (trailer check)
//   crcv_* ina_crc32c, Check = 0 (trailer value)
//   egr_*  ina_egress (EgrDepth beats)
//   rrx_*  ina_roce_rx
// Parameters are small so that the model verilates and simulates fast. MaxK (ina_ingress,
// ina_regs, ina_agg) is 512, neither the RTL default (256) nor the core model's (2048), so that the
// per-module tests check that the widths follow the parameter (K 64, 256 and 512, k64 0 = 512).
module ina_units_tb
#(
  parameter int unsigned MemWords  = 16,
  parameter int unsigned MemWidth  = 32,
  parameter int unsigned RegsJobs  = 4,
  parameter int unsigned RegsSlots = 64,
  parameter int unsigned AggJobs   = 2,
  parameter int unsigned AggSlots  = 4,
  parameter int unsigned AggFreeW  = 7,
  parameter int unsigned MaxK      = 512,
  parameter int unsigned EgrDepth  = 32
) (
  input  logic                                  clk_i,
  input  logic                                  rst_ni,
  // ina_ingress.
  input  logic                                  ing_s_axis_tvalid_i,
  output logic                                  ing_s_axis_tready_o,
  input  logic [ina_rtl_pkg::BeatBits-1:0]      ing_s_axis_tdata_i,
  input  logic [ina_rtl_pkg::BeatBytes-1:0]     ing_s_axis_tkeep_i,
  input  logic                                  ing_s_axis_tlast_i,
  input  logic                                  ing_s_axis_tuser_i,
  output logic                                  ing_pay_valid_o,
  input  logic                                  ing_pay_ready_i,
  output logic [ina_rtl_pkg::BeatBits-1:0]      ing_pay_data_o,
  output logic                                  ing_desc_valid_o,
  input  logic                                  ing_desc_ready_i,
  output logic [ina_rtl_pkg::DescBits-1:0]      ing_desc_o,
  output logic                                  ing_in_frame_o,
  // ina_slot_mem.
  input  logic                                  mem_re_i,
  input  logic [$clog2(MemWords)-1:0]           mem_raddr_i,
  output logic [MemWidth-1:0]                   mem_rdata_o,
  input  logic                                  mem_we_i,
  input  logic [$clog2(MemWords)-1:0]           mem_waddr_i,
  input  logic [MemWidth-1:0]                   mem_wdata_i,
  // ina_lane_adder.
  input  logic [ina_rtl_pkg::BeatBits-1:0]      add_a_i,
  input  logic [ina_rtl_pkg::BeatBits-1:0]      add_b_i,
  output logic [ina_rtl_pkg::BeatBits-1:0]      add_sum_o,
  // ina_regs.
  input  logic                                  regs_req_i,
  input  logic                                  regs_we_i,
  input  logic [11:0]                           regs_addr_i,
  input  logic [31:0]                           regs_wdata_i,
  output logic                                  regs_rvalid_o,
  output logic [31:0]                           regs_rdata_o,
  output logic [RegsJobs-1:0]                   regs_job_valid_o,
  output logic [RegsJobs*16-1:0]                regs_job_id_o,
  output logic [RegsJobs*32-1:0]                regs_job_slots_o,
  output logic [RegsJobs*32-1:0]                regs_job_world_o,
  output logic                                  regs_commit_o,
  output logic [31:0]                           regs_commit_slots_o,
  output logic                                  regs_commit_valid_o,
  output logic [RegsJobs*2-1:0]                 regs_job_sec_o,
  output logic [7:0]                            regs_commit_entry_o,
  output logic [1:0]                            regs_commit_sec_o,
  output logic [127:0]                          regs_commit_key_up_o,
  output logic [127:0]                          regs_commit_key_down_o,
  input  logic [ina_proto_pkg::NumCounters-1:0] regs_cnt_inc_i,
  input  logic [ina_proto_pkg::NumRoceCounters-1:0] regs_roce_cnt_inc_i,
  output logic [23:0]                           regs_roce_qpn_o,
  output logic [31:0]                           regs_roce_qkey_o,
  output logic [15:0]                           regs_roce_pkey_o,
  input  logic                                  regs_fail_i,
  input  logic [7:0]                            regs_fail_entry_i,
  input  logic [15:0]                           regs_fail_slot_i,
  input  logic [15:0]                           regs_fail_gen_i,
  input  logic [15:0]                           regs_fail_rank_i,
  // ina_agg.
  input  logic                                  agg_desc_valid_i,
  output logic                                  agg_desc_ready_o,
  input  logic [ina_rtl_pkg::DescBits-1:0]      agg_desc_i,
  input  logic                                  agg_pay_valid_i,
  output logic                                  agg_pay_ready_o,
  input  logic [ina_rtl_pkg::BeatBits-1:0]      agg_pay_data_i,
  input  logic [AggJobs-1:0]                    agg_job_valid_i,
  input  logic [AggJobs*16-1:0]                 agg_job_id_i,
  input  logic [AggJobs*32-1:0]                 agg_job_slots_i,
  input  logic [AggJobs*32-1:0]                 agg_job_world_i,
  input  logic                                  agg_commit_i,
  input  logic [31:0]                           agg_commit_slots_i,
  input  logic                                  agg_commit_valid_i,
  output logic                                  agg_out_valid_o,
  output logic [ina_rtl_pkg::BeatBits-1:0]      agg_out_data_o,
  output logic [ina_rtl_pkg::BeatBytes-1:0]     agg_out_keep_o,
  output logic                                  agg_out_last_o,
  output logic [ina_rtl_pkg::OutUserBits-1:0]   agg_out_user_o,
  input  logic [AggFreeW-1:0]                   agg_out_free_i,
  output logic [ina_proto_pkg::NumCounters-1:0] agg_cnt_inc_o,
  output logic                                  agg_busy_o,
  input  logic                                  agg_desc_crc_ok_i,
  output logic                                  agg_fail_o,
  output logic [7:0]                            agg_fail_entry_o,
  output logic [15:0]                           agg_fail_slot_o,
  output logic [15:0]                           agg_fail_gen_o,
  output logic [15:0]                           agg_fail_rank_o,
  // ina_crc32c, Check = 1.
  input  logic                                  crck_s_axis_tvalid_i,
  input  logic [ina_rtl_pkg::BeatBits-1:0]      crck_s_axis_tdata_i,
  input  logic [ina_rtl_pkg::BeatBytes-1:0]     crck_s_axis_tkeep_i,
  input  logic                                  crck_s_axis_tlast_i,
  output logic                                  crck_valid_o,
  output logic                                  crck_ok_o,
  output logic                                  crck_busy_o,
  // ina_crc32c, Check = 0.
  input  logic                                  crcv_s_axis_tvalid_i,
  input  logic [ina_rtl_pkg::BeatBits-1:0]      crcv_s_axis_tdata_i,
  input  logic [ina_rtl_pkg::BeatBytes-1:0]     crcv_s_axis_tkeep_i,
  input  logic                                  crcv_s_axis_tlast_i,
  output logic                                  crcv_valid_o,
  output logic [31:0]                           crcv_crc_o,
  output logic                                  crcv_busy_o,
  // ina_egress.
  input  logic                                  egr_in_valid_i,
  input  logic [ina_rtl_pkg::BeatBits-1:0]      egr_in_data_i,
  input  logic [ina_rtl_pkg::BeatBytes-1:0]     egr_in_keep_i,
  input  logic                                  egr_in_last_i,
  input  logic [ina_rtl_pkg::OutUserBits-1:0]   egr_in_user_i,
  output logic [$clog2(EgrDepth):0]             egr_free_o,
  output logic                                  egr_m_axis_tvalid_o,
  input  logic                                  egr_m_axis_tready_i,
  output logic [ina_rtl_pkg::BeatBits-1:0]      egr_m_axis_tdata_o,
  output logic [ina_rtl_pkg::BeatBytes-1:0]     egr_m_axis_tkeep_o,
  output logic                                  egr_m_axis_tlast_o,
  output logic [ina_rtl_pkg::OutUserBits-1:0]   egr_m_axis_tuser_o,
  output logic                                  egr_busy_o,
  // ina_roce_rx.
  input  logic                                  rrx_s_axis_tvalid_i,
  output logic                                  rrx_s_axis_tready_o,
  input  logic [ina_rtl_pkg::BeatBits-1:0]      rrx_s_axis_tdata_i,
  input  logic [ina_rtl_pkg::BeatBytes-1:0]     rrx_s_axis_tkeep_i,
  input  logic                                  rrx_s_axis_tlast_i,
  input  logic                                  rrx_s_axis_tuser_i,
  output logic                                  rrx_m_axis_tvalid_o,
  input  logic                                  rrx_m_axis_tready_i,
  output logic [ina_rtl_pkg::BeatBits-1:0]      rrx_m_axis_tdata_o,
  output logic [ina_rtl_pkg::BeatBytes-1:0]     rrx_m_axis_tkeep_o,
  output logic                                  rrx_m_axis_tlast_o,
  output logic                                  rrx_m_axis_tuser_o,
  output logic                                  rrx_verdict_valid_o,
  output logic                                  rrx_verdict_drop_o,
  input  logic [23:0]                           rrx_qpn_i,
  input  logic [31:0]                           rrx_qkey_i,
  input  logic [15:0]                           rrx_pkey_i,
  output logic [ina_proto_pkg::NumRoceCounters-1:0] rrx_cnt_inc_o,
  output logic                                  rrx_busy_o
);
  ina_rtl_pkg::desc_t ing_desc, agg_desc;

  if ($bits(ing_desc) != ina_rtl_pkg::DescBits) begin : gen_bad_desc
    $error("ina_units_tb: ina_rtl_pkg::DescBits is not $bits(desc_t)");
  end

  ina_ingress #(.MaxK(MaxK)) u_ingress (
    .clk_i,
    .rst_ni,
    .s_axis_tvalid_i(ing_s_axis_tvalid_i),
    .s_axis_tready_o(ing_s_axis_tready_o),
    .s_axis_tdata_i (ing_s_axis_tdata_i),
    .s_axis_tkeep_i (ing_s_axis_tkeep_i),
    .s_axis_tlast_i (ing_s_axis_tlast_i),
    .s_axis_tuser_i (ing_s_axis_tuser_i),
    .pay_valid_o    (ing_pay_valid_o),
    .pay_ready_i    (ing_pay_ready_i),
    .pay_data_o     (ing_pay_data_o),
    .desc_valid_o   (ing_desc_valid_o),
    .desc_ready_i   (ing_desc_ready_i),
    .desc_o         (ing_desc),
    .in_frame_o     (ing_in_frame_o)
  );
  assign ing_desc_o = ing_desc;

  ina_slot_mem #(
    .Words(MemWords),
    .Width(MemWidth)
  ) u_slot_mem (
    .clk_i,
    .re_i   (mem_re_i),
    .raddr_i(mem_raddr_i),
    .rdata_o(mem_rdata_o),
    .we_i   (mem_we_i),
    .waddr_i(mem_waddr_i),
    .wdata_i(mem_wdata_i)
  );

  ina_lane_adder u_lane_adder (
    .a_i  (add_a_i),
    .b_i  (add_b_i),
    .sum_o(add_sum_o)
  );

  ina_regs #(
    .NumJobs  (RegsJobs),
    .PoolSlots(RegsSlots),
    .MaxK     (MaxK)
  ) u_regs (
    .clk_i,
    .rst_ni,
    .req_i         (regs_req_i),
    .we_i          (regs_we_i),
    .addr_i        (regs_addr_i),
    .wdata_i       (regs_wdata_i),
    .rvalid_o      (regs_rvalid_o),
    .rdata_o       (regs_rdata_o),
    .job_valid_o   (regs_job_valid_o),
    .job_id_o      (regs_job_id_o),
    .job_slots_o   (regs_job_slots_o),
    .job_world_o   (regs_job_world_o),
    .job_sec_o     (regs_job_sec_o),
    .commit_o      (regs_commit_o),
    .commit_entry_o(regs_commit_entry_o),
    .commit_slots_o(regs_commit_slots_o),
    .commit_valid_o(regs_commit_valid_o),
    .commit_sec_o  (regs_commit_sec_o),
    .commit_key_up_o  (regs_commit_key_up_o),
    .commit_key_down_o(regs_commit_key_down_o),
    .roce_qpn_o    (regs_roce_qpn_o),
    .roce_qkey_o   (regs_roce_qkey_o),
    .roce_pkey_o   (regs_roce_pkey_o),
    .cnt_inc_i     (regs_cnt_inc_i),
    .roce_cnt_inc_i(regs_roce_cnt_inc_i),
    .fail_i        (regs_fail_i),
    .fail_entry_i  (regs_fail_entry_i),
    .fail_slot_i   (regs_fail_slot_i),
    .fail_gen_i    (regs_fail_gen_i),
    .fail_rank_i   (regs_fail_rank_i)
  );

  assign agg_desc = agg_desc_i;
  ina_rtl_pkg::seal_t agg_seal_unused;
  logic unused_seal;
  assign unused_seal = ^agg_seal_unused;

  ina_agg #(
    .NumJobs  (AggJobs),
    .PoolSlots(AggSlots),
    .MaxK     (MaxK),
    .OutFreeW (AggFreeW)
  ) u_agg (
    .clk_i,
    .rst_ni,
    .desc_valid_i  (agg_desc_valid_i),
    .desc_ready_o  (agg_desc_ready_o),
    .desc_i        (agg_desc),
    .desc_crc_ok_i (agg_desc_crc_ok_i),
    .desc_j0_i     ('0),  // CRC-only jobs here: keyed jobs are the core's test (co-simulation)
    .desc_keyed_i  (1'b0),
    .pay_valid_i   (agg_pay_valid_i),
    .pay_ready_o   (agg_pay_ready_o),
    .pay_data_i    (agg_pay_data_i),
    .job_valid_i   (agg_job_valid_i),
    .job_id_i      (agg_job_id_i),
    .job_slots_i   (agg_job_slots_i),
    .job_world_i   (agg_job_world_i),
    .job_sec_i     ('0),
    .commit_i      (agg_commit_i),
    .commit_slots_i(agg_commit_slots_i),
    .commit_valid_i(agg_commit_valid_i),
    .out_valid_o   (agg_out_valid_o),
    .out_data_o    (agg_out_data_o),
    .out_keep_o    (agg_out_keep_o),
    .out_last_o    (agg_out_last_o),
    .out_user_o    (agg_out_user_o),
    .out_seal_o    (agg_seal_unused),
    .out_free_i    (agg_out_free_i),
    .cnt_inc_o     (agg_cnt_inc_o),
    .fail_o        (agg_fail_o),
    .fail_entry_o  (agg_fail_entry_o),
    .fail_slot_o   (agg_fail_slot_o),
    .fail_gen_o    (agg_fail_gen_o),
    .fail_rank_o   (agg_fail_rank_o),
    .busy_o        (agg_busy_o)
  );

  logic [31:0] crck_crc_unused;
  logic        crcv_ok_unused;

  ina_crc32c #(.Check(1'b1)) u_crc_check (
    .clk_i,
    .rst_ni,
    .s_axis_tvalid_i(crck_s_axis_tvalid_i),
    .s_axis_tdata_i (crck_s_axis_tdata_i),
    .s_axis_tkeep_i (crck_s_axis_tkeep_i),
    .s_axis_tlast_i (crck_s_axis_tlast_i),
    .crc_valid_o    (crck_valid_o),
    .crc_o          (crck_crc_unused),
    .crc_ok_o       (crck_ok_o),
    .busy_o         (crck_busy_o)
  );

  ina_crc32c #(.Check(1'b0)) u_crc_value (
    .clk_i,
    .rst_ni,
    .s_axis_tvalid_i(crcv_s_axis_tvalid_i),
    .s_axis_tdata_i (crcv_s_axis_tdata_i),
    .s_axis_tkeep_i (crcv_s_axis_tkeep_i),
    .s_axis_tlast_i (crcv_s_axis_tlast_i),
    .crc_valid_o    (crcv_valid_o),
    .crc_o          (crcv_crc_o),
    .crc_ok_o       (crcv_ok_unused),
    .busy_o         (crcv_busy_o)
  );

  ina_egress #(.Depth(EgrDepth)) u_egress (
    .clk_i,
    .rst_ni,
    .in_valid_i     (egr_in_valid_i),
    .in_data_i      (egr_in_data_i),
    .in_keep_i      (egr_in_keep_i),
    .in_last_i      (egr_in_last_i),
    .in_user_i      (egr_in_user_i),
    .in_seal_i      ('0),  // CRC-only results here: keyed ones are the core's test
    .in_key_i       ('0),
    .in_hpow_i      ('0),
    .free_o         (egr_free_o),
    .m_axis_tvalid_o(egr_m_axis_tvalid_o),
    .m_axis_tready_i(egr_m_axis_tready_i),
    .m_axis_tdata_o (egr_m_axis_tdata_o),
    .m_axis_tkeep_o (egr_m_axis_tkeep_o),
    .m_axis_tlast_o (egr_m_axis_tlast_o),
    .m_axis_tuser_o (egr_m_axis_tuser_o),
    .busy_o         (egr_busy_o)
  );

  ina_roce_rx u_roce_rx (
    .clk_i,
    .rst_ni,
    .s_axis_tvalid_i(rrx_s_axis_tvalid_i),
    .s_axis_tready_o(rrx_s_axis_tready_o),
    .s_axis_tdata_i (rrx_s_axis_tdata_i),
    .s_axis_tkeep_i (rrx_s_axis_tkeep_i),
    .s_axis_tlast_i (rrx_s_axis_tlast_i),
    .s_axis_tuser_i (rrx_s_axis_tuser_i),
    .m_axis_tvalid_o(rrx_m_axis_tvalid_o),
    .m_axis_tready_i(rrx_m_axis_tready_i),
    .m_axis_tdata_o (rrx_m_axis_tdata_o),
    .m_axis_tkeep_o (rrx_m_axis_tkeep_o),
    .m_axis_tlast_o (rrx_m_axis_tlast_o),
    .m_axis_tuser_o (rrx_m_axis_tuser_o),
    .verdict_valid_o(rrx_verdict_valid_o),
    .verdict_drop_o (rrx_verdict_drop_o),
    .qpn_i          (rrx_qpn_i),
    .qkey_i         (rrx_qkey_i),
    .pkey_i         (rrx_pkey_i),
    .cnt_inc_o      (rrx_cnt_inc_o),
    .busy_o         (rrx_busy_o)
  );

  logic unused_tb;
  assign unused_tb = ^{crck_crc_unused, crcv_ok_unused};

endmodule
