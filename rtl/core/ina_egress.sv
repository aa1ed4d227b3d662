// Egress: buffers the result frames of the aggregation stage and appends each one's trailer: the
// CRC32C (proto/ina.toml [crc]), or for a result of a keyed job (sec mode mac or mac_encrypt,
// docs/security.md) its 16-byte AES-GCM tag; datasheet docs/rtl/ina_egress.md. A mac_encrypt
// result comes already encrypted (ina_core runs ina_gcm_ctr in front of this stage); its tag's
// GHASH takes the payload as ciphertext (in_seal_i.enc).
//
//   in_* --+--> output FIFO (Depth beats) ----------------------------> append --> m_axis
//          +--> ina_crc32c (Check = 0) --> CRC FIFO (Depth) ------------^
//          +--> ina_gcm_hash (Check = 0) --> S FIFO (Depth) ------------^ keyed: tag =
//          +--> ina_aes128 (J0 under the down key, first beat) --> FIFO -^ AES_K(J0) ^ S
//
// in_seal_i (with every beat; read at a first beat): whether the frame is a keyed job's result,
//   and J0 of its nonce; in_key_i / in_hpow_i (likewise): the job's down key and its H .. H^4
//   (ina_gcm_keys). Only keyed frames push into the S and AES FIFOs; every frame into the CRC FIFO.
//   The tag's 16 bytes follow the frame's data as the CRC's 4 do: in the last beat when it has room
//   (48 bytes or fewer), else the part that does not fit in one more beat.
//
// in_*: result beats (the ina_core frame layout: L2-L4 template and ina header in the first beat,
//   payload beats after it, tkeep contiguous, a multiple of 4 bytes in the last beat), pushed
//   without backpressure: the producer keeps at least one frame's room, reading free_o.
// m_axis: the same frames with 4 more bytes, the little-endian CRC32C of each frame's bytes from
//   byte 42 on: in the last beat after its data when that beat has room (60 bytes or fewer), else in
//   one more beat of 4 bytes (tlast moves to it; tuser is the frame's). Nothing else changes (the
//   producer already counts the trailer in the IPv4 and UDP lengths).
// Latency: a frame's last beat leaves once its CRC is known, 5 cycles after that beat came in; a
//   frame that waited in the FIFO for that long (under backpressure, or behind other frames) leaves
//   at once.
// Throughput: one beat per cycle in and out, plus the added beat of frames whose last beat is full;
//   the FIFO absorbs the CRC's latency when the output is the bottleneck, so no cycle is lost then.
// Backpressure: m_axis_tvalid_o depends on registered state only (the FIFOs, the added-beat flag),
//   never on m_axis_tready_i; while stalled, valid and data hold.
module ina_egress
#(
  parameter int unsigned Depth = 32  // output FIFO beats (power of two)
) (
  input  logic                                clk_i,
  input  logic                                rst_ni,
  input  logic                                in_valid_i,
  input  logic [ina_rtl_pkg::BeatBits-1:0]    in_data_i,
  input  logic [ina_rtl_pkg::BeatBytes-1:0]   in_keep_i,
  input  logic                                in_last_i,
  input  logic [ina_rtl_pkg::OutUserBits-1:0] in_user_i,
  input  ina_rtl_pkg::seal_t                  in_seal_i,
  input  logic [127:0]                        in_key_i,
  input  logic [511:0]                        in_hpow_i,
  output logic [$clog2(Depth):0]              free_o,
  output logic                                m_axis_tvalid_o,
  input  logic                                m_axis_tready_i,
  output logic [ina_rtl_pkg::BeatBits-1:0]    m_axis_tdata_o,
  output logic [ina_rtl_pkg::BeatBytes-1:0]   m_axis_tkeep_o,
  output logic                                m_axis_tlast_o,
  output logic [ina_rtl_pkg::OutUserBits-1:0] m_axis_tuser_o,
  // A beat or a CRC in flight (registered state only).
  output logic                                busy_o
);
  localparam int unsigned NB = ina_rtl_pkg::BeatBytes;
  localparam int unsigned W = ina_rtl_pkg::BeatBits + NB + 1 + ina_rtl_pkg::OutUserBits + 1;

  logic          fifo_ready_unused, head_valid, head_pop;
  logic [W-1:0]  head;
  logic [ina_rtl_pkg::BeatBits-1:0]    h_data;
  logic [NB-1:0]                       h_keep;
  logic                                h_last;
  logic [ina_rtl_pkg::OutUserBits-1:0] h_user;
  logic                                h_keyed;
  logic                                in_first_q, in_keyed_q, in_keyed;

  // The frame's seal is read at its first beat; its keyed bit goes with each beat.
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      in_first_q <= 1'b1;
      in_keyed_q <= 1'b0;
    end else if (in_valid_i) begin
      in_first_q <= in_last_i;
      in_keyed_q <= in_keyed;
    end
  end
  assign in_keyed = in_first_q ? in_seal_i.keyed : in_keyed_q;

  ina_fifo #(.Width(W), .Depth(Depth)) u_fifo (
    .clk_i,
    .rst_ni,
    .in_valid_i (in_valid_i),
    .in_ready_o (fifo_ready_unused),
    .in_data_i  ({in_keyed, in_user_i, in_last_i, in_keep_i, in_data_i}),
    .out_valid_o(head_valid),
    .out_ready_i(head_pop),
    .out_data_o (head),
    .free_o     (free_o)
  );
  assign {h_keyed, h_user, h_last, h_keep, h_data} = head;

  logic        crc_valid, crc_ok_unused, crc_busy;
  logic [31:0] crc;

  ina_crc32c #(.Check(1'b0)) u_crc (
    .clk_i,
    .rst_ni,
    .s_axis_tvalid_i(in_valid_i),
    .s_axis_tdata_i (in_data_i),
    .s_axis_tkeep_i (in_keep_i),
    .s_axis_tlast_i (in_last_i),
    .crc_valid_o    (crc_valid),
    .crc_o          (crc),
    .crc_ok_o       (crc_ok_unused),
    .busy_o         (crc_busy)
  );

  // One CRC per frame whose last beat is in the FIFO (at most Depth), so it never overflows.
  logic        cf_ready_unused, cf_valid, cf_pop;
  logic [31:0] cf_crc;
  logic [$clog2(Depth):0] cf_free_unused;

  ina_fifo #(.Width(32), .Depth(Depth)) u_crc_fifo (
    .clk_i,
    .rst_ni,
    .in_valid_i (crc_valid),
    .in_ready_o (cf_ready_unused),
    .in_data_i  (crc),
    .out_valid_o(cf_valid),
    .out_ready_i(cf_pop),
    .out_data_o (cf_crc),
    .free_o     (cf_free_unused)
  );

  // Keyed frames: S (ina_gcm_hash over the frame, under the down key's H) and AES_K(J0) (started
  // at the first beat), each into a FIFO of its own, in frame order; tag = their XOR.
  logic         s_valid, s_user_unused, ek_valid;
  logic [127:0] s_hash, s_tag_unused, ek;
  logic         hf_ready_unused, hf_valid, hf_pop, ef_ready_unused, ef_valid, ef_pop;
  logic [127:0] hf_s, ef_ek;
  logic [$clog2(Depth):0] hf_free_unused, ef_free_unused;
  logic [127:0] ek_key_unused;
  logic         ek_user_unused;

  ina_gcm_hash #(.Check(1'b0), .UserBits(1)) u_hash (
    .clk_i,
    .rst_ni,
    .in_valid_i (in_valid_i && in_keyed),  // keyed frames only
    .in_data_i  (in_data_i),
    .in_last_i  (in_last_i),
    .in_hpow_i  (in_hpow_i),
    .in_enc_i   (in_seal_i.enc),
    .in_user_i  (1'b0),
    .out_valid_o(s_valid),
    .out_hash_o (s_hash),
    .out_tag_o  (s_tag_unused),
    .out_user_o (s_user_unused)
  );
  ina_fifo #(.Width(128), .Depth(Depth)) u_hash_fifo (
    .clk_i,
    .rst_ni,
    .in_valid_i (s_valid),
    .in_ready_o (hf_ready_unused),
    .in_data_i  (s_hash),
    .out_valid_o(hf_valid),
    .out_ready_i(hf_pop),
    .out_data_o (hf_s),
    .free_o     (hf_free_unused)
  );
  ina_aes128 #(.UserBits(1)) u_aes (
    .clk_i,
    .rst_ni,
    .in_valid_i (in_valid_i && in_first_q && in_seal_i.keyed),
    .in_block_i (in_seal_i.j0),
    .in_key_i   (in_key_i),
    .in_user_i  (1'b0),
    .out_valid_o(ek_valid),
    .out_block_o(ek),
    .out_key_o  (ek_key_unused),
    .out_user_o (ek_user_unused)
  );
  ina_fifo #(.Width(128), .Depth(Depth)) u_ek_fifo (
    .clk_i,
    .rst_ni,
    .in_valid_i (ek_valid),
    .in_ready_o (ef_ready_unused),
    .in_data_i  (ek),
    .out_valid_o(ef_valid),
    .out_ready_i(ef_pop),
    .out_data_o (ef_ek),
    .free_o     (ef_free_unused)
  );

  // The append.
  logic                                extra_q, extra_d;  // presenting the added trailer beat
  logic                                extra_keyed_q;     // ... of a keyed frame
  logic [3:0]                          extra_off_q;       // trailer bytes already in the last beat
  logic [ina_rtl_pkg::OutUserBits-1:0] user_q;
  logic                                room;              // the head beat has room for the trailer
  logic                                take;
  logic                                t_keyed, t_ready;  // the trailer's frame is keyed; known
  logic [127:0]                        t_bytes;           // trailer byte d at [8d +: 8]
  logic [4:0]                          t_len;             // 4 or 16
  logic [3:0]                          t_off;             // 64 - the head beat's bytes (0 .. 12)
  logic [127:0]                        tag;

  assign t_keyed = extra_q ? extra_keyed_q : h_keyed;
  assign tag     = hf_s ^ ef_ek;
  always_comb begin
    t_bytes = {96'd0, cf_crc};
    if (t_keyed) begin
      for (int unsigned d = 0; d < 16; d++) t_bytes[8*d +: 8] = tag[127 - 8*d -: 8];
    end
  end
  assign t_len   = t_keyed ? 5'd16 : 5'd4;
  assign t_ready = cf_valid && (!t_keyed || (hf_valid && ef_valid));
  assign t_off   = {!h_keep[NB-4], 2'b00} + {!h_keep[NB-8], 2'b00} + {!h_keep[NB-12], 2'b00};

  // tkeep is contiguous from byte 0 and a last beat holds a multiple of 4 bytes (4 to 64), so the
  // trailer's place follows from tkeep alone, without counting its bytes: the last beat has room
  // when its byte NB - 4 is empty (60 bytes or fewer), and trailer byte i % 4 goes to byte i when
  // byte i is empty and byte i - 4 is not. One LUT level per byte from the FIFO head, where a
  // byte count (a popcount) and its compares took 8-10 (docs/rtl/synthesis.md).
  assign room = t_keyed ? !h_keep[NB-16] : !h_keep[NB-4];

  // The beat presented (registered state only: the FIFO heads and extra_q).
  always_comb begin
    m_axis_tvalid_o = 1'b0;
    m_axis_tdata_o  = h_data;
    m_axis_tkeep_o  = h_keep;
    m_axis_tlast_o  = h_last;
    m_axis_tuser_o  = h_user;
    if (extra_q) begin
      // The trailer's bytes that did not fit in the last beat (extra_off_q of them did).
      m_axis_tvalid_o = 1'b1;
      m_axis_tdata_o  = '0;
      m_axis_tkeep_o  = '0;
      for (int unsigned j = 0; j < 16; j++) begin
        if (5'(j) + 5'(extra_off_q) < t_len) begin
          m_axis_tdata_o[8*j +: 8] = t_bytes[8*(j + 32'(extra_off_q)) +: 8];
          m_axis_tkeep_o[j]        = 1'b1;
        end
      end
      m_axis_tlast_o = 1'b1;
      m_axis_tuser_o = user_q;
    end else if (!h_last) begin
      m_axis_tvalid_o = head_valid;
    end else begin
      m_axis_tvalid_o = head_valid && t_ready;
      // Trailer byte d at byte i = n + d of the beat, n its data bytes (a multiple of 4: byte n - 1
      // kept, byte n not); one choice of at most 4 per byte.
      for (int unsigned i = 4; i < NB; i++) begin
        for (int unsigned d = 0; d < 16 && d + 4 <= i; d++) begin
          if ((i - d) % 4 == 0 && 5'(d) < t_len && h_keep[i-d-1] && !h_keep[i-d]) begin
            m_axis_tdata_o[8*i +: 8] = t_bytes[8*d +: 8];
            m_axis_tkeep_o[i]        = 1'b1;
          end
        end
      end
      if (!room) m_axis_tlast_o = 1'b0;  // the trailer's rest goes in a beat of its own
    end
  end

  assign take = m_axis_tvalid_o && m_axis_tready_i;

  always_comb begin
    head_pop = take && !extra_q;
    cf_pop   = take && (extra_q || (h_last && room));
    hf_pop   = cf_pop && t_keyed;
    ef_pop   = cf_pop && t_keyed;
    extra_d  = extra_q;
    if (take) extra_d = !extra_q && h_last && !room;
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      extra_q <= 1'b0;
    end else begin
      extra_q <= extra_d;
    end
  end

  always_ff @(posedge clk_i) begin
    if (take && !extra_q) begin
      user_q        <= h_user;
      extra_keyed_q <= h_keyed;
      extra_off_q   <= t_off;
    end
  end

  // (A keyed frame's S and AES_K(J0) are computed while the frame is in the output FIFO.)
  assign busy_o = head_valid || cf_valid || crc_busy || extra_q || hf_valid || ef_valid;

  logic unused;
  assign unused = ^{fifo_ready_unused, crc_ok_unused, cf_ready_unused, cf_free_unused,
                    s_tag_unused, s_user_unused, hf_ready_unused, hf_free_unused, ef_ready_unused, ef_free_unused,
                    ek_key_unused, ek_user_unused, in_seal_i.entry};

`ifndef SYNTHESIS
  // Invariants (docs/rtl/assertions.md). The producer reserves room (free_o), so neither FIFO
  // is ever pushed while full; and m_axis holds a beat while the receiver stalls (AXI-Stream).
  a_egress_room: assert property (@(posedge clk_i) disable iff (!rst_ni)
      in_valid_i |-> fifo_ready_unused)
    else $error("ina_egress: a result beat pushed into the full output FIFO");
  a_egress_crc_room: assert property (@(posedge clk_i) disable iff (!rst_ni)
      crc_valid |-> cf_ready_unused)
    else $error("ina_egress: a trailer pushed into the full CRC FIFO");
  a_egress_hash_room: assert property (@(posedge clk_i) disable iff (!rst_ni)
      s_valid |-> hf_ready_unused)
    else $error("ina_egress: a keyed frame's S pushed into the full S FIFO");
  a_egress_ek_room: assert property (@(posedge clk_i) disable iff (!rst_ni)
      ek_valid |-> ef_ready_unused)
    else $error("ina_egress: a keyed frame's AES_K(J0) pushed into the full FIFO");
  // The producer's tkeep contract, which the trailer's placement relies on: contiguous from
  // byte 0, full except in a last beat, and a multiple of 4 bytes.
  logic [NB/4-1:0] keep_grp_split;
  always_comb begin
    for (int unsigned g = 0; g < NB / 4; g++) keep_grp_split[g] = in_keep_i[4*g] != in_keep_i[4*g+3];
  end
  always_ff @(posedge clk_i) begin
    if (rst_ni && in_valid_i) begin
      a_egress_keep: assert (in_keep_i[0] && (in_keep_i & (in_keep_i + 1'b1)) == '0 &&
                             (in_last_i || &in_keep_i) && keep_grp_split == '0)
        else $error("ina_egress: tkeep %h breaks the contract (contiguous, full unless last, whole lanes)",
                    in_keep_i);
    end
  end
  // m_axis holds a beat while the receiver stalls (AXI-Stream).
  ina_hold_check #(.Width(ina_rtl_pkg::BeatBits + NB + 1 + ina_rtl_pkg::OutUserBits),
                   .What("ina_egress: m_axis")) a_egress_hold (
    .clk_i, .rst_ni, .valid_i(m_axis_tvalid_o), .ready_i(m_axis_tready_i),
    .data_i({m_axis_tdata_o, m_axis_tkeep_o, m_axis_tlast_o, m_axis_tuser_o}));
`endif

endmodule
