// AES-128 and GHASH as tasks, for the AES-GCM blocks of keyed jobs (docs/security.md,
// docs/rtl/ina_aes128.md, docs/rtl/ina_gcm_hash.md): one AES round (forward and inverse), one step
// of the key schedule (forward and backward) and the GF(2^128) product of GCM. Each is pure
// combinational logic; the modules register between them.
//
// Tasks with an output, not functions, for the simulation model's speed: Verilator (5.006) inlines
// every function at each call and zeroes its locals (and copies of its wide arguments) on every
// clock edge, whether the call runs or not (in ina_core's model about 48,000 bits per edge, also
// on CRC-only traffic, which never calls them: docs/rtl/benchmarks.md). A task marked no_inline_task stays a C++ function of its own
// whose locals are set up only when it is called. So these tasks use no function with a wide
// argument, declare their loop variables at the top, and are called only where a block loads. For
// synthesis a task is the same logic as the function.
//
// A 128-bit block is logic [127:0] with its first byte (byte 0 on the wire, or of the key) in bits
// [127:120]: the order of FIPS-197's input bytes and of SP 800-38D's bit strings (GCM's bit 0 is
// bit 127 here). The AES state byte s[r, c] is byte r + 4c of the block.
package ina_gcm_pkg;

  // The S-box and its inverse (FIPS-197, 5.1.1 and 5.3.2), two ways with the same bytes:
  // - *_table: a variable part-select of a packed 2048-bit constant (byte x at bits
  //   [2047 - 8x -: 8]; packed, as yosys 0.23 reads no unpacked array parameters): what the
  //   simulation models use (a table lookup in Verilator's C++; with the case form instead the
  //   ina_gcm_tb model took 5.7 minutes to build here, beside two fuzzers, against ~20 s);
  // - *_rom: a case statement, a 256-byte ROM that synthesis maps to LUTs (yosys 0.23 ran out of
  //   memory on the part-selects, 20 per AES stage; docs/rtl/synthesis.md).
  // sbox / inv_sbox pick the one of the tool (SYNTHESIS: yosys defines it, Verilator does not);
  // rtl_gcm_test checks that the two agree on all 256 bytes, and the table against libcrypto.
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

  function automatic logic [7:0] sbox_table(input logic [7:0] x);
    sbox_table = SBox[2047 - 8 * x -: 8];
  endfunction
  function automatic logic [7:0] inv_sbox_table(input logic [7:0] x);
    inv_sbox_table = InvSBox[2047 - 8 * x -: 8];
  endfunction

  function automatic logic [7:0] sbox_rom(input logic [7:0] x);
    unique case (x)
      8'h00: sbox_rom = 8'h63;
      8'h01: sbox_rom = 8'h7c;
      8'h02: sbox_rom = 8'h77;
      8'h03: sbox_rom = 8'h7b;
      8'h04: sbox_rom = 8'hf2;
      8'h05: sbox_rom = 8'h6b;
      8'h06: sbox_rom = 8'h6f;
      8'h07: sbox_rom = 8'hc5;
      8'h08: sbox_rom = 8'h30;
      8'h09: sbox_rom = 8'h01;
      8'h0a: sbox_rom = 8'h67;
      8'h0b: sbox_rom = 8'h2b;
      8'h0c: sbox_rom = 8'hfe;
      8'h0d: sbox_rom = 8'hd7;
      8'h0e: sbox_rom = 8'hab;
      8'h0f: sbox_rom = 8'h76;
      8'h10: sbox_rom = 8'hca;
      8'h11: sbox_rom = 8'h82;
      8'h12: sbox_rom = 8'hc9;
      8'h13: sbox_rom = 8'h7d;
      8'h14: sbox_rom = 8'hfa;
      8'h15: sbox_rom = 8'h59;
      8'h16: sbox_rom = 8'h47;
      8'h17: sbox_rom = 8'hf0;
      8'h18: sbox_rom = 8'had;
      8'h19: sbox_rom = 8'hd4;
      8'h1a: sbox_rom = 8'ha2;
      8'h1b: sbox_rom = 8'haf;
      8'h1c: sbox_rom = 8'h9c;
      8'h1d: sbox_rom = 8'ha4;
      8'h1e: sbox_rom = 8'h72;
      8'h1f: sbox_rom = 8'hc0;
      8'h20: sbox_rom = 8'hb7;
      8'h21: sbox_rom = 8'hfd;
      8'h22: sbox_rom = 8'h93;
      8'h23: sbox_rom = 8'h26;
      8'h24: sbox_rom = 8'h36;
      8'h25: sbox_rom = 8'h3f;
      8'h26: sbox_rom = 8'hf7;
      8'h27: sbox_rom = 8'hcc;
      8'h28: sbox_rom = 8'h34;
      8'h29: sbox_rom = 8'ha5;
      8'h2a: sbox_rom = 8'he5;
      8'h2b: sbox_rom = 8'hf1;
      8'h2c: sbox_rom = 8'h71;
      8'h2d: sbox_rom = 8'hd8;
      8'h2e: sbox_rom = 8'h31;
      8'h2f: sbox_rom = 8'h15;
      8'h30: sbox_rom = 8'h04;
      8'h31: sbox_rom = 8'hc7;
      8'h32: sbox_rom = 8'h23;
      8'h33: sbox_rom = 8'hc3;
      8'h34: sbox_rom = 8'h18;
      8'h35: sbox_rom = 8'h96;
      8'h36: sbox_rom = 8'h05;
      8'h37: sbox_rom = 8'h9a;
      8'h38: sbox_rom = 8'h07;
      8'h39: sbox_rom = 8'h12;
      8'h3a: sbox_rom = 8'h80;
      8'h3b: sbox_rom = 8'he2;
      8'h3c: sbox_rom = 8'heb;
      8'h3d: sbox_rom = 8'h27;
      8'h3e: sbox_rom = 8'hb2;
      8'h3f: sbox_rom = 8'h75;
      8'h40: sbox_rom = 8'h09;
      8'h41: sbox_rom = 8'h83;
      8'h42: sbox_rom = 8'h2c;
      8'h43: sbox_rom = 8'h1a;
      8'h44: sbox_rom = 8'h1b;
      8'h45: sbox_rom = 8'h6e;
      8'h46: sbox_rom = 8'h5a;
      8'h47: sbox_rom = 8'ha0;
      8'h48: sbox_rom = 8'h52;
      8'h49: sbox_rom = 8'h3b;
      8'h4a: sbox_rom = 8'hd6;
      8'h4b: sbox_rom = 8'hb3;
      8'h4c: sbox_rom = 8'h29;
      8'h4d: sbox_rom = 8'he3;
      8'h4e: sbox_rom = 8'h2f;
      8'h4f: sbox_rom = 8'h84;
      8'h50: sbox_rom = 8'h53;
      8'h51: sbox_rom = 8'hd1;
      8'h52: sbox_rom = 8'h00;
      8'h53: sbox_rom = 8'hed;
      8'h54: sbox_rom = 8'h20;
      8'h55: sbox_rom = 8'hfc;
      8'h56: sbox_rom = 8'hb1;
      8'h57: sbox_rom = 8'h5b;
      8'h58: sbox_rom = 8'h6a;
      8'h59: sbox_rom = 8'hcb;
      8'h5a: sbox_rom = 8'hbe;
      8'h5b: sbox_rom = 8'h39;
      8'h5c: sbox_rom = 8'h4a;
      8'h5d: sbox_rom = 8'h4c;
      8'h5e: sbox_rom = 8'h58;
      8'h5f: sbox_rom = 8'hcf;
      8'h60: sbox_rom = 8'hd0;
      8'h61: sbox_rom = 8'hef;
      8'h62: sbox_rom = 8'haa;
      8'h63: sbox_rom = 8'hfb;
      8'h64: sbox_rom = 8'h43;
      8'h65: sbox_rom = 8'h4d;
      8'h66: sbox_rom = 8'h33;
      8'h67: sbox_rom = 8'h85;
      8'h68: sbox_rom = 8'h45;
      8'h69: sbox_rom = 8'hf9;
      8'h6a: sbox_rom = 8'h02;
      8'h6b: sbox_rom = 8'h7f;
      8'h6c: sbox_rom = 8'h50;
      8'h6d: sbox_rom = 8'h3c;
      8'h6e: sbox_rom = 8'h9f;
      8'h6f: sbox_rom = 8'ha8;
      8'h70: sbox_rom = 8'h51;
      8'h71: sbox_rom = 8'ha3;
      8'h72: sbox_rom = 8'h40;
      8'h73: sbox_rom = 8'h8f;
      8'h74: sbox_rom = 8'h92;
      8'h75: sbox_rom = 8'h9d;
      8'h76: sbox_rom = 8'h38;
      8'h77: sbox_rom = 8'hf5;
      8'h78: sbox_rom = 8'hbc;
      8'h79: sbox_rom = 8'hb6;
      8'h7a: sbox_rom = 8'hda;
      8'h7b: sbox_rom = 8'h21;
      8'h7c: sbox_rom = 8'h10;
      8'h7d: sbox_rom = 8'hff;
      8'h7e: sbox_rom = 8'hf3;
      8'h7f: sbox_rom = 8'hd2;
      8'h80: sbox_rom = 8'hcd;
      8'h81: sbox_rom = 8'h0c;
      8'h82: sbox_rom = 8'h13;
      8'h83: sbox_rom = 8'hec;
      8'h84: sbox_rom = 8'h5f;
      8'h85: sbox_rom = 8'h97;
      8'h86: sbox_rom = 8'h44;
      8'h87: sbox_rom = 8'h17;
      8'h88: sbox_rom = 8'hc4;
      8'h89: sbox_rom = 8'ha7;
      8'h8a: sbox_rom = 8'h7e;
      8'h8b: sbox_rom = 8'h3d;
      8'h8c: sbox_rom = 8'h64;
      8'h8d: sbox_rom = 8'h5d;
      8'h8e: sbox_rom = 8'h19;
      8'h8f: sbox_rom = 8'h73;
      8'h90: sbox_rom = 8'h60;
      8'h91: sbox_rom = 8'h81;
      8'h92: sbox_rom = 8'h4f;
      8'h93: sbox_rom = 8'hdc;
      8'h94: sbox_rom = 8'h22;
      8'h95: sbox_rom = 8'h2a;
      8'h96: sbox_rom = 8'h90;
      8'h97: sbox_rom = 8'h88;
      8'h98: sbox_rom = 8'h46;
      8'h99: sbox_rom = 8'hee;
      8'h9a: sbox_rom = 8'hb8;
      8'h9b: sbox_rom = 8'h14;
      8'h9c: sbox_rom = 8'hde;
      8'h9d: sbox_rom = 8'h5e;
      8'h9e: sbox_rom = 8'h0b;
      8'h9f: sbox_rom = 8'hdb;
      8'ha0: sbox_rom = 8'he0;
      8'ha1: sbox_rom = 8'h32;
      8'ha2: sbox_rom = 8'h3a;
      8'ha3: sbox_rom = 8'h0a;
      8'ha4: sbox_rom = 8'h49;
      8'ha5: sbox_rom = 8'h06;
      8'ha6: sbox_rom = 8'h24;
      8'ha7: sbox_rom = 8'h5c;
      8'ha8: sbox_rom = 8'hc2;
      8'ha9: sbox_rom = 8'hd3;
      8'haa: sbox_rom = 8'hac;
      8'hab: sbox_rom = 8'h62;
      8'hac: sbox_rom = 8'h91;
      8'had: sbox_rom = 8'h95;
      8'hae: sbox_rom = 8'he4;
      8'haf: sbox_rom = 8'h79;
      8'hb0: sbox_rom = 8'he7;
      8'hb1: sbox_rom = 8'hc8;
      8'hb2: sbox_rom = 8'h37;
      8'hb3: sbox_rom = 8'h6d;
      8'hb4: sbox_rom = 8'h8d;
      8'hb5: sbox_rom = 8'hd5;
      8'hb6: sbox_rom = 8'h4e;
      8'hb7: sbox_rom = 8'ha9;
      8'hb8: sbox_rom = 8'h6c;
      8'hb9: sbox_rom = 8'h56;
      8'hba: sbox_rom = 8'hf4;
      8'hbb: sbox_rom = 8'hea;
      8'hbc: sbox_rom = 8'h65;
      8'hbd: sbox_rom = 8'h7a;
      8'hbe: sbox_rom = 8'hae;
      8'hbf: sbox_rom = 8'h08;
      8'hc0: sbox_rom = 8'hba;
      8'hc1: sbox_rom = 8'h78;
      8'hc2: sbox_rom = 8'h25;
      8'hc3: sbox_rom = 8'h2e;
      8'hc4: sbox_rom = 8'h1c;
      8'hc5: sbox_rom = 8'ha6;
      8'hc6: sbox_rom = 8'hb4;
      8'hc7: sbox_rom = 8'hc6;
      8'hc8: sbox_rom = 8'he8;
      8'hc9: sbox_rom = 8'hdd;
      8'hca: sbox_rom = 8'h74;
      8'hcb: sbox_rom = 8'h1f;
      8'hcc: sbox_rom = 8'h4b;
      8'hcd: sbox_rom = 8'hbd;
      8'hce: sbox_rom = 8'h8b;
      8'hcf: sbox_rom = 8'h8a;
      8'hd0: sbox_rom = 8'h70;
      8'hd1: sbox_rom = 8'h3e;
      8'hd2: sbox_rom = 8'hb5;
      8'hd3: sbox_rom = 8'h66;
      8'hd4: sbox_rom = 8'h48;
      8'hd5: sbox_rom = 8'h03;
      8'hd6: sbox_rom = 8'hf6;
      8'hd7: sbox_rom = 8'h0e;
      8'hd8: sbox_rom = 8'h61;
      8'hd9: sbox_rom = 8'h35;
      8'hda: sbox_rom = 8'h57;
      8'hdb: sbox_rom = 8'hb9;
      8'hdc: sbox_rom = 8'h86;
      8'hdd: sbox_rom = 8'hc1;
      8'hde: sbox_rom = 8'h1d;
      8'hdf: sbox_rom = 8'h9e;
      8'he0: sbox_rom = 8'he1;
      8'he1: sbox_rom = 8'hf8;
      8'he2: sbox_rom = 8'h98;
      8'he3: sbox_rom = 8'h11;
      8'he4: sbox_rom = 8'h69;
      8'he5: sbox_rom = 8'hd9;
      8'he6: sbox_rom = 8'h8e;
      8'he7: sbox_rom = 8'h94;
      8'he8: sbox_rom = 8'h9b;
      8'he9: sbox_rom = 8'h1e;
      8'hea: sbox_rom = 8'h87;
      8'heb: sbox_rom = 8'he9;
      8'hec: sbox_rom = 8'hce;
      8'hed: sbox_rom = 8'h55;
      8'hee: sbox_rom = 8'h28;
      8'hef: sbox_rom = 8'hdf;
      8'hf0: sbox_rom = 8'h8c;
      8'hf1: sbox_rom = 8'ha1;
      8'hf2: sbox_rom = 8'h89;
      8'hf3: sbox_rom = 8'h0d;
      8'hf4: sbox_rom = 8'hbf;
      8'hf5: sbox_rom = 8'he6;
      8'hf6: sbox_rom = 8'h42;
      8'hf7: sbox_rom = 8'h68;
      8'hf8: sbox_rom = 8'h41;
      8'hf9: sbox_rom = 8'h99;
      8'hfa: sbox_rom = 8'h2d;
      8'hfb: sbox_rom = 8'h0f;
      8'hfc: sbox_rom = 8'hb0;
      8'hfd: sbox_rom = 8'h54;
      8'hfe: sbox_rom = 8'hbb;
      8'hff: sbox_rom = 8'h16;
      default: sbox_rom = 8'h00;
    endcase
  endfunction
  function automatic logic [7:0] inv_sbox_rom(input logic [7:0] x);
    unique case (x)
      8'h00: inv_sbox_rom = 8'h52;
      8'h01: inv_sbox_rom = 8'h09;
      8'h02: inv_sbox_rom = 8'h6a;
      8'h03: inv_sbox_rom = 8'hd5;
      8'h04: inv_sbox_rom = 8'h30;
      8'h05: inv_sbox_rom = 8'h36;
      8'h06: inv_sbox_rom = 8'ha5;
      8'h07: inv_sbox_rom = 8'h38;
      8'h08: inv_sbox_rom = 8'hbf;
      8'h09: inv_sbox_rom = 8'h40;
      8'h0a: inv_sbox_rom = 8'ha3;
      8'h0b: inv_sbox_rom = 8'h9e;
      8'h0c: inv_sbox_rom = 8'h81;
      8'h0d: inv_sbox_rom = 8'hf3;
      8'h0e: inv_sbox_rom = 8'hd7;
      8'h0f: inv_sbox_rom = 8'hfb;
      8'h10: inv_sbox_rom = 8'h7c;
      8'h11: inv_sbox_rom = 8'he3;
      8'h12: inv_sbox_rom = 8'h39;
      8'h13: inv_sbox_rom = 8'h82;
      8'h14: inv_sbox_rom = 8'h9b;
      8'h15: inv_sbox_rom = 8'h2f;
      8'h16: inv_sbox_rom = 8'hff;
      8'h17: inv_sbox_rom = 8'h87;
      8'h18: inv_sbox_rom = 8'h34;
      8'h19: inv_sbox_rom = 8'h8e;
      8'h1a: inv_sbox_rom = 8'h43;
      8'h1b: inv_sbox_rom = 8'h44;
      8'h1c: inv_sbox_rom = 8'hc4;
      8'h1d: inv_sbox_rom = 8'hde;
      8'h1e: inv_sbox_rom = 8'he9;
      8'h1f: inv_sbox_rom = 8'hcb;
      8'h20: inv_sbox_rom = 8'h54;
      8'h21: inv_sbox_rom = 8'h7b;
      8'h22: inv_sbox_rom = 8'h94;
      8'h23: inv_sbox_rom = 8'h32;
      8'h24: inv_sbox_rom = 8'ha6;
      8'h25: inv_sbox_rom = 8'hc2;
      8'h26: inv_sbox_rom = 8'h23;
      8'h27: inv_sbox_rom = 8'h3d;
      8'h28: inv_sbox_rom = 8'hee;
      8'h29: inv_sbox_rom = 8'h4c;
      8'h2a: inv_sbox_rom = 8'h95;
      8'h2b: inv_sbox_rom = 8'h0b;
      8'h2c: inv_sbox_rom = 8'h42;
      8'h2d: inv_sbox_rom = 8'hfa;
      8'h2e: inv_sbox_rom = 8'hc3;
      8'h2f: inv_sbox_rom = 8'h4e;
      8'h30: inv_sbox_rom = 8'h08;
      8'h31: inv_sbox_rom = 8'h2e;
      8'h32: inv_sbox_rom = 8'ha1;
      8'h33: inv_sbox_rom = 8'h66;
      8'h34: inv_sbox_rom = 8'h28;
      8'h35: inv_sbox_rom = 8'hd9;
      8'h36: inv_sbox_rom = 8'h24;
      8'h37: inv_sbox_rom = 8'hb2;
      8'h38: inv_sbox_rom = 8'h76;
      8'h39: inv_sbox_rom = 8'h5b;
      8'h3a: inv_sbox_rom = 8'ha2;
      8'h3b: inv_sbox_rom = 8'h49;
      8'h3c: inv_sbox_rom = 8'h6d;
      8'h3d: inv_sbox_rom = 8'h8b;
      8'h3e: inv_sbox_rom = 8'hd1;
      8'h3f: inv_sbox_rom = 8'h25;
      8'h40: inv_sbox_rom = 8'h72;
      8'h41: inv_sbox_rom = 8'hf8;
      8'h42: inv_sbox_rom = 8'hf6;
      8'h43: inv_sbox_rom = 8'h64;
      8'h44: inv_sbox_rom = 8'h86;
      8'h45: inv_sbox_rom = 8'h68;
      8'h46: inv_sbox_rom = 8'h98;
      8'h47: inv_sbox_rom = 8'h16;
      8'h48: inv_sbox_rom = 8'hd4;
      8'h49: inv_sbox_rom = 8'ha4;
      8'h4a: inv_sbox_rom = 8'h5c;
      8'h4b: inv_sbox_rom = 8'hcc;
      8'h4c: inv_sbox_rom = 8'h5d;
      8'h4d: inv_sbox_rom = 8'h65;
      8'h4e: inv_sbox_rom = 8'hb6;
      8'h4f: inv_sbox_rom = 8'h92;
      8'h50: inv_sbox_rom = 8'h6c;
      8'h51: inv_sbox_rom = 8'h70;
      8'h52: inv_sbox_rom = 8'h48;
      8'h53: inv_sbox_rom = 8'h50;
      8'h54: inv_sbox_rom = 8'hfd;
      8'h55: inv_sbox_rom = 8'hed;
      8'h56: inv_sbox_rom = 8'hb9;
      8'h57: inv_sbox_rom = 8'hda;
      8'h58: inv_sbox_rom = 8'h5e;
      8'h59: inv_sbox_rom = 8'h15;
      8'h5a: inv_sbox_rom = 8'h46;
      8'h5b: inv_sbox_rom = 8'h57;
      8'h5c: inv_sbox_rom = 8'ha7;
      8'h5d: inv_sbox_rom = 8'h8d;
      8'h5e: inv_sbox_rom = 8'h9d;
      8'h5f: inv_sbox_rom = 8'h84;
      8'h60: inv_sbox_rom = 8'h90;
      8'h61: inv_sbox_rom = 8'hd8;
      8'h62: inv_sbox_rom = 8'hab;
      8'h63: inv_sbox_rom = 8'h00;
      8'h64: inv_sbox_rom = 8'h8c;
      8'h65: inv_sbox_rom = 8'hbc;
      8'h66: inv_sbox_rom = 8'hd3;
      8'h67: inv_sbox_rom = 8'h0a;
      8'h68: inv_sbox_rom = 8'hf7;
      8'h69: inv_sbox_rom = 8'he4;
      8'h6a: inv_sbox_rom = 8'h58;
      8'h6b: inv_sbox_rom = 8'h05;
      8'h6c: inv_sbox_rom = 8'hb8;
      8'h6d: inv_sbox_rom = 8'hb3;
      8'h6e: inv_sbox_rom = 8'h45;
      8'h6f: inv_sbox_rom = 8'h06;
      8'h70: inv_sbox_rom = 8'hd0;
      8'h71: inv_sbox_rom = 8'h2c;
      8'h72: inv_sbox_rom = 8'h1e;
      8'h73: inv_sbox_rom = 8'h8f;
      8'h74: inv_sbox_rom = 8'hca;
      8'h75: inv_sbox_rom = 8'h3f;
      8'h76: inv_sbox_rom = 8'h0f;
      8'h77: inv_sbox_rom = 8'h02;
      8'h78: inv_sbox_rom = 8'hc1;
      8'h79: inv_sbox_rom = 8'haf;
      8'h7a: inv_sbox_rom = 8'hbd;
      8'h7b: inv_sbox_rom = 8'h03;
      8'h7c: inv_sbox_rom = 8'h01;
      8'h7d: inv_sbox_rom = 8'h13;
      8'h7e: inv_sbox_rom = 8'h8a;
      8'h7f: inv_sbox_rom = 8'h6b;
      8'h80: inv_sbox_rom = 8'h3a;
      8'h81: inv_sbox_rom = 8'h91;
      8'h82: inv_sbox_rom = 8'h11;
      8'h83: inv_sbox_rom = 8'h41;
      8'h84: inv_sbox_rom = 8'h4f;
      8'h85: inv_sbox_rom = 8'h67;
      8'h86: inv_sbox_rom = 8'hdc;
      8'h87: inv_sbox_rom = 8'hea;
      8'h88: inv_sbox_rom = 8'h97;
      8'h89: inv_sbox_rom = 8'hf2;
      8'h8a: inv_sbox_rom = 8'hcf;
      8'h8b: inv_sbox_rom = 8'hce;
      8'h8c: inv_sbox_rom = 8'hf0;
      8'h8d: inv_sbox_rom = 8'hb4;
      8'h8e: inv_sbox_rom = 8'he6;
      8'h8f: inv_sbox_rom = 8'h73;
      8'h90: inv_sbox_rom = 8'h96;
      8'h91: inv_sbox_rom = 8'hac;
      8'h92: inv_sbox_rom = 8'h74;
      8'h93: inv_sbox_rom = 8'h22;
      8'h94: inv_sbox_rom = 8'he7;
      8'h95: inv_sbox_rom = 8'had;
      8'h96: inv_sbox_rom = 8'h35;
      8'h97: inv_sbox_rom = 8'h85;
      8'h98: inv_sbox_rom = 8'he2;
      8'h99: inv_sbox_rom = 8'hf9;
      8'h9a: inv_sbox_rom = 8'h37;
      8'h9b: inv_sbox_rom = 8'he8;
      8'h9c: inv_sbox_rom = 8'h1c;
      8'h9d: inv_sbox_rom = 8'h75;
      8'h9e: inv_sbox_rom = 8'hdf;
      8'h9f: inv_sbox_rom = 8'h6e;
      8'ha0: inv_sbox_rom = 8'h47;
      8'ha1: inv_sbox_rom = 8'hf1;
      8'ha2: inv_sbox_rom = 8'h1a;
      8'ha3: inv_sbox_rom = 8'h71;
      8'ha4: inv_sbox_rom = 8'h1d;
      8'ha5: inv_sbox_rom = 8'h29;
      8'ha6: inv_sbox_rom = 8'hc5;
      8'ha7: inv_sbox_rom = 8'h89;
      8'ha8: inv_sbox_rom = 8'h6f;
      8'ha9: inv_sbox_rom = 8'hb7;
      8'haa: inv_sbox_rom = 8'h62;
      8'hab: inv_sbox_rom = 8'h0e;
      8'hac: inv_sbox_rom = 8'haa;
      8'had: inv_sbox_rom = 8'h18;
      8'hae: inv_sbox_rom = 8'hbe;
      8'haf: inv_sbox_rom = 8'h1b;
      8'hb0: inv_sbox_rom = 8'hfc;
      8'hb1: inv_sbox_rom = 8'h56;
      8'hb2: inv_sbox_rom = 8'h3e;
      8'hb3: inv_sbox_rom = 8'h4b;
      8'hb4: inv_sbox_rom = 8'hc6;
      8'hb5: inv_sbox_rom = 8'hd2;
      8'hb6: inv_sbox_rom = 8'h79;
      8'hb7: inv_sbox_rom = 8'h20;
      8'hb8: inv_sbox_rom = 8'h9a;
      8'hb9: inv_sbox_rom = 8'hdb;
      8'hba: inv_sbox_rom = 8'hc0;
      8'hbb: inv_sbox_rom = 8'hfe;
      8'hbc: inv_sbox_rom = 8'h78;
      8'hbd: inv_sbox_rom = 8'hcd;
      8'hbe: inv_sbox_rom = 8'h5a;
      8'hbf: inv_sbox_rom = 8'hf4;
      8'hc0: inv_sbox_rom = 8'h1f;
      8'hc1: inv_sbox_rom = 8'hdd;
      8'hc2: inv_sbox_rom = 8'ha8;
      8'hc3: inv_sbox_rom = 8'h33;
      8'hc4: inv_sbox_rom = 8'h88;
      8'hc5: inv_sbox_rom = 8'h07;
      8'hc6: inv_sbox_rom = 8'hc7;
      8'hc7: inv_sbox_rom = 8'h31;
      8'hc8: inv_sbox_rom = 8'hb1;
      8'hc9: inv_sbox_rom = 8'h12;
      8'hca: inv_sbox_rom = 8'h10;
      8'hcb: inv_sbox_rom = 8'h59;
      8'hcc: inv_sbox_rom = 8'h27;
      8'hcd: inv_sbox_rom = 8'h80;
      8'hce: inv_sbox_rom = 8'hec;
      8'hcf: inv_sbox_rom = 8'h5f;
      8'hd0: inv_sbox_rom = 8'h60;
      8'hd1: inv_sbox_rom = 8'h51;
      8'hd2: inv_sbox_rom = 8'h7f;
      8'hd3: inv_sbox_rom = 8'ha9;
      8'hd4: inv_sbox_rom = 8'h19;
      8'hd5: inv_sbox_rom = 8'hb5;
      8'hd6: inv_sbox_rom = 8'h4a;
      8'hd7: inv_sbox_rom = 8'h0d;
      8'hd8: inv_sbox_rom = 8'h2d;
      8'hd9: inv_sbox_rom = 8'he5;
      8'hda: inv_sbox_rom = 8'h7a;
      8'hdb: inv_sbox_rom = 8'h9f;
      8'hdc: inv_sbox_rom = 8'h93;
      8'hdd: inv_sbox_rom = 8'hc9;
      8'hde: inv_sbox_rom = 8'h9c;
      8'hdf: inv_sbox_rom = 8'hef;
      8'he0: inv_sbox_rom = 8'ha0;
      8'he1: inv_sbox_rom = 8'he0;
      8'he2: inv_sbox_rom = 8'h3b;
      8'he3: inv_sbox_rom = 8'h4d;
      8'he4: inv_sbox_rom = 8'hae;
      8'he5: inv_sbox_rom = 8'h2a;
      8'he6: inv_sbox_rom = 8'hf5;
      8'he7: inv_sbox_rom = 8'hb0;
      8'he8: inv_sbox_rom = 8'hc8;
      8'he9: inv_sbox_rom = 8'heb;
      8'hea: inv_sbox_rom = 8'hbb;
      8'heb: inv_sbox_rom = 8'h3c;
      8'hec: inv_sbox_rom = 8'h83;
      8'hed: inv_sbox_rom = 8'h53;
      8'hee: inv_sbox_rom = 8'h99;
      8'hef: inv_sbox_rom = 8'h61;
      8'hf0: inv_sbox_rom = 8'h17;
      8'hf1: inv_sbox_rom = 8'h2b;
      8'hf2: inv_sbox_rom = 8'h04;
      8'hf3: inv_sbox_rom = 8'h7e;
      8'hf4: inv_sbox_rom = 8'hba;
      8'hf5: inv_sbox_rom = 8'h77;
      8'hf6: inv_sbox_rom = 8'hd6;
      8'hf7: inv_sbox_rom = 8'h26;
      8'hf8: inv_sbox_rom = 8'he1;
      8'hf9: inv_sbox_rom = 8'h69;
      8'hfa: inv_sbox_rom = 8'h14;
      8'hfb: inv_sbox_rom = 8'h63;
      8'hfc: inv_sbox_rom = 8'h55;
      8'hfd: inv_sbox_rom = 8'h21;
      8'hfe: inv_sbox_rom = 8'h0c;
      8'hff: inv_sbox_rom = 8'h7d;
      default: inv_sbox_rom = 8'h00;
    endcase
  endfunction

  function automatic logic [7:0] sbox(input logic [7:0] x);
