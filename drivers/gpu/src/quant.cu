// The CUDA kernels of ina/gpu/quant.h. All arithmetic is quant_elem.h's; this file only maps
// elements to threads and memory.
//
// Mapping:
//  - BlockExps: a group of G lanes (G = 32, or 16/8/4/2/1 for small K) reduces one K-block with
//    warp intrinsics (__reduce_max_sync over the sign-cleared patterns, __reduce_or_sync over the
//    nonfinite flags); a warp covers 32 / G blocks, so short blocks do not idle half a warp.
//  - Quantize / Dequantize: one thread per 4 consecutive elements (a 16-byte float / int32 vector,
//    8 bytes for 16-bit inputs) in a grid-stride loop; K % 4 == 0 keeps a vector inside one block.
//    Otherwise (or when misaligned) one thread per element. Indices are 32-bit when the tensor
//    allows (64-bit division costs more than the memory traffic of an element).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "ina/gpu/device.h"
#include "ina/gpu/quant.h"
#include "ina/gpu/quant_elem.h"

namespace ina::gpu {
namespace {

namespace e = ::ina::gpu::elem;

constexpr int kThreads = 256;            // threads per CTA
constexpr unsigned kMaxGrid = 1u << 20;  // CTAs per launch (grid-stride beyond)
constexpr unsigned kFullMask = 0xffffffffu;

// ---------------------------------------------------------------------------------------------
// Typed loads of 4 consecutive elements (the vector paths) or of one element.

struct Vec4f {
  float v[4];
};

template <typename T>
__device__ __forceinline__ float LoadOne(const T* x, size_t i) {
  if constexpr (sizeof(T) == 4) {
    return __ldg(reinterpret_cast<const float*>(x) + i);
  } else {
    const uint16_t bits = __ldg(reinterpret_cast<const unsigned short*>(x) + i);
    return e::ToFloat(T{bits});
  }
}

// REQUIRES: x + 4 * vi aligned to 4 * sizeof(T) bytes.
template <typename T>
__device__ __forceinline__ Vec4f LoadFour(const T* x, size_t vi) {
  Vec4f r;
  if constexpr (sizeof(T) == 4) {
    const float4 f = __ldg(reinterpret_cast<const float4*>(x) + vi);
    r.v[0] = f.x;
    r.v[1] = f.y;
    r.v[2] = f.z;
    r.v[3] = f.w;
  } else {
    const uint2 u = __ldg(reinterpret_cast<const uint2*>(x) + vi);
    r.v[0] = e::ToFloat(T{static_cast<uint16_t>(u.x & 0xffffu)});
    r.v[1] = e::ToFloat(T{static_cast<uint16_t>(u.x >> 16)});
    r.v[2] = e::ToFloat(T{static_cast<uint16_t>(u.y & 0xffffu)});
    r.v[3] = e::ToFloat(T{static_cast<uint16_t>(u.y >> 16)});
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// Block exponents.

// group: lanes per block (power of two <= 32). vec: 4-element loads (K % 4 == 0, x aligned).
template <typename T, bool kVec>
__global__ void BlockExpKernel(const T* __restrict__ x, size_t n, size_t k, size_t blocks,
                               int group, uint8_t* __restrict__ exps,
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
    uint32_t max_bits = 0;
    uint32_t bad = 0;
    if (b < blocks) {
      const size_t begin = b * k;
      const size_t cnt = min(k, n - begin);
      size_t i = 0;
      if constexpr (kVec) {
        const size_t nvec = cnt / 4;
        const size_t vbase = begin / 4;
#pragma unroll 4
        for (size_t v = glane; v < nvec; v += group) {
          const Vec4f f = LoadFour(x, vbase + v);
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            max_bits = max(max_bits, e::ExpContribution(f.v[j]));
            bad |= e::IsNonFinite(f.v[j]) ? 1u : 0u;
          }
        }
        i = nvec * 4;
      }
      for (size_t j = i + glane; j < cnt; j += group) {
        const float f = LoadOne(x, begin + j);
        max_bits = max(max_bits, e::ExpContribution(f));
        bad |= e::IsNonFinite(f) ? 1u : 0u;
      }
    }
    // Reduce within each group: a full-warp reduction when one block spans the warp, else a
    // shuffle tree over the group's lanes.
    if (group == 32) {
      max_bits = __reduce_max_sync(kFullMask, max_bits);
      bad = __reduce_or_sync(kFullMask, bad);
    } else {
      for (int off = group / 2; off > 0; off /= 2) {
        max_bits = max(max_bits, __shfl_xor_sync(kFullMask, max_bits, off));
        bad |= __shfl_xor_sync(kFullMask, bad, off);
      }
    }
    if (b < blocks && glane == 0) {
      exps[b] = e::BiasedExpFromMaxBits(max_bits);
      if (nonfinite != nullptr) nonfinite[b] = bad != 0 ? 1 : 0;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Quantize.

template <typename T, typename Index, bool kStoreVec>
__global__ void QuantizeVecKernel(const T* __restrict__ x, Index n, Index k,
                                  const uint8_t* __restrict__ exps, int precision,
                                  uint8_t* __restrict__ out, Index stride) {
  const Index nvec = n / 4;
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index v = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; v < nvec; v += step) {
    const Index i = v * 4;
    const Index b = i / k;
    const float scale = e::QuantScale(__ldg(exps + b), precision);
    const Vec4f f = LoadFour(x, v);
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) w[j] = e::WireWord(e::QuantizeElem(f.v[j], scale));
    uint8_t* dst = out + static_cast<size_t>(b) * stride + static_cast<size_t>(i - b * k) * 4;
    if constexpr (kStoreVec) {
      *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) reinterpret_cast<uint32_t*>(dst)[j] = w[j];
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
    const Index b = i / k;
    const float scale = e::QuantScale(__ldg(exps + b), precision);
    uint8_t* dst = out + static_cast<size_t>(b) * stride + static_cast<size_t>(i - b * k) * 4;
    *reinterpret_cast<uint32_t*>(dst) = e::WireWord(e::QuantizeElem(LoadOne(x, i), scale));
  }
}

// ---------------------------------------------------------------------------------------------
// Dequantize.

template <bool kAvg>
__device__ __forceinline__ float DequantOne(uint32_t word, float scale, float divisor) {
  const int32_t q = e::FromWireWord(word);
  if constexpr (kAvg) {
    return e::DequantizeAvgElem(q, scale, divisor);
  } else {
    return e::DequantizeElem(q, scale);
  }
}

template <typename Index, bool kAvg, bool kLoadVec>
__global__ void DequantizeVecKernel(const uint8_t* __restrict__ in, Index stride, Index n, Index k,
                                    const uint8_t* __restrict__ exps, int precision, float divisor,
                                    float* __restrict__ out) {
  const Index nvec = n / 4;
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index v = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; v < nvec; v += step) {
    const Index i = v * 4;
    const Index b = i / k;
    const float scale = e::DequantScale(__ldg(exps + b), precision);
    const uint8_t* src = in + static_cast<size_t>(b) * stride + static_cast<size_t>(i - b * k) * 4;
    uint32_t w[4];
    if constexpr (kLoadVec) {
      const uint4 u = __ldg(reinterpret_cast<const uint4*>(src));
      w[0] = u.x;
      w[1] = u.y;
      w[2] = u.z;
      w[3] = u.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) w[j] = __ldg(reinterpret_cast<const uint32_t*>(src) + j);
    }
    float4 r;
    r.x = DequantOne<kAvg>(w[0], scale, divisor);
    r.y = DequantOne<kAvg>(w[1], scale, divisor);
    r.z = DequantOne<kAvg>(w[2], scale, divisor);
    r.w = DequantOne<kAvg>(w[3], scale, divisor);
    reinterpret_cast<float4*>(out)[v] = r;
  }
}

template <typename Index, bool kAvg>
__global__ void DequantizeOneKernel(const uint8_t* __restrict__ in, Index stride, Index first,
                                    Index n, Index k, const uint8_t* __restrict__ exps,
                                    int precision, float divisor, float* __restrict__ out) {
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = first + static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step) {
    const Index b = i / k;
    const float scale = e::DequantScale(__ldg(exps + b), precision);
    const uint8_t* src = in + static_cast<size_t>(b) * stride + static_cast<size_t>(i - b * k) * 4;
    out[i] = DequantOne<kAvg>(__ldg(reinterpret_cast<const uint32_t*>(src)), scale, divisor);
  }
}

