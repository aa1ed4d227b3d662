// Block floating point quantization, as in SwitchML.
//
// A block is up to K floats that travel in one packet. All workers agree on the block's exponent
// E one round ahead (the fabric max-reduces the exponent fields), so every worker scales the block
// by the same power of two:
//   E   = the smallest integer in [kExpMin, kExpMax] with |x| < 2^E for every finite x of the block
//         on every worker (BlockExp gives one worker's E; the fabric takes the max).
//   P   = Precision(world) = 30 - ceil(log2(world)): the bits each value gets.
//   q   = round_to_nearest_even(x * 2^(P - E)), so |q| <= 2^P and the sum of `world` values has
//         |sum| <= 2^30: the fabric's int32 sum can never overflow.
//   out = float(sum) * 2^(E - P)
// The power-of-two scalings are exact (E >= kExpMin keeps 2^(P-E) and 2^(E-P) normal floats).
// Error bound per element of the result, against the exact float64 sum S of the inputs, for
// results within the float range (a sum of finite inputs near 2^128 can still round to Inf):
//   |out - S| <= world * 2^(E - P - 1) + 2^-24 * (|S| + world * 2^(E - P - 1))
// (rounding each input, then rounding the int32 sum to float). docs/protocol.md restates it.
// Non-finite inputs: BlockExp reports them; the worker sends zeros with the nonfinite flag and
// every worker's result block becomes NaN.
//
// Exponents travel biased (E + proto::kExpBias) in a uint8_t; 0 (proto::kExpNone) means "no block"
// and is neutral for the max.
//
// Kernels: a scalar reference and AVX2 / AVX-512 variants, bit-exact to it, chosen once at start
// (ActiveKernels(), or by name: KernelsByName). Elements on the wire are big-endian int32: Quantize
// writes wire bytes directly into the packet, Dequantize reads them from the result packet.
// quantize_crc also returns the CRC32C of what it wrote (the packet's payload check), in one pass.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ina::host::quant {

// Bits per value for a world of `world` ranks: 30 - ceil(log2(world)). REQUIRES: world >= 1.
int Precision(int world);

struct Kernels {
  std::string_view name;  // "scalar", "avx2", "avx512"
  // Biased exponent of x[0..n) (see above); n == 0 gives kExpMin biased. Writes *nonfinite
  // (unless null): true iff an element is Inf or NaN (the exponent then covers the finite
  // elements only).
  uint8_t (*block_exp)(const float* x, size_t n, bool* nonfinite);
  // Writes n big-endian int32 to out: round(x * 2^(P - E)), E = biased_exp - kExpBias.
  // REQUIRES: x finite, |x| < 2^E, biased_exp from block_exp (or a max of such).
  void (*quantize)(const float* x, size_t n, uint8_t biased_exp, int precision, uint8_t* out);
  // Reads n big-endian int32 from in, writes float(v) * 2^(E - P) to out.
  void (*dequantize)(const uint8_t* in, size_t n, uint8_t biased_exp, int precision, float* out);
  // int32 tensors: host order <-> big-endian wire, no scaling.
  void (*to_wire)(const int32_t* x, size_t n, uint8_t* out);
  void (*from_wire)(const uint8_t* in, size_t n, int32_t* out);
  // quantize, fused with the payload check: writes what quantize writes and returns
  // proto::Crc32c(0, out, 4 * n), computed piece by piece (kCrcPieceElems) right after each piece
  // is written, while it is in L1, so a sender never reads the chunk a second time for its CRCs.
  // Same REQUIRES as quantize.
  uint32_t (*quantize_crc)(const float* x, size_t n, uint8_t biased_exp, int precision,
                           uint8_t* out);
  // Averaging, in place: x[i] = x[i] / d correctly rounded (what one IEEE division gives), for d
  // an integer in [2, kFastDivideMax]. The SIMD variants take d's reciprocal once and give each
  // element a multiply and two FMAs (Markstein's correction, as ina/gpu/quant_elem.h's
  // DequantizeAvgElem); an element whose |x| is outside [2^-80, 2^126] (zero aside), or Inf/NaN,
  // is divided instead. Use DivideBy, which picks the variant and handles any divisor.
  void (*divide)(float* x, size_t n, float d);
};

// The largest divisor Kernels::divide takes: the same correction (ina/gpu/quant_elem.h) was
// checked against the division for every significand with every odd divisor up to it, in a
// one-off run (even ones only shift the exponent); host_quant_prop_test checks every odd
// divisor up to 65 and a few larger.
inline constexpr int kFastDivideMax = 4096;

// quantize_crc's piece: 2048 elements, 8 KiB of floats in and 8 KiB of wire out (one K = 2048
// packet's payload), which stay in a 32 KiB L1 together.
inline constexpr size_t kCrcPieceElems = 2048;

// Averaging (the all-reduce's AllReduceOptions::average, ina/host/communicator.h), in place:
// x[i] / float(divisor) correctly rounded (one IEEE division's result, the bits
// ina/gpu/quant_elem.h's DequantizeAvgElem gives after the dequantization; ActiveKernels().divide
// computes it without a division per element), and for int32 C++'s `/`, truncating toward zero.
// No-op for divisor 1. REQUIRES: divisor >= 1.
void DivideBy(float* x, size_t n, int divisor);
// The same with the caller's kernels (its CommConfig::quant) for divisors up to kFastDivideMax.
void DivideBy(const Kernels& k, float* x, size_t n, int divisor);
void DivideBy(int32_t* x, size_t n, int divisor);

const Kernels& ScalarKernels();
// nullptr when the CPU (or the compiler) lacks the instructions.
const Kernels* Avx2Kernels();
const Kernels* Avx512Kernels();
// The fastest kernels this CPU runs. Chosen once, thread-safe.
const Kernels& ActiveKernels();
// "auto" (ActiveKernels), "scalar", "avx2" or "avx512"; nullptr for another name or a variant this
// CPU or build lacks. (CommConfig::quant names them; INA_QUANT sets it through FromEnv.)
const Kernels* KernelsByName(std::string_view name);

}  // namespace ina::host::quant
