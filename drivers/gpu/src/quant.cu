// The CUDA kernels of ina/gpu/quant.h. All arithmetic is quant_elem.h's and the per-thread
// bodies and path choice are quant_map.h's (both also built and tested by the host compiler);
// this file holds the grid-stride loops, the warp reductions, argument checks and launches.
//
// Mapping:
//  - BlockExps: a group of G lanes (G = 32, or 16/8/4/2/1 for small K) reduces one K-block with
//    warp intrinsics (__reduce_max_sync over the sign-cleared patterns, __reduce_or_sync over the
//    nonfinite flags); a warp covers 32 / G blocks, so short blocks do not idle half a warp.
//  - Quantize / Dequantize: 4 consecutive elements per vector (a 16-byte float / int32 access,
//    8 bytes for 16-bit inputs), kUnroll vectors per thread per round of a grid-stride loop;
//    K % 4 == 0 keeps a vector inside one block. Otherwise (or when misaligned) one element per
//    thread per round. Indices are 32-bit when the tensor
//    allows (64-bit division costs more than the memory traffic of an element).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "ina/gpu/device.h"
#include "ina/gpu/quant.h"
#include "ina/gpu/quant_elem.h"
#include "ina/gpu/quant_map.h"

namespace ina::gpu {
namespace {

namespace e = ::ina::gpu::elem;
namespace m = ::ina::gpu::map;

constexpr int kThreads = 256;  // threads per CTA
// CTAs per launch, grid-stride beyond: ~4 waves of 8 CTAs on a 132-SM H100/H200, and small
// enough that the tests' 2^20-element tensors take the loops' second round on the per-element path.
constexpr unsigned kMaxGrid = 4096;
constexpr unsigned kFullMask = 0xffffffffu;
// Vectors per thread per round of the vector kernels: their loads are all issued before the
// stores, for more bytes in flight per thread.
constexpr int kUnroll = 2;

// ---------------------------------------------------------------------------------------------
// Kernels: grid-stride loops over the bodies in quant_map.h.

// group: lanes per block (power of two <= 32). kVec: 4-element loads (K % 4 == 0, x aligned).
template <typename T, bool kVec>
__global__ void BlockExpKernel(const T* __restrict__ x, size_t n, size_t k, size_t blocks,
                               unsigned group, uint8_t* __restrict__ exps,
                               uint8_t* __restrict__ nonfinite) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned glane = lane % group;
  const size_t groups_per_cta = kThreads / group;
  const size_t stride = static_cast<size_t>(gridDim.x) * groups_per_cta;
  // All lanes of a warp run the same number of iterations (the bound is per warp), so the
  // full-warp reductions below never see an exited lane.
  const size_t warp_first =
      static_cast<size_t>(blockIdx.x) * groups_per_cta + (threadIdx.x / 32) * (32 / group);
  for (size_t wb = warp_first; wb < blocks; wb += stride) {
    const size_t b = wb + lane / group;
    m::ExpPartial r;
    if (b < blocks) r = m::BlockExpPartial<T, kVec>(x, n, k, b, glane, group);
    // Reduce within each group: a full-warp reduction when one block spans the warp, else a
    // shuffle tree over the group's lanes.
    if (group == 32) {
      r.max_bits = __reduce_max_sync(kFullMask, r.max_bits);
      r.bad = __reduce_or_sync(kFullMask, r.bad);
    } else {
      for (unsigned off = group / 2; off > 0; off /= 2) {
        r.max_bits = max(r.max_bits, __shfl_xor_sync(kFullMask, r.max_bits, off));
        r.bad |= __shfl_xor_sync(kFullMask, r.bad, off);
      }
    }
    if (b < blocks && glane == 0) m::BlockExpFinish(r, b, exps, nonfinite);
  }
}

template <typename T, typename Index, bool kWide>
__global__ void QuantizeVecKernel(const T* __restrict__ x, Index nvec, Index k,
                                  const uint8_t* __restrict__ exps, int precision,
                                  uint8_t* __restrict__ out, Index stride) {
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index v0 = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; v0 < nvec;
       v0 += kUnroll * step) {
    m::QuantIn<Index> in[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const Index v = v0 + u * step;
      if (v < nvec) in[u] = m::QuantizeVecLoad<T, Index>(x, k, exps, v);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const Index v = v0 + u * step;
      if (v < nvec) m::QuantizeVecStore<Index, kWide>(in[u], k, precision, out, stride, v);
    }
  }
}

// Elements [first, n), one per thread.
template <typename T, typename Index>
__global__ void QuantizeOneKernel(const T* __restrict__ x, Index first, Index n, Index k,
                                  const uint8_t* __restrict__ exps, int precision,
                                  uint8_t* __restrict__ out, Index stride) {
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = first + static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step) {
    m::QuantizeOneAt<T, Index>(x, k, exps, precision, out, stride, i);
  }
}

