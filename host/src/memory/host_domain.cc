// HostDomain (ina/host/memory_domain.h): host memory behind one copy thread, FIFO; the
// quantization calls run ScalarKernels() on the same thread. Also the interface's defaults.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "ina/host/memory_domain.h"
#include "ina/host/quant.h"
#include "ina/proto/crc32c.h"

namespace ina::host {

Result<MemoryDomain::Fence> MemoryDomain::BlockExps(const float*, size_t, size_t, uint8_t*,
                                                    uint8_t*) {
  return Unimplemented(name() + ": does not quantize (quantizes() is false)");
}
Result<MemoryDomain::Fence> MemoryDomain::Quantize(const float*, size_t, size_t, const uint8_t*,
                                                   int, uint8_t*) {
  return Unimplemented(name() + ": does not quantize (quantizes() is false)");
}
Result<MemoryDomain::Fence> MemoryDomain::Dequantize(float*, const uint8_t*, size_t, size_t,
                                                     const uint8_t*, int, int) {
  return Unimplemented(name() + ": does not quantize (quantizes() is false)");
}

Result<std::unique_ptr<NicBuffer>> MemoryDomain::AllocNicBuffer(size_t) {
  return Unimplemented(name() + ": no memory a NIC can send from");
}
Result<MemoryDomain::Fence> MemoryDomain::PayloadCrcs(const uint8_t*, size_t, size_t, uint32_t*) {
  return Unimplemented(name() + ": no payload CRCs in the domain");
}
Result<MemoryDomain::Fence> MemoryDomain::QuantizeCrcs(const float* src, size_t n, size_t k,
                                                       const uint8_t* exps, int precision,
                                                       uint8_t* wire, uint32_t* crcs) {
  INA_RETURN_IF_ERROR(Quantize(src, n, k, exps, precision, wire).status());
  return PayloadCrcs(wire, n, k, crcs);
}

namespace {

Status CheckQuantArgs(const char* what, size_t k, int precision, int divisor = 1) {
  if (k < 1) return InvalidArgument(std::string("host-async: ") + what + ": k 0");
  if (precision < 1 || precision > 30) {
    return InvalidArgument(std::string("host-async: ") + what + ": precision " +
                           std::to_string(precision) + " outside [1, 30]");
  }
  if (divisor < 1) {
    return InvalidArgument(std::string("host-async: ") + what + ": divisor " +
                           std::to_string(divisor) + " < 1");
  }
  return Status::Ok();
}

class HeapStaging final : public StagingBuffer {
 public:
  explicit HeapStaging(size_t bytes) : buf_(bytes) {}
  uint8_t* data() const override { return const_cast<uint8_t*>(buf_.data()); }
  size_t size() const override { return buf_.size(); }

 private:
  std::vector<uint8_t> buf_;
};

// A NicBuffer in host memory: heap (fd -1), or a memfd's mapping with the memfd as its "dma-buf"
// (HostNicMemory::kMemfd: not a dma-buf, so a provider's ibv_reg_dmabuf_mr refuses it).
class HostNicBuffer final : public NicBuffer {
 public:
  ~HostNicBuffer() override {
    if (fd_ >= 0) {
      munmap(p_, bytes_);
      close(fd_);
    } else {
      std::free(p_);
    }
  }
  static Result<std::unique_ptr<NicBuffer>> Make(size_t bytes, bool memfd) {
    bytes = std::max<size_t>(4096, (bytes + 4095) / 4096 * 4096);
    auto b = std::unique_ptr<HostNicBuffer>(new HostNicBuffer);
    b->bytes_ = bytes;
    if (!memfd) {
      b->p_ = static_cast<uint8_t*>(std::aligned_alloc(4096, bytes));
      if (b->p_ == nullptr) {
        return ResourceExhausted("host-async: NIC buffer of " + std::to_string(bytes) + " bytes");
      }
      return std::unique_ptr<NicBuffer>(std::move(b));
    }
    b->fd_ = memfd_create("ina-nic-buffer", MFD_CLOEXEC);
    if (b->fd_ < 0) return Unavailable("host-async: memfd_create: " + ErrnoText(errno));
    if (ftruncate(b->fd_, static_cast<off_t>(bytes)) != 0) {
      return Unavailable("host-async: ftruncate(memfd): " + ErrnoText(errno));
    }
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd_, 0);
    if (m == MAP_FAILED) return Unavailable("host-async: mmap(memfd): " + ErrnoText(errno));
    b->p_ = static_cast<uint8_t*>(m);
    return std::unique_ptr<NicBuffer>(std::move(b));
  }
  uint8_t* data() const override { return p_; }
  size_t size() const override { return bytes_; }
  int dmabuf_fd() const override { return fd_; }

