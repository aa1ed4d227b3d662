// The key table of keyed jobs (sec modes mac and mac_encrypt, docs/security.md): per job entry,
// what the AES-GCM blocks need of its two traffic keys, computed once when the entry is committed
// (ina_regs' commit_o): for the up key (data, checked by ina_gcm_check) H .. H^4 and the last
// round key; for the down key (results, sealed in ina_egress) H .. H^4 and the key itself.
//
// A commit of an entry in a keyed mode starts two ina_gcm_key (up and down side by side); their
// results are written to the entry 14 cycles later. busy_o is high from the commit until then:
// ina_core takes no frame meanwhile, so no frame is checked or sealed with half-written keys. A
// commit in mode crc writes nothing (the entry's packets never reach the GCM blocks' results:
// ina_agg drops them or takes the CRC path). Datasheet: docs/rtl/ina_aes128.md.
module ina_gcm_keys
#(
  parameter int unsigned NumJobs = 8
) (
  input  logic                    clk_i,
  input  logic                    rst_ni,
  input  logic                    commit_i,
  input  logic [7:0]              commit_entry_i,
  input  logic [1:0]              commit_sec_i,
  input  logic [127:0]            commit_key_up_i,
  input  logic [127:0]            commit_key_down_i,
  // Entry j at [512j +: 512] (H^i at [128(i-1) +: 128] within) and [128j +: 128].
  output logic [NumJobs*512-1:0]  up_hpow_o,
  output logic [NumJobs*128-1:0]  up_last_key_o,
  output logic [NumJobs*512-1:0]  down_hpow_o,
  output logic [NumJobs*128-1:0]  down_key_o,
  output logic                    busy_o
);
  localparam int unsigned JW = (NumJobs > 1) ? $clog2(NumJobs) : 1;

  logic         start, up_busy, up_done, down_busy, down_done;
  logic [511:0] up_hpow, down_hpow;
  logic [127:0] up_last, down_last_unused;
  logic [JW-1:0] entry_q;
  logic [127:0] key_down_q;
  logic         pending_q;

  assign start = commit_i && (commit_sec_i == 2'(ina_proto_pkg::SecModeMac) ||
                              commit_sec_i == 2'(ina_proto_pkg::SecModeMacEncrypt)) &&
                 commit_entry_i < 8'(NumJobs);

  ina_gcm_key u_up (
    .clk_i,
    .rst_ni,
    .start_i   (start),
    .key_i     (commit_key_up_i),
    .busy_o    (up_busy),
    .done_o    (up_done),
    .hpow_o    (up_hpow),
    .last_key_o(up_last)
  );
  ina_gcm_key u_down (
    .clk_i,
    .rst_ni,
    .start_i   (start),
    .key_i     (commit_key_down_i),
    .busy_o    (down_busy),
    .done_o    (down_done),
    .hpow_o    (down_hpow),
    .last_key_o(down_last_unused)
  );

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      pending_q <= 1'b0;
    end else begin
      if (start) pending_q <= 1'b1;
      else if (up_done) pending_q <= 1'b0;
    end
  end
  always_ff @(posedge clk_i) begin
    if (start) begin
      entry_q    <= commit_entry_i[JW-1:0];
      key_down_q <= commit_key_down_i;
    end
  end

  // The table: flip-flops (NumJobs x 1280 bits), written whole per entry.
  logic [NumJobs*512-1:0] up_hpow_q, down_hpow_q;
  logic [NumJobs*128-1:0] up_last_q, down_key_q;
  always_ff @(posedge clk_i) begin
    if (pending_q && up_done) begin
      up_hpow_q[512*entry_q +: 512]   <= up_hpow;
      up_last_q[128*entry_q +: 128]   <= up_last;
      down_hpow_q[512*entry_q +: 512] <= down_hpow;
      down_key_q[128*entry_q +: 128]  <= key_down_q;
    end
  end

  assign up_hpow_o     = up_hpow_q;
  assign up_last_key_o = up_last_q;
  assign down_hpow_o   = down_hpow_q;
  assign down_key_o    = down_key_q;
  assign busy_o        = commit_i || pending_q;

  logic unused;
  assign unused = ^{up_busy, down_busy, down_done, down_last_unused};

endmodule
