// GPU quantization kernels: block exponents, quantize to big-endian block-scaled int32, and
// dequantize (optionally averaging), on a caller-given CUDA stream.
//
// The results are bit for bit those of the CPU kernels (ina::host::quant::ScalarKernels(), see
// ina/host/quant.h for the scheme) applied block by block; the per-element arithmetic is shared
// with the host compiler in ina/gpu/quant_elem.h, which also defines averaging and the exact
// bfloat16/float16 -> float conversion.
//
// A tensor of n elements is cut into K-blocks: block b holds elements [b*K, min(n, (b+1)*K)),
// blocks = ceil(n / K). Every pointer below is device memory (or managed/mapped memory the device
// can reach). Per-block arrays (exponents, nonfinite flags) have `blocks` entries.
//
// Asynchrony: each call only enqueues work on `stream` (0: the legacy default stream) and returns;
// results are valid once the stream reaches that point (an event, cudaStreamSynchronize). The
// Status reports argument errors (checked before anything is enqueued) and launch errors; a
// fault while the kernel runs surfaces at the next synchronising call, as CUDA defines. n == 0
// enqueues nothing. Thread-safe (no state); calls on one stream run in order.
//
// Speed: one pass over memory per call. Vector loads and stores (16 bytes) are used when the
// pointers and K (and the stride) allow: float/int32 data 16-byte aligned, K % 4 == 0,
// stride % 16 == 0, otherwise a per-element path (same results).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ina/base/status.h"

namespace ina::gpu {

enum class DType : uint8_t {
  kFloat32,
  kBFloat16,  // bit patterns (uint16_t), as torch.bfloat16
  kFloat16,   // IEEE binary16 bit patterns (uint16_t), as torch.float16 / __half
};

std::string_view DTypeName(DType dtype);
size_t DTypeBytes(DType dtype);

// Blocks of a tensor: ceil(n / k). REQUIRES: k >= 1.
inline size_t BlockCount(size_t n, int k) { return (n + static_cast<size_t>(k) - 1) / k; }

// Writes, for every K-block b of x[0..n) (elements of `dtype`), the block's biased exponent to
// exps[b] (ScalarKernels().block_exp of the block, as floats) and, unless nonfinite is null,
// 1 to nonfinite[b] if the block holds an Inf or NaN, else 0.
// Errors: kInvalidArgument for k < 1, null pointers with n > 0, or x misaligned for its dtype.
Status BlockExps(const void* x, DType dtype, size_t n, int k, uint8_t* exps, uint8_t* nonfinite,
                 cudaStream_t stream);

// Quantizes x[0..n) block by block at the given biased exponents (exps[b], as a fabric's max of
// BlockExps results) and precision (ina::host::quant::Precision(world)): block b's elements go
// big-endian to out + b * out_stride, 4 bytes each (ScalarKernels().quantize of the block).
// out_stride (bytes) >= 4 * k lets blocks land in packet-sized slots (headers in between are not
// touched); out_stride == 0 means 4 * k (a dense int32 tensor).
// REQUIRES (as the CPU kernel): every element finite and |x| < 2^E of its block; otherwise the
// element's value is unspecified (it may differ from the CPU's, which is undefined there).
// Errors: kInvalidArgument for k < 1, precision outside [1, 30], a stride below 4 * k or not a
// multiple of 4, out not 4-byte aligned, null pointers with n > 0, x misaligned for its dtype.
Status Quantize(const void* x, DType dtype, size_t n, int k, const uint8_t* exps, int precision,
                uint8_t* out, size_t out_stride, cudaStream_t stream);

// Dequantizes n big-endian int32 elements laid out as Quantize writes them (block b at
// in + b * in_stride; 0 means 4 * k) at exps[b] and precision into out[0..n) (float32):
// ScalarKernels().dequantize of each block, then, if divisor > 1, each element divided by
// float(divisor) (fused averaging: divisor = world gives the mean; see quant_elem.h).
// Errors: kInvalidArgument for k < 1, precision outside [1, 30], divisor < 1, a bad stride or
// alignment (as Quantize), null pointers with n > 0.
Status Dequantize(const uint8_t* in, size_t in_stride, size_t n, int k, const uint8_t* exps,
                  int precision, int divisor, float* out, cudaStream_t stream);

// Loads every kernel behind the calls above onto the current device now, so that no later call
// loads one. Under lazy loading (CUDA_MODULE_LOADING=LAZY, the default since CUDA 12.2) a
// kernel's first launch loads it, and loading may wait for the device's running work under the
// context's lock: a launch made while another kernel waits for this one's result (NCCL's CollNet
// kernel spins until the plugin's all-reduce is done) then never returns. Call it where no such
// kernel can run yet (the CUDA memory domain does, when it is made). Idempotent and cheap after
// the first call (one cudaFuncGetAttributes per kernel). Errors: the CUDA error, naming the
// kernel.
Status LoadQuantKernels();

}  // namespace ina::gpu
