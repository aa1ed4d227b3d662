// Test-only top for the AES-GCM blocks (tests/rtl/units/gcm_test.cc): each module side by side
// with flat, prefixed ports (aes_, inv_, key_, hash_, chk_, ctr_), 8 user bits where they take any; and
// the two forms of ina_gcm_pkg's S-boxes (sbx_: the table simulation uses, the ROM synthesis uses).
module ina_gcm_tb (
  input  logic         clk_i,
  input  logic         rst_ni,
  // ina_aes128
  input  logic         aes_in_valid_i,
  input  logic [127:0] aes_in_block_i,
  input  logic [127:0] aes_in_key_i,
  input  logic [7:0]   aes_in_user_i,
  output logic         aes_out_valid_o,
  output logic [127:0] aes_out_block_o,
  output logic [127:0] aes_out_key_o,
  output logic [7:0]   aes_out_user_o,
  // ina_aes128, Inverse = 1
  input  logic         inv_in_valid_i,
  input  logic [127:0] inv_in_block_i,
  input  logic [127:0] inv_in_last_key_i,
  input  logic [7:0]   inv_in_user_i,
  output logic         inv_out_valid_o,
  output logic [127:0] inv_out_block_o,
  output logic [7:0]   inv_out_user_o,
  // ina_gcm_key
  input  logic         key_start_i,
  input  logic [127:0] key_key_i,
  output logic         key_busy_o,
  output logic         key_done_o,
  output logic [511:0] key_hpow_o,
  output logic [127:0] key_last_key_o,
  // ina_gcm_hash, Check = 0 (a frame to seal)
  input  logic         hash_in_valid_i,
  input  logic [511:0] hash_in_data_i,
  input  logic         hash_in_last_i,
  input  logic [511:0] hash_in_hpow_i,
  input  logic         hash_in_enc_i,
  input  logic [7:0]   hash_in_user_i,
  output logic         hash_out_valid_o,
  output logic [127:0] hash_out_hash_o,
  output logic [7:0]   hash_out_user_o,
  // ina_gcm_check
  input  logic         chk_in_valid_i,
  input  logic [511:0] chk_in_data_i,
  input  logic         chk_in_last_i,
  input  logic [511:0] chk_in_hpow_i,
  input  logic [127:0] chk_in_last_key_i,
  input  logic         chk_in_enc_i,
  input  logic [7:0]   chk_in_user_i,
  output logic         chk_out_valid_o,
  output logic [127:0] chk_out_j0_o,
  output logic [127:0] chk_out_key_o,
  output logic [7:0]   chk_out_user_o,
  output logic         chk_busy_o,
  // ina_gcm_ctr
  input  logic         ctr_in_valid_i,
  input  logic [511:0] ctr_in_data_i,
  input  logic         ctr_in_enc_i,
  input  logic [15:0]  ctr_in_index_i,
  input  logic [127:0] ctr_in_j0_i,
  input  logic [127:0] ctr_in_key_i,
  input  logic [7:0]   ctr_in_user_i,
  output logic         ctr_out_valid_o,
  output logic [511:0] ctr_out_data_o,
  output logic [7:0]   ctr_out_user_o,
  output logic [3:0]   ctr_inflight_o,
  output logic         ctr_busy_o,
  // ina_gcm_pkg's S-boxes, both forms
  input  logic [7:0]   sbx_x_i,
  output logic [7:0]   sbx_table_o,
  output logic [7:0]   sbx_rom_o,
  output logic [7:0]   sbx_inv_table_o,
  output logic [7:0]   sbx_inv_rom_o
);
  assign sbx_table_o     = ina_gcm_pkg::sbox_table(sbx_x_i);
  assign sbx_rom_o       = ina_gcm_pkg::sbox_rom(sbx_x_i);
  assign sbx_inv_table_o = ina_gcm_pkg::inv_sbox_table(sbx_x_i);
  assign sbx_inv_rom_o   = ina_gcm_pkg::inv_sbox_rom(sbx_x_i);

  ina_aes128 #(.UserBits(8)) u_aes (
    .clk_i,
    .rst_ni,
    .in_valid_i (aes_in_valid_i),
    .in_block_i (aes_in_block_i),
    .in_key_i   (aes_in_key_i),
    .in_user_i  (aes_in_user_i),
    .out_valid_o(aes_out_valid_o),
    .out_block_o(aes_out_block_o),
    .out_key_o  (aes_out_key_o),
    .out_user_o (aes_out_user_o)
  );

  logic [127:0] unused_inv_key;
  ina_aes128 #(.Inverse(1'b1), .UserBits(8)) u_inv (
    .clk_i,
    .rst_ni,
    .in_valid_i (inv_in_valid_i),
    .in_block_i (inv_in_block_i),
    .in_key_i   (inv_in_last_key_i),
    .in_user_i  (inv_in_user_i),
    .out_valid_o(inv_out_valid_o),
    .out_block_o(inv_out_block_o),
    .out_key_o  (unused_inv_key),
    .out_user_o (inv_out_user_o)
  );

  ina_gcm_key u_key (
    .clk_i,
    .rst_ni,
    .start_i   (key_start_i),
    .key_i     (key_key_i),
    .busy_o    (key_busy_o),
    .done_o    (key_done_o),
    .hpow_o    (key_hpow_o),
    .last_key_o(key_last_key_o)
  );

  logic [127:0] unused_hash_tag;
  ina_gcm_hash #(.Check(1'b0), .UserBits(8)) u_hash (
    .clk_i,
    .rst_ni,
    .in_valid_i (hash_in_valid_i),
    .in_data_i  (hash_in_data_i),
    .in_last_i  (hash_in_last_i),
    .in_hpow_i  (hash_in_hpow_i),
    .in_enc_i   (hash_in_enc_i),
    .in_user_i  (hash_in_user_i),
    .out_valid_o(hash_out_valid_o),
    .out_hash_o (hash_out_hash_o),
    .out_tag_o  (unused_hash_tag),
    .out_user_o (hash_out_user_o)
  );

  ina_gcm_check #(.UserBits(8)) u_chk (
    .clk_i,
    .rst_ni,
    .in_valid_i   (chk_in_valid_i),
    .in_data_i    (chk_in_data_i),
    .in_last_i    (chk_in_last_i),
    .in_hpow_i    (chk_in_hpow_i),
    .in_last_key_i(chk_in_last_key_i),
    .in_enc_i     (chk_in_enc_i),
    .in_user_i    (chk_in_user_i),
    .out_valid_o  (chk_out_valid_o),
    .out_j0_o     (chk_out_j0_o),
    .out_key_o    (chk_out_key_o),
    .out_user_o   (chk_out_user_o),
    .busy_o       (chk_busy_o)
  );

  ina_gcm_ctr #(.UserBits(8)) u_ctr (
    .clk_i,
    .rst_ni,
    .in_valid_i (ctr_in_valid_i),
    .in_data_i  (ctr_in_data_i),
    .in_enc_i   (ctr_in_enc_i),
    .in_index_i (ctr_in_index_i),
    .in_j0_i    (ctr_in_j0_i),
    .in_key_i   (ctr_in_key_i),
    .in_user_i  (ctr_in_user_i),
    .out_valid_o(ctr_out_valid_o),
    .out_data_o (ctr_out_data_o),
    .out_user_o (ctr_out_user_o),
    .inflight_o (ctr_inflight_o),
    .busy_o     (ctr_busy_o)
  );

endmodule
