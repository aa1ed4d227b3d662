#include "staged_op.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

namespace ina::host::internal {

using std::chrono::microseconds;

namespace {
constexpr microseconds kWaitSlice{1000};  // re-check stop / cancel this often while waiting
}  // namespace

Status BlockStager::LocalExp(int64_t, uint8_t*, bool*) {
  return Internal("staged op: LocalExp on a stager that does not quantize");
}
Status BlockStager::Agree(int64_t, uint8_t) {
  return Internal("staged op: Agree on a stager that does not quantize");
}
Result<bool> BlockStager::Quantized(int64_t) {
  return Internal("staged op: Quantized on a stager that does not quantize");
}

size_t StagedOp::StagingBytes(size_t n, size_t elem_bytes, size_t k, bool quantize, bool nic_wire) {
  if (!quantize) return n * elem_bytes;
  const size_t blocks = (n + k - 1) / k;
  // + alignment of the NaN block (and of the CRCs after it)
  return 4 * n + 3 * blocks + 4 * k + 16 + (nic_wire ? 4 * blocks : 0);
}

StagedOp::StagedOp(MemoryDomain& domain, uint8_t* staging, void* user, size_t n, size_t elem_bytes,
                   size_t k, const std::atomic<bool>& stop, const std::atomic<bool>* cancel,
                   const Quant* quant)
    : domain_(domain),
      staging_(staging),
      user_(static_cast<uint8_t*>(user)),
      n_(n),
      elem_bytes_(elem_bytes),
      k_(k),
      stop_(stop),
      cancel_(cancel),
      quant_(quant != nullptr) {
  const size_t blocks_per_chunk = std::max<size_t>(1, domain.chunk_bytes() / (elem_bytes * k));
  chunk_elems_ = blocks_per_chunk * k;
  chunks_ = (n + chunk_elems_ - 1) / chunk_elems_;
  blocks_ = (n + k - 1) / k;
  in_fence_.assign(chunks_, 0);
  in_done_ = std::make_unique<std::atomic<bool>[]>(chunks_);
  for (size_t c = 0; c < chunks_; ++c) in_done_[c].store(false, std::memory_order_relaxed);
  if (!quant_) {
    left_ = std::make_unique<std::atomic<uint32_t>[]>(chunks_);
    for (size_t c = 0; c < chunks_; ++c) {
      left_[c].store(static_cast<uint32_t>((ChunkElems(c) + k - 1) / k), std::memory_order_relaxed);
    }
    return;
  }
  precision_ = quant->precision;
  divisor_ = quant->divisor;
  qblocks_ = std::min<size_t>(blocks_per_chunk, std::max<size_t>(1, quant->window / 2));
  qchunks_ = (blocks_ + qblocks_ - 1) / qblocks_;
  exps_ = staging + 4 * n;
  nonfinite_ = exps_ + blocks_;
  agreed_ = nonfinite_ + blocks_;
  const uintptr_t nan_at = reinterpret_cast<uintptr_t>(agreed_ + blocks_);
  nan_block_ = agreed_ + blocks_ + ((16 - nan_at % 16) % 16);
  if (quant->nic_wire != nullptr) {
    nic_wire_ = quant->nic_wire;
    crcs_ = reinterpret_cast<uint32_t*>(nan_block_ + 4 * k);  // 16-byte aligned, as the NaN block
  }
  result_nf_.assign(blocks_, 0);
  left_ = std::make_unique<std::atomic<uint32_t>[]>(qchunks_);
  unagreed_ = std::make_unique<std::atomic<uint32_t>[]>(qchunks_);
  q_fence_ = std::make_unique<std::atomic<MemoryDomain::Fence>[]>(qchunks_);
  q_done_ = std::make_unique<std::atomic<bool>[]>(qchunks_);
  for (size_t c = 0; c < qchunks_; ++c) {
    left_[c].store(static_cast<uint32_t>(QChunkBlocks(c)), std::memory_order_relaxed);
    unagreed_[c].store(static_cast<uint32_t>(QChunkBlocks(c)), std::memory_order_relaxed);
    q_fence_[c].store(0, std::memory_order_relaxed);
    q_done_[c].store(false, std::memory_order_relaxed);
  }
}

void StagedOp::NoteFence(MemoryDomain::Fence f) {
  // Fences grow in enqueue order; keep the largest (lanes may race here).
  MemoryDomain::Fence cur = last_fence_.load(std::memory_order_relaxed);
  while (f > cur && !last_fence_.compare_exchange_weak(cur, f)) {
  }
}

Status StagedOp::Start() {
  if (quant_) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (size_t i = 0; i < k_; ++i) std::memcpy(nan_block_ + 4 * i, &nan, 4);
    for (size_t c = 0; c < chunks_; ++c) {
      const size_t off = c * chunk_elems_;
      const size_t b0 = off / k_;
      auto f = domain_.BlockExps(reinterpret_cast<const float*>(user_) + off, ChunkElems(c), k_,
                                 exps_ + b0, nonfinite_ + b0);
      if (!f.ok()) {
        return f.status().WithContext(domain_.name() + ": block exponents of chunk " +
                                      std::to_string(c));
      }
      in_fence_[c] = *f;
      NoteFence(*f);
    }
    return Status::Ok();
  }
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

Status StagedOp::LocalExp(int64_t b, uint8_t* exp, bool* nonfinite) {
  const size_t c = ChunkOf(b);
  if (!in_done_[c].load(std::memory_order_acquire)) {
    Status s = WaitFence(in_fence_[c], /*interruptible=*/true);
    if (!s.ok()) {
      return s.WithContext(domain_.name() + ": block exponents of chunk " + std::to_string(c));
    }
    in_done_[c].store(true, std::memory_order_release);
  }
  *exp = exps_[b];
  *nonfinite = nonfinite_[b] != 0;
  return Status::Ok();
}

Status StagedOp::Agree(int64_t b, uint8_t exp) {
  agreed_[b] = exp;
  const size_t qc = QChunkOf(b);
  if (unagreed_[qc].fetch_sub(1, std::memory_order_acq_rel) != 1) return Status::Ok();
  const size_t b0 = qc * qblocks_;
  const size_t off = b0 * k_;
  const size_t cnt = std::min(qblocks_ * k_, n_ - off);
  uint8_t* wire = (nic_wire_ != nullptr ? nic_wire_ : staging_) + 4 * off;
  const float* src = reinterpret_cast<const float*>(user_) + off;
  // With a NIC buffer, the payload CRCs too, in the same pass where the domain can (the block is
  // sendable when they are).
  auto f = nic_wire_ != nullptr
               ? domain_.QuantizeCrcs(src, cnt, k_, agreed_ + b0, precision_, wire, crcs_ + b0)
               : domain_.Quantize(src, cnt, k_, agreed_ + b0, precision_, wire);
  if (!f.ok()) {
    return f.status().WithContext(domain_.name() + ": quantization of blocks " +
                                  std::to_string(b0) + ".." +
                                  std::to_string(b0 + QChunkBlocks(qc)));
  }
  NoteFence(*f);
  q_fence_[qc].store(*f, std::memory_order_release);
  return Status::Ok();
}

Result<bool> StagedOp::Quantized(int64_t b) {
  const size_t qc = QChunkOf(b);
  if (q_done_[qc].load(std::memory_order_acquire)) return true;
  const MemoryDomain::Fence f = q_fence_[qc].load(std::memory_order_acquire);
  if (f == 0) return false;
  auto r = domain_.Wait(f, microseconds(0));
  if (!r.ok()) {
    return r.status().WithContext(domain_.name() + ": quantization of block " + std::to_string(b));
  }
  if (*r) q_done_[qc].store(true, std::memory_order_release);
  return *r;
}

Status StagedOp::EnqueueDequantize(size_t qc) {
  const size_t b0 = qc * qblocks_;
  const size_t off = b0 * k_;
  const size_t cnt = std::min(qblocks_ * k_, n_ - off);
  float* dst = reinterpret_cast<float*>(user_) + off;
  auto f = domain_.Dequantize(dst, staging_ + 4 * off, cnt, k_, agreed_ + b0, precision_, divisor_);
  if (!f.ok()) {
    return f.status().WithContext(domain_.name() + ": dequantization of blocks " +
                                  std::to_string(b0) + ".." +
                                  std::to_string(b0 + QChunkBlocks(qc)));
  }
  NoteFence(*f);
  for (size_t b = b0; b < b0 + QChunkBlocks(qc); ++b) {
    if (result_nf_[b] == 0) continue;
    auto nf =
        domain_.CopyOut(reinterpret_cast<float*>(user_) + b * k_, nan_block_, 4 * BlockElems(b));
    if (!nf.ok()) {
      return nf.status().WithContext(domain_.name() + ": NaN over block " + std::to_string(b));
    }
    NoteFence(*nf);
  }
  return Status::Ok();
}

Status StagedOp::Release(int64_t b) {
  if (quant_) {
    const size_t qc = QChunkOf(b);
    if (left_[qc].fetch_sub(1, std::memory_order_acq_rel) != 1) return Status::Ok();
    return EnqueueDequantize(qc);
  }
  const size_t c = ChunkOf(b);
  if (left_[c].fetch_sub(1, std::memory_order_acq_rel) != 1) return Status::Ok();
  const size_t off = c * chunk_elems_ * elem_bytes_;
  auto f = domain_.CopyOut(user_ + off, staging_ + off, ChunkElems(c) * elem_bytes_);
  if (!f.ok()) {
    return f.status().WithContext(domain_.name() + ": copy of chunk " + std::to_string(c) +
                                  " back from staging");
  }
  NoteFence(*f);
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