 private:
  HostNicBuffer() = default;
  static std::string ErrnoText(int e) { return std::string(std::strerror(e)); }
  uint8_t* p_ = nullptr;
  size_t bytes_ = 0;
  int fd_ = -1;
};

class HostDomain final : public MemoryDomain {
 public:
  explicit HostDomain(const HostDomainOptions& o) : opts_(o), thread_([this] { Run(); }) {}

  ~HostDomain() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  MemoryKind kind() const override { return MemoryKind::kHost; }
  std::string name() const override { return "host-async"; }
  size_t chunk_bytes() const override { return opts_.chunk_bytes; }

  Status CheckPointer(const void* p, size_t bytes) const override {
    if (p == nullptr && bytes > 0) return InvalidArgument("host-async: null tensor");
    return Status::Ok();
  }

  Result<std::unique_ptr<StagingBuffer>> AllocStaging(size_t bytes) override {
    return std::unique_ptr<StagingBuffer>(new HeapStaging(bytes));
  }

  Status OrderAfter(void* stream) override {
    if (stream != nullptr) return InvalidArgument("host-async: there are no streams (pass null)");
    return Status::Ok();
  }

  Result<Fence> CopyIn(uint8_t* staging, const void* src, size_t bytes) override {
    return EnqueueCopy(staging, src, bytes);
  }
  Result<Fence> CopyOut(void* dst, const uint8_t* staging, size_t bytes) override {
    return EnqueueCopy(dst, staging, bytes);
  }

  bool quantizes() const override { return opts_.quantize; }

  Result<Fence> BlockExps(const float* src, size_t n, size_t k, uint8_t* exps,
                          uint8_t* nonfinite) override {
    INA_RETURN_IF_ERROR(CheckQuantize("BlockExps", k, 30));
    return Enqueue([=, this] {
      for (size_t b = 0, off = 0; off < n; ++b, off += k) {
        bool nf = false;
        exps[b] = kern_.block_exp(src + off, std::min(k, n - off), &nf);
        nonfinite[b] = nf ? 1 : 0;
      }
    });
  }

  Result<Fence> Quantize(const float* src, size_t n, size_t k, const uint8_t* exps, int precision,
                         uint8_t* wire) override {
    INA_RETURN_IF_ERROR(CheckQuantize("Quantize", k, precision));
    return Enqueue([=, this] { QuantizeBlocks(src, n, k, exps, precision, wire, nullptr); });
  }

  Result<Fence> QuantizeCrcs(const float* src, size_t n, size_t k, const uint8_t* exps,
                             int precision, uint8_t* wire, uint32_t* crcs) override {
    INA_RETURN_IF_ERROR(CheckQuantize("QuantizeCrcs", k, precision));
    return Enqueue([=, this] { QuantizeBlocks(src, n, k, exps, precision, wire, crcs); });
  }

  Result<Fence> Dequantize(float* dst, const uint8_t* wire, size_t n, size_t k, const uint8_t* exps,
                           int precision, int divisor) override {
    INA_RETURN_IF_ERROR(CheckQuantize("Dequantize", k, precision, divisor));
    return Enqueue([=, this] {
      for (size_t b = 0, off = 0; off < n; ++b, off += k) {
        const size_t cnt = std::min(k, n - off);
        kern_.dequantize(wire + 4 * off, cnt, exps[b], precision, dst + off);
        // One IEEE division's result, as the GPU's fused averaging (ina/gpu/quant_elem.h).
        quant::DivideBy(kern_, dst + off, cnt, divisor);
      }
    });
  }

