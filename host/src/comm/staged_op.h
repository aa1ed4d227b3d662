// StagedOp: one all-reduce call on a tensor in a MemoryDomain (ina/host/memory_domain.h),
// staged through host memory in chunks (docs/gpu.md, "The pipeline").
//
// Start enqueues every chunk's copy into staging (fences in chunk order). The slot window
// (slot_window.h) calls Acquire(b) before it first reads block b of the staged tensor, which waits
// for that chunk's fence only (already complete in the common case: the copies run ahead of the
// network), and Release(b) once block b's result is in staging; the chunk's last Release enqueues
// the chunk's copy back. Finish waits for every copy enqueued, also after a failure, so no copy
// touches the staging or the caller's tensor after the op ended.
//
// Quantizing in the domain (a float tensor and domain.quantizes(); docs/gpu.md, "Quantizing on the
// device"): Start enqueues every chunk's BlockExps instead; the window reads a block's local
// exponent with LocalExp (waits for its chunk's BlockExps), tells the agreed exponent with Agree
// (the last of a quantization chunk enqueues the chunk's Quantize into wire()), polls Quantized
// before it sends a block (never waits: a block's exponent may depend on results still to come,
// so a slot whose block is not quantized yet is parked, not blocked), copies the block from
// wire() into its packet, writes the result there, and Release(b) of a quantization chunk's last
// block enqueues the chunk's Dequantize into the tensor (then NaN over the blocks whose result
// was nonfinite). Quantization chunks are at most window/2 blocks (and at most the domain's
// chunk): block b's exponent comes with block b-W's result, so chunk c's exponents are all known
// once chunk c-2 has its results, and the device quantizes chunk c while chunk c-1 is on the
// wire; a chunk of more than W blocks would wait for its own results.
//
// Threading: Acquire, Release, LocalExp, Agree and Quantized are called by every lane's progress
// thread (each lane touches its own blocks; the chunk counters are atomic, the domain is
// thread-safe). Start and Finish by lane 0's thread, outside RunOnAllLanes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ina/base/status.h"
#include "ina/host/memory_domain.h"

namespace ina::host::internal {

// What the slot window needs of a staged tensor.
class BlockStager {
 public:
  virtual ~BlockStager() = default;
  // Block b's elements are in staging (waits for its chunk's copy). Errors: the copy's, Aborted
  // when the op is stopped or cancelled while waiting.
  virtual Status Acquire(int64_t b) = 0;
  // Block b's result is in staging: its chunk's last block enqueues the copy back (or the
  // dequantization).
  virtual Status Release(int64_t b) = 0;

  // Quantizing in the domain (see above); the defaults are those of a copying stager.
  virtual bool quantizes() const { return false; }
  // Block b's int32 (big-endian) in staging, 4 * k bytes a block.
  virtual uint8_t* wire() const { return nullptr; }
  // Block b's local biased exponent and nonfinite flag (waits for its chunk's BlockExps).
  virtual Status LocalExp(int64_t b, uint8_t* exp, bool* nonfinite);
  // Block b's agreed exponent (the fabric's max), once per block.
  virtual Status Agree(int64_t b, uint8_t exp);
  // Whether block b is quantized into wire() (polls, never waits).
  virtual Result<bool> Quantized(int64_t b);
  // Block b's result carried the nonfinite flag: it becomes NaN (call before Release(b)).
  virtual void ResultNonfinite(int64_t /*b*/) {}
  // Sending from the domain's memory (GPUDirect RDMA, docs/gpu.md): block b's int32 lie at
  // tx_body() + 4 * k * b in a NicBuffer the host never reads (the packet takes its payload from
  // there: TxMessage::body), and PayloadCrc(b) is their CRC32C (valid once Quantized(b)).
  // nullptr: the window copies the block from wire() into its packet.
  virtual const uint8_t* tx_body() const { return nullptr; }
  virtual uint32_t PayloadCrc(int64_t /*b*/) const { return 0; }
};

class StagedOp final : public BlockStager {
 public:
  // Quantizing in the domain: the world's precision and the window W (quantization chunks are at
  // most max(1, W/2) blocks).
  struct Quant {
    int precision = 30;
    uint16_t window = 1;
    int divisor = 1;  // averaging: passed to the domain's Dequantize (world_size; 1: sum)
    // A NicBuffer's memory of at least 4 * n bytes (GPUDirect RDMA): the domain quantizes into it
    // and computes each block's payload CRC, packets take their payload from it (tx_body()), and
    // results still come back into staging. nullptr: quantize into staging.
    uint8_t* nic_wire = nullptr;
  };

