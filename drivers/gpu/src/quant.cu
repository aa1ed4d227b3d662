// The CUDA kernels of ina/gpu/quant.h. All arithmetic is quant_elem.h's, the per-thread bodies
// quant_map.h's, and the plan (launch geometry, path choice, which thread takes which items, the
// loops themselves) quant_plan.h's; all three are also built and tested by the host compiler. This
// file holds the warp reductions, argument checks and launches.
//
// Mapping (quant_plan.h has the details):
//  - BlockExps: a group of G lanes (G = 32, or 16/8/4/2/1 for small K) reduces one K-block with
//    warp intrinsics (__reduce_max_sync over the sign-cleared patterns, __reduce_or_sync over the
//    nonfinite flags); a warp covers 32 / G blocks, so short blocks do not idle half a warp.
//  - Quantize / Dequantize: 4 consecutive elements per vector (a 16-byte float / int32 access,
//    8 bytes for 16-bit inputs), kUnroll vectors per thread per round of a grid-stride loop;
//    K % 4 == 0 keeps a vector inside one block. Otherwise (or when misaligned) one element per
//    thread per round. Indices are 32-bit when the tensor allows (64-bit division costs more
//    than the memory traffic of an element).
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "ina/gpu/device.h"
#include "ina/gpu/quant.h"
#include "ina/gpu/quant_elem.h"
#include "ina/gpu/quant_map.h"
#include "ina/gpu/quant_plan.h"

