// Host runs of the quantization launches of drivers/gpu/src/quant.cu: the same plans
// (quant_plan.h's LaunchesOf) and, for every thread (cta, thread) of every launch, the same thread
// bodies (quant_map.h) the kernels call. Threads run one after another; the plan tests check that
// no two touch the same bytes, so the order is not part of the result. grid_override (non-zero)
// runs every launch with that many CTAs instead of the plan's, for more grid-stride rounds on
// small tensors. BlockExps' warp reductions are replaced by combining the partials of a block's
// lanes, after checking that they are exactly the lanes the reduction would combine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ina/gpu/quant_map.h"
#include "ina/gpu/quant_plan.h"

namespace ina::gpu::testing {

namespace pl = ::ina::gpu::plan;
namespace mp = ::ina::gpu::map;

template <typename T, typename Index>
pl::Plan RunQuantize(const T* x, size_t n, int k, const uint8_t* exps, int precision, uint8_t* out,
                     size_t stride, unsigned grid_override = 0) {
  const pl::Plan plan = pl::PlanQuantize(x, sizeof(T), n, k, out, stride);
  const auto kk = static_cast<Index>(k), ss = static_cast<Index>(stride);
  for (const pl::Launch& l : pl::LaunchesOf(plan)) {
    const unsigned grid = grid_override != 0 ? grid_override : l.grid;
    const auto first = static_cast<Index>(l.first), end = static_cast<Index>(l.end);
    for (unsigned cta = 0; cta < grid; ++cta) {
      for (unsigned t = 0; t < pl::kThreads; ++t) {
        switch (l.body) {
          case pl::Body::kVecWide:
            mp::QuantizeVecThread<T, Index, true>(cta, t, grid, x, first, end, kk, exps, precision,
                                                  out, ss);
            break;
          case pl::Body::kVec:
            mp::QuantizeVecThread<T, Index, false>(cta, t, grid, x, first, end, kk, exps, precision,
                                                   out, ss);
            break;
          case pl::Body::kOne:
            mp::QuantizeOneThread<T, Index>(cta, t, grid, x, first, end, kk, exps, precision, out,
                                            ss);
            break;
        }
      }
    }
  }
  return plan;
}

template <typename Index, bool kAvg>
void RunDequantizeLaunch(const pl::Launch& l, unsigned grid, const uint8_t* in, Index ss, Index kk,
                         const uint8_t* exps, int precision, float d, float* out) {
  const auto first = static_cast<Index>(l.first), end = static_cast<Index>(l.end);
  for (unsigned cta = 0; cta < grid; ++cta) {
    for (unsigned t = 0; t < pl::kThreads; ++t) {
      switch (l.body) {
        case pl::Body::kVecWide:
          mp::DequantizeVecThread<Index, kAvg, true>(cta, t, grid, in, ss, first, end, kk, exps,
                                                     precision, d, out);
          break;
        case pl::Body::kVec:
          mp::DequantizeVecThread<Index, kAvg, false>(cta, t, grid, in, ss, first, end, kk, exps,
                                                      precision, d, out);
          break;
        case pl::Body::kOne:
          mp::DequantizeOneThread<Index, kAvg>(cta, t, grid, in, ss, first, end, kk, exps,
                                               precision, d, out);
          break;
      }
    }
  }
}

template <typename Index>
pl::Plan RunDequantize(const uint8_t* in, size_t stride, size_t n, int k, const uint8_t* exps,
                       int precision, int divisor, float* out, unsigned grid_override = 0) {
  const pl::Plan plan = pl::PlanDequantize(in, stride, n, k, out);
  const auto kk = static_cast<Index>(k), ss = static_cast<Index>(stride);
  const float d = static_cast<float>(divisor);
  for (const pl::Launch& l : pl::LaunchesOf(plan)) {
    const unsigned grid = grid_override != 0 ? grid_override : l.grid;
    if (divisor > 1) {
      RunDequantizeLaunch<Index, true>(l, grid, in, ss, kk, exps, precision, d, out);
    } else {
      RunDequantizeLaunch<Index, false>(l, grid, in, ss, kk, exps, precision, d, out);
    }
  }
  return plan;
}

// BlockExps as BlockExpKernel runs it. Returns "" or what is wrong with the lanes' mapping: a
// block's lanes must be `group` distinct lanes glane 0..group-1 of one aligned group of a warp
// (what the shuffle / __reduce_*_sync reduction combines).
template <typename T>
std::string RunBlockExps(const T* x, size_t n, int k, uint8_t* exps, uint8_t* nonfinite,
                         bool* used_vec, unsigned grid_override = 0) {
  const size_t kk = static_cast<size_t>(k);
  const size_t blocks = (n + kk - 1) / kk;
  const bool vec = pl::BlockExpVec(x, sizeof(T), k);
  const unsigned group = pl::BlockExpGroup(k, vec);
  const unsigned grid = grid_override != 0 ? grid_override : pl::BlockExpGrid(blocks, group);
  *used_vec = vec;
  if (32 % group != 0) return "group " + std::to_string(group) + " does not divide a warp";
  std::vector<mp::ExpPartial> acc(blocks);
  std::vector<uint32_t> lanes(blocks, 0);
  std::vector<size_t> group_of(blocks, SIZE_MAX);
  std::string err;
  for (unsigned cta = 0; cta < grid; ++cta) {
    for (unsigned t = 0; t < pl::kThreads; ++t) {
      const size_t gthread = static_cast<size_t>(cta) * pl::kThreads + t;
      pl::BlockExpRounds(cta, t, grid, group, blocks, [&](size_t b, unsigned glane, bool valid) {
        if (!valid) return;
        if (glane != (t % 32) % group || (lanes[b] >> glane & 1) != 0 ||
            (group_of[b] != SIZE_MAX && group_of[b] != gthread / group)) {
          if (err.empty()) err = "block " + std::to_string(b) + ": lane mapping";
          return;
        }
        lanes[b] |= 1u << glane;
        group_of[b] = gthread / group;
        const mp::ExpPartial p = vec ? mp::BlockExpPartial<T, true>(x, n, kk, b, glane, group)
                                     : mp::BlockExpPartial<T, false>(x, n, kk, b, glane, group);
        acc[b].max_bits = acc[b].max_bits > p.max_bits ? acc[b].max_bits : p.max_bits;
        acc[b].bad |= p.bad;
      });
    }
  }
  const uint32_t all = group == 32 ? 0xffffffffu : (1u << group) - 1;
  for (size_t b = 0; b < blocks; ++b) {
    if (lanes[b] != all && err.empty()) err = "block " + std::to_string(b) + ": lanes missing";
    mp::BlockExpFinish(acc[b], b, exps, nonfinite);
  }
  return err;
}

}  // namespace ina::gpu::testing
