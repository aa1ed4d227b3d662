// How the GPU kernels (drivers/gpu/src/quant.cu) map elements to threads and memory, written as
// `__host__ __device__` per-thread bodies plus the host-side path choice, so the host compiler can
// run them too. The kernels are grid-stride loops over these bodies (and warp reductions for
// BlockExps); the unit tests run the same bodies in plain loops on the host against the CPU
// kernels, which checks the indexing, strides, vector/per-element split and tails without a GPU.
//
// Not an API for other code: ina/gpu/quant.h is. Everything here assumes the checks of quant.h's
// functions have passed (k >= 1, alignment as the plan says, stride >= 4 * k, stride % 4 == 0).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ina/gpu/quant_elem.h"

namespace ina::gpu::map {

namespace e = ::ina::gpu::elem;

// ---------------------------------------------------------------------------------------------
// Memory access: read-only cached loads (__ldg) and vector stores on the device, memcpy on the
// host. REQUIRES: p aligned to the access size.

INA_HD inline void Load16(const void* p, uint32_t w[4]) {
#ifdef __CUDA_ARCH__
  const uint4 u = __ldg(static_cast<const uint4*>(p));
  w[0] = u.x;
  w[1] = u.y;
  w[2] = u.z;
  w[3] = u.w;
#else
  std::memcpy(w, p, 16);
#endif
}

INA_HD inline void Load8(const void* p, uint32_t w[2]) {
#ifdef __CUDA_ARCH__
  const uint2 u = __ldg(static_cast<const uint2*>(p));
  w[0] = u.x;
  w[1] = u.y;
#else
  std::memcpy(w, p, 8);
#endif
}

INA_HD inline uint32_t Load4(const void* p) {
#ifdef __CUDA_ARCH__
  return __ldg(static_cast<const unsigned int*>(p));
#else
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
#endif
}

INA_HD inline uint16_t Load2(const void* p) {
#ifdef __CUDA_ARCH__
  return __ldg(static_cast<const unsigned short*>(p));
#else
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
#endif
}

INA_HD inline uint8_t Load1(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldg(p);
#else
  return *p;
#endif
}

INA_HD inline void Store16(void* p, const uint32_t w[4]) {
#ifdef __CUDA_ARCH__
  *static_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
#else
  std::memcpy(p, w, 16);
#endif
}

INA_HD inline void Store4(void* p, uint32_t w) {
#ifdef __CUDA_ARCH__
  *static_cast<uint32_t*>(p) = w;
#else
  std::memcpy(p, &w, 4);
#endif
}

// ---------------------------------------------------------------------------------------------
// Typed element loads: T is float, e::BFloat16 or e::Float16; results are exact floats.

struct Vec4f {
  float v[4];
};

template <typename T>
INA_HD inline float LoadOne(const T* x, size_t i) {
  if constexpr (sizeof(T) == 4) {
    return e::BitsToFloat(Load4(x + i));
  } else {
    return e::ToFloat(T{Load2(x + i)});
  }
}

// Elements 4 * vi .. 4 * vi + 3. REQUIRES: x aligned to 4 * sizeof(T) bytes.
template <typename T>
INA_HD inline Vec4f LoadFour(const T* x, size_t vi) {
  Vec4f r;
  if constexpr (sizeof(T) == 4) {
    uint32_t w[4];
    Load16(x + 4 * vi, w);
    for (int j = 0; j < 4; ++j) r.v[j] = e::BitsToFloat(w[j]);
  } else {
    uint32_t w[2];
    Load8(x + 4 * vi, w);  // little-endian: element 2j is the low half of word j
    for (int j = 0; j < 4; ++j) {
      r.v[j] = e::ToFloat(T{static_cast<uint16_t>(w[j / 2] >> (16 * (j % 2)))});
    }
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// Path choice (host side of the launches).

inline bool AlignedTo(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

// Elements [0, vec_elems) go through the 4-element path (kVec bodies), [vec_elems, n) one per
// thread. wide_io: the int32 side (quantize's output, dequantize's input) moves 16 bytes at once.
struct Plan {
  size_t vec_elems = 0;
  bool wide_io = false;
};

inline Plan PlanQuantize(const void* x, size_t elem_bytes, size_t n, int k, const void* out,
                         size_t stride) {
  Plan p;
  if (k % 4 == 0 && AlignedTo(x, 4 * elem_bytes)) {
    p.vec_elems = n / 4 * 4;
    p.wide_io = AlignedTo(out, 16) && stride % 16 == 0;
  }
  return p;
}

inline Plan PlanDequantize(const void* in, size_t stride, size_t n, int k, const float* out) {
  Plan p;
  if (k % 4 == 0 && AlignedTo(out, 16)) {
    p.vec_elems = n / 4 * 4;
    p.wide_io = AlignedTo(in, 16) && stride % 16 == 0;
  }
  return p;
}

// BlockExps: 4-element loads when K % 4 == 0 and x allows; lanes per block (a power of two up
// to 32, enough for one vector or element per lane where K allows).
inline bool BlockExpVec(const void* x, size_t elem_bytes, int k) {
  return k % 4 == 0 && AlignedTo(x, 4 * elem_bytes);
}

inline unsigned BlockExpGroup(int k, bool vec) {
  const size_t wanted = vec ? static_cast<size_t>(k) / 4 : static_cast<size_t>(k);
  unsigned group = 1;
  while (group < 32 && group < wanted) group *= 2;
  return group;
}

// ---------------------------------------------------------------------------------------------
// Per-thread bodies.

// One lane's share of block b's exponent: lane glane of `group` lanes takes every group-th vector
// (or element). The block's result is the max / OR over its lanes (BlockExpFinish).
struct ExpPartial {
  uint32_t max_bits = 0;
  uint32_t bad = 0;
};

template <typename T, bool kVec>
INA_HD inline ExpPartial BlockExpPartial(const T* x, size_t n, size_t k, size_t b, unsigned glane,
                                         unsigned group) {
  ExpPartial r;
  const size_t begin = b * k;
  const size_t cnt = k < n - begin ? k : n - begin;
  size_t first = 0;
  if constexpr (kVec) {
    const size_t nvec = cnt / 4;
    const size_t vbase = begin / 4;
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
    first = nvec * 4;
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

// Address of element i (in block b = i / k) in a blocked int32 layout.
template <typename Index>
INA_HD inline size_t WireOffset(Index i, Index b, Index k, Index stride) {
  return static_cast<size_t>(b) * stride + static_cast<size_t>(i - b * k) * 4;
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
  in.b = v * 4 / k;
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
  uint8_t* dst = out + WireOffset(v * 4, in.b, k, stride);
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
  const Index b = i / k;
  const float scale = e::QuantScale(Load1(exps + b), precision);
  Store4(out + WireOffset(i, b, k, stride), e::WireWord(e::QuantizeElem(LoadOne(x, i), scale)));
}

template <bool kAvg>
INA_HD inline float DequantWord(uint32_t word, float scale, float divisor) {
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
  const Index i = v * 4;
  const Index b = i / k;
  r.exp = Load1(exps + b);
  const uint8_t* src = in + WireOffset(i, b, k, stride);
  if constexpr (kWide) {
    Load16(src, r.w);
  } else {
    for (int j = 0; j < 4; ++j) r.w[j] = Load4(src + 4 * j);
  }
  return r;
}

template <typename Index, bool kAvg>
INA_HD inline void DequantizeVecStore(const DequantIn& in, int precision, float divisor, float* out,
                                      Index v) {
  const float scale = e::DequantScale(in.exp, precision);
  uint32_t r[4];
  for (int j = 0; j < 4; ++j) r[j] = e::FloatBits(DequantWord<kAvg>(in.w[j], scale, divisor));
  Store16(out + 4 * static_cast<size_t>(v), r);
}

template <typename Index, bool kAvg, bool kWide>
INA_HD inline void DequantizeVecAt(const uint8_t* in, Index stride, Index k, const uint8_t* exps,
                                   int precision, float divisor, float* out, Index v) {
  DequantizeVecStore<Index, kAvg>(DequantizeVecLoad<Index, kWide>(in, stride, k, exps, v),
                                  precision, divisor, out, v);
}

template <typename Index, bool kAvg>
INA_HD inline void DequantizeOneAt(const uint8_t* in, Index stride, Index k, const uint8_t* exps,
                                   int precision, float divisor, float* out, Index i) {
  const Index b = i / k;
  const float scale = e::DequantScale(Load1(exps + b), precision);
  const float y = DequantWord<kAvg>(Load4(in + WireOffset(i, b, k, stride)), scale, divisor);
  Store4(out + i, e::FloatBits(y));
}

}  // namespace ina::gpu::map