namespace ina::gpu {
namespace {

namespace e = ::ina::gpu::elem;
namespace m = ::ina::gpu::map;
namespace p = ::ina::gpu::plan;

using p::kThreads;
constexpr unsigned kFullMask = 0xffffffffu;

// ---------------------------------------------------------------------------------------------
// Kernels: quant_plan.h's loops over quant_map.h's bodies.

// group: lanes per block (power of two <= 32). kVec: 4-element loads (K % 4 == 0, x aligned).
template <typename T, bool kVec>
__global__ void BlockExpKernel(const T* __restrict__ x, size_t n, size_t k, size_t blocks,
                               unsigned group, uint8_t* __restrict__ exps,
                               uint8_t* __restrict__ nonfinite) {
  p::BlockExpRounds(blockIdx.x, threadIdx.x, gridDim.x, group, blocks,
                    [&](size_t b, unsigned glane, bool valid) {
                      m::ExpPartial r;
                      if (valid) r = m::BlockExpPartial<T, kVec>(x, n, k, b, glane, group);
                      // Reduce within each group: a full-warp reduction when one block spans
                      // the warp, else a shuffle tree over the group's lanes.
                      if (group == 32) {
                        r.max_bits = __reduce_max_sync(kFullMask, r.max_bits);
                        r.bad = __reduce_or_sync(kFullMask, r.bad);
                      } else {
                        for (unsigned off = group / 2; off > 0; off /= 2) {
                          r.max_bits = max(r.max_bits, __shfl_xor_sync(kFullMask, r.max_bits, off));
                          r.bad |= __shfl_xor_sync(kFullMask, r.bad, off);
                        }
                      }
                      if (valid && glane == 0) m::BlockExpFinish(r, b, exps, nonfinite);
                    });
}

// Quantize / dequantize: one launch of quant_plan.h's LaunchesOf, items [first, end); each thread
// is quant_map.h's thread body.
template <typename T, typename Index, bool kWide>
__global__ void QuantizeVecKernel(const T* __restrict__ x, Index first, Index end, Index k,
                                  const uint8_t* __restrict__ exps, int precision,
                                  uint8_t* __restrict__ out, Index stride) {
  m::QuantizeVecThread<T, Index, kWide>(blockIdx.x, threadIdx.x, gridDim.x, x, first, end, k, exps,
                                        precision, out, stride);
}

template <typename T, typename Index>
__global__ void QuantizeOneKernel(const T* __restrict__ x, Index first, Index end, Index k,
                                  const uint8_t* __restrict__ exps, int precision,
                                  uint8_t* __restrict__ out, Index stride) {
  m::QuantizeOneThread<T, Index>(blockIdx.x, threadIdx.x, gridDim.x, x, first, end, k, exps,
                                 precision, out, stride);
}

// 8 CTAs of 256 threads per SM (32 registers): full occupancy for the averaging variants too
// (36 registers and 6 CTAs without the bound; no spills with it, ptxas -v).
template <typename Index, bool kAvg, bool kWide>
__global__ void __launch_bounds__(kThreads, 8)
    DequantizeVecKernel(const uint8_t* __restrict__ in, Index stride, Index first, Index end,
                        Index k, const uint8_t* __restrict__ exps, int precision, float divisor,
                        float* __restrict__ out) {
  m::DequantizeVecThread<Index, kAvg, kWide>(blockIdx.x, threadIdx.x, gridDim.x, in, stride, first,
                                             end, k, exps, precision, divisor, out);
}

template <typename Index, bool kAvg>
__global__ void DequantizeOneKernel(const uint8_t* __restrict__ in, Index stride, Index first,
                                    Index end, Index k, const uint8_t* __restrict__ exps,
                                    int precision, float divisor, float* __restrict__ out) {
  m::DequantizeOneThread<Index, kAvg>(blockIdx.x, threadIdx.x, gridDim.x, in, stride, first, end, k,
                                      exps, precision, divisor, out);
}

// ---------------------------------------------------------------------------------------------
// Host side: argument checks, path choice, launches.

bool Aligned(const void* ptr, size_t a) { return p::AlignedTo(ptr, a); }

Status LaunchStatus(const char* kernel) {
  return CudaStatus(cudaGetLastError(), std::string("launch ") + kernel);
}

Status CheckCommon(const char* op, size_t n, int k, int precision, const void* a, const void* b,
                   const void* c, size_t stride) {
  const std::string who = std::string("gpu ") + op + ": ";
  if (k < 1) return InvalidArgument(who + "k must be >= 1, got " + std::to_string(k));
  if (precision < 1 || precision > 30) {
    return InvalidArgument(who + "precision must be in [1, 30], got " + std::to_string(precision));
  }
  if (n > 0 && (a == nullptr || b == nullptr || c == nullptr)) {
    return InvalidArgument(who + "null pointer with n = " + std::to_string(n));
  }
  if (stride < 4 * static_cast<size_t>(k) || stride % 4 != 0) {
    return InvalidArgument(who + "block stride " + std::to_string(stride) +
                           " bytes must be a multiple of 4 and >= 4 * k = " +
                           std::to_string(4 * static_cast<size_t>(k)));
  }
  return Status::Ok();
}

template <typename T>
Status BlockExpsTyped(const T* x, size_t n, int k, uint8_t* exps, uint8_t* nonfinite,
                      cudaStream_t stream) {
  const size_t blocks = BlockCount(n, k);
  const bool vec = p::BlockExpVec(x, sizeof(T), k);
  const unsigned group = p::BlockExpGroup(k, vec);
  const unsigned grid = p::BlockExpGrid(blocks, group);
  const size_t kk = static_cast<size_t>(k);
  if (vec) {
    BlockExpKernel<T, true>
        <<<grid, kThreads, 0, stream>>>(x, n, kk, blocks, group, exps, nonfinite);
  } else {
    BlockExpKernel<T, false>
        <<<grid, kThreads, 0, stream>>>(x, n, kk, blocks, group, exps, nonfinite);
  }
  return LaunchStatus("BlockExpKernel");
}

template <typename T, typename Index>
Status QuantizeIndexed(const T* x, size_t n, int k, const uint8_t* exps, int precision,
                       uint8_t* out, size_t stride, cudaStream_t stream) {
  const Index kk = static_cast<Index>(k);
  const Index ss = static_cast<Index>(stride);
  for (const p::Launch& l : p::LaunchesOf(p::PlanQuantize(x, sizeof(T), n, k, out, stride))) {
    const auto first = static_cast<Index>(l.first), end = static_cast<Index>(l.end);
    switch (l.body) {
      case p::Body::kVecWide:
        QuantizeVecKernel<T, Index, true>
            <<<l.grid, kThreads, 0, stream>>>(x, first, end, kk, exps, precision, out, ss);
        break;
      case p::Body::kVec:
        QuantizeVecKernel<T, Index, false>
            <<<l.grid, kThreads, 0, stream>>>(x, first, end, kk, exps, precision, out, ss);
        break;
      case p::Body::kOne:
        QuantizeOneKernel<T, Index>
            <<<l.grid, kThreads, 0, stream>>>(x, first, end, kk, exps, precision, out, ss);
        break;
    }
    INA_RETURN_IF_ERROR(
        LaunchStatus(l.body == p::Body::kOne ? "QuantizeOneKernel" : "QuantizeVecKernel"));
  }
  return Status::Ok();
}

template <typename Index, bool kAvg>
Status DequantizeIndexed(const uint8_t* in, size_t stride, size_t n, int k, const uint8_t* exps,
                         int precision, float divisor, float* out, cudaStream_t stream) {
  const Index kk = static_cast<Index>(k);
  const Index ss = static_cast<Index>(stride);
  for (const p::Launch& l : p::LaunchesOf(p::PlanDequantize(in, stride, n, k, out))) {
    const auto first = static_cast<Index>(l.first), end = static_cast<Index>(l.end);
    switch (l.body) {
      case p::Body::kVecWide:
        DequantizeVecKernel<Index, kAvg, true><<<l.grid, kThreads, 0, stream>>>(
            in, ss, first, end, kk, exps, precision, divisor, out);
        break;
      case p::Body::kVec:
        DequantizeVecKernel<Index, kAvg, false><<<l.grid, kThreads, 0, stream>>>(
            in, ss, first, end, kk, exps, precision, divisor, out);
        break;
      case p::Body::kOne:
        DequantizeOneKernel<Index, kAvg><<<l.grid, kThreads, 0, stream>>>(
            in, ss, first, end, kk, exps, precision, divisor, out);
        break;
    }
    INA_RETURN_IF_ERROR(
        LaunchStatus(l.body == p::Body::kOne ? "DequantizeOneKernel" : "DequantizeVecKernel"));
  }
  return Status::Ok();
}

// Lazy loading: cudaFuncGetAttributes extracts the kernel's function handle, which loads it.
template <typename Kernel>
Status LoadKernel(Kernel* kernel, const char* name) {
  cudaFuncAttributes a{};
  return CudaStatus(cudaFuncGetAttributes(&a, kernel),
                    std::string("cudaFuncGetAttributes(") + name + ")");
}

// Every instantiation the launches above can pick for input type T.
template <typename T>
Status LoadTypedKernels() {
  INA_RETURN_IF_ERROR(LoadKernel(BlockExpKernel<T, true>, "BlockExpKernel"));
  INA_RETURN_IF_ERROR(LoadKernel(BlockExpKernel<T, false>, "BlockExpKernel"));
  for (Status s : {LoadKernel(QuantizeVecKernel<T, uint32_t, true>, "QuantizeVecKernel"),
                   LoadKernel(QuantizeVecKernel<T, uint32_t, false>, "QuantizeVecKernel"),
                   LoadKernel(QuantizeVecKernel<T, uint64_t, true>, "QuantizeVecKernel"),
                   LoadKernel(QuantizeVecKernel<T, uint64_t, false>, "QuantizeVecKernel"),
                   LoadKernel(QuantizeOneKernel<T, uint32_t>, "QuantizeOneKernel"),
                   LoadKernel(QuantizeOneKernel<T, uint64_t>, "QuantizeOneKernel")}) {
    INA_RETURN_IF_ERROR(s);
  }
  return Status::Ok();
}

template <typename Index>
Status LoadDequantizeKernels() {
  for (Status s : {LoadKernel(DequantizeVecKernel<Index, true, true>, "DequantizeVecKernel"),
                   LoadKernel(DequantizeVecKernel<Index, true, false>, "DequantizeVecKernel"),
                   LoadKernel(DequantizeVecKernel<Index, false, true>, "DequantizeVecKernel"),
                   LoadKernel(DequantizeVecKernel<Index, false, false>, "DequantizeVecKernel"),
                   LoadKernel(DequantizeOneKernel<Index, true>, "DequantizeOneKernel"),
                   LoadKernel(DequantizeOneKernel<Index, false>, "DequantizeOneKernel")}) {
    INA_RETURN_IF_ERROR(s);
  }
  return Status::Ok();
}

template <typename T>
Status QuantizeTyped(const T* x, size_t n, int k, const uint8_t* exps, int precision, uint8_t* out,
                     size_t stride, cudaStream_t stream) {
  if (p::Fits32(n, stride, k)) {
    return QuantizeIndexed<T, uint32_t>(x, n, k, exps, precision, out, stride, stream);
  }
  return QuantizeIndexed<T, uint64_t>(x, n, k, exps, precision, out, stride, stream);
}

}  // namespace

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat16:
      return "float16";
  }
  return "unknown";
}