template <typename Index, bool kAvg, bool kWide>
__global__ void DequantizeVecKernel(const uint8_t* __restrict__ in, Index stride, Index nvec,
                                    Index k, const uint8_t* __restrict__ exps, int precision,
                                    float divisor, float* __restrict__ out) {
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index v0 = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; v0 < nvec;
       v0 += kUnroll * step) {
    m::DequantIn w[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const Index v = v0 + u * step;
      if (v < nvec) w[u] = m::DequantizeVecLoad<Index, kWide>(in, stride, k, exps, v);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const Index v = v0 + u * step;
      if (v < nvec) m::DequantizeVecStore<Index, kAvg>(w[u], precision, divisor, out, v);
    }
  }
}

template <typename Index, bool kAvg>
__global__ void DequantizeOneKernel(const uint8_t* __restrict__ in, Index stride, Index first,
                                    Index n, Index k, const uint8_t* __restrict__ exps,
                                    int precision, float divisor, float* __restrict__ out) {
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = first + static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step) {
    m::DequantizeOneAt<Index, kAvg>(in, stride, k, exps, precision, divisor, out, i);
  }
}

// ---------------------------------------------------------------------------------------------
// Host side: argument checks, path choice, launches.

unsigned GridFor(size_t items) {
  const size_t ctas = (items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<size_t>(ctas, 1, kMaxGrid));
}

bool Aligned(const void* p, size_t a) { return m::AlignedTo(p, a); }

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
  const bool vec = m::BlockExpVec(x, sizeof(T), k);
  const unsigned group = m::BlockExpGroup(k, vec);
  const size_t ctas = (blocks * group + kThreads - 1) / kThreads;  // one group per block
  const unsigned grid = static_cast<unsigned>(std::clamp<size_t>(ctas, 1, kMaxGrid));
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
  const m::Plan plan = m::PlanQuantize(x, sizeof(T), n, k, out, stride);
  if (plan.vec_elems > 0) {
    const size_t nvec = plan.vec_elems / 4;
    const Index nv = static_cast<Index>(nvec);
    if (plan.wide_io) {
      QuantizeVecKernel<T, Index, true>
          <<<GridFor((nvec + kUnroll - 1) / kUnroll), kThreads, 0, stream>>>(x, nv, kk, exps,
                                                                             precision, out, ss);
    } else {
      QuantizeVecKernel<T, Index, false>
          <<<GridFor((nvec + kUnroll - 1) / kUnroll), kThreads, 0, stream>>>(x, nv, kk, exps,
                                                                             precision, out, ss);
    }
    INA_RETURN_IF_ERROR(LaunchStatus("QuantizeVecKernel"));
  }
  if (plan.vec_elems < n) {
    QuantizeOneKernel<T, Index><<<GridFor(n - plan.vec_elems), kThreads, 0, stream>>>(
        x, static_cast<Index>(plan.vec_elems), static_cast<Index>(n), kk, exps, precision, out, ss);
    INA_RETURN_IF_ERROR(LaunchStatus("QuantizeOneKernel"));
  }
  return Status::Ok();
}

// 32-bit indices suffice when every byte offset of the output fits (offsets are computed in
// size_t, but element and block indices, and b * stride, in Index).
bool Fits32(size_t n, size_t stride, int k) {
  const size_t blocks = BlockCount(n, k);
  return n < (size_t{1} << 31) && stride < (size_t{1} << 31) && blocks < (size_t{1} << 31);
}

template <typename Index, bool kAvg>
Status DequantizeIndexed(const uint8_t* in, size_t stride, size_t n, int k, const uint8_t* exps,
                         int precision, float divisor, float* out, cudaStream_t stream) {
  const Index kk = static_cast<Index>(k);
  const Index ss = static_cast<Index>(stride);
  const m::Plan plan = m::PlanDequantize(in, stride, n, k, out);
  if (plan.vec_elems > 0) {
    const size_t nvec = plan.vec_elems / 4;
    const Index nv = static_cast<Index>(nvec);
    if (plan.wide_io) {
      DequantizeVecKernel<Index, kAvg, true>
          <<<GridFor((nvec + kUnroll - 1) / kUnroll), kThreads, 0, stream>>>(
              in, ss, nv, kk, exps, precision, divisor, out);
    } else {
      DequantizeVecKernel<Index, kAvg, false>
          <<<GridFor((nvec + kUnroll - 1) / kUnroll), kThreads, 0, stream>>>(
              in, ss, nv, kk, exps, precision, divisor, out);
    }
    INA_RETURN_IF_ERROR(LaunchStatus("DequantizeVecKernel"));
  }
  if (plan.vec_elems < n) {
    DequantizeOneKernel<Index, kAvg><<<GridFor(n - plan.vec_elems), kThreads, 0, stream>>>(
        in, ss, static_cast<Index>(plan.vec_elems), static_cast<Index>(n), kk, exps, precision,
        divisor, out);
    INA_RETURN_IF_ERROR(LaunchStatus("DequantizeOneKernel"));
  }
  return Status::Ok();
}

template <typename T>
Status QuantizeTyped(const T* x, size_t n, int k, const uint8_t* exps, int precision, uint8_t* out,
                     size_t stride, cudaStream_t stream) {
  if (Fits32(n, stride, k)) {
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
  const bool fits = Fits32(n, stride, k);
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

}  // namespace ina::gpu
