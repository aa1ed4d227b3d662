// The per-block CRC32C kernel of ina/gpu/crc.h over crc_elem.h's arithmetic.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "ina/gpu/crc.h"
#include "ina/gpu/crc_elem.h"
#include "ina/gpu/device.h"

namespace ina::gpu {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxGrid = 4096;  // CTAs per launch; grid-stride beyond
constexpr unsigned kFullMask = 0xffffffffu;

__device__ const crc::Crc32cTables kDeviceTables = crc::MakeCrc32cTables();

// `group` lanes (a power of two <= 32) per block; a warp covers 32 / group blocks per round.
// Each thread block first copies the table into shared memory and computes the lanes'
// multipliers for a full block and for the last one (which may be shorter): group threads each,
// a few hundred operations once per thread block.
__global__ void BlockCrcKernel(const uint32_t* __restrict__ wire, size_t n, uint32_t k,
                               size_t blocks, unsigned group, uint32_t last_words,
                               uint32_t* __restrict__ crcs) {
  __shared__ uint32_t t[4][256];
  __shared__ uint32_t factor[2][32];  // [0]: full blocks, [1]: the last block
  for (unsigned i = threadIdx.x; i < 4 * 256; i += blockDim.x) {
    t[i / 256][i % 256] = kDeviceTables.t[i / 256][i % 256];
  }
  if (threadIdx.x < 64 && threadIdx.x % 32 < group) {
    const unsigned g = threadIdx.x % 32;
    const uint32_t words = threadIdx.x < 32 ? k : last_words;
    factor[threadIdx.x / 32][g] = crc::BlockCrcFactor(words, group, g);
  }
  __syncthreads();
  const unsigned lane = threadIdx.x % 32;
  const unsigned glane = lane % group;
  const size_t groups_per_cta = kThreads / group;
  const size_t stride = static_cast<size_t>(gridDim.x) * groups_per_cta;
  // The loop bound is per warp, so every lane reaches the shuffles below.
  const size_t warp_first =
      static_cast<size_t>(blockIdx.x) * groups_per_cta + (threadIdx.x / 32) * (32 / group);
  for (size_t wb = warp_first; wb < blocks; wb += stride) {
    const size_t b = wb + lane / group;
    uint32_t term = 0;
    if (b < blocks) {
      const size_t first = b * k;
      const bool last = b + 1 == blocks;
      const uint32_t words = last ? last_words : k;
      const uint32_t reg = crc::BlockCrcLane(t, wire + first, words, group, glane);
      term = crc::BlockCrcTerm(reg, factor[last ? 1 : 0][glane]);
    }
    for (unsigned off = group / 2; off > 0; off /= 2) term ^= __shfl_xor_sync(kFullMask, term, off);
    if (b < blocks && glane == 0) crcs[b] = ~term;
  }
}

}  // namespace

Status BlockCrcs(const uint8_t* wire, size_t n, int k, uint32_t* crcs, cudaStream_t stream) {
  if (k < 1) return InvalidArgument("gpu BlockCrcs: k must be >= 1, got " + std::to_string(k));
  if (n > 0 && (wire == nullptr || crcs == nullptr)) {
    return InvalidArgument("gpu BlockCrcs: null pointer with n = " + std::to_string(n));
  }
  if (reinterpret_cast<uintptr_t>(wire) % 4 != 0 || reinterpret_cast<uintptr_t>(crcs) % 4 != 0) {
    return InvalidArgument("gpu BlockCrcs: wire and crcs must be aligned to 4 bytes");
  }
  if (n == 0) return Status::Ok();
  const auto kk = static_cast<uint32_t>(k);
  const size_t blocks = (n + kk - 1) / kk;
  const unsigned group = crc::BlockCrcLanes(kk);
  const auto last_words = static_cast<uint32_t>(n - (blocks - 1) * kk);
  const size_t ctas = (blocks * group + kThreads - 1) / kThreads;
  const auto grid = static_cast<unsigned>(std::clamp<size_t>(ctas, 1, kMaxGrid));
  BlockCrcKernel<<<grid, kThreads, 0, stream>>>(reinterpret_cast<const uint32_t*>(wire), n, kk,
                                                blocks, group, last_words, crcs);
  return CudaStatus(cudaGetLastError(), "launch BlockCrcKernel");
}

Status LoadCrcKernels() {
  cudaFuncAttributes a{};
  return CudaStatus(cudaFuncGetAttributes(&a, BlockCrcKernel),
                    "cudaFuncGetAttributes(BlockCrcKernel)");
}

}  // namespace ina::gpu