size_t DTypeBytes(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kBFloat16:
    case DType::kFloat16:
      return 2;
  }
  return 0;
}

namespace {

Status CheckDType(const char* op, DType dtype, const void* x) {
  const size_t bytes = DTypeBytes(dtype);
  if (bytes == 0) {
    return InvalidArgument(std::string("gpu ") + op + ": unknown dtype " +
                           std::to_string(static_cast<int>(dtype)));
  }
  if (!Aligned(x, bytes)) {
    return InvalidArgument(std::string("gpu ") + op + ": " + std::string(DTypeName(dtype)) +
                           " input not aligned to " + std::to_string(bytes) + " bytes");
  }
  return Status::Ok();
}

}  // namespace

Status BlockExps(const void* x, DType dtype, size_t n, int k, uint8_t* exps, uint8_t* nonfinite,
                 cudaStream_t stream) {
  if (k < 1) return InvalidArgument("gpu BlockExps: k must be >= 1, got " + std::to_string(k));
  if (n > 0 && (x == nullptr || exps == nullptr)) {
    return InvalidArgument("gpu BlockExps: null pointer with n = " + std::to_string(n));
  }
  INA_RETURN_IF_ERROR(CheckDType("BlockExps", dtype, x));
  if (n == 0) return Status::Ok();
  switch (dtype) {
    case DType::kFloat32:
      return BlockExpsTyped(static_cast<const float*>(x), n, k, exps, nonfinite, stream);
    case DType::kBFloat16:
      return BlockExpsTyped(static_cast<const e::BFloat16*>(x), n, k, exps, nonfinite, stream);
    case DType::kFloat16:
      return BlockExpsTyped(static_cast<const e::Float16*>(x), n, k, exps, nonfinite, stream);
  }
  return Internal("gpu BlockExps: unreachable dtype");
}

