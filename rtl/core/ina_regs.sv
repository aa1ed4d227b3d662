// Control registers: identification, the job table and the per-cause counters.
//
// Map (byte addresses, 32-bit registers) from proto/ina.toml [[register]] via ina_proto_pkg:
//   id, version, params (ro); job_sel, job_id, job_slots, job_world, job_sec (rw); job_commit,
//   job_key_up0..3, job_key_down0..3 (wo: reads return 0);
//   fail_where, fail_who (ro);
//   roce_qpn, roce_qkey, roce_pkey (rw: the RoCEv2 ingress's identity, ina_roce_rx);
//   counters (ro) from counter_base, one per ina_proto_pkg::counter_e, then one per
//   ina_proto_pkg::roce_counter_e.
// Writes to job_id/job_slots/job_world/job_sec go to staging registers; writing 1 to job_commit
// copies them into entry job_sel (ignored when job_sel >= NumJobs) and pulses commit_o so the
// aggregation stage resets the entry's slots. Reads of job_id/job_slots/job_world/job_sec return
// entry job_sel. The traffic keys of a keyed entry (job_key_up*, job_key_down*) are staged the same
// way but never read back: a commit passes them on once (commit_key_up_o / commit_key_down_o, to
// ina_gcm_keys, with commit_o) and clears the staged copies.
// Register fields (job_id id/valid, job_slots base/window, job_world world/k64/group, params,
// job_commit go) are declared in proto/ina.toml and used here as ina_proto_pkg::Reg<Reg><Field>Lsb
// / Width; job_world.k64 0 means MaxK; params.k64 reads MaxK / 64.
// Parameters: NumJobs entries; PoolSlots (log2 in params.log2_slots); MaxK, the core's largest K
// (a power of two, 64 .. ina_rtl_pkg::MaxKLimit, so that MaxK / 64 fits the 8-bit k64 fields).
//
// Bus: one request per cycle (req_i, we_i, addr_i, wdata_i); a read's data is in rdata_o with
// rvalid_o the next cycle. Unknown addresses read 0; writes to read-only registers are ignored.
// Counters wrap at 2^32; cnt_inc_i[i] adds one to counter i in that cycle, roce_cnt_inc_i[i] to
// RoCEv2 counter i.
// fail_i marks entry fail_entry_i failed: job_valid_o drops it (its packets are unknown_job) and
// job_id reads its failed bit until the next commit to the entry; fail_where / fail_who hold the
// latest failure.
module ina_regs
#(
  parameter int unsigned NumJobs   = 8,
  parameter int unsigned PoolSlots = 1024,
  parameter int unsigned MaxK      = 256
) (
  input  logic        clk_i,
  input  logic        rst_ni,
  // Register bus.
  input  logic        req_i,
  input  logic        we_i,
  input  logic [11:0] addr_i,
  input  logic [31:0] wdata_i,
  output logic        rvalid_o,
  output logic [31:0] rdata_o,
  // Job table.
  output logic [NumJobs-1:0]       job_valid_o,
  output logic [NumJobs*16-1:0] job_id_o,
  output logic [NumJobs*32-1:0] job_slots_o,
  output logic [NumJobs*32-1:0] job_world_o,
  // Security mode of each entry (job_sec.mode; entry j at [2j +: 2]).
  output logic [NumJobs*2-1:0]  job_sec_o,
  // One-cycle pulse after a commit, with the committed entry's index, slots register, validity,
  // security mode and traffic keys (byte 0 of a key in bits [127:120]).
  output logic        commit_o,
  output logic [7:0]  commit_entry_o,
  output logic [31:0] commit_slots_o,
  output logic        commit_valid_o,
  output logic [1:0]  commit_sec_o,
  output logic [127:0] commit_key_up_o,
  output logic [127:0] commit_key_down_o,
  // RoCEv2 ingress identity (roce_qpn.qpn, roce_qkey, roce_pkey.pkey).
  output logic [23:0] roce_qpn_o,
  output logic [31:0] roce_qkey_o,
  output logic [15:0] roce_pkey_o,
  // Counters.
  input  logic [ina_proto_pkg::NumCounters-1:0] cnt_inc_i,
  input  logic [ina_proto_pkg::NumRoceCounters-1:0] roce_cnt_inc_i,
  // The aggregation stage ended a job (ranks disagree): entry, slot, generation, rank.
  input  logic        fail_i,
  input  logic [7:0]  fail_entry_i,
  input  logic [15:0] fail_slot_i,
  input  logic [15:0] fail_gen_i,
  input  logic [15:0] fail_rank_i
);

  if (NumJobs < 1 || NumJobs > 256) begin : gen_bad_jobs
    $error("ina_regs: NumJobs must be 1..256");
  end
  if (PoolSlots < 2 || PoolSlots > 65536) begin : gen_bad_slots
    $error("ina_regs: PoolSlots must be 2..65536");
  end
  // MaxK / 64 must fit params.k64 and job_world.k64 (proto/ina.toml), and the descriptor.
  if (MaxK < 64 || MaxK > ina_rtl_pkg::MaxKLimit || (MaxK & (MaxK - 1)) != 0 ||
      MaxK / 64 >= (1 << ina_proto_pkg::RegParamsK64Width) ||
      MaxK / 64 >= (1 << ina_proto_pkg::RegJobWorldK64Width)) begin : gen_bad_max_k
    $error("ina_regs: MaxK must be a power of two in 64..MaxKLimit, MaxK / 64 in the k64 fields");
  end

  if (ina_proto_pkg::RegJobSecModeWidth != 2) begin : gen_bad_sec
    $error("ina_regs: job_sec.mode must be 2 bits (proto/ina.toml)");
  end
  if (ina_proto_pkg::RegRoceQpnQpnWidth != 24 || ina_proto_pkg::RegRocePkeyPkeyWidth != 16) begin : gen_bad_roce
    $error("ina_regs: roce_qpn.qpn must be 24 bits and roce_pkey.pkey 16 (proto/ina.toml)");
  end

  localparam int unsigned JW = (NumJobs > 1) ? $clog2(NumJobs) : 1;
  localparam int unsigned NumCnt = ina_proto_pkg::NumCounters + ina_proto_pkg::NumRoceCounters;

  logic [31:0] sel_q, slots_q, world_q;
  logic [1:0]  sec_q;                   // staged job_sec.mode
  logic [127:0] key_up_q, key_down_q;   // staged keys (write-only)
  logic [127:0] ckey_up_q, ckey_down_q; // the keys of the last commit
  logic [NumJobs*2-1:0] jsec_q;
  logic        id_valid_q;
  logic [15:0] id_q;
  logic [NumJobs-1:0]       valid_q, failed_q;
  logic [31:0] fail_where_q, fail_who_q;
  // Flat vectors (yosys 0.23 reads no multi-dimensional packed arrays): entry j at [16j +: 16] /
  // [32j +: 32], counter i at [32i +: 32].
  logic [NumJobs*16-1:0]    jid_q;
  logic [NumJobs*32-1:0]    jslots_q, jworld_q;
  logic [NumCnt*32-1:0] cnt_q;
  logic [NumCnt-1:0]    inc;
  logic [23:0] roce_qpn_q;
  logic [31:0] roce_qkey_q;
  logic [15:0] roce_pkey_q;
  logic        commit_q;
  logic [31:0] rdata_d;
  logic        wr, rd, do_commit, sel_ok;
  logic [JW-1:0] sel;

  assign wr        = req_i && we_i;
  assign rd        = req_i && !we_i;
  assign sel_ok    = sel_q < NumJobs;
  assign sel       = sel_q[JW-1:0];
  assign do_commit = wr && addr_i == ina_proto_pkg::RegJobCommitAddr &&
                     wdata_i[ina_proto_pkg::RegJobCommitGoLsb] && sel_ok;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      sel_q    <= ina_proto_pkg::RegJobSelReset;
      id_valid_q <= ina_proto_pkg::RegJobIdReset[ina_proto_pkg::RegJobIdValidLsb];
      id_q     <= ina_proto_pkg::RegJobIdReset[ina_proto_pkg::RegJobIdIdLsb +: ina_proto_pkg::RegJobIdIdWidth];
      slots_q  <= ina_proto_pkg::RegJobSlotsReset;
      world_q  <= ina_proto_pkg::RegJobWorldReset;
      sec_q    <= ina_proto_pkg::RegJobSecReset[ina_proto_pkg::RegJobSecModeLsb +: 2];
      key_up_q   <= '0;
      key_down_q <= '0;
      ckey_up_q  <= '0;
      ckey_down_q <= '0;
      jsec_q   <= '0;
      valid_q  <= '0;
      jid_q    <= '0;
      jslots_q <= '0;
      jworld_q <= '0;
      commit_q <= 1'b0;
    end else begin
      commit_q <= do_commit;
      if (wr) begin
        unique case (addr_i)
          ina_proto_pkg::RegJobSelAddr:   sel_q   <= wdata_i;
          ina_proto_pkg::RegJobIdAddr: begin
            id_valid_q <= wdata_i[ina_proto_pkg::RegJobIdValidLsb];
            id_q       <= wdata_i[ina_proto_pkg::RegJobIdIdLsb +: ina_proto_pkg::RegJobIdIdWidth];
          end
          ina_proto_pkg::RegJobSlotsAddr: slots_q <= wdata_i;
          ina_proto_pkg::RegJobWorldAddr: world_q <= wdata_i;
          ina_proto_pkg::RegJobSecAddr:   sec_q   <= wdata_i[ina_proto_pkg::RegJobSecModeLsb +: 2];
          ina_proto_pkg::RegJobKeyUp0Addr:   key_up_q[127:96]   <= wdata_i;
          ina_proto_pkg::RegJobKeyUp1Addr:   key_up_q[95:64]    <= wdata_i;
          ina_proto_pkg::RegJobKeyUp2Addr:   key_up_q[63:32]    <= wdata_i;
          ina_proto_pkg::RegJobKeyUp3Addr:   key_up_q[31:0]     <= wdata_i;
          ina_proto_pkg::RegJobKeyDown0Addr: key_down_q[127:96] <= wdata_i;
          ina_proto_pkg::RegJobKeyDown1Addr: key_down_q[95:64]  <= wdata_i;
          ina_proto_pkg::RegJobKeyDown2Addr: key_down_q[63:32]  <= wdata_i;
          ina_proto_pkg::RegJobKeyDown3Addr: key_down_q[31:0]   <= wdata_i;
          default: ;
        endcase
      end
      if (do_commit) begin
        // The staged keys go to the key table once and are not kept here.
        ckey_up_q   <= key_up_q;
        ckey_down_q <= key_down_q;
        key_up_q    <= '0;
        key_down_q  <= '0;
        jsec_q[2*sel +: 2] <= sec_q;
        valid_q[sel]  <= id_valid_q;
        jid_q[16*sel +: 16]    <= id_q;
        jslots_q[32*sel +: 32] <= slots_q;
        jworld_q[32*sel +: 32] <= world_q;
      end
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      failed_q     <= '0;
      fail_where_q <= ina_proto_pkg::RegFailWhereReset;
      fail_who_q   <= ina_proto_pkg::RegFailWhoReset;
    end else begin
      if (do_commit) failed_q[sel] <= 1'b0;
      if (fail_i && fail_entry_i < 8'(NumJobs)) begin
        failed_q[fail_entry_i[JW-1:0]] <= 1'b1;
        fail_where_q <= (32'(fail_slot_i) << ina_proto_pkg::RegFailWhereSlotLsb) |
                        (32'(fail_gen_i) << ina_proto_pkg::RegFailWhereGenLsb);
        fail_who_q   <= (32'(fail_rank_i) << ina_proto_pkg::RegFailWhoRankLsb) |
                        (32'(fail_entry_i) << ina_proto_pkg::RegFailWhoEntryLsb) |
                        (32'd1 << ina_proto_pkg::RegFailWhoValidLsb);
      end
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      roce_qpn_q  <= ina_proto_pkg::RegRoceQpnReset[ina_proto_pkg::RegRoceQpnQpnLsb +: 24];
      roce_qkey_q <= ina_proto_pkg::RegRoceQkeyReset;
      roce_pkey_q <= ina_proto_pkg::RegRocePkeyReset[ina_proto_pkg::RegRocePkeyPkeyLsb +: 16];
    end else if (wr) begin
      if (addr_i == ina_proto_pkg::RegRoceQpnAddr) begin
        roce_qpn_q <= wdata_i[ina_proto_pkg::RegRoceQpnQpnLsb +: 24];
      end
      if (addr_i == ina_proto_pkg::RegRoceQkeyAddr) roce_qkey_q <= wdata_i;
      if (addr_i == ina_proto_pkg::RegRocePkeyAddr) begin
        roce_pkey_q <= wdata_i[ina_proto_pkg::RegRocePkeyPkeyLsb +: 16];
      end
    end
  end

  assign inc = {roce_cnt_inc_i, cnt_inc_i};

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      cnt_q <= '0;
    end else begin
      for (int unsigned i = 0; i < NumCnt; i++) begin
        if (inc[i]) cnt_q[32*i +: 32] <= cnt_q[32*i +: 32] + 32'd1;
      end
    end
  end

  // Read values of the registers with fields, assembled at the positions proto/ina.toml gives.
  logic [31:0] params_rd, job_id_rd;
  assign params_rd = (32'($clog2(PoolSlots)) << ina_proto_pkg::RegParamsLog2SlotsLsb) |
                     (32'(ina_proto_pkg::MaxWorkers) << ina_proto_pkg::RegParamsMaxWorkersLsb) |
                     (32'(MaxK / 64) << ina_proto_pkg::RegParamsK64Lsb);
  assign job_id_rd = (32'(valid_q[sel]) << ina_proto_pkg::RegJobIdValidLsb) |
                     (32'(failed_q[sel]) << ina_proto_pkg::RegJobIdFailedLsb) |
                     (32'(jid_q[16*sel +: 16]) << ina_proto_pkg::RegJobIdIdLsb);

  always_comb begin
    rdata_d = '0;
    unique case (addr_i)
      ina_proto_pkg::RegIdAddr:       rdata_d = ina_proto_pkg::RegIdReset;
      ina_proto_pkg::RegVersionAddr:  rdata_d = 32'(ina_proto_pkg::Version);
      ina_proto_pkg::RegParamsAddr:   rdata_d = params_rd;
      ina_proto_pkg::RegJobSelAddr:   rdata_d = sel_q;
      ina_proto_pkg::RegJobIdAddr:    rdata_d = sel_ok ? job_id_rd : '0;
      ina_proto_pkg::RegJobSlotsAddr: rdata_d = sel_ok ? jslots_q[32*sel +: 32] : '0;
      ina_proto_pkg::RegJobWorldAddr: rdata_d = sel_ok ? jworld_q[32*sel +: 32] : '0;
      ina_proto_pkg::RegJobSecAddr:
        rdata_d = sel_ok ? 32'(jsec_q[2*sel +: 2]) << ina_proto_pkg::RegJobSecModeLsb : '0;
      ina_proto_pkg::RegFailWhereAddr: rdata_d = fail_where_q;
      ina_proto_pkg::RegFailWhoAddr:   rdata_d = fail_who_q;
      ina_proto_pkg::RegRoceQpnAddr:   rdata_d = 32'(roce_qpn_q) << ina_proto_pkg::RegRoceQpnQpnLsb;
      ina_proto_pkg::RegRoceQkeyAddr:  rdata_d = roce_qkey_q;
      ina_proto_pkg::RegRocePkeyAddr:  rdata_d = 32'(roce_pkey_q) << ina_proto_pkg::RegRocePkeyPkeyLsb;
      default: begin
        if (addr_i >= ina_proto_pkg::RegCounterBaseAddr && addr_i < ina_proto_pkg::RegCounterBaseAddr + 12'(4 * NumCnt)
            && addr_i[1:0] == 2'b00) begin
          rdata_d = cnt_q[32*(6'((addr_i - ina_proto_pkg::RegCounterBaseAddr) >> 2)) +: 32];
        end
      end
    endcase
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rvalid_o <= 1'b0;
      rdata_o  <= '0;
    end else begin
      rvalid_o <= rd;
      if (rd) rdata_o <= rdata_d;
    end
  end

  assign job_valid_o    = valid_q & ~failed_q;
  assign job_id_o       = jid_q;
  assign job_slots_o    = jslots_q;
  assign job_world_o    = jworld_q;
  assign job_sec_o      = jsec_q;
  assign commit_o       = commit_q;
  assign commit_entry_o = 8'(sel);
  assign commit_slots_o = jslots_q[32*sel +: 32];
  assign commit_valid_o = valid_q[sel];
  assign commit_sec_o   = jsec_q[2*sel +: 2];
  assign commit_key_up_o   = ckey_up_q;
  assign commit_key_down_o = ckey_down_q;
  assign roce_qpn_o     = roce_qpn_q;
  assign roce_qkey_o    = roce_qkey_q;
  assign roce_pkey_o    = roce_pkey_q;

endmodule
