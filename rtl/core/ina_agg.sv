// Aggregation stage: checks each frame's descriptor against the job table and its slot copy,
// updates the copy's metadata, and streams the payload through a read-modify-write pipeline on the
// slot memory; completed slots and result re-sends leave as result frames.
//
// Rules: exactly those of dataplane/include/ina/dp/engine.h (drop causes in that order, duplicate
// and re-send, the generation window (both copies of the slot are read: the copy of the packet's
// generation and the other, which holds the previous generation), the slot-history check, the
// disagreement of two ranks (offset, count, int32 flag, or a float block's exponent), generation
// reset of a copy, first contribution / add / complete).
// When two ranks disagree (rule 13) the stage pulses fail_o with the job's entry and where (slot,
// generation, rank): ina_regs marks the entry failed, so its later packets are unknown_job, as
// the reference engine removes the job. Keyed jobs (job_sec_i mode mac or mac_encrypt,
// docs/security.md; a mac_encrypt payload arrives decrypted: ina_core) take
// rules K1-K4 in place of the CRC verdict: the frame's J0 (desc_j0_i, from ina_gcm_check) against
// the nonce the slot expects; a packet with sec != 0 naming a CRC-only job is drop_cross_job
// (rule 6). Results carry their seal (out_seal_o) for ina_egress. Also: a frame
// whose MAC error bit was set is malformed; a job slot outside the pool is bad_slot. The CRC32C
// trailer was checked while the frame streamed in (ina_core: ina_crc32c beside ingress), so its
// verdict comes with the descriptor (desc_crc_ok_i) and a damaged frame is dropped at the header op,
// before any metadata or slot memory is written. Result frames leave without their trailer, which
// ina_egress appends; their IPv4 and UDP lengths already count it.
//
// Pipeline, one op per cycle:
//   S-1 pre-stage, while the descriptor waits at desc_i: its metadata read, and what depends on the
//      descriptor and the job table alone (job lookup, pool slot, slot x K and window x K, the
//      descriptor's own checks), registered.
//   S0 issue: a packet's header op (decision, metadata update, counters, result header beat) and
//      then max(in_beats, out_beats) payload ops (pop payload FIFO; read slot memory).
//   S1: slot memory data (forwarded from the writes of the two previous cycles), 16-lane add.
//   S2: write back to slot memory; push result beats to the output FIFO.
// Metadata lives in two RAMs with a synchronous read (block RAM / UltraRAM), read in the cycle
// before the header op at the slot of the descriptor waiting at desc_i and updated at the header
// op; the previous cycle's metadata write is forwarded over the RAM's read, so a packet's decision
// sees every packet before it, back to back on one slot included. Payload data hazards between
// back-to-back packets on the same slot are resolved by forwarding in S1. Neither ever stalls.
// A descriptor is taken no earlier than the cycle after it first shows at desc_i (its metadata
// read and pre-stage; in ina_core it waits there anyway for its CRC verdict, 4 cycles), or after
// the job table changed under it (commit_i, or fail_o last cycle); a one-beat frame (malformed by
// the first rule, which reads desc_i itself) is taken at once.
// Throughput: 1 + payload beats cycles per packet = the input rate of the frame, so the stage keeps
// up with a saturated input. A packet starts only when the output FIFO has room for a whole result
// frame plus the ops in flight (out_free_i >= OutReserve), so the pipeline never stalls mid-packet.
// Parameters: NumJobs entries; PoolSlots, a power of two 2..65536; MaxK, the largest K (elements
// per packet; a power of two, 64 .. ina_rtl_pkg::MaxKLimit = 8192): every width below follows
// from it (MaxBeats = MaxK / 16 payload beats, the beat counters, the slot memory's PoolSlots x 2
// copies x MaxBeats beats of 512 bits, OutReserve); a job's K (job_world.k64 x 64, 0 meaning MaxK)
// must not exceed it (the software's check: params.k64 reads MaxK / 64); OutFreeW, the width of
// out_free_i, must count OutReserve.
// Slot reset: after a job commit, the job's slots are reset one per cycle (both copies to
// generations 0xFFFE/0xFFFF, empty); no packet starts meanwhile. Out of reset the same walk covers
// the whole pool (PoolSlots cycles before the first packet starts).
module ina_agg
#(
  parameter int unsigned NumJobs   = 8,
  parameter int unsigned PoolSlots = 1024,
  parameter int unsigned MaxK      = 256,
  parameter int unsigned OutFreeW  = 6
) (
  input  logic                clk_i,
  input  logic                rst_ni,
  // Descriptors and payload beats from ingress (through FIFOs).
  input  logic                desc_valid_i,
  output logic                desc_ready_o,
  input  ina_rtl_pkg::desc_t               desc_i,
  input  logic                desc_crc_ok_i,  // the frame's CRC32C trailer matched
  input  logic [127:0]        desc_j0_i,      // ina_gcm_check's AES_K^-1(tag ^ S) of the frame
  input  logic                desc_keyed_i,   // ... which it checked (desc_j0_i is its J0)
  input  logic                pay_valid_i,
  output logic                pay_ready_o,
  input  logic [ina_rtl_pkg::BeatBits-1:0] pay_data_i,
  // Job table.
  input  logic [NumJobs-1:0]       job_valid_i,
  input  logic [NumJobs*16-1:0] job_id_i,
  input  logic [NumJobs*32-1:0] job_slots_i,
  input  logic [NumJobs*32-1:0] job_world_i,
  input  logic [NumJobs*2-1:0]  job_sec_i,     // job_sec.mode of each entry
  input  logic                commit_i,
  input  logic [31:0]         commit_slots_i,
  input  logic                commit_valid_i,
  // Result beats to the output FIFO.
  output logic                out_valid_o,
  output logic [ina_rtl_pkg::BeatBits-1:0] out_data_o,
  output logic [ina_rtl_pkg::BeatBytes-1:0] out_keep_o,
  output logic                out_last_o,
  output logic [ina_rtl_pkg::OutUserBits-1:0] out_user_o,
  output ina_rtl_pkg::seal_t  out_seal_o,     // with every beat of a result: how to seal it
  input  logic [OutFreeW-1:0] out_free_i,
  // Counter increments.
  output logic [ina_proto_pkg::NumCounters-1:0] cnt_inc_o,
  // Rule 13 of engine.h: the ranks of job entry fail_entry_o disagree (one-cycle pulse).
  output logic                fail_o,
  output logic [7:0]          fail_entry_o,
  output logic [15:0]         fail_slot_o,
  output logic [15:0]         fail_gen_o,
  output logic [15:0]         fail_rank_o,
  // A packet, a result beat or a slot reset is in flight (registered state only).
  output logic                busy_o
);

  localparam int unsigned SW = $clog2(PoolSlots);
  localparam int unsigned MaxBeats = MaxK / ina_rtl_pkg::Lanes;  // payload beats at K = MaxK
  localparam int unsigned BW = $clog2(MaxBeats);  // a beat's index in a slot copy
  localparam int unsigned CW = BW + 1;            // a count of beats, 0 .. MaxBeats
  localparam int unsigned AW = SW + 1 + BW;  // {pool slot, copy, beat}
  localparam int unsigned OutReserve = 1 + MaxBeats + 2;

  if (PoolSlots < 2 || (1 << SW) != PoolSlots || PoolSlots > 65536) begin : gen_bad_slots
    $error("ina_agg: PoolSlots must be a power of two in 2..65536");
  end
  if (MaxK < 64 || MaxK > ina_rtl_pkg::MaxKLimit || (MaxK & (MaxK - 1)) != 0 ||
      MaxK / 64 >= (1 << ina_proto_pkg::RegJobWorldK64Width)) begin : gen_bad_max_k
    $error("ina_agg: MaxK must be a power of two in 64..MaxKLimit with MaxK / 64 in job_world.k64");
  end
  if (OutReserve >= (1 << (OutFreeW - 1)) * 2) begin : gen_bad_free
    $error("ina_agg: the output FIFO must hold a result frame plus the pipeline");
  end
  if (ina_proto_pkg::MaxWorkers > 64) begin : gen_bad_workers
    $error("ina_agg: the worker bitmap is 64 bits");
  end

  typedef enum logic [1:0] {
    ModeDrop   = 2'd0,
    ModeFirst  = 2'd1,  // first contribution of a copy: write the payload
    ModeAdd    = 2'd2,  // later contribution: read, add, write
    ModeResend = 2'd3   // duplicate for a complete copy: read and emit
  } mode_e;

  typedef struct packed {
    logic [15:0] gen;
    logic [63:0] bitmap;
    logic [6:0]  cnt;
    logic [31:0] offset;
    logic [15:0] count;
    logic [7:0]  flags;
    logic [7:0]  exp;
    logic [7:0]  next_exp;
    logic [47:0] use_hi;  // the copy's use (its generation counted since the job's commit) >> 16
  } meta_t;

  // ---------------------------------------------------------------------------------------------
  // Slot metadata and the reset walk.
  // Copy 0 / copy 1 of each pool slot, each in its own simple-dual-port RAM (ina_slot_mem: one
  // synchronous read-first read port, one write port; block RAM / UltraRAM on an FPGA), as plain
  // vectors: yosys 0.23 reads an unpacked array of a struct type as a single struct.
  // (MetaBits = $bits(meta_t), which yosys 0.23 cannot evaluate; the WIDTH lint of verilator checks
  // the assignments below.)
  // Read: every cycle both RAMs read the slot of the descriptor at desc_i (pslot, through the job
  // table), so the header op in the next cycle finds its metadata read; a descriptor is taken only
  // when the slot read last cycle is still its slot (pre_fresh below: same descriptor, same job
  // table).
  // Forwarding: the RAM read in cycle t-1 returns the word before cycle t-1's write; that write
  // (the previous header op's metadata, or the reset walk's) is kept one cycle and replaces the
  // read data when it hit the same slot. Writes before t-1 are in the RAM. So the header op always
  // sees the updates of every packet before it, back to back on one slot included.
  localparam int unsigned MetaBits = 16 + 64 + 7 + 32 + 16 + 8 + 8 + 8 + 48;
  logic meta_we;
  logic [SW-1:0] meta_slot;
  logic meta_copy;
  meta_t meta_new;

  logic          rst_busy_q, rst_busy_d;
  logic [16:0]   rst_ptr_q, rst_ptr_d, rst_end_q, rst_end_d;
  logic [15:0]   c_base, c_window;  // fields of the committed entry's job_slots (proto/ina.toml)

  assign c_base   = commit_slots_i[ina_proto_pkg::RegJobSlotsBaseLsb +: ina_proto_pkg::RegJobSlotsBaseWidth];
  assign c_window = commit_slots_i[ina_proto_pkg::RegJobSlotsWindowLsb +: ina_proto_pkg::RegJobSlotsWindowWidth];

  always_comb begin
    rst_busy_d = rst_busy_q;
    rst_ptr_d  = rst_ptr_q;
    rst_end_d  = rst_end_q;
    if (rst_busy_q) begin
      rst_ptr_d = rst_ptr_q + 17'd1;
      if (rst_ptr_d >= rst_end_q || rst_ptr_d >= 17'(PoolSlots)) rst_busy_d = 1'b0;
    end
    if (commit_i && commit_valid_i && c_window != 16'd0) begin
      rst_busy_d = 1'b1;
      rst_ptr_d  = {1'b0, c_base};
      rst_end_d  = {1'b0, c_base} + {1'b0, c_window};
    end
  end

  // Out of reset the walk covers the whole pool, so the metadata needs no reset of its own (and
  // can live in a RAM): no packet starts for PoolSlots cycles.
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rst_busy_q <= 1'b1;
      rst_ptr_q  <= '0;
      rst_end_q  <= 17'(PoolSlots);
    end else begin
      rst_busy_q <= rst_busy_d;
      rst_ptr_q  <= rst_ptr_d;
      rst_end_q  <= rst_end_d;
    end
  end

  // Reset state of a copy: generation 0xFFFE (copy 0) / 0xFFFF (copy 1), no contributions; uses -2
  // and -1 (the first use, generation 0, is use 0: engine.h rule K4).
  meta_t empty0, empty1;
  always_comb begin
    empty0 = '0;
    empty0.gen = 16'hFFFE;
    empty0.use_hi = '1;
    empty1 = '0;
    empty1.gen = 16'hFFFF;
    empty1.use_hi = '1;
  end

  // The metadata write of this cycle: the reset walk (both copies) or the header op (one copy);
  // they never coincide (no packet starts during a walk).
  logic          mw_walk, mw_we0, mw_we1;
  logic [SW-1:0] mw_slot;
  logic [MetaBits-1:0] mw_data0, mw_data1;
  assign mw_walk  = rst_busy_q && rst_ptr_q < 17'(PoolSlots);
  assign mw_we0   = mw_walk || (meta_we && !meta_copy);
  assign mw_we1   = mw_walk || (meta_we && meta_copy);
  assign mw_slot  = mw_walk ? rst_ptr_q[SW-1:0] : meta_slot;
  assign mw_data0 = mw_walk ? empty0 : meta_new;
  assign mw_data1 = mw_walk ? empty1 : meta_new;

  logic [16:0]   pslot;      // pool slot of the descriptor at desc_i (S0 below)
  logic [SW-1:0] mrd_slot_q;  // the slot the RAMs read last cycle
  logic [MetaBits-1:0] m0_rdata, m1_rdata, m0_fwd, m1_fwd;
  // Last cycle's write, for forwarding (the walk's data are the constants empty0 / empty1).
  logic          mw_we0_q, mw_we1_q, mw_walk_q;
  logic [SW-1:0] mw_slot_q;
  logic [MetaBits-1:0] mw_data_q;

  ina_slot_mem #(.Words(PoolSlots), .Width(MetaBits)) u_meta0 (
    .clk_i,
    .re_i   (1'b1),
    .raddr_i(pslot[SW-1:0]),
    .rdata_o(m0_rdata),
    .we_i   (mw_we0),
    .waddr_i(mw_slot),
    .wdata_i(mw_data0)
  );
  ina_slot_mem #(.Words(PoolSlots), .Width(MetaBits)) u_meta1 (
    .clk_i,
    .re_i   (1'b1),
    .raddr_i(pslot[SW-1:0]),
    .rdata_o(m1_rdata),
    .we_i   (mw_we1),
    .waddr_i(mw_slot),
    .wdata_i(mw_data1)
  );

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      mw_we0_q <= 1'b0;
      mw_we1_q <= 1'b0;
    end else begin
      mw_we0_q <= mw_we0;
      mw_we1_q <= mw_we1;
    end
  end
  always_ff @(posedge clk_i) begin
    mrd_slot_q <= pslot[SW-1:0];
    mw_walk_q  <= mw_walk;
    mw_slot_q  <= mw_slot;
    mw_data_q  <= meta_new;
  end

  always_comb begin
    m0_fwd = m0_rdata;
    m1_fwd = m1_rdata;
    if (mw_slot_q == mrd_slot_q) begin
      if (mw_we0_q) m0_fwd = mw_walk_q ? empty0 : mw_data_q;
      if (mw_we1_q) m1_fwd = mw_walk_q ? empty1 : mw_data_q;
    end
  end

  // ---------------------------------------------------------------------------------------------
  // S0: the decision for the descriptor at the FIFO head.
  logic          busy_q, busy_d;         // issuing the payload ops of a packet
  logic [CW-1:0] op_q, op_d;             // next payload op
  logic [CW-1:0] nops_q, nops_d;         // payload ops of the packet
  logic [CW-1:0] inb_q, inb_d;           // payload beats to pop
  logic [CW-1:0] outb_q, outb_d;         // payload beats to read / emit
  mode_e         mode_q, mode_d;
  logic          emit_q, emit_d;
  logic [SW-1:0] ps_q, ps_d;
  logic          cp_q, cp_d;
  logic [15:0]   cnt_elems_q, cnt_elems_d;  // elements of the result (masking, tkeep)
  logic [ina_rtl_pkg::OutUserBits-1:0] user_q, user_d;

  logic start;
  meta_t       m, mo;  // the copy of the packet's generation, and the other one
  logic        in_progress, next_use, early, fits, differs, fail, dup, complete;
  logic        cur_is_mo, early_m, early_mo, hist_match;
  logic [ina_proto_pkg::NumCounters-1:0] inc;
  logic        hdr_emit;
  logic [15:0] hdr_rank;
  logic [CW-1:0] beats_of_stored;
  logic        retx, int32_new, int32_old, runt;

  // Payload beats of `count` elements: ceil(count / Lanes), at most MaxBeats (no adder wider than
  // the beat count: this is on the header op's path from the metadata RAM).
  localparam int unsigned LB = $clog2(ina_rtl_pkg::Lanes);
  function automatic logic [CW-1:0] beats_of(input logic [15:0] count);
    if (count > 16'(MaxK)) beats_of = CW'(MaxBeats);
    else beats_of = CW'(count >> LB) + CW'(|count[LB-1:0]);
  endfunction

  // a + b == c (mod 2^n) without a carry chain: bit i of the sum is c's exactly when the carry
  // into bit i is r_i = a_i ^ b_i ^ c_i; so r_0 == 0 and each r_{i+1} is the carry out of bit i
  // given r_i (one 6-input function per bit, then an AND; written on whole vectors, which a
  // simulator evaluates in a few word operations).
  function automatic logic sum_eq34(logic [33:0] a, logic [33:0] b, logic [33:0] c);
    logic [32:0] carry;  // the carry out of each bit, given the carry into it that c needs
    carry = (a[32:0] & b[32:0]) | ((a[32:0] ^ b[32:0]) & ~c[32:0]);
    sum_eq34 = (a ^ b ^ c) == {carry, 1'b0};
  endfunction
  // a - b is negative as a 16-bit two's complement distance (bit 15 of the difference).
  function automatic logic behind16(logic [15:0] a, logic [15:0] b);
    behind16 = 1'((a - b) >> 15);
  endfunction
  function automatic logic sum_eq16(logic [15:0] a, logic [15:0] b, logic [15:0] c);
    logic [14:0] carry;
    carry = (a[14:0] & b[14:0]) | ((a[14:0] ^ b[14:0]) & ~c[14:0]);
    sum_eq16 = (a ^ b ^ c) == {carry, 1'b0};
  endfunction

  // ---------------------------------------------------------------------------------------------
  // Pre-stage: everything the header op needs that depends on the descriptor and the job table
  // alone, computed every cycle for the descriptor at desc_i (in the cycle its metadata is read)
  // and registered: the job lookup and the entry's fields, the pool slot, the products slot x K
  // and window x K (the DSPs), and the descriptor's own checks. The registered values (pre_q)
  // are the current descriptor's when desc_i is the same as last cycle (pre_desc_q) and the job
  // table has not changed since (pre_fresh); the table changes only with a commit (ina_regs writes
  // the entry at the edge into commit_i's cycle) or after fail_o (ina_regs drops the entry at the
  // next edge): a_agg_table_stable checks it, a_agg_pre checks that pre_q equals the recomputation
  // (pre_d) whenever a header op uses it. A descriptor waits at desc_i for its metadata read
  // anyway, so this costs no cycle.
  typedef struct packed {
    logic [7:0]    idx;
    logic [7:0]    world;
    logic [6:0]    world_m1;   // world - 1 (mod 128): the count that the next contribution completes
    logic          world_is1;
    logic [16:0]   k;
    logic [15:0]   group;
    logic [16:0]   pslot;
    logic          bad_ver;    // the causes after the CRC verdict, each the first to hold:
    logic          mal_late;   //   malformed (type, length, count > K)
    logic          unknown;    //   unknown job
    logic          cross_job;  //   cross job: sec is not the job's mode
    logic          keyed;      // the job is keyed (mode mac or mac_encrypt): rules K1-K4, no CRC
    logic          enc;        // ... in mode mac_encrypt (its results are encrypted)
    logic          rank_bad;   //   bad rank
    logic          slot_bad;   //   bad slot
    logic          ok;         //   none
    logic          fits_first; // rule 12 by the slot's first block alone (known flags, offset s K)
    logic          hist_ok;    // rule 12 may take the other copy's history (known flags, count > 0)
    logic [33:0]   stride;     // window x K
    logic [15:0]   gen_m1, gen_m2;
    logic [CW-1:0] beats;      // payload beats of count
  } pre_t;
  pre_t pre_d, pre_q;
  ina_rtl_pkg::desc_t pre_desc_q;
  logic pre_fresh, fail_q;

  always_comb begin
    logic [NumJobs-1:0] hit;
    logic [15:0] base, window, group;
    logic [7:0]  world, kq, idx;
    logic [16:0] k;
    logic [32:0] first_off;
    logic        known, bad_type, bad_len, bad_len_k, bad_count, bad_rank, bad_slot, bad_sec;
    logic        keyed, cross_k;
    logic [1:0]  mode;
    // The lowest matching entry (an 8-input priority encoder), then its fields by index (a mux
    // tree; cheaper for a simulator than an AND-OR over every entry). With no match, entry 0's
    // fields, which no rule uses (unknown job).
    for (int unsigned j = 0; j < NumJobs; j++) begin
      hit[j] = job_valid_i[j] && job_id_i[16*j +: 16] == desc_i.job;
    end
    idx = '0;
    for (int j = NumJobs - 1; j >= 0; j--) begin
      if (hit[j]) idx = 8'(j);
    end
    // Register fields from proto/ina.toml (ina_proto_pkg::Reg<Register><Field>Lsb/Width).
    base   = job_slots_i[32*idx + ina_proto_pkg::RegJobSlotsBaseLsb +: ina_proto_pkg::RegJobSlotsBaseWidth];
    window = job_slots_i[32*idx + ina_proto_pkg::RegJobSlotsWindowLsb +: ina_proto_pkg::RegJobSlotsWindowWidth];
    world  = job_world_i[32*idx + ina_proto_pkg::RegJobWorldWorldLsb +: ina_proto_pkg::RegJobWorldWorldWidth];
    kq     = job_world_i[32*idx + ina_proto_pkg::RegJobWorldK64Lsb +: ina_proto_pkg::RegJobWorldK64Width];
    group  = job_world_i[32*idx + ina_proto_pkg::RegJobWorldGroupLsb +: ina_proto_pkg::RegJobWorldGroupWidth];
    k = (kq == 8'd0) ? 17'(MaxK) : {3'b0, kq, 6'b0};
    known = (desc_i.flags & ~((8'd1 << ina_proto_pkg::FlagRetxBit) |
                              (8'd1 << ina_proto_pkg::FlagNonfiniteBit) |
                              (8'd1 << ina_proto_pkg::FlagInt32Bit))) == '0;
    first_off = 33'(desc_i.slot) * 33'(k);

    pre_d.idx       = idx;
    pre_d.world     = world;
    pre_d.world_m1  = world[6:0] - 7'd1;
    pre_d.world_is1 = world[6:0] == 7'd1;
    pre_d.k         = k;
    pre_d.group     = group;
    pre_d.pslot     = {1'b0, base} + {1'b0, desc_i.slot};
    bad_type  = desc_i.mtype != ina_proto_pkg::MsgTypeData;
    bad_len   = {2'b0, desc_i.frame_bytes} !=
                22'(ina_proto_pkg::PayloadOffset + ina_proto_pkg::CrcBytes) + {4'b0, desc_i.count, 2'b00};
    bad_len_k = {2'b0, desc_i.frame_bytes} !=
                22'(ina_proto_pkg::PayloadOffset + ina_proto_pkg::TagBytes) + {4'b0, desc_i.count, 2'b00};
    bad_count = {1'b0, desc_i.count} > k;
    bad_rank  = desc_i.rank >= {8'd0, world};
    bad_slot  = desc_i.slot >= window || pre_d.pslot >= 17'(PoolSlots);
    // Rule 4: a known job in a keyed mode takes rules K1-K3 (no CRC); mac and mac_encrypt are the
    // keyed modes, so an entry in another (3, which ina::drv::ProgramJob refuses) drops every
    // packet as a cross-job one, whatever its sec. (A mac_encrypt frame's payload reaches this
    // stage decrypted: ina_core XORs it with its keystream as it leaves the payload FIFO.)
    mode      = |hit ? job_sec_i[2*idx +: 2] : 2'(ina_proto_pkg::SecModeCrc);
    keyed     = mode != 2'(ina_proto_pkg::SecModeCrc);
    cross_k   = desc_i.sec != 8'(mode) || (mode != 2'(ina_proto_pkg::SecModeMac) &&
                                           mode != 2'(ina_proto_pkg::SecModeMacEncrypt));
    // Rule 6: a packet naming a CRC-only job must carry sec 0.
    bad_sec   = desc_i.sec != 8'(ina_proto_pkg::SecModeCrc);
    pre_d.keyed    = keyed;
    pre_d.enc      = mode == 2'(ina_proto_pkg::SecModeMacEncrypt);
    pre_d.bad_ver  = desc_i.version != 8'(ina_proto_pkg::Version);
    if (!keyed) begin
      pre_d.mal_late  = bad_type || bad_len || (|hit && !bad_sec && bad_count);
      pre_d.unknown   = !bad_type && !bad_len && !(|hit);
      pre_d.cross_job = !bad_type && !bad_len && |hit && bad_sec;
      pre_d.rank_bad  = !bad_type && !bad_len && |hit && !bad_sec && !bad_count && bad_rank;
      pre_d.slot_bad  = !bad_type && !bad_len && |hit && !bad_sec && !bad_count && !bad_rank &&
                        bad_slot;
      pre_d.ok        = !bad_type && !bad_len && |hit && !bad_sec && !bad_count && !bad_rank &&
                        !bad_slot;
    end else begin
      // K1 sec, K2 type and length (with the tag), then rules 7-9.
      pre_d.cross_job = cross_k;
      pre_d.mal_late  = !cross_k && (bad_type || bad_len_k || bad_count);
      pre_d.unknown   = 1'b0;
      pre_d.rank_bad  = !cross_k && !bad_type && !bad_len_k && !bad_count && bad_rank;
      pre_d.slot_bad  = !cross_k && !bad_type && !bad_len_k && !bad_count && !bad_rank && bad_slot;
      pre_d.ok        = !cross_k && !bad_type && !bad_len_k && !bad_count && !bad_rank && !bad_slot;
    end
    // Rule 12, the slot's history: block s (offset s*K) starts a call (an empty block only as
    // float); otherwise the block W*K after the previous generation's full block, of the same type
    // (the header op compares with the other copy: hist_match).
    pre_d.fits_first = known && {1'b0, desc_i.offset} == first_off &&
                       (desc_i.count != '0 || !desc_i.flags[ina_proto_pkg::FlagInt32Bit]);
    pre_d.hist_ok   = known && desc_i.count != '0;
    pre_d.stride    = 34'(window) * 34'(k);
    pre_d.gen_m1    = desc_i.gen - 16'd1;
    pre_d.gen_m2    = desc_i.gen - 16'd2;
    pre_d.beats     = beats_of(desc_i.count);
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      fail_q <= 1'b0;
    end else begin
      fail_q <= fail;
    end
  end
  always_ff @(posedge clk_i) begin
    pre_q      <= pre_d;
    pre_desc_q <= desc_i;
  end
  assign pre_fresh = desc_i == pre_desc_q && !commit_i && !fail_q;
  assign pslot     = pre_d.pslot;

  // A descriptor is taken when its pre-stage values and metadata read (last cycle, for the same
  // descriptor under the same job table) are fresh, or when the packet needs neither: a frame
  // with no beat after the first (shorter than the ina header and trailer, or a MAC error) is
  // dropped as malformed by the first rule, which reads desc_i directly, so back-to-back runts
  // are taken one per cycle.
  logic meta_needed;
  assign meta_needed = desc_i.stored_beats != '0;
  assign start = !busy_q && !rst_busy_q && desc_valid_i && (out_free_i >= OutFreeW'(OutReserve)) &&
                 (pre_fresh || !meta_needed);
  assign desc_ready_o = start;

  assign runt  = desc_i.frame_bytes < ina_rtl_pkg::FrameBytesBits'(ina_proto_pkg::PayloadOffset + ina_proto_pkg::CrcBytes) ||
                 desc_i.mac_err;
  assign m     = desc_i.gen[0] ? m1_fwd : m0_fwd;
  assign mo    = desc_i.gen[0] ? m0_fwd : m1_fwd;
  assign retx  = desc_i.flags[ina_proto_pkg::FlagRetxBit];
  assign int32_new = desc_i.flags[ina_proto_pkg::FlagInt32Bit];
  assign int32_old = m.flags[ina_proto_pkg::FlagInt32Bit];

  // What remains of the rules in the header op: compares of the metadata read with the descriptor
  // and the pre-stage values.
  // Duplicate / re-send: the rank is in the copy's bitmap; complete: all ranks are.
  assign dup         = m.bitmap[desc_i.rank[5:0]];
  assign complete    = m.cnt == pre_q.world[6:0];
  // Rule 11, the generation window: the copies hold consecutive generations (cur - 1, cur).
  assign in_progress = desc_i.gen == m.gen && m.cnt != '0;
  assign next_use    = m.gen == pre_q.gen_m2 && mo.gen == pre_q.gen_m1 &&
                       (mo.cnt == '0 || mo.cnt == pre_q.world[6:0]);
  // Early vs stale: the 16-bit distance from the current generation (the other copy's when it is
  // the newer) is in 1..0x7FFF; both distances are computed and the newer copy's chosen.
  assign cur_is_mo   = sum_eq16(m.gen, 16'd1, mo.gen);
  assign early_m     = desc_i.gen != m.gen && !behind16(desc_i.gen, m.gen);
  assign early_mo    = desc_i.gen != mo.gen && !behind16(desc_i.gen, mo.gen);
  assign early       = cur_is_mo ? early_mo : early_m;
  // Rule 12: offset == other copy's offset + W K, the other copy full (count K) and of the type.
  assign hist_match  = sum_eq34({2'b0, mo.offset}, pre_q.stride, {2'b0, desc_i.offset});
  assign fits        = pre_q.fits_first ||
                       (pre_q.hist_ok && mo.cnt != '0 && {1'b0, mo.count} == pre_q.k && hist_match &&
                        int32_new == mo.flags[ina_proto_pkg::FlagInt32Bit]);
  // The other copy's bitmap and exponents play no part in the rules.
  logic unused_mo;
  assign unused_mo = ^{mo.bitmap, mo.exp, mo.next_exp};
  // Rule 13: a block that fits the history but differs from another rank's: the ranks disagree.
  // A float block (int32 clear) must also carry the copy's exponent: the agreed one (an int32
  // block has none, its exp is not compared).
  assign differs = desc_i.offset != m.offset || desc_i.count != m.count || int32_new != int32_old ||
                   (!int32_new && desc_i.exp != m.exp);

  // ina_ingress keeps at most MaxBeats payload beats per frame (the same MaxK).
  assign beats_of_stored = CW'(desc_i.stored_beats);

  // The decision as flat conditions (each cause is the first to hold in engine.h's order), not an
  // if-else chain, which synthesis would map to a chain of multiplexers through every cause.
  // Before the slot rules: the descriptor's own checks and the job lookup (pre-stage), with the
  // CRC verdict (rule 4) between the version and the message type.
  logic gate, ok, seen, resend, accept, done, placed, authentic;
  assign gate   = !runt && !pre_q.bad_ver && (pre_q.keyed || desc_crc_ok_i);
  assign ok     = gate && pre_q.ok;
  assign placed = in_progress || next_use;
  assign seen   = in_progress && dup;
  assign resend = ok && authentic && seen && complete;
  assign accept = ok && authentic && !seen && placed && fits && !(in_progress && differs);
  assign done   = next_use ? pre_q.world_is1 : m.cnt == pre_q.world_m1;

  // Rule K4, keyed jobs: the frame's J0 (ina_gcm_check: AES_K^-1(tag ^ S) under the job's up key)
  // must be that of nonce (rank, slot, use) for the use the slot expects: the copy's when in
  // progress, else the other copy's + 1 (the next use); J0 of use - 65536 (use >= 65536) is a
  // replay. The low 16 bits of a use are the generation, so only use >> 16 (use_hi) is stored and
  // compared; the +1 carries into it when the other copy's generation is 0xFFFF.
  logic [47:0] use_hi;       // the packet's use >> 16
  logic [47:0] j0_use_hi_p1;
  logic        j0_fixed, tag_ok, replayed;
  assign use_hi       = in_progress ? m.use_hi : mo.use_hi + 48'(mo.gen == 16'hFFFF);
  assign j0_use_hi_p1 = desc_j0_i[95:48] + 48'd1;
  assign j0_fixed     = desc_j0_i[127:112] == desc_i.rank && desc_j0_i[111:96] == desc_i.slot &&
                        desc_j0_i[47:32] == desc_i.gen && desc_j0_i[31:0] == 32'd1;
  // (desc_keyed_i is low only for a frame that named the job before it was committed keyed: no J0.)
  assign tag_ok       = desc_keyed_i && j0_fixed && desc_j0_i[95:48] == use_hi;
  assign replayed     = desc_keyed_i && j0_fixed && use_hi != '0 && j0_use_hi_p1 == use_hi;
  assign authentic    = !pre_q.keyed || tag_ok;

  always_comb begin
    inc = '0;
    inc[ina_proto_pkg::CntRxPackets]       = 1'b1;
    inc[ina_proto_pkg::CntDropMalformed]   = runt || (gate && pre_q.mal_late);
    inc[ina_proto_pkg::CntDropBadVersion]  = !runt && pre_q.bad_ver;
    inc[ina_proto_pkg::CntDropBadCrc]      = !runt && !pre_q.bad_ver && !pre_q.keyed && !desc_crc_ok_i;
    inc[ina_proto_pkg::CntDropUnknownJob]  = gate && pre_q.unknown;
    inc[ina_proto_pkg::CntDropCrossJob]    = gate && pre_q.cross_job;
    inc[ina_proto_pkg::CntDropBadRank]     = gate && pre_q.rank_bad;
    inc[ina_proto_pkg::CntDropBadSlot]     = gate && pre_q.slot_bad;
    // (Keyed: a retransmission counts once its tag verified.)
    inc[ina_proto_pkg::CntRetransmissions] = ok && retx && (!pre_q.keyed || (placed && tag_ok));
    inc[ina_proto_pkg::CntResultResends]   = resend;
    inc[ina_proto_pkg::CntDuplicates]      = ok && authentic && seen && !complete;
    inc[ina_proto_pkg::CntDropEarly]       = ok && !placed && early;
    inc[ina_proto_pkg::CntDropStale]       = ok && !placed && !early;
    inc[ina_proto_pkg::CntDropForged]      = ok && pre_q.keyed && placed && !tag_ok && !replayed;
    inc[ina_proto_pkg::CntDropReplayed]    = ok && pre_q.keyed && placed && !tag_ok && replayed;
    inc[ina_proto_pkg::CntDropHistory]     = ok && authentic && !seen && placed && !fits;
    inc[ina_proto_pkg::CntDropMismatch]    = ok && authentic && !seen && in_progress && fits && differs;
    inc[ina_proto_pkg::CntRxData]          = accept;
    inc[ina_proto_pkg::CntResults]         = accept && done;
    fail      = ok && authentic && !seen && in_progress && fits && differs;
    meta_we   = accept;
    meta_slot = pre_q.pslot[SW-1:0];
    meta_copy = desc_i.gen[0];
    emit_d    = resend || (accept && done);
    hdr_emit  = emit_d;
    hdr_rank  = resend ? desc_i.rank : ina_proto_pkg::RankAll;
    inb_d     = beats_of_stored;
    outb_d    = resend ? beats_of(m.count) : accept ? pre_q.beats : '0;
    cnt_elems_d = resend ? m.count : desc_i.count;
    mode_d    = resend ? ModeResend : !accept ? ModeDrop : next_use ? ModeFirst : ModeAdd;
    // The copy after this packet (written only when accepted; a re-send's header shows it as is).
    meta_new  = m;
    if (accept) begin
      if (next_use) begin
        meta_new = '0;
        meta_new.gen      = desc_i.gen;
        meta_new.offset   = desc_i.offset;
        meta_new.count    = desc_i.count;
        meta_new.flags    = desc_i.flags & ~(8'd1 << ina_proto_pkg::FlagRetxBit);
        meta_new.exp      = desc_i.exp;
        meta_new.next_exp = desc_i.next_exp;
        meta_new.cnt      = 7'd1;
        meta_new.use_hi   = use_hi;
      end else begin
        meta_new.flags    = m.flags | (desc_i.flags & ~(8'd1 << ina_proto_pkg::FlagRetxBit));
        meta_new.exp      = (desc_i.exp > m.exp) ? desc_i.exp : m.exp;
        meta_new.next_exp = (desc_i.next_exp > m.next_exp) ? desc_i.next_exp : m.next_exp;
        meta_new.cnt      = m.cnt + 7'd1;
      end
      meta_new.bitmap[desc_i.rank[5:0]] = 1'b1;
    end
    if (!start) begin
      inc = '0;
      meta_we = 1'b0;
      fail = 1'b0;
    end
  end

  // Result header beat: L2-L4 template (addresses, ports and checksums are the shell's, per
  // destination) and the ina header of the copy after this packet, each field big-endian at its
  // byte. Computed where s1_data_q loads (S1 below), in the cycles that load it: a simulator then
  // builds the 512-bit beat only in header cycles (the same logic in synthesis).
  function automatic logic [15:0] be2(logic [15:0] v);  // bytes in wire order
    be2 = {v[7:0], v[15:8]};
  endfunction
  function automatic logic [31:0] be4(logic [31:0] v);
    be4 = {v[7:0], v[15:8], v[23:16], v[31:24]};
  endfunction
  function automatic logic [ina_rtl_pkg::BeatBits-1:0] result_header(
      logic keyed, logic enc, logic [13:0] elems, logic [7:0] flags, logic [7:0] exp, logic [7:0] next_exp,
      logic [15:0] job, logic [15:0] rank, logic [15:0] slot, logic [15:0] gen, logic [15:0] count,
      logic [31:0] offset);
    logic [ina_rtl_pkg::BeatBits-1:0] h;
    logic [15:0] udp_len;
    // The trailer ina_egress appends: the CRC32C, or a keyed job's tag.
    udp_len = (keyed ? 16'(8 + ina_proto_pkg::HeaderBytes + ina_proto_pkg::TagBytes) :
                       16'(8 + ina_proto_pkg::HeaderBytes + ina_proto_pkg::CrcBytes)) + {elems, 2'b00};
    h = '0;
    h[8*12 +: 16] = be2(16'h0800);           // ethertype IPv4
    h[8*14 +: 8]  = 8'h45;                   // IPv4, 20-byte header
    h[8*16 +: 16] = be2(udp_len + 16'd20);
    h[8*22 +: 8]  = 8'd64;                   // TTL
    h[8*23 +: 8]  = 8'd17;                   // UDP
    h[8*38 +: 16] = be2(udp_len);
    h[8*(ina_rtl_pkg::InaHdrByte + ina_proto_pkg::VersionOffset) +: 8] = 8'(ina_proto_pkg::Version);
    h[8*(ina_rtl_pkg::InaHdrByte + ina_proto_pkg::TypeOffset) +: 8] = 8'(ina_proto_pkg::MsgTypeResult);
    h[8*(ina_rtl_pkg::InaHdrByte + ina_proto_pkg::FlagsOffset) +: 8]   = flags;
    h[8*(ina_rtl_pkg::InaHdrByte + ina_proto_pkg::ExpOffset) +: 8]     = exp;
    h[8*(ina_rtl_pkg::InaHdrByte + ina_proto_pkg::NextExpOffset) +: 8] = next_exp;
    h[8*(ina_rtl_pkg::InaHdrByte + ina_proto_pkg::SecOffset) +: 8] =
        !keyed ? 8'(ina_proto_pkg::SecModeCrc) :
        enc    ? 8'(ina_proto_pkg::SecModeMacEncrypt) : 8'(ina_proto_pkg::SecModeMac);
    h[8*(ina_rtl_pkg::InaHdrByte + ina_proto_pkg::JobOffset) +: 16]    = be2(job);
    h[8*(ina_rtl_pkg::InaHdrByte + ina_proto_pkg::RankOffset) +: 16]   = be2(rank);
    h[8*(ina_rtl_pkg::InaHdrByte + ina_proto_pkg::SlotOffset) +: 16]   = be2(slot);
    h[8*(ina_rtl_pkg::InaHdrByte + ina_proto_pkg::GenOffset) +: 16]    = be2(gen);
    h[8*(ina_rtl_pkg::InaHdrByte + ina_proto_pkg::CountOffset) +: 16]  = be2(count);
    h[8*(ina_rtl_pkg::InaHdrByte + ina_proto_pkg::OffsetOffset) +: 32] = be4(offset);
    result_header = h;
  endfunction

  assign nops_d  = (inb_d > outb_d) ? inb_d : outb_d;
  assign ps_d    = pre_q.pslot[SW-1:0];
  assign cp_d    = desc_i.gen[0];
  assign user_d  = {hdr_rank, pre_q.group};
  // A result's seal: J0 of nonce (destination, slot, the copy's use) under the entry's down key
  // (engine.h: the reference seals with MakeNonce(dest, slot, copy.use)); a re-send's copy is the
  // packet's own (in progress), so the use is the packet's either way.
  ina_rtl_pkg::seal_t seal_d, seal_q;
  assign seal_d.keyed = pre_q.keyed;
  assign seal_d.enc   = pre_q.enc;
  assign seal_d.entry = pre_q.idx;
  assign seal_d.j0    = {hdr_rank, desc_i.slot, use_hi, desc_i.gen, 32'd1};

  // Payload op issue.
  logic          s0_pay;       // a payload op issues this cycle
  logic          s0_pop, s0_rd, s0_emit, s0_last;
  logic [AW-1:0] s0_addr;
  logic [ina_rtl_pkg::BeatBytes-1:0] s0_keep;
  logic [16:0]   s0_left;      // elements from this beat on

  assign s0_pay  = busy_q;
  assign s0_pop  = s0_pay && op_q < inb_q;
  assign s0_rd   = s0_pay && op_q < outb_q && (mode_q == ModeAdd || mode_q == ModeResend);
  assign s0_emit = s0_pay && op_q < outb_q && emit_q;
  assign s0_last = op_q + CW'(1) == outb_q;
  assign s0_addr = {ps_q, cp_q, op_q[BW-1:0]};
  assign s0_left = {1'b0, cnt_elems_q} - (17'(op_q) << LB);
  assign pay_ready_o = s0_pop;
  // The payload beats of a descriptor are always in the FIFO before it (ingress order).
  logic unused_pay_valid;
  assign unused_pay_valid = pay_valid_i;

  // Lane l (bytes 4l..4l+3) holds an element of the packet: l < s0_left.
  logic [ina_rtl_pkg::Lanes-1:0] s0_lanes;
  always_comb begin
    for (int unsigned l = 0; l < ina_rtl_pkg::Lanes; l++) begin
      s0_lanes[l] = 17'(l) < s0_left;
      s0_keep[ina_proto_pkg::ElemBytes*l +: ina_proto_pkg::ElemBytes] = {ina_proto_pkg::ElemBytes{s0_lanes[l]}};
    end
  end

  always_comb begin
    busy_d = busy_q;
    op_d   = op_q;
    if (busy_q) begin
      op_d = op_q + CW'(1);
      if (op_d == nops_q) busy_d = 1'b0;
    end else if (start) begin
      op_d   = '0;
      busy_d = (inb_d | outb_d) != '0;
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      busy_q <= 1'b0;
      op_q   <= '0;
    end else begin
      busy_q <= busy_d;
      op_q   <= op_d;
    end
  end

  always_ff @(posedge clk_i) begin
    if (start) begin
      nops_q      <= nops_d;
      inb_q       <= inb_d;
      outb_q      <= outb_d;
      mode_q      <= mode_d;
      emit_q      <= emit_d;
      ps_q        <= ps_d;
      cp_q        <= cp_d;
      cnt_elems_q <= cnt_elems_d;
      user_q      <= user_d;
      seal_q      <= seal_d;
    end
  end

  assign cnt_inc_o    = inc;
  assign fail_o       = fail;
  assign fail_entry_o = pre_q.idx;
  assign fail_slot_o  = desc_i.slot;
  assign fail_gen_o   = desc_i.gen;
  assign fail_rank_o  = desc_i.rank;

  // ---------------------------------------------------------------------------------------------
  // S1 / S2.
  logic                s1_valid_q, s2_valid_q, wb_valid_q;
  logic                s1_hdr_q, s1_emit_q, s1_we_q, s1_last_q;
  mode_e               s1_mode_q;
  logic [AW-1:0]       s1_addr_q, s2_addr_q, wb_addr_q;
  logic [ina_rtl_pkg::BeatBits-1:0] s1_data_q;   // header beat, or payload in host lane order (masked)
  logic [ina_rtl_pkg::BeatBytes-1:0] s1_keep_q, s2_keep_q;
  logic [ina_rtl_pkg::OutUserBits-1:0] s1_user_q, s2_user_q;
  ina_rtl_pkg::seal_t  s1_seal_q, s2_seal_q;
  logic                s2_we_q, s2_emit_q, s2_last_q;
  logic [ina_rtl_pkg::BeatBits-1:0] s2_val_q, s2_out_q, wb_data_q;
  logic [ina_rtl_pkg::BeatBits-1:0] mem_rdata, mem_fwd, sum, s1_val;

  // A payload beat in host lane order, the lanes beyond the packet's elements zeroed.
  function automatic logic [ina_rtl_pkg::BeatBits-1:0] host_lanes(
      logic [ina_rtl_pkg::BeatBits-1:0] d, logic [ina_rtl_pkg::Lanes-1:0] lanes);
    logic [ina_rtl_pkg::BeatBits-1:0] r;
    r = ina_rtl_pkg::swap_lanes(d);
    for (int unsigned l = 0; l < ina_rtl_pkg::Lanes; l++) begin
      if (!lanes[l]) r[32*l +: 32] = '0;
    end
    host_lanes = r;
  endfunction

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      s1_valid_q <= 1'b0;
      s2_valid_q <= 1'b0;
      wb_valid_q <= 1'b0;
    end else begin
      s1_valid_q <= (start && hdr_emit) || s0_pay;
      s2_valid_q <= s1_valid_q;
      wb_valid_q <= s2_valid_q && s2_we_q;
    end
  end

  always_ff @(posedge clk_i) begin
    s1_hdr_q  <= !busy_q;
    s1_emit_q <= busy_q ? s0_emit : 1'b1;
    s1_we_q   <= busy_q && op_q < outb_q && (mode_q == ModeFirst || mode_q == ModeAdd);
    s1_last_q <= busy_q ? s0_last : (outb_d == '0);
    s1_mode_q <= mode_q;
    s1_addr_q <= s0_addr;
    // The header beat, or the payload beat popped (zero when none is).
    if (!busy_q) begin
      s1_data_q <= result_header(pre_q.keyed, pre_q.enc, cnt_elems_d[13:0], meta_new.flags, meta_new.exp, meta_new.next_exp,
                                 desc_i.job, hdr_rank, desc_i.slot, desc_i.gen, meta_new.count,
                                 meta_new.offset);
    end else if (s0_pop) begin
      s1_data_q <= host_lanes(pay_data_i, s0_lanes);
    end else begin
      s1_data_q <= '0;
    end
    s1_keep_q <= busy_q ? s0_keep : '1;
    s1_user_q <= busy_q ? user_q : user_d;
    if (busy_q || start) s1_seal_q <= busy_q ? seal_q : seal_d;  // (idle: kept, not copied)

    s2_we_q   <= s1_we_q && s1_valid_q && !s1_hdr_q;
    s2_emit_q <= s1_emit_q;
    s2_last_q <= s1_last_q;
    s2_addr_q <= s1_addr_q;
    s2_val_q  <= s1_val;
    if (s1_hdr_q) s2_out_q <= s1_data_q;
    else s2_out_q <= ina_rtl_pkg::swap_lanes(s1_val);
    s2_keep_q <= s1_keep_q;
    s2_user_q <= s1_user_q;
    if (s1_valid_q) s2_seal_q <= s1_seal_q;

    wb_addr_q <= s2_addr_q;
    wb_data_q <= s2_val_q;
  end

  ina_slot_mem #(
    .Words(PoolSlots * 2 * MaxBeats),
    .Width(ina_rtl_pkg::BeatBits)
  ) u_mem (
    .clk_i,
    .re_i   (s0_rd),
    .raddr_i(s0_addr),
    .rdata_o(mem_rdata),
    .we_i   (s2_valid_q && s2_we_q),
    .waddr_i(s2_addr_q),
    .wdata_i(s2_val_q)
  );

  // Forwarding: the write in S2 now is newer than last cycle's, which the read-first memory missed.
  always_comb begin
    mem_fwd = mem_rdata;
    if (wb_valid_q && wb_addr_q == s1_addr_q) mem_fwd = wb_data_q;
    if (s2_valid_q && s2_we_q && s2_addr_q == s1_addr_q) mem_fwd = s2_val_q;
  end

  ina_lane_adder u_add (
    .a_i  (mem_fwd),
    .b_i  (s1_data_q),
    .sum_o(sum)
  );

  always_comb begin
    unique case (s1_mode_q)
      ModeFirst:  s1_val = s1_data_q;
      ModeAdd:    s1_val = sum;
      ModeResend: s1_val = mem_fwd;
      default:    s1_val = '0;
    endcase
  end

  assign busy_o = busy_q || s1_valid_q || s2_valid_q || rst_busy_q;

  assign out_valid_o = s2_valid_q && s2_emit_q;
  assign out_data_o  = s2_out_q;
  assign out_keep_o  = s2_keep_q;
  assign out_last_o  = s2_last_q;
  assign out_user_o  = s2_user_q;
  assign out_seal_o  = s2_seal_q;

`ifndef SYNTHESIS
  // Invariants (docs/rtl/assertions.md).
  // A packet's payload beats are in the payload FIFO before its descriptor is (ingress order),
  // so a payload op never pops an empty FIFO.
  a_agg_pay_present: assert property (@(posedge clk_i) disable iff (!rst_ni)
      s0_pop |-> pay_valid_i)
    else $error("ina_agg: payload op on an empty payload FIFO");
  // A descriptor never says more payload beats than MaxBeats (ina_ingress and ina_agg built with
  // the same MaxK), so the beat counters and the slot memory's beat index hold every payload op.
  a_agg_stored_beats: assert property (@(posedge clk_i) disable iff (!rst_ni)
      desc_valid_i |-> desc_i.stored_beats <= ina_rtl_pkg::StoredBeatsBits'(MaxBeats))
    else $error("ina_agg: a descriptor with %0d payload beats, more than MaxK / 16 = %0d",
                desc_i.stored_beats, MaxBeats);
  // The room reserved before a packet (OutReserve) covers every beat it emits: the output FIFO is
  // never pushed while full, so the pipeline never stalls mid-packet.
  a_agg_out_room: assert property (@(posedge clk_i) disable iff (!rst_ni)
      out_valid_o |-> out_free_i != '0)
    else $error("ina_agg: result beat with no room in the output FIFO");
  // A copy's contribution count is the number of ranks in its bitmap, never more than the world.
  a_agg_count: assert property (@(posedge clk_i) disable iff (!rst_ni)
      meta_we |-> 7'($countones(meta_new.bitmap)) == meta_new.cnt &&
                  meta_new.cnt <= pre_q.world[6:0])
    else $error("ina_agg: slot %0d copy %0d: count %0d, bitmap %h, world %0d", meta_slot,
                meta_copy, meta_new.cnt, meta_new.bitmap, pre_q.world);
  // One result per completed copy: the contribution that completes it emits the result header,
  // and a copy already complete is never completed again (later packets re-send or are dropped).
  a_agg_result_once: assert property (@(posedge clk_i) disable iff (!rst_ni)
      start && inc[ina_proto_pkg::CntResults] |->
        hdr_emit && emit_d && meta_new.cnt == pre_q.world[6:0] &&
        !(in_progress && m.cnt == pre_q.world[6:0]))
    else $error("ina_agg: slot %0d gen %0d completed twice or without its result", pslot,
                desc_i.gen);
  // A result header is emitted only for a completing contribution or a re-send to one rank.
  a_agg_emit_cause: assert property (@(posedge clk_i) disable iff (!rst_ni)
      start && hdr_emit |-> inc[ina_proto_pkg::CntResults] || inc[ina_proto_pkg::CntResultResends])
    else $error("ina_agg: result header without a cause");
  // The slot-reset walk and packets never overlap, and a packet ends before the next starts.
  a_agg_no_overlap: assert property (@(posedge clk_i) disable iff (!rst_ni)
      start |-> !rst_busy_q && !busy_q)
    else $error("ina_agg: a packet started during a reset walk or another packet");
  // The metadata a header op decides on (last cycle's RAM read, forwarded) is the slot's current
  // metadata: a shadow copy, written with the RAMs and read combinationally, must agree.
  logic [MetaBits-1:0] sh0_q[PoolSlots];
  logic [MetaBits-1:0] sh1_q[PoolSlots];
  always_ff @(posedge clk_i) begin
    if (mw_we0) sh0_q[mw_slot] <= mw_data0;
    if (mw_we1) sh1_q[mw_slot] <= mw_data1;
  end
  // An immediate assertion, checked at the clock edge: in a concurrent one Verilator 5.006 copies
  // both shadow arrays every cycle to sample them (4x slower at 8192 slots), and it cannot index
  // an array inside a property.
  logic meta_latest;
  assign meta_latest = m0_fwd == sh0_q[pslot[SW-1:0]] && m1_fwd == sh1_q[pslot[SW-1:0]];
  always_ff @(posedge clk_i) begin
    if (rst_ni && start && meta_needed) begin
      a_agg_meta_fwd: assert (meta_latest)
        else $error("ina_agg: slot %0d: the metadata read (forwarded) is not the slot's latest",
                    pslot);
    end
  end
  // The pre-stage (pre_q, registered last cycle) is what the header op would compute now from
  // desc_i and the job table (pre_d) whenever it is used: pre_fresh is right. Mutation-checked:
  // without the desc_i == pre_desc_q term RtlAggTest fails (counters differ from the reference).
  // An immediate assertion: pre_t is a struct, compared once per header op.
  logic [NumJobs*(1+16+32+32+2)-1:0] tbl_q;
  logic tbl_q_valid;
  always_ff @(posedge clk_i) begin
    tbl_q       <= {job_valid_i, job_id_i, job_slots_i, job_world_i, job_sec_i};
    tbl_q_valid <= rst_ni;
    if (rst_ni && start && meta_needed) begin
      a_agg_pre: assert (pre_q == pre_d)
        else $error("ina_agg: job %0d slot %0d: the pre-stage values are stale", desc_i.job,
                    desc_i.slot);
    end
    // The job table changes only at the edge into a cycle with commit_i (ina_regs) or after
    // fail_o, which is what pre_fresh assumes.
    if (rst_ni && tbl_q_valid && !commit_i && !fail_q) begin
      a_agg_table_stable: assert ({job_valid_i, job_id_i, job_slots_i, job_world_i, job_sec_i} == tbl_q)
        else $error("ina_agg: the job table changed without a commit or a failure");
    end
  end
  // A descriptor taken without its metadata read (a one-beat frame) is dropped as malformed before
  // any rule reads the slot, and writes no metadata.
  a_agg_runt_no_meta: assert property (@(posedge clk_i) disable iff (!rst_ni)
      start && !meta_needed |-> inc[ina_proto_pkg::CntDropMalformed] && !meta_we)
    else $error("ina_agg: a descriptor with no payload beat was taken without its metadata");
  // Rule 13 fails a job only on a mismatch drop.
  a_agg_fail_cause: assert property (@(posedge clk_i) disable iff (!rst_ni)
      fail_o |-> inc[ina_proto_pkg::CntDropMismatch])
    else $error("ina_agg: fail_o without a mismatch");
`endif

endmodule