Status Quantize(const void* x, DType dtype, size_t n, int k, const uint8_t* exps, int precision,
                uint8_t* out, size_t out_stride, cudaStream_t stream) {
  const size_t stride = out_stride == 0 && k > 0 ? 4 * static_cast<size_t>(k) : out_stride;
  INA_RETURN_IF_ERROR(CheckCommon("Quantize", n, k, precision, x, exps, out, stride));
  INA_RETURN_IF_ERROR(CheckDType("Quantize", dtype, x));
  if (!Aligned(out, 4)) return InvalidArgument("gpu Quantize: out not aligned to 4 bytes");
  if (n == 0) return Status::Ok();
  switch (dtype) {
    case DType::kFloat32:
      return QuantizeTyped(static_cast<const float*>(x), n, k, exps, precision, out, stride,
                           stream);
    case DType::kBFloat16:
      return QuantizeTyped(static_cast<const e::BFloat16*>(x), n, k, exps, precision, out, stride,
                           stream);
    case DType::kFloat16:
      return QuantizeTyped(static_cast<const e::Float16*>(x), n, k, exps, precision, out, stride,
                           stream);
  }
  return Internal("gpu Quantize: unreachable dtype");
}

Status Dequantize(const uint8_t* in, size_t in_stride, size_t n, int k, const uint8_t* exps,
                  int precision, int divisor, float* out, cudaStream_t stream) {
  const size_t stride = in_stride == 0 && k > 0 ? 4 * static_cast<size_t>(k) : in_stride;
  INA_RETURN_IF_ERROR(CheckCommon("Dequantize", n, k, precision, in, exps, out, stride));
  if (divisor < 1) {
    return InvalidArgument("gpu Dequantize: divisor must be >= 1, got " + std::to_string(divisor));
  }
  if (!Aligned(in, 4) || !Aligned(out, 4)) {
    return InvalidArgument("gpu Dequantize: in and out must be aligned to 4 bytes");
  }
  if (n == 0) return Status::Ok();
  const float d = static_cast<float>(divisor);
  const bool fits = p::Fits32(n, stride, k);
  if (divisor > 1) {
    return fits ? DequantizeIndexed<uint32_t, true>(in, stride, n, k, exps, precision, d, out,
                                                    stream)
                : DequantizeIndexed<uint64_t, true>(in, stride, n, k, exps, precision, d, out,
                                                    stream);
  }
  return fits
             ? DequantizeIndexed<uint32_t, false>(in, stride, n, k, exps, precision, d, out, stream)
             : DequantizeIndexed<uint64_t, false>(in, stride, n, k, exps, precision, d, out,
                                                  stream);
}

Status LoadQuantKernels() {
  INA_RETURN_IF_ERROR(LoadTypedKernels<float>());
  INA_RETURN_IF_ERROR(LoadTypedKernels<e::BFloat16>());
  INA_RETURN_IF_ERROR(LoadTypedKernels<e::Float16>());
  INA_RETURN_IF_ERROR(LoadDequantizeKernels<uint32_t>());
  return LoadDequantizeKernels<uint64_t>();
}

}  // namespace ina::gpu
