// The GPU kernels' per-thread bodies (drivers/gpu/src/quant.cu): what one item of quant_plan.h
// loads, computes and stores, written as `__host__ __device__` functions so the host compiler can
// run them too. The kernels run these bodies in quant_plan.h's loops; the unit tests run the same
// bodies in the same loops on the host against the CPU kernels, and watch every load and store
// they make (AccessWatch), without a GPU.
//
// Not an API for other code: ina/gpu/quant.h is. Everything here assumes the checks of quant.h's
// functions have passed (k >= 1, alignment as the plan says, stride >= 4 * k, stride % 4 == 0).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ina/gpu/quant_elem.h"
#include "ina/gpu/quant_plan.h"

namespace ina::gpu::map {

namespace e = ::ina::gpu::elem;
namespace p = ::ina::gpu::plan;

// ---------------------------------------------------------------------------------------------
// Memory access: read-only cached loads (__ldg) and vector stores on the device, memcpy on the
// host. REQUIRES: p aligned to the access size.

#ifndef __CUDA_ARCH__
// Host only: when set (by a test, on its own thread), sees every access of the bodies before it
// is made: its address, size in bytes and direction. Not compiled into device code.
class AccessWatch {
 public:
  virtual ~AccessWatch() = default;
  virtual void Access(const void* p, size_t bytes, bool write) = 0;
};
inline thread_local AccessWatch* g_access_watch = nullptr;
inline void Watch(const void* p, size_t bytes, bool write) {
  if (g_access_watch != nullptr) g_access_watch->Access(p, bytes, write);
}
#endif

INA_HD inline void Load16(const void* p, uint32_t w[4]) {
#ifdef __CUDA_ARCH__
  const uint4 u = __ldg(static_cast<const uint4*>(p));
  w[0] = u.x;
  w[1] = u.y;
  w[2] = u.z;
  w[3] = u.w;
#else
  Watch(p, 16, false);
  std::memcpy(w, p, 16);
#endif
}

INA_HD inline void Load8(const void* p, uint32_t w[2]) {
#ifdef __CUDA_ARCH__
  const uint2 u = __ldg(static_cast<const uint2*>(p));
  w[0] = u.x;
  w[1] = u.y;
#else
  Watch(p, 8, false);
  std::memcpy(w, p, 8);
#endif
}

INA_HD inline uint32_t Load4(const void* p) {
#ifdef __CUDA_ARCH__
  return __ldg(static_cast<const unsigned int*>(p));
#else
  Watch(p, 4, false);
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
#endif
}

INA_HD inline uint16_t Load2(const void* p) {
#ifdef __CUDA_ARCH__
  return __ldg(static_cast<const unsigned short*>(p));
#else
  Watch(p, 2, false);
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
#endif
}

INA_HD inline uint8_t Load1(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldg(p);
#else
  Watch(p, 1, false);
  return *p;
#endif
}

INA_HD inline void Store16(void* p, const uint32_t w[4]) {
#ifdef __CUDA_ARCH__
  *static_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
#else
  Watch(p, 16, true);
  std::memcpy(p, w, 16);
#endif
}

INA_HD inline void Store4(void* p, uint32_t w) {
#ifdef __CUDA_ARCH__
  *static_cast<uint32_t*>(p) = w;
#else
  Watch(p, 4, true);
  std::memcpy(p, &w, 4);
#endif
}

// ---------------------------------------------------------------------------------------------
// Typed element loads: T is float, e::BFloat16 or e::Float16; results are exact floats.

struct Vec4f {
  float v[4];
};

template <typename T, typename Index>
INA_HD inline float LoadOne(const T* x, Index i) {
  const void* src = reinterpret_cast<const uint8_t*>(x) + p::ElemOffset(i, sizeof(T));
  if constexpr (sizeof(T) == 4) {
    return e::BitsToFloat(Load4(src));
  } else {
    return e::ToFloat(T{Load2(src)});
  }
}

// Elements 4 * v .. 4 * v + 3. REQUIRES: x aligned to 4 * sizeof(T) bytes.
template <typename T, typename Index>
INA_HD inline Vec4f LoadFour(const T* x, Index v) {
  const void* src = reinterpret_cast<const uint8_t*>(x) + p::VecElemOffset(v, sizeof(T));
  Vec4f r;
  if constexpr (sizeof(T) == 4) {
    uint32_t w[4];
    Load16(src, w);
    for (int j = 0; j < 4; ++j) r.v[j] = e::BitsToFloat(w[j]);
  } else {
    uint32_t w[2];
    Load8(src, w);  // little-endian: element 2j is the low half of word j
    for (int j = 0; j < 4; ++j) {
      r.v[j] = e::ToFloat(T{static_cast<uint16_t>(w[j / 2] >> (16 * (j % 2)))});
    }
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// Per-thread bodies.

// One lane's share of block b's exponent: lane glane of `group` lanes takes every group-th vector
// (or element). The block's result is the max / OR over its lanes (BlockExpFinish).
struct ExpPartial {
  uint32_t max_bits = 0;
  uint32_t bad = 0;
};

template <typename T, bool kVecLoads>
INA_HD inline ExpPartial BlockExpPartial(const T* x, size_t n, size_t k, size_t b, unsigned glane,
                                         unsigned group) {
  ExpPartial r;
  const size_t begin = b * k;
  const size_t cnt = k < n - begin ? k : n - begin;
  size_t first = 0;
  if constexpr (kVecLoads) {
    const size_t nvec = cnt / p::kVec;
    const size_t vbase = begin / p::kVec;  // begin % 4 == 0: K % 4 == 0 on this path
#ifdef __CUDA_ARCH__
#pragma unroll 4
#endif
    for (size_t v = glane; v < nvec; v += group) {
      const Vec4f f = LoadFour(x, vbase + v);
      for (int j = 0; j < 4; ++j) {
        const uint32_t c = e::ExpContribution(f.v[j]);
        r.max_bits = r.max_bits > c ? r.max_bits : c;
        r.bad |= e::IsNonFinite(f.v[j]) ? 1u : 0u;
      }
    }
    first = nvec * p::kVec;
  }
  for (size_t j = first + glane; j < cnt; j += group) {
    const float f = LoadOne(x, begin + j);
    const uint32_t c = e::ExpContribution(f);
    r.max_bits = r.max_bits > c ? r.max_bits : c;
    r.bad |= e::IsNonFinite(f) ? 1u : 0u;
  }
  return r;
}

INA_HD inline void BlockExpFinish(ExpPartial block, size_t b, uint8_t* exps, uint8_t* nonfinite) {
  exps[b] = e::BiasedExpFromMaxBits(block.max_bits);
  if (nonfinite != nullptr) nonfinite[b] = block.bad != 0 ? 1 : 0;
}

// The vector bodies come in a load half and a store half, so a kernel can issue several
// vectors' loads before their stores (more bytes in flight per thread).

// Inputs of one 4-element vector of quantize: elements 4v .. 4v+3, in one K-block (K % 4 == 0).
template <typename Index>
struct QuantIn {
  Index b;      // block
  uint8_t exp;  // its biased exponent
  Vec4f f;
};

template <typename T, typename Index>
INA_HD inline QuantIn<Index> QuantizeVecLoad(const T* x, Index k, const uint8_t* exps, Index v) {
  QuantIn<Index> in;
  in.b = p::VecBlock(v, k);
  in.exp = Load1(exps + in.b);
  in.f = LoadFour(x, v);
  return in;
}

template <typename Index, bool kWide>
INA_HD inline void QuantizeVecStore(const QuantIn<Index>& in, Index k, int precision, uint8_t* out,
                                    Index stride, Index v) {
  const float scale = e::QuantScale(in.exp, precision);
  uint32_t w[4];
  for (int j = 0; j < 4; ++j) w[j] = e::WireWord(e::QuantizeElem(in.f.v[j], scale));
  uint8_t* dst = out + p::VecWireOffset(v, k, stride);
  if constexpr (kWide) {
    Store16(dst, w);
  } else {
    for (int j = 0; j < 4; ++j) Store4(dst + 4 * j, w[j]);
  }
}

template <typename T, typename Index, bool kWide>
INA_HD inline void QuantizeVecAt(const T* x, Index k, const uint8_t* exps, int precision,
                                 uint8_t* out, Index stride, Index v) {
  QuantizeVecStore<Index, kWide>(QuantizeVecLoad<T, Index>(x, k, exps, v), k, precision, out,
                                 stride, v);
}

template <typename T, typename Index>
INA_HD inline void QuantizeOneAt(const T* x, Index k, const uint8_t* exps, int precision,
                                 uint8_t* out, Index stride, Index i) {
  const Index b = p::ElemBlock(i, k);
  const float scale = e::QuantScale(Load1(exps + b), precision);
  Store4(out + p::WireOffset(i, b, k, stride), e::WireWord(e::QuantizeElem(LoadOne(x, i), scale)));
}

template <bool kAvg>
INA_HD inline float DequantWord(uint32_t word, float scale, e::AvgDivisor divisor) {
  const int32_t q = e::FromWireWord(word);
  if constexpr (kAvg) {
    return e::DequantizeAvgElem(q, scale, divisor);
  } else {
    return e::DequantizeElem(q, scale);
  }
}

// Inputs of one 4-element vector of dequantize: words 4v .. 4v+3 (one K-block) and the block's
// biased exponent; the output goes to out[4v .. 4v+3] (out 16-byte aligned).
struct DequantIn {
  uint8_t exp;
  uint32_t w[4];
};

template <typename Index, bool kWide>
INA_HD inline DequantIn DequantizeVecLoad(const uint8_t* in, Index stride, Index k,
                                          const uint8_t* exps, Index v) {
  DequantIn r;
  r.exp = Load1(exps + p::VecBlock(v, k));
  const uint8_t* src = in + p::VecWireOffset(v, k, stride);
  if constexpr (kWide) {
    Load16(src, r.w);
  } else {
    for (int j = 0; j < 4; ++j) r.w[j] = Load4(src + 4 * j);
  }
  return r;
}

template <typename Index, bool kAvg>
INA_HD inline void DequantizeVecStore(const DequantIn& in, int precision, e::AvgDivisor divisor,
                                      float* out, Index v) {
  const float scale = e::DequantScale(in.exp, precision);
  uint32_t r[4];
  for (int j = 0; j < 4; ++j) r[j] = e::FloatBits(DequantWord<kAvg>(in.w[j], scale, divisor));
  Store16(reinterpret_cast<uint8_t*>(out) + p::VecElemOffset(v, 4), r);
}

template <typename Index, bool kAvg, bool kWide>
INA_HD inline void DequantizeVecAt(const uint8_t* in, Index stride, Index k, const uint8_t* exps,
                                   int precision, e::AvgDivisor divisor, float* out, Index v) {
  DequantizeVecStore<Index, kAvg>(DequantizeVecLoad<Index, kWide>(in, stride, k, exps, v),
                                  precision, divisor, out, v);
}

template <typename Index, bool kAvg>
INA_HD inline void DequantizeOneAt(const uint8_t* in, Index stride, Index k, const uint8_t* exps,
                                   int precision, e::AvgDivisor divisor, float* out, Index i) {
  const Index b = p::ElemBlock(i, k);
  const float scale = e::DequantScale(Load1(exps + b), precision);
  const float y = DequantWord<kAvg>(Load4(in + p::WireOffset(i, b, k, stride)), scale, divisor);
  Store4(reinterpret_cast<uint8_t*>(out) + p::ElemOffset(i, 4), e::FloatBits(y));
}

// ---------------------------------------------------------------------------------------------
// One thread of each quantize / dequantize kernel: quant.cu's kernels are these with (blockIdx.x,
// threadIdx.x, gridDim.x); the tests call them for every thread of a launch. Items [first, end)
// of a quant_plan.h Launch: vectors (Vec) or elements (One).

template <typename T, typename Index, bool kWide>
INA_HD inline void QuantizeVecThread(unsigned cta, unsigned thread, unsigned grid, const T* x,
                                     Index first, Index end, Index k, const uint8_t* exps,
                                     int precision, uint8_t* out, Index stride) {
  p::GridStride<p::kUnroll, Index>(
      cta, thread, grid, first, end,
      [&](Index v) { return QuantizeVecLoad<T, Index>(x, k, exps, v); },
      [&](const QuantIn<Index>& in, Index v) {
        QuantizeVecStore<Index, kWide>(in, k, precision, out, stride, v);
      });
}

template <typename T, typename Index>
INA_HD inline void QuantizeOneThread(unsigned cta, unsigned thread, unsigned grid, const T* x,
                                     Index first, Index end, Index k, const uint8_t* exps,
                                     int precision, uint8_t* out, Index stride) {
  p::GridStrideEach<Index>(cta, thread, grid, first, end, [&](Index i) {
    QuantizeOneAt<T, Index>(x, k, exps, precision, out, stride, i);
  });
}

template <typename Index, bool kAvg, bool kWide>
INA_HD inline void DequantizeVecThread(unsigned cta, unsigned thread, unsigned grid,
                                       const uint8_t* in, Index stride, Index first, Index end,
                                       Index k, const uint8_t* exps, int precision, float divisor,
                                       float* out) {
  const e::AvgDivisor div = e::MakeAvgDivisor(divisor);  // once per thread, not per element
  p::GridStride<p::kUnroll, Index>(
      cta, thread, grid, first, end,
      [&](Index v) { return DequantizeVecLoad<Index, kWide>(in, stride, k, exps, v); },
      [&](const DequantIn& w, Index v) {
        DequantizeVecStore<Index, kAvg>(w, precision, div, out, v);
      });
}

template <typename Index, bool kAvg>
INA_HD inline void DequantizeOneThread(unsigned cta, unsigned thread, unsigned grid,
                                       const uint8_t* in, Index stride, Index first, Index end,
                                       Index k, const uint8_t* exps, int precision, float divisor,
                                       float* out) {
  const e::AvgDivisor div = e::MakeAvgDivisor(divisor);
  p::GridStrideEach<Index>(cta, thread, grid, first, end, [&](Index i) {
    DequantizeOneAt<Index, kAvg>(in, stride, k, exps, precision, div, out, i);
  });
}

}  // namespace ina::gpu::map
