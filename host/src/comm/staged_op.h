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
// Threading: Acquire and Release are called by every lane's progress thread (each lane touches
// its own blocks; the chunk counters are atomic, the domain is thread-safe). Start and Finish by
// lane 0's thread, outside RunOnAllLanes.
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
  // Block b's result is in staging: its chunk's last block enqueues the copy back.
  virtual Status Release(int64_t b) = 0;
};

class StagedOp final : public BlockStager {
 public:
  // `staging` holds n * elem_bytes bytes; `user` is the caller's tensor in `domain`. Chunks are
  // domain.chunk_bytes() rounded down to whole blocks of k elements (at least one block).
  // `stop` and `cancel` (may be null) are polled while Acquire waits.
  StagedOp(MemoryDomain& domain, uint8_t* staging, void* user, size_t n, size_t elem_bytes,
           size_t k, const std::atomic<bool>& stop, const std::atomic<bool>* cancel);

  // Enqueues every chunk's copy into staging.
  Status Start();
  Status Acquire(int64_t b) override;
  Status Release(int64_t b) override;
  // Waits for every copy enqueued so far (bounded only by the domain). `op_status` is the op's
  // result; returns it, or the copies' error when the op itself succeeded.
  Status Finish(const Status& op_status);

  size_t chunks() const { return chunks_; }
  size_t chunk_elems() const { return chunk_elems_; }

 private:
  Status WaitFence(MemoryDomain::Fence f, bool interruptible);
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
};

}  // namespace ina::host::internal
