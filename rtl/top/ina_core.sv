// ina aggregation core: the dataplane an FPGA SmartNIC runs between its MAC and its multicast
// replication logic.
//
//   s_axis -> ina_roce_rx -+-> ina_ingress -> payload FIFO / descriptor FIFO -+-> (XOR) ina_agg ...
//   (RoCEv2 checks, ICRC)  +-> ina_crc32c (check) ----------> CRC-ok FIFO ----+     ^
//                          +-> ina_gcm_check (keyed frames) -> J0 FIFO -------+     |
//                          |     (keyed and mac_encrypt bit FIFO) ------------+     |
//                          |   +-> J0, K -> ina_gcm_ctr (keystream) -> keystream FIFO
//        its verdicts ------------------------------------> RoCE verdict FIFO +
//     ... ina_agg -> ina_gcm_ctr (encrypts) -> ina_egress -> m_axis (output FIFO, CRC32C trailer
//         or a keyed job's tag)
//                        ina_regs (job table, keys, counters) <-> reg bus; ina_gcm_keys (key table)
// Keyed jobs (sec modes mac and mac_encrypt, docs/security.md; docs/rtl/ina_core.md "Keyed jobs"):
//   a frame whose first beat names a keyed job goes through ina_gcm_check (its J0 joins the
//   descriptor; ina_agg's rule K4 compares it with the slot's expected nonce), and its results get
//   their tag in ina_egress under the job's down key. A mac_encrypt frame's payload is XORed with
//   its keystream (made from the J0 its tag gave) as it leaves the payload FIFO, and its results
//   are encrypted on their way to ina_egress. s_axis takes no beat while ina_gcm_keys writes a
//   keyed entry's key constants (15 cycles after its commit).
//
// s_axis: frames (Ethernet + IPv4 + UDP + ina header in the first 64-byte beat, then payload
//   beats, then the ina message's 4-byte CRC32C trailer; tdata byte 0 = frame byte 0; tkeep
//   contiguous; tuser = MAC error), or the same ina message as a RoCEv2 UD SEND_ONLY (UDP
//   destination port 4791, BTH and DETH before it, pad and ICRC after it: docs/rdma.md), which
//   ina_roce_rx checks (roce_* counters) and decapsulates into the UDP layout; every frame after it
//   is in the UDP layout. The trailer is checked as the frame streams in; the verdict
//   joins the frame's descriptor (a frame's descriptor goes to ina_agg only with it), and a frame
//   whose trailer does not match is dropped (drop_bad_crc) before it touches any slot. A RoCEv2
//   frame that ina_roce_rx found bad only after forwarding it (bad ICRC, lengths) has a drop
//   verdict: its descriptor and payload beats are discarded here (the drain below) while the
//   aggregation stage is idle, so it touches no slot and counts no engine counter.
// m_axis: result frames, same layout, trailer appended by ina_egress; tuser [15:0] = the job's
//   multicast group, [31:16] = destination rank (0xFFFF: every rank of the group; else re-send to
//   that rank only). The L2-L4 addresses, ports and checksums of result frames are zero: the shell
//   fills them per destination (the CRC32C covers the ina message only, so it needs no update).
//   Results leave as UDP frames whether the packets came over UDP or RoCEv2: BTH, DETH, pad and
//   ICRC of a RoCEv2 result are the shell's (per destination QP and PSN; docs/rtl/ina_roce_rx.md).
// reg bus: see ina_regs.
// Throughput: one beat per cycle in and out; a frame of n payload beats (its trailer included)
// costs n + 1 cycles; the same message as a RoCEv2 frame costs its own beats (26 bytes more: at
// most one beat more; a full message of any K in proto/ina.toml has as many beats either way).
// Latency: store-and-forward; a result's first beat leaves 16 cycles after the completing frame's
// CRC verdict (ingress, descriptor FIFO, issue, S1, S2, ina_gcm_ctr's 11, output FIFO; a
// mac_encrypt frame's descriptor waits for its keystream too), which comes 4 cycles after
// the frame's last beat into ina_ingress; that beat enters 1 cycle after the frame's last beat on
// s_axis (ina_roce_rx holds one beat; 0 cycles for a RoCEv2 frame whose tail beyond 20 bytes is
// only pad and ICRC). Its last beat leaves once its own CRC is known (ina_egress).
// Backpressure: m_axis_tready low fills the output FIFO; the aggregation stage then waits between
// packets and the input FIFOs fill; s_axis_tready_o falls when they are full (ina_roce_rx passes
// ina_ingress's ready on while it forwards a beat).
module ina_core
#(
  parameter int unsigned NumJobs   = 8,
  parameter int unsigned PoolSlots = 1024,
  // Largest K (elements per packet): a power of two, 64 .. ina_rtl_pkg::MaxKLimit (8192); every
  // job's K must be at most MaxK (params.k64 reads MaxK / 64). MaxBeats = MaxK / 16 payload beats.
  parameter int unsigned MaxK      = 256,
  parameter int unsigned PayDepth  = MaxK / 4,  // payload FIFO beats (>= 2 * MaxBeats; 4 frames)
  parameter int unsigned DescDepth = 8,         // also the RoCE verdict FIFO's, times 2
  // Output FIFO beats (>= MaxBeats + 4 + 11, as ina_gcm_ctr's beats in front of it count against it;
  // 2 frames, and at least 64 so that small frames keep the output at line rate).
  parameter int unsigned OutDepth  = (MaxK / 8 > 64) ? MaxK / 8 : 64
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
  localparam int unsigned MaxBeats = MaxK / ina_rtl_pkg::Lanes;
  localparam int unsigned JW = (NumJobs > 1) ? $clog2(NumJobs) : 1;  // a job entry's index
  localparam int unsigned CtrLatency = 11;  // ina_gcm_ctr's

  if (ina_rtl_pkg::InaHdrByte != ina_proto_pkg::FramePrefixBytes ||
      ina_rtl_pkg::Lanes * ina_proto_pkg::ElemBytes != ina_rtl_pkg::BeatBytes) begin : gen_bad_pkg
    $error("ina_core: ina_rtl_pkg disagrees with ina_proto_pkg");
  end
  if ($bits(desc_in) != ina_rtl_pkg::DescBits) begin : gen_bad_desc
    $error("ina_core: ina_rtl_pkg::DescBits is not $bits(desc_t)");
  end
  // MaxK: a power of two that the descriptor's beat count and the k64 register fields hold.
  if (MaxK < 64 || MaxK > ina_rtl_pkg::MaxKLimit || (MaxK & (MaxK - 1)) != 0 ||
      MaxK / ina_rtl_pkg::Lanes >= (1 << ina_rtl_pkg::StoredBeatsBits) ||
      MaxK / 64 >= (1 << ina_proto_pkg::RegParamsK64Width) ||
      MaxK / 64 >= (1 << ina_proto_pkg::RegJobWorldK64Width)) begin : gen_bad_max_k
    $error("ina_core: MaxK must be a power of two in 64..MaxKLimit, MaxK / 64 in the k64 fields");
  end
  if (PayDepth < 2 * MaxBeats) begin : gen_bad_pay
    $error("ina_core: PayDepth must hold two maximal frames");
  end
  if (DescDepth < 2) begin : gen_bad_desc_depth
    $error("ina_core: DescDepth must be at least 2");
  end
  if (OutDepth < MaxBeats + 4 + CtrLatency) begin : gen_bad_out
    $error("ina_core: OutDepth must hold a result frame plus the pipeline and ina_gcm_ctr's beats");
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
  logic [OutFreeW-1:0] out_free, egr_free;
  logic [$clog2(PayDepth):0]  unused_pay_free;
  logic                pay_out_enc;  // the beat at the payload FIFO's head is a mac_encrypt frame's
  logic [ina_rtl_pkg::BeatBits-1:0] pay_out_raw;  // ... as received (ciphertext if so)
  logic [$clog2(DescDepth):0] unused_desc_free;

  logic [NumJobs-1:0]       job_valid;
  logic [NumJobs*16-1:0]    job_id;  // entry j at [16j +: 16]
  logic [NumJobs*32-1:0]    job_slots, job_world;  // entry j at [32j +: 32]
  logic        commit, commit_valid;
  logic [31:0] commit_slots;
  // Keyed jobs (sec mode mac): the modes, the committed keys, the key table, the tag check beside
  // ingress and its verdicts (J0) in frame order, the results' seals.
  logic [NumJobs*2-1:0]   job_sec;
  logic [7:0]             commit_entry;
  logic [1:0]             commit_sec;
  logic [127:0]           commit_key_up, commit_key_down;
  logic [NumJobs*512-1:0] up_hpow, down_hpow;
  logic [NumJobs*128-1:0] up_last_key, down_key;
  logic                   keys_busy, gcm_valid, gcm_busy, gv_in_ready, gv_valid, gv_ready;
  logic [127:0]           gcm_j0, gv_j0;
  logic                   gcm_enc;  // the verdict is a mac_encrypt frame's
  logic [$clog2(DescDepth):0] unused_gv_free;
  logic [511:0]           rx_hpow;
  logic [127:0]           rx_last_key;
  logic                   rx_hit, rx_keyed_q, rx_keyed;  // the frame on dec_* names a keyed job
  logic                   rx_hit_enc, rx_enc_q, rx_enc;  // ... in mode mac_encrypt, and says so
  logic                   kf_in_ready, kf_valid, kf_keyed, kf_enc;
  logic [127:0]           gcm_key;
  logic [$clog2(DescDepth):0] unused_kf_free;
  ina_rtl_pkg::seal_t     out_seal;
  logic                   rx_valid, rx_ready;
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
  // The frames after ina_roce_rx (UDP layout), its verdicts, and the RoCEv2 identity registers.
  logic        dec_valid, dec_ready, dec_last, dec_user;
  logic [ina_rtl_pkg::BeatBits-1:0]  dec_data;
  logic [ina_rtl_pkg::BeatBytes-1:0] dec_keep;
  logic        rv_in_valid, rv_in_drop, rv_in_ready, rv_valid, rv_ready, rv_drop, roce_busy;
  logic [$clog2(2 * DescDepth):0] unused_rv_free;
  logic [23:0] roce_qpn;
  logic [31:0] roce_qkey;
  logic [15:0] roce_pkey;
  logic [ina_proto_pkg::NumRoceCounters-1:0] roce_cnt_inc;

  // While the key table is being written (a commit of a keyed entry, 15 cycles) no beat is taken,
  // so no frame is checked against half-written keys.
  assign rx_valid        = s_axis_tvalid_i && !keys_busy;
  assign s_axis_tready_o = rx_ready && !keys_busy;

  ina_roce_rx u_roce_rx (
    .clk_i,
    .rst_ni,
    .s_axis_tvalid_i(rx_valid),
    .s_axis_tready_o(rx_ready),
    .s_axis_tdata_i,
    .s_axis_tkeep_i,
    .s_axis_tlast_i,
    .s_axis_tuser_i,
    .m_axis_tvalid_o(dec_valid),
    .m_axis_tready_i(dec_ready),
    .m_axis_tdata_o (dec_data),
    .m_axis_tkeep_o (dec_keep),
    .m_axis_tlast_o (dec_last),
    .m_axis_tuser_o (dec_user),
    .verdict_valid_o(rv_in_valid),
    .verdict_drop_o (rv_in_drop),
    .qpn_i          (roce_qpn),
    .qkey_i         (roce_qkey),
    .pkey_i         (roce_pkey),
    .cnt_inc_o      (roce_cnt_inc),
    .busy_o         (roce_busy)
  );

  // One RoCE verdict per frame ina_roce_rx forwards, popped with its descriptor. It can be pushed
  // before the descriptor (ina_roce_rx holds up to two frames' tails), hence twice DescDepth.
  ina_fifo #(.Width(1), .Depth(2 * DescDepth)) u_rv_fifo (
    .clk_i,
    .rst_ni,
    .in_valid_i (rv_in_valid),
    .in_ready_o (rv_in_ready),
    .in_data_i  (rv_in_drop),
    .out_valid_o(rv_valid),
    .out_ready_i(rv_ready),
    .out_data_o (rv_drop),
    .free_o     (unused_rv_free)
  );

  ina_crc32c #(.Check(1'b1)) u_crc_rx (
    .clk_i,
    .rst_ni,
    .s_axis_tvalid_i(dec_valid && dec_ready),
    .s_axis_tdata_i (dec_data),
    .s_axis_tkeep_i (dec_keep),
    .s_axis_tlast_i (dec_last),
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

  // The tag check of keyed frames beside the CRC's: a frame whose first beat names a keyed job
  // (mode mac; ina_ingress is between frames: !in_frame) goes through ina_gcm_check with that job's
  // up-key constants, and its verdict (J0) into a FIFO; every frame's keyed bit goes into a 1-bit
  // FIFO with its descriptor, so a CRC-only frame waits for no verdict, and the check (and a
  // simulator) does no work for it.
  logic [JW-1:0] rx_entry;
  always_comb begin
    logic [15:0] jid;
    logic [NumJobs-1:0] hit;
    hit      = '0;
    jid      = '0;
    rx_entry = '0;
    if (dec_valid && !in_frame) begin
      jid = ina_rtl_pkg::be16(dec_data, ina_rtl_pkg::InaHdrByte + ina_proto_pkg::JobOffset);
      for (int unsigned j = 0; j < NumJobs; j++) begin
        hit[j] = job_valid[j] && job_id[16*j +: 16] == jid &&
                 (job_sec[2*j +: 2] == 2'(ina_proto_pkg::SecModeMac) ||
                  job_sec[2*j +: 2] == 2'(ina_proto_pkg::SecModeMacEncrypt));
      end
      for (int j = NumJobs - 1; j >= 0; j--) begin
        if (hit[j]) rx_entry = JW'(j);
      end
    end
    rx_hit = |hit;
    // A mac_encrypt job's frame that says mac_encrypt (sec): its payload is ciphertext, hashed as
    // such and decrypted on its way to ina_agg. A frame of such a job that says another mode is
    // dropped there (cross job) whatever is done with it here; one of another job is never
    // decrypted, whatever its sec says.
    // (A part-select, not ina_rtl_pkg::beat_byte: a simulator copies a function's 512-bit argument.)
    rx_hit_enc = rx_hit && job_sec[2*rx_entry +: 2] == 2'(ina_proto_pkg::SecModeMacEncrypt) &&
                 dec_data[8*(ina_rtl_pkg::InaHdrByte + ina_proto_pkg::SecOffset) +: 8] ==
                     8'(ina_proto_pkg::SecModeMacEncrypt);
  end
  // Read by ina_gcm_check at a keyed frame's first beat only.
  assign rx_hpow     = rx_hit ? up_hpow[512*rx_entry +: 512] : '0;
  assign rx_last_key = rx_hit ? up_last_key[128*rx_entry +: 128] : '0;
  assign rx_keyed = in_frame ? rx_keyed_q : rx_hit;
  assign rx_enc   = in_frame ? rx_enc_q : rx_hit_enc;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rx_keyed_q <= 1'b0;
      rx_enc_q   <= 1'b0;
    end else if (dec_valid && dec_ready) begin
      rx_keyed_q <= rx_keyed;
      rx_enc_q   <= rx_enc;
    end
  end

  ina_gcm_check #(.UserBits(1)) u_gcm_rx (
    .clk_i,
    .rst_ni,
    .in_valid_i   (dec_valid && dec_ready && rx_keyed),
    .in_data_i    (dec_data),
    .in_last_i    (dec_last),
    .in_hpow_i    (rx_hpow),
    .in_last_key_i(rx_last_key),
    .in_enc_i     (rx_enc),
    .in_user_i    (rx_enc),
    .out_valid_o  (gcm_valid),
    .out_j0_o     (gcm_j0),
    .out_key_o    (gcm_key),
    .out_user_o   (gcm_enc),
    .busy_o       (gcm_busy)
  );

  // One J0 per descriptor, 14 cycles after its frame's last beat, popped with it (so it holds no
  // more than the descriptor FIFO does).
  ina_fifo #(.Width(128), .Depth(DescDepth)) u_gv_fifo (
    .clk_i,
    .rst_ni,
    .in_valid_i (gcm_valid),
    .in_ready_o (gv_in_ready),
    .in_data_i  (gcm_j0),
    .out_valid_o(gv_valid),
    .out_ready_i(gv_ready),
    .out_data_o (gv_j0),
    .free_o     (unused_gv_free)
  );

  // Each frame's keyed and mac_encrypt bits, pushed with its descriptor (the same handshake),
  // popped with it.
  ina_fifo #(.Width(2), .Depth(DescDepth)) u_kf_fifo (
    .clk_i,
    .rst_ni,
    .in_valid_i (desc_in_valid && desc_in_ready),
    .in_ready_o (kf_in_ready),
    .in_data_i  ({rx_enc, rx_keyed}),
    .out_valid_o(kf_valid),
    .out_ready_i(desc_out_ready),
    .out_data_o ({kf_enc, kf_keyed}),
    .free_o     (unused_kf_free)
  );

  // mac_encrypt frames: the keystream of each, made once its tag gave its J0 (for a genuine frame
  // the J0 it was sealed with; a forged one is dropped by rule K4 whatever it is XORed with), one
  // beat per payload beat the frame stored, in frame order:
  //   stored-beat counts (pushed with the descriptor) -> requests (with J0 and K, at the verdict)
  //   -> ina_gcm_ctr (zero beats in) -> keystream FIFO, popped with the payload beats it decrypts.
  // A descriptor of such a frame goes to ina_agg only once its keystream is whole (ks_frames_q),
  // as ina_agg pops a packet's payload beats back to back.
  localparam int unsigned SBB = ina_rtl_pkg::StoredBeatsBits;
  logic           kn_in_ready, kn_valid;
  logic [SBB-1:0] kn_beats;
  logic [$clog2(DescDepth):0] unused_kn_free, unused_rq_free;
  logic           rq_in_ready, rq_valid, rq_pop;
  logic [127:0]   rq_j0, rq_key;
  logic [SBB-1:0] rq_beats;
  logic           gen_busy_q, gen_launch;
  logic [SBB-1:0] gen_left_q;
  logic [15:0]    gen_idx_q;
  logic [127:0]   gen_j0_q, gen_key_q;
  logic           kc_valid, kc_push, kc_last, kc_busy;
  logic [ina_rtl_pkg::BeatBits-1:0] kc_data;
  logic [3:0]     kc_inflight_unused;
  logic           ks_in_ready, ks_valid, ks_pop;
  logic [ina_rtl_pkg::BeatBits-1:0] ks_data;
  logic [$clog2(PayDepth):0] unused_ks_free;
  logic [$clog2(DescDepth)+1:0] ks_frames_q;  // frames whose keystream is whole, descriptor not popped

  ina_fifo #(.Width(SBB), .Depth(DescDepth)) u_kn_fifo (
    .clk_i,
    .rst_ni,
    .in_valid_i (desc_in_valid && desc_in_ready && rx_enc),
    .in_ready_o (kn_in_ready),
    .in_data_i  (desc_in.stored_beats),
    .out_valid_o(kn_valid),
    .out_ready_i(gcm_valid && gcm_enc),
    .out_data_o (kn_beats),
    .free_o     (unused_kn_free)
  );
  ina_fifo #(.Width(256 + SBB), .Depth(DescDepth)) u_rq_fifo (
    .clk_i,
    .rst_ni,
    .in_valid_i (gcm_valid && gcm_enc),
    .in_ready_o (rq_in_ready),
    .in_data_i  ({gcm_j0, gcm_key, kn_beats}),
    .out_valid_o(rq_valid),
    .out_ready_i(rq_pop),
    .out_data_o ({rq_j0, rq_key, rq_beats}),
    .free_o     (unused_rq_free)
  );
  // One request at a time: its beats on consecutive cycles; a frame that stored no payload beat
  // sends one marker through the pipeline (no keystream, no push), so frames complete in order.
  assign rq_pop     = rq_valid && !gen_busy_q;
  assign gen_launch = gen_busy_q || (rq_pop && rq_beats == '0);
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      gen_busy_q <= 1'b0;
    end else if (rq_pop) begin
      gen_busy_q <= rq_beats != '0;
    end else if (gen_busy_q) begin
      gen_busy_q <= gen_left_q != SBB'(1);
    end
  end
  always_ff @(posedge clk_i) begin
    if (rq_pop) begin
      gen_left_q <= rq_beats;
      gen_idx_q  <= '0;
      gen_j0_q   <= rq_j0;
      gen_key_q  <= rq_key;
    end else if (gen_busy_q) begin
      gen_left_q <= gen_left_q - SBB'(1);
      gen_idx_q  <= gen_idx_q + 16'd1;
    end
  end

  ina_gcm_ctr #(.UserBits(2), .PassData(1'b0)) u_ctr_rx (
    .clk_i,
    .rst_ni,
    .in_valid_i (gen_launch),
    .in_data_i  ('0),
    .in_enc_i   (gen_busy_q),
    .in_index_i (gen_idx_q),
    .in_j0_i    (gen_j0_q),
    .in_key_i   (gen_key_q),
    .in_user_i  ({gen_busy_q, !gen_busy_q || gen_left_q == SBB'(1)}),  // push, last of its frame
    .out_valid_o(kc_valid),
    .out_data_o (kc_data),
    .out_user_o ({kc_push, kc_last}),
    .inflight_o (kc_inflight_unused),
    .busy_o     (kc_busy)
  );

  // Never more keystream beats than payload beats in the payload FIFO (each is made for one that is
  // there, and popped with it): PayDepth holds them.
  // (No hold check of its head: its reader pops it only with the payload FIFO's, whose check stays.)
  ina_fifo #(.Width(ina_rtl_pkg::BeatBits), .Depth(PayDepth), .HoldCheck(1'b0)) u_ks_fifo (
    .clk_i,
    .rst_ni,
    .in_valid_i (kc_valid && kc_push),
    .in_ready_o (ks_in_ready),
    .in_data_i  (kc_data),
    .out_valid_o(ks_valid),
    .out_ready_i(ks_pop),
    .out_data_o (ks_data),
    .free_o     (unused_ks_free)
  );
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      ks_frames_q <= '0;
    end else begin
      ks_frames_q <= ks_frames_q + ($clog2(DescDepth)+2)'(kc_valid && kc_last) -
                     ($clog2(DescDepth)+2)'(desc_out_ready && kf_enc);
    end
  end

  ina_ingress #(.MaxK(MaxK)) u_ingress (
    .clk_i,
    .rst_ni,
    .s_axis_tvalid_i(dec_valid),
    .s_axis_tready_o(dec_ready),
    .s_axis_tdata_i (dec_data),
    .s_axis_tkeep_i (dec_keep),
    .s_axis_tlast_i (dec_last),
    .s_axis_tuser_i (dec_user),
    .pay_valid_o (pay_in_valid),
    .pay_ready_i (pay_in_ready),
    .pay_data_o  (pay_in_data),
    .desc_valid_o(desc_in_valid),
    .desc_ready_i(desc_in_ready),
    .desc_o      (desc_in),
    .in_frame_o  (in_frame)
  );

  // Each payload beat with its frame's mac_encrypt bit; such a beat leaves XORed with its
  // keystream beat, which is popped with it.
  ina_fifo #(.Width(ina_rtl_pkg::BeatBits + 1), .Depth(PayDepth)) u_pay_fifo (
    .clk_i,
    .rst_ni,
    .in_valid_i (pay_in_valid),
    .in_ready_o (pay_in_ready),
    .in_data_i  ({rx_enc, pay_in_data}),
    .out_valid_o(pay_out_valid),
    .out_ready_i(pay_out_ready),
    .out_data_o ({pay_out_enc, pay_out_raw}),
    .free_o     (unused_pay_free)
  );
  assign pay_out_data = pay_out_enc ? pay_out_raw ^ ks_data : pay_out_raw;
  assign ks_pop       = pay_out_valid && pay_out_ready && pay_out_enc;

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

  // A frame with a RoCE drop verdict at the head is drained here: its descriptor (with its two
  // verdicts) is popped, then its stored payload beats, all while ina_agg is idle (not busy: it
  // pops payload only while busy, and it is offered no descriptor meanwhile).
  logic agg_desc_ready, agg_pay_ready, head_ready, drain_start, drain_q;
  logic [ina_rtl_pkg::StoredBeatsBits-1:0] drain_left_q;
  assign head_ready     = desc_out_valid && ok_valid && rv_valid && kf_valid &&
                          (!kf_keyed || gv_valid) && (!kf_enc || ks_frames_q != '0);
  assign drain_start    = head_ready && rv_drop && !drain_q && !agg_busy;
  assign desc_out_ready = agg_desc_ready || drain_start;
  assign ok_ready       = desc_out_ready;
  assign rv_ready       = desc_out_ready;
  assign gv_ready       = desc_out_ready && kf_keyed;
  assign pay_out_ready  = drain_q ? pay_out_valid : agg_pay_ready;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      drain_q      <= 1'b0;
      drain_left_q <= '0;
    end else if (drain_start) begin
      drain_q      <= desc_out.stored_beats != '0;
      drain_left_q <= desc_out.stored_beats;
    end else if (drain_q && pay_out_valid) begin
      drain_q      <= drain_left_q != ina_rtl_pkg::StoredBeatsBits'(1);
      drain_left_q <= drain_left_q - ina_rtl_pkg::StoredBeatsBits'(1);
    end
  end

  ina_agg #(
    .NumJobs  (NumJobs),
    .PoolSlots(PoolSlots),
    .MaxK     (MaxK),
    .OutFreeW (OutFreeW)
  ) u_agg (
    .clk_i,
    .rst_ni,
    .desc_valid_i  (head_ready && !rv_drop && !drain_q),
    .desc_ready_o  (agg_desc_ready),
    .desc_i        (desc_out),
    .desc_crc_ok_i (ok_data),
    .desc_j0_i     (gv_j0),
    .desc_keyed_i  (kf_keyed),
    .pay_valid_i   (pay_out_valid && !drain_q),
    .pay_ready_o   (agg_pay_ready),
    .pay_data_i    (pay_out_data),
    .job_valid_i   (job_valid),
    .job_id_i      (job_id),
    .job_slots_i   (job_slots),
    .job_world_i   (job_world),
    .job_sec_i     (job_sec),
    .commit_i      (commit),
    .commit_slots_i(commit_slots),
    .commit_valid_i(commit_valid),
    .out_valid_o   (out_valid),
    .out_data_o    (out_data),
    .out_keep_o    (out_keep),
    .out_last_o    (out_last),
    .out_user_o    (out_user),
    .out_seal_o    (out_seal),
    .out_free_i    (out_free),
    .cnt_inc_o     (cnt_inc),
    .fail_o        (fail),
    .fail_entry_o  (fail_entry),
    .fail_slot_o   (fail_slot),
    .fail_gen_o    (fail_gen),
    .fail_rank_o   (fail_rank),
    .busy_o        (agg_busy)
  );

  // mac_encrypt results are encrypted on their way to ina_egress: ina_gcm_ctr delays every result
  // beat by its latency and XORs a mac_encrypt result's payload beats with their keystream, under
  // the job's down key and the result's J0 (its seal, read at the header beat). The beats in it
  // were reserved room for by ina_agg, so they count against the output FIFO's free room.
  logic         eg_first_q, eg_enc_q;
  logic [15:0]  eg_idx_q;
  logic [127:0] eg_j0_q, eg_key_q;
  logic         d_valid, d_last, eg_ctr_busy;
  logic [ina_rtl_pkg::BeatBits-1:0]    d_data;
  logic [ina_rtl_pkg::BeatBytes-1:0]   d_keep;
  logic [ina_rtl_pkg::OutUserBits-1:0] d_user;
  ina_rtl_pkg::seal_t                  d_seal;
  logic [3:0]   eg_inflight;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      eg_first_q <= 1'b1;
    end else if (out_valid) begin
      eg_first_q <= out_last;
    end
  end
  always_ff @(posedge clk_i) begin
    if (out_valid) begin
      eg_idx_q <= eg_first_q ? 16'd0 : eg_idx_q + 16'd1;
      if (eg_first_q) begin
        eg_enc_q <= out_seal.keyed && out_seal.enc;
        eg_j0_q  <= out_seal.j0;
        eg_key_q <= out_seal.keyed && out_seal.enc ? down_key[128*out_seal.entry[JW-1:0] +: 128] : '0;
      end
    end
  end
  ina_gcm_ctr #(.UserBits(ina_rtl_pkg::BeatBytes + 1 + ina_rtl_pkg::OutUserBits +
                          ina_rtl_pkg::SealBits)) u_ctr_tx (
    .clk_i,
    .rst_ni,
    .in_valid_i (out_valid),
    .in_data_i  (out_data),
    .in_enc_i   (!eg_first_q && eg_enc_q),
    .in_index_i (eg_idx_q),
    .in_j0_i    (eg_j0_q),
    .in_key_i   (eg_key_q),
    .in_user_i  ({out_keep, out_last, out_user, out_seal}),
    .out_valid_o(d_valid),
    .out_data_o (d_data),
    .out_user_o ({d_keep, d_last, d_user, d_seal}),
    .inflight_o (eg_inflight),
    .busy_o     (eg_ctr_busy)
  );
  assign out_free = egr_free - OutFreeW'(eg_inflight);

  // The down key of a keyed result's job (zero for a CRC-only one, which ina_egress does not seal;
  // and a simulator then skips the selection).
  logic [127:0] egr_key;
  logic [511:0] egr_hpow;
  assign egr_key  = d_seal.keyed ? down_key[128*d_seal.entry[JW-1:0] +: 128] : '0;
  assign egr_hpow = d_seal.keyed ? down_hpow[512*d_seal.entry[JW-1:0] +: 512] : '0;

  // The aggregation stage reserves room before each packet, so the output FIFO always takes a push.
  ina_egress #(.Depth(OutDepth)) u_egress (
    .clk_i,
    .rst_ni,
    .in_valid_i     (d_valid),
    .in_data_i      (d_data),
    .in_keep_i      (d_keep),
    .in_last_i      (d_last),
    .in_user_i      (d_user),
    .in_seal_i      (d_seal),
    .in_key_i       (egr_key),
    .in_hpow_i      (egr_hpow),
    .free_o         (egr_free),
    .m_axis_tvalid_o,
    .m_axis_tready_i,
    .m_axis_tdata_o,
    .m_axis_tkeep_o,
    .m_axis_tlast_o,
    .m_axis_tuser_o,
    .busy_o         (egress_busy)
  );

  assign idle_o = !in_frame && !desc_out_valid && !pay_out_valid && !agg_busy && !crc_busy &&
                  !ok_valid && !egress_busy && !roce_busy && !rv_valid && !drain_q && !gcm_busy &&
                  !gv_valid && !keys_busy && !kf_valid && !kn_valid && !rq_valid && !gen_busy_q &&
                  !kc_busy && !ks_valid && !eg_ctr_busy;

  logic unused_crc;
  assign unused_crc = ^{crc_unused_ready, crc_unused_value, unused_ok_free, unused_rv_free,
                        rv_in_ready, unused_gv_free, unused_kf_free, gv_in_ready,
                        kf_in_ready, kn_in_ready, unused_kn_free, unused_rq_free, rq_in_ready,
                        kc_inflight_unused, ks_in_ready, unused_ks_free};

  ina_regs #(
    .NumJobs  (NumJobs),
    .PoolSlots(PoolSlots),
    .MaxK     (MaxK)
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
    .job_sec_o     (job_sec),
    .commit_o      (commit),
    .commit_entry_o(commit_entry),
    .commit_slots_o(commit_slots),
    .commit_valid_o(commit_valid),
    .commit_sec_o  (commit_sec),
    .commit_key_up_o  (commit_key_up),
    .commit_key_down_o(commit_key_down),
    .roce_qpn_o    (roce_qpn),
    .roce_qkey_o   (roce_qkey),
    .roce_pkey_o   (roce_pkey),
    .cnt_inc_i     (cnt_inc),
    .roce_cnt_inc_i(roce_cnt_inc),
    .fail_i        (fail),
    .fail_entry_i  (fail_entry),
    .fail_slot_i   (fail_slot),
    .fail_gen_i    (fail_gen),
    .fail_rank_i   (fail_rank)
  );

  ina_gcm_keys #(.NumJobs(NumJobs)) u_keys (
    .clk_i,
    .rst_ni,
    .commit_i         (commit),
    .commit_entry_i   (commit_entry),
    .commit_sec_i     (commit_sec),
    .commit_key_up_i  (commit_key_up),
    .commit_key_down_i(commit_key_down),
    .up_hpow_o        (up_hpow),
    .up_last_key_o    (up_last_key),
    .down_hpow_o      (down_hpow),
    .down_key_o       (down_key),
    .busy_o           (keys_busy)
  );

