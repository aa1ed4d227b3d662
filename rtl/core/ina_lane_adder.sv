// 16-lane (Lanes) int32 adder with wrapping (two's complement, modulo 2^32) arithmetic.
// Combinational; lanes in host order (lane l = bits [32l +: 32]).
module ina_lane_adder
(
  input  logic [ina_rtl_pkg::BeatBits-1:0] a_i,
  input  logic [ina_rtl_pkg::BeatBits-1:0] b_i,
  output logic [ina_rtl_pkg::BeatBits-1:0] sum_o
);
  for (genvar l = 0; l < ina_rtl_pkg::Lanes; l++) begin : gen_lane
    assign sum_o[32*l +: 32] = a_i[32*l +: 32] + b_i[32*l +: 32];
  end
endmodule
