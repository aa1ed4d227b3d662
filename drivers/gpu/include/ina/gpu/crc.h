// Per-block CRC32C of a wire buffer on the GPU: the payload CRCs a sender needs to seal packets
// whose payload it never reads (GPUDirect RDMA; docs/gpu.md, "In the CUDA domain").
//
// A wire buffer of n int32 elements in K-blocks (as ina/gpu/quant.h's Quantize writes it with
// out_stride 0): block b is the 4 * min(k, n - b * k) bytes at wire + 4 * k * b. BlockCrcs writes
// crcs[b] = proto::Crc32c(0, those bytes) (zlib convention, host byte order) for every block.
// The arithmetic is ina/gpu/crc_elem.h's (unit-tested on the host); mapping: a group of
// crc::BlockCrcLanes(k) lanes of one warp per block (32 for k >= 128), each lane a contiguous
// segment of 32-bit words with the slicing-by-4 table in shared memory, the lanes' registers
// combined with one carry-less multiply each and a shuffle tree.
//
// Asynchrony, errors and threading as quant.h: only enqueues on `stream`; kInvalidArgument for
// k < 1, null pointers with n > 0, wire not 4-byte aligned; launch errors named. n == 0 enqueues
// nothing. Both pointers are device memory (or memory the device can reach).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ina/base/status.h"

namespace ina::gpu {

Status BlockCrcs(const uint8_t* wire, size_t n, int k, uint32_t* crcs, cudaStream_t stream);

// Loads BlockCrcs's kernel onto the current device now: why, as LoadQuantKernels (quant.h).
Status LoadCrcKernels();

}  // namespace ina::gpu