`ifndef SYNTHESIS
  // Invariants (docs/rtl/assertions.md).
  // The shell's side of s_axis (AXI-Stream): a beat once presented holds until taken. Checked, so
  // a shell or testbench that breaks it is named here rather than as a wrong sum later.
  ina_hold_check #(.Width(ina_rtl_pkg::BeatBits + ina_rtl_pkg::BeatBytes + 2),
                   .What("ina_core: s_axis (the shell must hold a presented beat)")) a_core_in_hold (
    .clk_i, .rst_ni, .valid_i(s_axis_tvalid_i), .ready_i(s_axis_tready_o),
    .data_i({s_axis_tdata_i, s_axis_tkeep_i, s_axis_tlast_i, s_axis_tuser_i}));
  // One CRC verdict per descriptor: never more verdicts than the descriptor FIFO can hold.
  a_core_ok_room: assert property (@(posedge clk_i) disable iff (!rst_ni)
      crc_valid |-> crc_unused_ready)
    else $error("ina_core: a CRC verdict pushed into the full verdict FIFO");
  a_core_gv_room: assert property (@(posedge clk_i) disable iff (!rst_ni)
      gcm_valid |-> gv_in_ready)
    else $error("ina_core: a tag verdict pushed into the full verdict FIFO");
  // The keyed bits go with the descriptors: the FIFO has room whenever the descriptor FIFO takes one.
  a_core_kf_room: assert property (@(posedge clk_i) disable iff (!rst_ni)
      desc_in_valid && desc_in_ready |-> kf_in_ready)
    else $error("ina_core: a keyed bit pushed into the full FIFO");
  // The mac_encrypt bookkeeping: a verdict finds its frame's beat count, a request and a
  // keystream beat their FIFO's room, a decrypted payload beat its keystream beat.
  a_core_kn_room: assert property (@(posedge clk_i) disable iff (!rst_ni)
      desc_in_valid && desc_in_ready && rx_enc |-> kn_in_ready)
    else $error("ina_core: a mac_encrypt frame's beat count pushed into the full FIFO");
  a_core_kn_there: assert property (@(posedge clk_i) disable iff (!rst_ni)
      gcm_valid && gcm_enc |-> kn_valid && rq_in_ready)
    else $error("ina_core: a mac_encrypt verdict without its frame's beat count or room");
  a_core_ks_room: assert property (@(posedge clk_i) disable iff (!rst_ni)
      kc_valid && kc_push |-> ks_in_ready)
    else $error("ina_core: a keystream beat pushed into the full keystream FIFO");
  a_core_ks_there: assert property (@(posedge clk_i) disable iff (!rst_ni)
      pay_out_valid && pay_out_ready && pay_out_enc |-> ks_valid)
    else $error("ina_core: a mac_encrypt payload beat popped without its keystream");
  a_core_eg_room: assert property (@(posedge clk_i) disable iff (!rst_ni)
      egr_free >= OutFreeW'(eg_inflight))
    else $error("ina_core: more result beats in ina_gcm_ctr than the output FIFO has room for");
  a_core_rv_room: assert property (@(posedge clk_i) disable iff (!rst_ni)
      rv_in_valid |-> rv_in_ready)
    else $error("ina_core: a RoCE verdict pushed into the full RoCE verdict FIFO");
  // The decapsulated stream keeps the AXI-Stream rule too (given the shell keeps it on s_axis).
  ina_hold_check #(.Width(ina_rtl_pkg::BeatBits + ina_rtl_pkg::BeatBytes + 2),
                   .What("ina_core: ina_roce_rx's output")) a_core_dec_hold (
    .clk_i, .rst_ni, .valid_i(dec_valid), .ready_i(dec_ready),
    .data_i({dec_data, dec_keep, dec_last, dec_user}));
  // A drain pops only its frame's payload beats: ina_agg pops none meanwhile.
  a_core_drain_alone: assert property (@(posedge clk_i) disable iff (!rst_ni)
      drain_q |-> !agg_pay_ready && !agg_desc_ready)
    else $error("ina_core: ina_agg took a beat or descriptor during a RoCE drain");
`endif

endmodule
