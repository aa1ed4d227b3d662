// The plan of the GPU quantization kernels (drivers/gpu/src/quant.cu): launch geometry, the
// choice between the vector and the per-element path, and which thread handles which elements,
// as plain `__host__ __device__` index arithmetic. The kernels run their loops through the
// functions here (GridStride, GridStrideEach, BlockExpRounds) and find their bytes through the
// offsets here, so the CPU tests (tests/drivers/gpu/quant_plan_test.cc) run the same arithmetic
// over every dtype, K, base alignment, length, stride and grid, and check that every element is
// covered exactly once, nothing outside the tensor or its blocks is touched, and every vector
// access is aligned to its width.
//
// Layout of one call (n elements, K-blocks, block b of the int32 side at b * stride bytes):
//  - body: elements [0, vec_elems), one item = kVec consecutive elements (4v .. 4v+3) in one
//    K-block (K % 4 == 0), loaded or stored with one access per side (16 bytes of float32 or
//    int32, 8 of a 16-bit input), or four 4-byte int32 accesses when the int32 side is not
//    16-byte aligned (!wide_io);
//  - tail: elements [vec_elems, n), one item = one element, 2- or 4-byte accesses.
//  - No head: the body starts at element 0, so a base that is not aligned to the vector width
//    takes the per-element path for the whole tensor (vec_elems = 0). Element 0 of a tensor that
//    starts mid-vector would put every vector across a K-block boundary.
// Units: elements unless named _bytes; offsets are bytes from the side's base pointer.
//
// Not an API for other code: ina/gpu/quant.h is. Everything here assumes quant.h's argument
// checks passed (k >= 1, element-aligned input, 4-byte aligned int32 side and out, stride >= 4 *
// k, stride % 4 == 0).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ina/gpu/quant_elem.h"  // INA_HD