  // The staging bytes an op needs: n * elem_bytes, or with quantization the int32 blocks, three
  // per-block arrays and one block of NaN (and with a NIC wire, one CRC per block).
  static size_t StagingBytes(size_t n, size_t elem_bytes, size_t k, bool quantize,
                             bool nic_wire = false);

  // `staging` holds StagingBytes(...) bytes; `user` is the caller's tensor in `domain`. Chunks
  // are domain.chunk_bytes() rounded down to whole blocks of k elements (at least one block).
  // `stop` and `cancel` (may be null) are polled while Acquire waits. `quant` (float32 tensors,
  // domain.quantizes()): quantize in the domain.
  StagedOp(MemoryDomain& domain, uint8_t* staging, void* user, size_t n, size_t elem_bytes,
           size_t k, const std::atomic<bool>& stop, const std::atomic<bool>* cancel,
           const Quant* quant = nullptr);

  // Enqueues every chunk's copy into staging.
  Status Start();
  Status Acquire(int64_t b) override;
  Status Release(int64_t b) override;
  bool quantizes() const override { return quant_; }
  uint8_t* wire() const override { return quant_ ? staging_ : nullptr; }
  Status LocalExp(int64_t b, uint8_t* exp, bool* nonfinite) override;
  Status Agree(int64_t b, uint8_t exp) override;
  Result<bool> Quantized(int64_t b) override;
  void ResultNonfinite(int64_t b) override { result_nf_[static_cast<size_t>(b)] = 1; }
  const uint8_t* tx_body() const override { return nic_wire_; }
  uint32_t PayloadCrc(int64_t b) const override { return crcs_[b]; }
  // Waits for every copy enqueued so far (bounded only by the domain). `op_status` is the op's
  // result; returns it, or the copies' error when the op itself succeeded.
  Status Finish(const Status& op_status);

  size_t chunks() const { return chunks_; }
  size_t chunk_elems() const { return chunk_elems_; }
  size_t quant_chunk_blocks() const { return qblocks_; }

 private:
  Status WaitFence(MemoryDomain::Fence f, bool interruptible);
  void NoteFence(MemoryDomain::Fence f);
  Status EnqueueDequantize(size_t qc);
  size_t QChunkOf(int64_t b) const { return static_cast<size_t>(b) / qblocks_; }
  size_t QChunkBlocks(size_t qc) const { return std::min(qblocks_, blocks_ - qc * qblocks_); }
  size_t BlockElems(size_t b) const { return std::min(k_, n_ - b * k_); }
  size_t ChunkOf(int64_t b) const { return static_cast<size_t>(b) * k_ / chunk_elems_; }
  size_t ChunkElems(size_t c) const { return std::min(chunk_elems_, n_ - c * chunk_elems_); }

  MemoryDomain& domain_;
  uint8_t* const staging_;
  uint8_t* const user_;
  const size_t n_, elem_bytes_, k_;
  const std::atomic<bool>& stop_;
  const std::atomic<bool>* const cancel_;
  size_t chunk_elems_ = 0;
  size_t chunks_ = 0;
  std::vector<MemoryDomain::Fence> in_fence_;
  std::unique_ptr<std::atomic<bool>[]> in_done_;   // fence seen complete (skip the domain call)
  std::unique_ptr<std::atomic<uint32_t>[]> left_;  // blocks of the chunk without their result
  std::atomic<MemoryDomain::Fence> last_fence_{0};

  // Quantizing in the domain. Staging: wire (4n) | exps | nonfinite | agreed (blocks each) |
  // one block of NaN (4k).
  const bool quant_ = false;
  int precision_ = 30;
  int divisor_ = 1;
  size_t blocks_ = 0;
  size_t qblocks_ = 1;  // blocks per quantization chunk
  size_t qchunks_ = 0;
  uint8_t* exps_ = nullptr;
  uint8_t* nonfinite_ = nullptr;
  uint8_t* agreed_ = nullptr;
  uint8_t* nan_block_ = nullptr;
  uint8_t* nic_wire_ = nullptr;                        // Quant::nic_wire
  uint32_t* crcs_ = nullptr;                           // with a NIC wire: per block, in staging
  std::vector<uint8_t> result_nf_;                     // per block: its result was nonfinite
  std::unique_ptr<std::atomic<uint32_t>[]> unagreed_;  // per quantization chunk
  std::unique_ptr<std::atomic<MemoryDomain::Fence>[]> q_fence_;  // 0: Quantize not enqueued
  std::unique_ptr<std::atomic<bool>[]> q_done_;
};

}  // namespace ina::host::internal
