#include "staged_op.h"

#include <algorithm>
#include <string>

namespace ina::host::internal {

using std::chrono::microseconds;

namespace {
constexpr microseconds kWaitSlice{1000};  // re-check stop / cancel this often while waiting
}

StagedOp::StagedOp(MemoryDomain& domain, uint8_t* staging, void* user, size_t n, size_t elem_bytes,
                   size_t k, const std::atomic<bool>& stop, const std::atomic<bool>* cancel)
    : domain_(domain),
      staging_(staging),
      user_(static_cast<uint8_t*>(user)),
      n_(n),
      elem_bytes_(elem_bytes),
      k_(k),
      stop_(stop),
      cancel_(cancel) {
  const size_t blocks_per_chunk = std::max<size_t>(1, domain.chunk_bytes() / (elem_bytes * k));
  chunk_elems_ = blocks_per_chunk * k;
  chunks_ = (n + chunk_elems_ - 1) / chunk_elems_;
  in_fence_.assign(chunks_, 0);
  in_done_ = std::make_unique<std::atomic<bool>[]>(chunks_);
  left_ = std::make_unique<std::atomic<uint32_t>[]>(chunks_);
  for (size_t c = 0; c < chunks_; ++c) {
    in_done_[c].store(false, std::memory_order_relaxed);
    left_[c].store(static_cast<uint32_t>((ChunkElems(c) + k - 1) / k), std::memory_order_relaxed);
  }
}

Status StagedOp::Start() {
  for (size_t c = 0; c < chunks_; ++c) {
    const size_t off = c * chunk_elems_ * elem_bytes_;
    auto f = domain_.CopyIn(staging_ + off, user_ + off, ChunkElems(c) * elem_bytes_);
    if (!f.ok()) {
      return f.status().WithContext(domain_.name() + ": copy of chunk " + std::to_string(c) +
                                    " into staging");
    }
    in_fence_[c] = *f;
    last_fence_.store(*f, std::memory_order_release);
  }
  return Status::Ok();
}

Status StagedOp::WaitFence(MemoryDomain::Fence f, bool interruptible) {
  while (true) {
    auto r = domain_.Wait(f, kWaitSlice);
    if (!r.ok()) return r.status();
    if (*r) return Status::Ok();
    if (!interruptible) continue;
    if (stop_.load(std::memory_order_relaxed)) {
      return Aborted("communicator destroyed while the op waited for a copy into staging");
    }
    if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) {
      return Aborted("another lane of this op failed");
    }
  }
}

Status StagedOp::Acquire(int64_t b) {
  const size_t c = ChunkOf(b);
  if (in_done_[c].load(std::memory_order_acquire)) return Status::Ok();
  Status s = WaitFence(in_fence_[c], /*interruptible=*/true);
  if (!s.ok()) {
    return s.WithContext(domain_.name() + ": chunk " + std::to_string(c) + " into staging");
  }
  in_done_[c].store(true, std::memory_order_release);
  return Status::Ok();
}

Status StagedOp::Release(int64_t b) {
  const size_t c = ChunkOf(b);
  if (left_[c].fetch_sub(1, std::memory_order_acq_rel) != 1) return Status::Ok();
  const size_t off = c * chunk_elems_ * elem_bytes_;
  auto f = domain_.CopyOut(user_ + off, staging_ + off, ChunkElems(c) * elem_bytes_);
  if (!f.ok()) {
    return f.status().WithContext(domain_.name() + ": copy of chunk " + std::to_string(c) +
                                  " back from staging");
  }
  // Fences grow in enqueue order; keep the largest (lanes may race here).
  MemoryDomain::Fence cur = last_fence_.load(std::memory_order_relaxed);
  while (*f > cur && !last_fence_.compare_exchange_weak(cur, *f)) {
  }
  return Status::Ok();
}

Status StagedOp::Finish(const Status& op_status) {
  // Not interruptible: the staging buffer is reused (and the caller told the tensor is free) only
  // once no copy can touch them.
  Status s = WaitFence(last_fence_.load(std::memory_order_acquire), /*interruptible=*/false);
  if (!op_status.ok()) return op_status;
  if (!s.ok()) return s.WithContext(domain_.name() + ": copies of the staged all-reduce");
  return Status::Ok();
}

}  // namespace ina::host::internal