namespace ina::gpu::plan {

inline constexpr unsigned kThreads = 256;  // threads per CTA of every quantization kernel
// CTAs per launch, grid-stride beyond: ~4 waves of 8 CTAs on a 132-SM H100/H200.
inline constexpr unsigned kMaxGrid = 4096;
// Vectors per thread per round of the vector kernels: their loads are all issued before the
// stores, for more bytes in flight per thread.
inline constexpr int kUnroll = 2;
inline constexpr size_t kVec = 4;  // elements per vector item

inline bool AlignedTo(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

// ---------------------------------------------------------------------------------------------
// Path choice (host side of the launches).

struct Plan {
  size_t n = 0;
  size_t vec_elems = 0;  // body [0, vec_elems) in vectors; tail [vec_elems, n) per element
  bool wide_io = false;  // the int32 side of the body moves 16 bytes per access
  size_t nvec() const { return vec_elems / kVec; }
  size_t tail_elems() const { return n - vec_elems; }
};

// x: elem_bytes-wide input elements; out: the blocked int32 output, block b at b * stride.
inline Plan PlanQuantize(const void* x, size_t elem_bytes, size_t n, int k, const void* out,
                         size_t stride) {
  Plan p;
  p.n = n;
  if (k % 4 == 0 && AlignedTo(x, kVec * elem_bytes)) {
    p.vec_elems = n / kVec * kVec;
    p.wide_io = AlignedTo(out, 16) && stride % 16 == 0;
  }
  return p;
}

// in: the blocked int32 input, block b at b * stride; out: n floats.
inline Plan PlanDequantize(const void* in, size_t stride, size_t n, int k, const float* out) {
  Plan p;
  p.n = n;
  if (k % 4 == 0 && AlignedTo(out, 16)) {
    p.vec_elems = n / kVec * kVec;
    p.wide_io = AlignedTo(in, 16) && stride % 16 == 0;
  }
  return p;
}

// CTAs for `items` items of one thread each per round (at least 1, at most kMaxGrid).
inline unsigned GridFor(size_t items) {
  const size_t ctas = (items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(ctas < 1 ? 1 : (ctas > kMaxGrid ? kMaxGrid : ctas));
}

// The launches of one quantize or dequantize call, in order: the body's vectors [first, end)
// (kVec items; 16-byte int32 accesses when wide) and the tail's elements [first, end) (kOne).
enum class Body { kVec, kVecWide, kOne };
struct Launch {
  Body body = Body::kOne;
  unsigned grid = 0;  // CTAs of kThreads
  size_t first = 0;   // items: vectors for kVec / kVecWide, elements for kOne
  size_t end = 0;
};
struct Launches {
  Launch item[2];
  int count = 0;
  const Launch* begin() const { return item; }
  const Launch* end() const { return item + count; }
};

inline Launches LaunchesOf(const Plan& p) {
  Launches ls;
  if (p.nvec() > 0) {
    ls.item[ls.count++] = {p.wide_io ? Body::kVecWide : Body::kVec,
                           GridFor((p.nvec() + kUnroll - 1) / kUnroll), 0, p.nvec()};
  }
  if (p.tail_elems() > 0) {
    ls.item[ls.count++] = {Body::kOne, GridFor(p.tail_elems()), p.vec_elems, p.n};
  }
  return ls;
}

// 32-bit indices suffice when element and block indices, b * stride, and the loops' indices
// (below end + kUnroll * kThreads * kMaxGrid) fit.
inline bool Fits32(size_t n, size_t stride, int k) {
  const size_t blocks = (n + static_cast<size_t>(k) - 1) / static_cast<size_t>(k);
  return n < (size_t{1} << 31) && stride < (size_t{1} << 31) && blocks < (size_t{1} << 31);
}

// BlockExps: 4-element loads when K % 4 == 0 and x allows; `group` lanes per K-block (a power
// of two up to 32, enough for one vector or element per lane where K allows).
inline bool BlockExpVec(const void* x, size_t elem_bytes, int k) {
  return k % 4 == 0 && AlignedTo(x, kVec * elem_bytes);
}

inline unsigned BlockExpGroup(int k, bool vec) {
  const size_t wanted = vec ? static_cast<size_t>(k) / kVec : static_cast<size_t>(k);
  unsigned group = 1;
  while (group < 32 && group < wanted) group *= 2;
  return group;
}

inline unsigned BlockExpGrid(size_t blocks, unsigned group) {
  return GridFor(blocks * group);  // one group per block
}

// ---------------------------------------------------------------------------------------------
// Which thread handles which items: the kernels' loops, with (cta, thread, grid) as arguments
// (blockIdx.x, threadIdx.x, gridDim.x on the device; any values in the tests). Index is
// uint32_t when Fits32, else uint64_t.

// Items [first, end), kU per thread per round: thread t of CTA c takes first + c * kThreads + t
// + (r * kU + u) * step, step = grid * kThreads. All kU loads of a round come before its stores.
// load(i) -> In; store(const In&, i).
template <int kU, typename Index, typename Load, typename Store>
INA_HD inline void GridStride(unsigned cta, unsigned thread, unsigned grid, Index first, Index end,
                              Load&& load, Store&& store) {
  const Index step = static_cast<Index>(grid) * kThreads;
  for (Index i0 = first + static_cast<Index>(cta) * kThreads + thread; i0 < end; i0 += kU * step) {
    decltype(load(i0)) in[kU];
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int u = 0; u < kU; ++u) {
      const Index i = i0 + static_cast<Index>(u) * step;
      if (i < end) in[u] = load(i);
    }
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int u = 0; u < kU; ++u) {
      const Index i = i0 + static_cast<Index>(u) * step;
      if (i < end) store(in[u], i);
    }
  }
}

// One item per thread per round: fn(i) for i in [first, end).
template <typename Index, typename Fn>
INA_HD inline void GridStrideEach(unsigned cta, unsigned thread, unsigned grid, Index first,
                                  Index end, Fn&& fn) {
  const Index step = static_cast<Index>(grid) * kThreads;
  for (Index i = first + static_cast<Index>(cta) * kThreads + thread; i < end; i += step) fn(i);
}

// BlockExps: groups of `group` lanes (group divides 32), one K-block per group per round; the
// groups of a warp take consecutive blocks. fn(b, glane, valid) runs for every round of every
// lane, valid = b < blocks: all lanes of a warp run the same rounds, so full-warp reductions in fn
// never see an exited lane. A lane with valid reduces block b together with its group.
template <typename Fn>
INA_HD inline void BlockExpRounds(unsigned cta, unsigned thread, unsigned grid, unsigned group,
                                  size_t blocks, Fn&& fn) {
  const unsigned lane = thread % 32;
  const size_t groups_per_cta = kThreads / group;
  const size_t step = static_cast<size_t>(grid) * groups_per_cta;
  const size_t warp_first =
      static_cast<size_t>(cta) * groups_per_cta + (thread / 32) * (32 / group);
  for (size_t wb = warp_first; wb < blocks; wb += step) {
    const size_t b = wb + lane / group;
    fn(b, lane % group, b < blocks);
  }
}

// ---------------------------------------------------------------------------------------------
// Offsets: the bytes an item touches, from each side's base pointer.

// Element i's int32 in the blocked layout (block b = i / k).
template <typename Index>
INA_HD inline size_t WireOffset(Index i, Index b, Index k, Index stride) {
  return static_cast<size_t>(b) * stride + static_cast<size_t>(i - b * k) * 4;
}

// Block of vector v (elements 4v .. 4v+3, one block because K % 4 == 0) and of element i.
template <typename Index>
INA_HD inline Index VecBlock(Index v, Index k) {
  return v * static_cast<Index>(kVec) / k;
}
template <typename Index>
INA_HD inline Index ElemBlock(Index i, Index k) {
  return i / k;
}

// Vector v of a dense element array (input of quantize, output of dequantize).
template <typename Index>
INA_HD inline size_t VecElemOffset(Index v, size_t elem_bytes) {
  return static_cast<size_t>(v) * kVec * elem_bytes;
}
template <typename Index>
INA_HD inline size_t ElemOffset(Index i, size_t elem_bytes) {
  return static_cast<size_t>(i) * elem_bytes;
}

// Vector v's four int32 (contiguous within its block).
template <typename Index>
INA_HD inline size_t VecWireOffset(Index v, Index k, Index stride) {
  return WireOffset<Index>(v * static_cast<Index>(kVec), VecBlock(v, k), k, stride);
}

}  // namespace ina::gpu::plan