`ifdef SYNTHESIS
    sbox = sbox_rom(x);
`else
    sbox = sbox_table(x);
`endif
  endfunction
  function automatic logic [7:0] inv_sbox(input logic [7:0] x);
`ifdef SYNTHESIS
    inv_sbox = inv_sbox_rom(x);
`else
    inv_sbox = inv_sbox_table(x);
`endif
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
  task automatic aes_next_key(input logic [127:0] k, input logic [7:0] rcon,
                              output logic [127:0] o);
    /*verilator no_inline_task*/
    logic [31:0] w0, w1, w2, w3;
    w0 = k[127:96] ^ key_word_t(k[31:0], rcon);
    w1 = k[95:64] ^ w0;
    w2 = k[63:32] ^ w1;
    w3 = k[31:0] ^ w2;
    o = {w0, w1, w2, w3};
  endtask
  // Round key r - 1 from round key r (rcon = round_const(r)): the schedule run backwards.
  task automatic aes_prev_key(input logic [127:0] k, input logic [7:0] rcon,
                              output logic [127:0] o);
    /*verilator no_inline_task*/
    logic [31:0] w1, w2, w3;
    w3 = k[31:0] ^ k[63:32];
    w2 = k[63:32] ^ k[95:64];
    w1 = k[95:64] ^ k[127:96];
    o = {k[127:96] ^ key_word_t(w3, rcon), w1, w2, w3};
  endtask

  // One encryption round: SubBytes, ShiftRows, MixColumns (unless last), AddRoundKey.
  task automatic aes_round(input logic [127:0] s, input logic [127:0] rk, input logic last,
                           output logic [127:0] o);
    /*verilator no_inline_task*/
    logic [7:0] t[16];
    logic [7:0] a0, a1, a2, a3;
    int unsigned c, r;
    // SubBytes and ShiftRows: s'[r, c] = S(s[r, c + r mod 4]) (state byte r + 4c).
    for (c = 0; c < 4; c++) begin
      for (r = 0; r < 4; r++) t[r + 4 * c] = sbox(s[127 - 8 * (r + 4 * ((c + r) % 4)) -: 8]);
    end
    for (c = 0; c < 4; c++) begin
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
    o = o ^ rk;
  endtask

  // One decryption round (FIPS-197, 5.3, the inverse cipher): InvShiftRows, InvSubBytes,
  // AddRoundKey, InvMixColumns (unless last).
  task automatic aes_inv_round(input logic [127:0] s, input logic [127:0] rk, input logic last,
                               output logic [127:0] o);
    /*verilator no_inline_task*/
    logic [7:0] t[16];
    logic [127:0] u;
    logic [7:0] a0, a1, a2, a3;
    int unsigned c, r, i;
    // InvShiftRows and InvSubBytes: s'[r, c + r mod 4] = S^-1(s[r, c]).
    for (c = 0; c < 4; c++) begin
      for (r = 0; r < 4; r++) t[r + 4 * ((c + r) % 4)] = inv_sbox(s[127 - 8 * (r + 4 * c) -: 8]);
    end
    for (i = 0; i < 16; i++) u[127 - 8 * i -: 8] = t[i];
    u = u ^ rk;
    o = u;
    if (!last) begin
      for (c = 0; c < 4; c++) begin
        a0 = u[127 - 32 * c -: 8];
        a1 = u[119 - 32 * c -: 8];
        a2 = u[111 - 32 * c -: 8];
        a3 = u[103 - 32 * c -: 8];
        o[127 - 32 * c -: 32] = {gmul8(a0, 4'he) ^ gmul8(a1, 4'hb) ^ gmul8(a2, 4'hd) ^ gmul8(a3, 4'h9),
                                 gmul8(a0, 4'h9) ^ gmul8(a1, 4'he) ^ gmul8(a2, 4'hb) ^ gmul8(a3, 4'hd),
                                 gmul8(a0, 4'hd) ^ gmul8(a1, 4'h9) ^ gmul8(a2, 4'he) ^ gmul8(a3, 4'hb),
                                 gmul8(a0, 4'hb) ^ gmul8(a1, 4'hd) ^ gmul8(a2, 4'h9) ^ gmul8(a3, 4'he)};
      end
    end
  endtask

  // X * Y in GCM's GF(2^128) (SP 800-38D, algorithm 1): bit-reflected, R = 11100001 || 0^120.
  task automatic gf128_mul(input logic [127:0] x, input logic [127:0] y, output logic [127:0] z);
    /*verilator no_inline_task*/
    logic [127:0] v;
    int unsigned i;
    z = '0;
    v = y;
    // (Masks rather than branches: a simulator's branch on each bit of x mispredicts half the
    // time.)
    for (i = 0; i < 128; i++) begin
      z = z ^ (v & {128{x[127 - i]}});
      v = {1'b0, v[127:1]} ^ ({8'he1, 120'h0} & {128{v[0]}});
    end
  endtask

endpackage