// ---------------------------------------------------------------------------------------------
// Host side: argument checks, path choice, launches.

unsigned GridFor(size_t items) {
  const size_t ctas = (items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<size_t>(ctas, 1, kMaxGrid));
}

bool Aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

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
  const size_t kk = static_cast<size_t>(k);
  const bool vec = kk % 4 == 0 && Aligned(x, 4 * sizeof(T));
  const size_t lanes_wanted = vec ? kk / 4 : kk;
  int group = 1;
  while (group < 32 && static_cast<size_t>(group) < lanes_wanted) group *= 2;
  const size_t groups = blocks;  // one group per block
  const size_t ctas = (groups * group + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(std::clamp<size_t>(ctas, 1, kMaxGrid));
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
  const Index nn = static_cast<Index>(n);
  const Index kk = static_cast<Index>(k);
  const Index ss = static_cast<Index>(stride);
  size_t done = 0;
  if (k % 4 == 0 && Aligned(x, 4 * sizeof(T)) && n >= 4) {
    const size_t nvec = n / 4;
    if (Aligned(out, 16) && stride % 16 == 0) {
      QuantizeVecKernel<T, Index, true>
          <<<GridFor(nvec), kThreads, 0, stream>>>(x, nn, kk, exps, precision, out, ss);
    } else {
      QuantizeVecKernel<T, Index, false>
          <<<GridFor(nvec), kThreads, 0, stream>>>(x, nn, kk, exps, precision, out, ss);
    }
    INA_RETURN_IF_ERROR(LaunchStatus("QuantizeVecKernel"));
    done = nvec * 4;
  }
  if (done < n) {
    QuantizeOneKernel<T, Index><<<GridFor(n - done), kThreads, 0, stream>>>(
        x, static_cast<Index>(done), nn, kk, exps, precision, out, ss);
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
  const Index nn = static_cast<Index>(n);
  const Index kk = static_cast<Index>(k);
  const Index ss = static_cast<Index>(stride);
  size_t done = 0;
  if (k % 4 == 0 && Aligned(out, 16) && n >= 4) {
    const size_t nvec = n / 4;
    if (Aligned(in, 16) && stride % 16 == 0) {
      DequantizeVecKernel<Index, kAvg, true>
          <<<GridFor(nvec), kThreads, 0, stream>>>(in, ss, nn, kk, exps, precision, divisor, out);
    } else {
      DequantizeVecKernel<Index, kAvg, false>
          <<<GridFor(nvec), kThreads, 0, stream>>>(in, ss, nn, kk, exps, precision, divisor, out);
    }
    INA_RETURN_IF_ERROR(LaunchStatus("DequantizeVecKernel"));
    done = nvec * 4;
  }
  if (done < n) {
    DequantizeOneKernel<Index, kAvg><<<GridFor(n - done), kThreads, 0, stream>>>(
        in, ss, static_cast<Index>(done), nn, kk, exps, precision, divisor, out);
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
