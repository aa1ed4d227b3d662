// Hand-written parameters and helpers of the ina RTL dataplane. Wire constants (offsets, message
// types, counters, register addresses) come from the generated ina_proto_pkg; only
// implementation choices live here.
package ina_rtl_pkg;

  // AXI-stream beat: 512 bits, byte 0 of the frame in tdata[7:0].
  localparam int unsigned BeatBytes = 64;
  localparam int unsigned BeatBits = 8 * BeatBytes;
  // int32 lanes per payload beat.
  // (yosys 0.23 cannot read another package's parameters inside a package: the two wire constants
  // below are restated, and ina_core checks them against ina_proto_pkg at elaboration.)
  localparam int unsigned Lanes = BeatBytes / 4;
  // The largest K (elements per packet) is the MaxK parameter of ina_core (and of ina_ingress,
  // ina_agg, ina_regs, which it passes it to): a power of two, 64 .. MaxKLimit, checked at
  // elaboration (each module's gen_bad_max_k). MaxKLimit is what the descriptor's beat count
  // (StoredBeatsBits) and the job_world.k64 / params.k64 register fields (8 bits: K / 64 <= 255)
  // hold; a frame of K = 8192 (32 KiB of payload) is beyond any Ethernet MTU anyway.
  localparam int unsigned MaxKLimit = 8192;
  // Bits of a payload beat count 0 .. MaxKLimit / Lanes (desc_t.stored_beats).
  localparam int unsigned StoredBeatsBits = 10;
  // Byte offset of the ina header in the frame (Ethernet + IPv4 + UDP).
  localparam int unsigned InaHdrByte = 42;
  // Output tuser: [15:0] multicast group of the job, [31:16] destination rank (RankAll: the group).
  localparam int unsigned OutUserBits = 32;
  // Frame byte counter width (saturating): enough for 64 + 4 * 65535.
  localparam int unsigned FrameBytesBits = 20;

  // Fields of the ina header of one frame, host order, plus what ingress learned about the frame.
  typedef struct packed {
    logic [7:0]  version;
    logic [7:0]  mtype;
    logic [7:0]  flags;
    logic [7:0]  exp;
    logic [7:0]  next_exp;
    logic [7:0]  sec;
    logic [15:0] job;
    logic [15:0] rank;
    logic [15:0] slot;
    logic [15:0] gen;
    logic [15:0] count;
    logic [31:0] offset;
    logic [FrameBytesBits-1:0] frame_bytes;  // bytes of the whole frame (saturating)
    logic [StoredBeatsBits-1:0] stored_beats;  // payload beats kept (<= MaxK / Lanes)
    logic        mac_err;                    // tuser of any beat was set: the MAC saw an error
  } desc_t;
  // $bits(desc_t), spelled out for yosys 0.23 ($bits of a package type); ina_core checks it.
  localparam int unsigned DescBits = 6 * 8 + 5 * 16 + 32 + FrameBytesBits + StoredBeatsBits + 1;

  // What ina_egress needs to seal a result of a keyed job (sec mode mac or mac_encrypt;
  // docs/security.md): the job entry (its down key), whether to encrypt the payload (mac_encrypt),
  // and J0, the GCM counter block of the result's nonce (destination rank, slot, the copy's use, 1).
  // keyed 0: a CRC-only result (the CRC32C trailer).
  typedef struct packed {
    logic         keyed;
    logic         enc;
    logic [7:0]   entry;
    logic [127:0] j0;
  } seal_t;
  localparam int unsigned SealBits = 1 + 1 + 8 + 128;

  // Byte `i` of a beat.
  function automatic logic [7:0] beat_byte(input logic [BeatBits-1:0] d, input int unsigned i);
    beat_byte = d[8*i +: 8];
  endfunction

  // Big-endian 16/32-bit field at byte `i` of a beat.
  function automatic logic [15:0] be16(input logic [BeatBits-1:0] d, input int unsigned i);
    be16 = {d[8*i +: 8], d[8*(i+1) +: 8]};
  endfunction

  function automatic logic [31:0] be32(input logic [BeatBits-1:0] d, input int unsigned i);
    be32 = {d[8*i +: 8], d[8*(i+1) +: 8], d[8*(i+2) +: 8], d[8*(i+3) +: 8]};
  endfunction

  // Swaps the byte order of every 32-bit lane (wire big-endian <-> host order lanes).
  function automatic logic [BeatBits-1:0] swap_lanes(input logic [BeatBits-1:0] d);
    logic [BeatBits-1:0] r;
    for (int unsigned l = 0; l < Lanes; l++) begin
      r[32*l +: 32] = {d[32*l +: 8], d[32*l+8 +: 8], d[32*l+16 +: 8], d[32*l+24 +: 8]};
    end
    swap_lanes = r;
  endfunction

endpackage
