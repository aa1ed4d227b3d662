// AES-128 and GHASH as functions, for the AES-GCM blocks of keyed jobs (docs/security.md,
// docs/rtl/ina_aes128.md, docs/rtl/ina_gcm_hash.md): one AES round (forward and inverse), one step
// of the key schedule (forward and backward) and the GF(2^128) product of GCM. Each is pure
// combinational logic; the modules register between them.
//
// A 128-bit block is logic [127:0] with its first byte (byte 0 on the wire, or of the key) in bits
// [127:120]: the order of FIPS-197's input bytes and of SP 800-38D's bit strings (GCM's bit 0 is
// bit 127 here). The AES state byte s[r, c] is byte r + 4c of the block.
package ina_gcm_pkg;

  // The S-box and its inverse (FIPS-197, 5.1.1 and 5.3.2), byte x at bits [2047 - 8x -: 8]: packed
  // vectors, as yosys 0.23 does not read unpacked array parameters.
  localparam logic [2047:0] SBox =
      {256'h637c777bf26b6fc53001672bfed7ab76ca82c97dfa5947f0add4a2af9ca472c0,
       256'hb7fd9326363ff7cc34a5e5f171d8311504c723c31896059a071280e2eb27b275,
       256'h09832c1a1b6e5aa0523bd6b329e32f8453d100ed20fcb15b6acbbe394a4c58cf,
       256'hd0efaafb434d338545f9027f503c9fa851a3408f929d38f5bcb6da2110fff3d2,
       256'hcd0c13ec5f974417c4a77e3d645d197360814fdc222a908846eeb814de5e0bdb,
       256'he0323a0a4906245cc2d3ac629195e479e7c8376d8dd54ea96c56f4ea657aae08,
       256'hba78252e1ca6b4c6e8dd741f4bbd8b8a703eb5664803f60e613557b986c11d9e,
       256'he1f8981169d98e949b1e87e9ce5528df8ca1890dbfe6426841992d0fb054bb16};
  localparam logic [2047:0] InvSBox =
      {256'h52096ad53036a538bf40a39e81f3d7fb7ce339829b2fff87348e4344c4dee9cb,
       256'h547b9432a6c2233dee4c950b42fac34e082ea16628d924b2765ba2496d8bd125,
       256'h72f8f66486689816d4a45ccc5d65b6926c704850fdedb9da5e154657a78d9d84,
       256'h90d8ab008cbcd30af7e45805b8b34506d02c1e8fca3f0f02c1afbd0301138a6b,
       256'h3a9111414f67dcea97f2cfcef0b4e67396ac7422e7ad3585e2f937e81c75df6e,
       256'h47f11a711d29c5896fb7620eaa18be1bfc563e4bc6d279209adbc0fe78cd5af4,
       256'h1fdda8338807c731b11210592780ec5f60517fa919b54a0d2de57a9f93c99cef,
       256'ha0e03b4dae2af5b0c8ebbb3c83539961172b047eba77d626e169146355210c7d};

  function automatic logic [7:0] sbox(input logic [7:0] x);
    sbox = SBox[2047 - 8 * x -: 8];
  endfunction
  function automatic logic [7:0] inv_sbox(input logic [7:0] x);
    inv_sbox = InvSBox[2047 - 8 * x -: 8];
  endfunction

  // Byte i (0 .. 15) of a block.
  function automatic logic [7:0] byte_of(input logic [127:0] b, input int unsigned i);
    byte_of = b[127 - 8 * i -: 8];
  endfunction

  // x * {02} in GF(2^8) (FIPS-197, 4.2.1).
  function automatic logic [7:0] xtime(input logic [7:0] x);
    xtime = {x[6:0], 1'b0} ^ (x[7] ? 8'h1b : 8'h00);
  endfunction
  // x * c for the constants of MixColumns and InvMixColumns.
  function automatic logic [7:0] gmul8(input logic [7:0] x, input logic [3:0] c);
    logic [7:0] x2, x4, x8;
    x2 = xtime(x);
    x4 = xtime(x2);
    x8 = xtime(x4);
    gmul8 = (c[0] ? x : 8'h00) ^ (c[1] ? x2 : 8'h00) ^ (c[2] ? x4 : 8'h00) ^ (c[3] ? x8 : 8'h00);
  endfunction

  // The round constant of key-schedule step r (1 .. 10): {02}^(r-1).
  function automatic logic [7:0] round_const(input int unsigned r);
    logic [7:0] c;
    c = 8'h01;
    for (int unsigned i = 1; i < r; i++) c = xtime(c);
    round_const = c;
  endfunction

  // SubWord(RotWord(w)) ^ rcon << 24 (FIPS-197, 5.2).
  function automatic logic [31:0] key_word_t(input logic [31:0] w, input logic [7:0] rcon);
    key_word_t = {sbox(w[23:16]) ^ rcon, sbox(w[15:8]), sbox(w[7:0]), sbox(w[31:24])};
  endfunction

  // Round key r from round key r - 1 (rcon = round_const(r)).
  function automatic logic [127:0] aes_next_key(input logic [127:0] k, input logic [7:0] rcon);
    logic [31:0] w0, w1, w2, w3;
    w0 = k[127:96] ^ key_word_t(k[31:0], rcon);
    w1 = k[95:64] ^ w0;
    w2 = k[63:32] ^ w1;
    w3 = k[31:0] ^ w2;
    aes_next_key = {w0, w1, w2, w3};
  endfunction
  // Round key r - 1 from round key r (rcon = round_const(r)): the schedule run backwards.
  function automatic logic [127:0] aes_prev_key(input logic [127:0] k, input logic [7:0] rcon);
    logic [31:0] w1, w2, w3;
    w3 = k[31:0] ^ k[63:32];
    w2 = k[63:32] ^ k[95:64];
    w1 = k[95:64] ^ k[127:96];
    aes_prev_key = {k[127:96] ^ key_word_t(w3, rcon), w1, w2, w3};
  endfunction

  // One encryption round: SubBytes, ShiftRows, MixColumns (unless last), AddRoundKey.
  function automatic logic [127:0] aes_round(input logic [127:0] s, input logic [127:0] rk,
                                             input logic last);
    logic [7:0] t[16];
    logic [127:0] o;
    // SubBytes and ShiftRows: s'[r, c] = S(s[r, c + r mod 4]).
    for (int unsigned c = 0; c < 4; c++) begin
      for (int unsigned r = 0; r < 4; r++) t[r + 4 * c] = sbox(byte_of(s, r + 4 * ((c + r) % 4)));
    end
    for (int unsigned c = 0; c < 4; c++) begin
      logic [7:0] a0, a1, a2, a3;
      a0 = t[4 * c];
      a1 = t[4 * c + 1];
      a2 = t[4 * c + 2];
      a3 = t[4 * c + 3];
      if (last) begin
        o[127 - 32 * c -: 32] = {a0, a1, a2, a3};
      end else begin
        o[127 - 32 * c -: 32] = {xtime(a0) ^ xtime(a1) ^ a1 ^ a2 ^ a3,
                                 a0 ^ xtime(a1) ^ xtime(a2) ^ a2 ^ a3,
                                 a0 ^ a1 ^ xtime(a2) ^ xtime(a3) ^ a3,
                                 xtime(a0) ^ a0 ^ a1 ^ a2 ^ xtime(a3)};
      end
    end
    aes_round = o ^ rk;
  endfunction

  // One decryption round (FIPS-197, 5.3, the inverse cipher): InvShiftRows, InvSubBytes,
  // AddRoundKey, InvMixColumns (unless last).
  function automatic logic [127:0] aes_inv_round(input logic [127:0] s, input logic [127:0] rk,
                                                 input logic last);
    logic [7:0] t[16];
    logic [127:0] u, o;
    // InvShiftRows and InvSubBytes: s'[r, c + r mod 4] = S^-1(s[r, c]).
    for (int unsigned c = 0; c < 4; c++) begin
      for (int unsigned r = 0; r < 4; r++) begin
        t[r + 4 * ((c + r) % 4)] = inv_sbox(byte_of(s, r + 4 * c));
      end
    end
    for (int unsigned i = 0; i < 16; i++) u[127 - 8 * i -: 8] = t[i];
    u = u ^ rk;
    o = u;
    if (!last) begin
      for (int unsigned c = 0; c < 4; c++) begin
        logic [7:0] a0, a1, a2, a3;
        a0 = byte_of(u, 4 * c);
        a1 = byte_of(u, 4 * c + 1);
        a2 = byte_of(u, 4 * c + 2);
        a3 = byte_of(u, 4 * c + 3);
        o[127 - 32 * c -: 32] = {gmul8(a0, 4'he) ^ gmul8(a1, 4'hb) ^ gmul8(a2, 4'hd) ^ gmul8(a3, 4'h9),
                                 gmul8(a0, 4'h9) ^ gmul8(a1, 4'he) ^ gmul8(a2, 4'hb) ^ gmul8(a3, 4'hd),
                                 gmul8(a0, 4'hd) ^ gmul8(a1, 4'h9) ^ gmul8(a2, 4'he) ^ gmul8(a3, 4'hb),
                                 gmul8(a0, 4'hb) ^ gmul8(a1, 4'hd) ^ gmul8(a2, 4'h9) ^ gmul8(a3, 4'he)};
      end
    end
    aes_inv_round = o;
  endfunction

  // X * Y in GCM's GF(2^128) (SP 800-38D, algorithm 1): bit-reflected, R = 11100001 || 0^120.
  function automatic logic [127:0] gf128_mul(input logic [127:0] x, input logic [127:0] y);
    logic [127:0] z, v;
    z = '0;
    v = y;
    for (int unsigned i = 0; i < 128; i++) begin
      if (x[127 - i]) z = z ^ v;
      v = {1'b0, v[127:1]} ^ (v[0] ? {8'he1, 120'h0} : 128'h0);
    end
    gf128_mul = z;
  endfunction

endpackage
