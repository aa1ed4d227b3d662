// MemoryDomain: where a tensor lives, and the asynchronous copy engine between it and host
// staging memory (docs/gpu.md, "The memory domain"; docs/host.md, "Device memory").
//
// Communicator::AllReduce(data, domain, stream) takes a tensor in `domain`'s memory (GPU memory
// for the CUDA domain of drivers/gpu, ina/gpu/memory_domain.h). The communicator stages it
// through host memory the domain allocates (page-locked for the CUDA domain), in chunks of
// chunk_bytes(): every chunk's copy into staging is enqueued at the start of the op, the progress
// engine waits for a chunk's fence only when it first reads a block of that chunk (so chunk i+1
// is still copying while chunk i is on the wire), and a chunk's copy back is enqueued as soon as
// its last block's result is in staging. The request completes when the last copy back is done.
// Nothing synchronises the whole device: one fence (CUDA event) per copy.
// A domain that quantizes (quantizes(), below; the CUDA domain and HostDomain by default) moves
// float tensors as the wire's int32 instead: per chunk it computes the block exponents, and once
// the fabric agreed them it quantizes the chunk into staging, and later dequantizes the chunk's
// results from staging into the tensor (docs/gpu.md, "Quantizing on the device").
//
// The interface is narrow on purpose: libina builds and runs without CUDA. This header has no
// CUDA types (`stream` is an opaque cudaStream_t for the CUDA domain); HostDomain (below) is the
// same pipeline over host memory, with a real asynchronous copy thread, so the staging and
// pipelining logic is tested on every machine.
//
// Contract of every implementation:
//  - Copies complete in the order they were enqueued: when fence f is complete, so is every
//    fence below f. A failed copy fails its fence and every later one (sticky error).
//  - Thread-safe: the communicator's lanes call Wait/Poll and enqueue copies from their threads.
//  - Nothing here throws; errors are Status (the CUDA domain names the CUDA call).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ina/base/status.h"

namespace ina::host {

enum class MemoryKind { kHost, kCuda };

// Host memory the domain's copy engine reads and writes (page-locked for CUDA: cudaHostAlloc).
// Freed by the destructor; must not outlive its domain.
class StagingBuffer {
 public:
  virtual ~StagingBuffer() = default;
  virtual uint8_t* data() const = 0;
  virtual size_t size() const = 0;  // bytes
};

// Memory of a domain's own that a NIC sends from (GPUDirect RDMA; docs/gpu.md, "GPUDirect
// RDMA"): the communicator has the domain quantize into it, registers it with a transport that
// posts packet payloads from where they lie (Transport::RegisterTxBody: verbs), and sends every
// packet's payload from it, so the wire's int32 never cross host memory on the way out. Freed by
// the destructor (after the transport unregistered it); must not outlive its domain.
class NicBuffer {
 public:
  virtual ~NicBuffer() = default;
  virtual uint8_t* data() const = 0;  // the domain's address (CUDA: the device pointer)
  virtual size_t size() const = 0;    // bytes
  // A dma-buf that exports [data(), data() + size()) from dmabuf_offset(), owned by the buffer
  // (CUDA: cuMemGetHandleForAddressRange; the NIC registers it with ibv_reg_dmabuf_mr); -1 for
  // host memory (registered with ibv_reg_mr).
  virtual int dmabuf_fd() const = 0;
  virtual uint64_t dmabuf_offset() const { return 0; }
};

class MemoryDomain {
 public:
  // A copy's completion ticket, from 1, increasing in enqueue order. 0: none (always complete).
  using Fence = uint64_t;

  virtual ~MemoryDomain() = default;

  virtual MemoryKind kind() const = 0;
  virtual std::string name() const = 0;  // for messages: "cuda:0", "host-async"
  // The pipeline's copy granularity in bytes (the communicator rounds it to whole blocks).
  virtual size_t chunk_bytes() const = 0;

  // OK when [p, p + bytes) is memory of this domain; InvalidArgument naming what it is otherwise
  // (the CUDA domain: cudaPointerGetAttributes; host memory passed as device memory is an
  // error, not a silent slow path).
  virtual Status CheckPointer(const void* p, size_t bytes) const = 0;

  // Staging of at least `bytes` bytes. Errors: ResourceExhausted, the domain's error.
  virtual Result<std::unique_ptr<StagingBuffer>> AllocStaging(size_t bytes) = 0;

  // Copies enqueued after this call start after the work enqueued on `stream` so far (CUDA:
  // an event recorded on it that the copy stream waits for; no host wait). nullptr: the legacy
  // default stream for CUDA, nothing for HostDomain. Does not block.
  virtual Status OrderAfter(void* stream) = 0;

  // Enqueue a copy of `bytes` bytes: domain memory -> staging (CopyIn) or staging -> domain memory
  // (CopyOut). Do not block on the copy; return its fence. Both buffers must stay alive and
  // untouched (the source unchanged, the destination unread) until the fence completes.
  virtual Result<Fence> CopyIn(uint8_t* staging, const void* src, size_t bytes) = 0;
  virtual Result<Fence> CopyOut(void* dst, const uint8_t* staging, size_t bytes) = 0;

  // Blocks up to `timeout` for fence `f`: true when it completed, false when the time ran out,
  // the copy's error when it (or an earlier copy) failed. timeout 0 polls.
  virtual Result<bool> Wait(Fence f, std::chrono::microseconds timeout) = 0;