  Result<std::unique_ptr<NicBuffer>> AllocNicBuffer(size_t bytes) override {
    switch (opts_.nic_memory) {
      case HostNicMemory::kHeap:
        return HostNicBuffer::Make(bytes, /*memfd=*/false);
      case HostNicMemory::kMemfd:
        return HostNicBuffer::Make(bytes, /*memfd=*/true);
      case HostNicMemory::kNone:
        break;
    }
    return Unimplemented("host-async: no NIC buffers (HostDomainOptions::nic_memory kNone)");
  }

  Result<Fence> PayloadCrcs(const uint8_t* wire, size_t n, size_t k, uint32_t* crcs) override {
    if (k < 1) return InvalidArgument("host-async: PayloadCrcs: k 0");
    return Enqueue([=] {
      for (size_t b = 0, off = 0; off < n; ++b, off += k) {
        crcs[b] = proto::Crc32c(0, wire + 4 * off, 4 * std::min(k, n - off));
      }
    });
  }

  Result<bool> Wait(Fence f, std::chrono::microseconds timeout) override {
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait_for(lk, timeout, [&] { return completed_ >= f; });
    return completed_ >= f;
  }

 private:
  Status CheckQuantize(const char* what, size_t k, int precision, int divisor = 1) const {
    if (!opts_.quantize) {
      return Unimplemented("host-async: does not quantize (HostDomainOptions::quantize false)");
    }
    return CheckQuantArgs(what, k, precision, divisor);
  }

  // Quantize's work on the copy thread; with `crcs`, each block's payload CRC right after the
  // block is written (QuantizeCrcs).
  void QuantizeBlocks(const float* src, size_t n, size_t k, const uint8_t* exps, int precision,
                      uint8_t* wire, uint32_t* crcs) const {
    for (size_t b = 0, off = 0; off < n; ++b, off += k) {
      const size_t cnt = std::min(k, n - off);
      uint8_t* out = wire + 4 * off;
      // Outside the contract (Inf/NaN) the CPU's conversion is undefined: zeros instead (the
      // communicator sends zeros for such a block and never reads these).
      bool nonfinite = false;
      (void)kern_.block_exp(src + off, cnt, &nonfinite);
      if (nonfinite) {
        std::memset(out, 0, 4 * cnt);
        if (crcs != nullptr) crcs[b] = proto::Crc32c(0, out, 4 * cnt);
      } else if (crcs != nullptr) {
        crcs[b] = kern_.quantize_crc(src + off, cnt, exps[b], precision, out);
      } else {
        kern_.quantize(src + off, cnt, exps[b], precision, out);
      }
    }
  }

  Result<Fence> EnqueueCopy(void* dst, const void* src, size_t bytes) {
    return Enqueue([=] {
      if (bytes > 0) std::memcpy(dst, src, bytes);
    });
  }

  Result<Fence> Enqueue(std::function<void()> task) {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(std::move(task));
    cv_.notify_one();
    return ++enqueued_;
  }

  void Run() {
    std::unique_lock<std::mutex> lk(mu_);
    while (true) {
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_, and every queued task done
      std::function<void()> task = std::move(queue_.front());
      queue_.pop_front();
      lk.unlock();
      task();
      lk.lock();
      ++completed_;
      done_cv_.notify_all();
    }
  }

  const HostDomainOptions opts_;
  const quant::Kernels& kern_ = quant::ScalarKernels();
  std::mutex mu_;
  std::condition_variable cv_;               // copy thread: work or stop
  std::condition_variable done_cv_;          // waiters: completed_ moved
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  Fence enqueued_ = 0;                       // guarded by mu_
  Fence completed_ = 0;                      // guarded by mu_
  bool stop_ = false;                        // guarded by mu_
  std::thread thread_;                       // last: started after the state above
};

}  // namespace

Result<std::unique_ptr<MemoryDomain>> MakeHostDomain(const HostDomainOptions& options) {
  if (options.chunk_bytes < 4) {
    return InvalidArgument("host-async: chunk_bytes " + std::to_string(options.chunk_bytes) +
                           " < 4");
  }
  return std::unique_ptr<MemoryDomain>(new HostDomain(options));
}

}  // namespace ina::host