  // --- Quantization in the domain (docs/gpu.md, "Quantizing on the device") ---
  //
  // A domain whose quantizes() is true runs a float all-reduce's quantization on its own
  // processor: the communicator asks it for the block exponents of each chunk, agrees them with
  // the fabric, has it quantize the chunk into staging as the wire's big-endian int32, sends from
  // there, and has it dequantize the results from staging into the tensor. int32 tensors keep
  // the copies above (to_wire is a byte swap). Each call below only enqueues, in the same order
  // as the copies (its fence completes after every earlier fence); the arrays in staging must
  // stay alive and unchanged (written ones unread) until its fence completes. The results are
  // those of ScalarKernels() (ina/host/quant.h) applied block by block, bit for bit.
  // Blocks: block b of x[0..n) is x[b*k, min(n, (b+1)*k)); blocks = ceil(n / k).
  // Default: quantizes() false and the three calls Unimplemented.
  virtual bool quantizes() const { return false; }

  // exps[b] = biased block exponent of block b of src[0..n) (domain memory, float32),
  // nonfinite[b] = 1 if the block holds an Inf or NaN, else 0 (staging, `blocks` bytes each).
  virtual Result<Fence> BlockExps(const float* src, size_t n, size_t k, uint8_t* exps,
                                  uint8_t* nonfinite);
  // Quantizes src[0..n) (domain memory) block by block at the biased exponents exps[b] (staging;
  // the fabric's max, >= the block's own) and `precision` (quant::Precision(world)) into `wire`
  // (staging, 4 * n bytes: block b at wire + 4 * k * b, big-endian int32). REQUIRES (as the CPU
  // kernel): the block's elements finite (the communicator sends zeros for a nonfinite block and
  // ignores what was written for it).
  virtual Result<Fence> Quantize(const float* src, size_t n, size_t k, const uint8_t* exps,
                                 int precision, uint8_t* wire);
  // dst[0..n) (domain memory, float32) = the big-endian int32 in `wire` (staging, laid out as
  // Quantize writes it) dequantized at exps[b] and precision, divided by float(divisor) when
  // divisor > 1 (docs/gpu.md, averaging). REQUIRES: divisor >= 1.
  virtual Result<Fence> Dequantize(float* dst, const uint8_t* wire, size_t n, size_t k,
                                   const uint8_t* exps, int precision, int divisor);

  // --- Sending from the domain's memory (GPUDirect RDMA; docs/gpu.md) ---
  //
  // A NicBuffer of at least `bytes` bytes, which Quantize may take as its `wire` (then the
  // int32 stay in domain memory) and PayloadCrcs reads. Errors say why there is none, in one
  // line, for the communicator's fallback message (the CUDA domain: no dma-buf support on the
  // device or driver, the export's error). Default: Unimplemented.
  virtual Result<std::unique_ptr<NicBuffer>> AllocNicBuffer(size_t bytes);
  // crcs[b] = proto::Crc32c(0, block b's bytes, 4 * count_b) for each block of wire[0, 4n) laid
  // out as Quantize writes it (wire in staging or in a NicBuffer of this domain; crcs in
  // staging, host byte order), so the sender seals a packet whose payload it never reads
  // (proto::Crc32cCombine). Enqueued in order like the calls above. Default: Unimplemented.
  virtual Result<Fence> PayloadCrcs(const uint8_t* wire, size_t n, size_t k, uint32_t* crcs);
  // Quantize, then PayloadCrcs of what it wrote (same arguments, same results), as one call: a
  // domain that can fuses them and takes each block's CRC while the block is still in cache, so
  // the chunk is not read a second time (HostDomain: quant::Kernels::quantize_crc per block). The
  // CRC of a nonfinite block is that of the bytes written for it. Default: Quantize, then
  // PayloadCrcs (two passes; the fence is the second's).
  virtual Result<Fence> QuantizeCrcs(const float* src, size_t n, size_t k, const uint8_t* exps,
                                     int precision, uint8_t* wire, uint32_t* crcs);
};

// Host memory through the same pipeline: CopyIn/CopyOut (and the quantization calls) run on one
// copy thread in FIFO order (fences complete in order), staging is plain heap memory. For tests of
// the staged path on machines without a GPU, and as the reference the CUDA domain is compared with.
// QuantizeCrcs is fused here (one pass per block).
// Threading: thread-safe. The destructor finishes the queued copies, then joins the thread.
// With `quantize` (the default) it also quantizes in the domain (quantizes() true): the copy
// thread runs ScalarKernels() for BlockExps, Quantize and Dequantize, so the device-quantizing
// pipeline runs, in order and asynchronously, on every machine.
// NIC buffers (AllocNicBuffer): heap memory (kHeap, the default: the verbs transport registers it
// with ibv_reg_mr, so the whole GPUDirect send path runs over soft-RoCE without a GPU), none
// (kNone: Unimplemented, the host-staging path), or a memfd exported as if it were a dma-buf
// (kMemfd: a provider's ibv_reg_dmabuf_mr refuses it, which tests the fallback).
enum class HostNicMemory { kHeap, kNone, kMemfd };
struct HostDomainOptions {
  size_t chunk_bytes = size_t{1} << 20;  // >= 4
  bool quantize = true;
  HostNicMemory nic_memory = HostNicMemory::kHeap;
};
Result<std::unique_ptr<MemoryDomain>> MakeHostDomain(const HostDomainOptions& options = {});

}  // namespace ina::host
