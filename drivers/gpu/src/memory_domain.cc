// The CUDA memory domain (ina/gpu/memory_domain.h). Plain C++ over the CUDA runtime API and the
// kernels' launch functions (ina/gpu/quant.h): no nvcc compile here.
#include "ina/gpu/memory_domain.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ina/gpu/crc.h"
#include "ina/gpu/device.h"
#include "ina/gpu/dmabuf.h"
#include "ina/gpu/quant.h"
#include "nic_ranges.h"

namespace ina::gpu {
namespace {

using host::MemoryDomain;
using host::MemoryKind;
using host::NicBuffer;
using host::StagingBuffer;
using std::chrono::microseconds;

class PinnedStaging final : public StagingBuffer {
 public:
  PinnedStaging(uint8_t* p, size_t bytes) : p_(p), bytes_(bytes) {}
  ~PinnedStaging() override { (void)cudaFreeHost(p_); }
  uint8_t* data() const override { return p_; }
  size_t size() const override { return bytes_; }

 private:
  uint8_t* p_;
  size_t bytes_;
};

const char* MemoryTypeName(cudaMemoryType t) {
  switch (t) {
    case cudaMemoryTypeUnregistered:
      return "pageable host memory";
    case cudaMemoryTypeHost:
      return "page-locked host memory";
    case cudaMemoryTypeDevice:
      return "device memory";
    case cudaMemoryTypeManaged:
      return "managed memory";
  }
  return "unknown memory";
}

// NIC buffers are cudaMalloc'd in multiples of this (cuMemGetHandleForAddressRange wants the range
// page-aligned; 2 MiB covers every host page size and is the GPU's large-page size).
constexpr size_t kNicAlign = size_t{2} << 20;

class CudaDomain;

// Device memory exported as a dma-buf; the domain keeps its range (Quantize and PayloadCrcs then
// read or write it directly). The destructor (via the domain) waits for the copy stream, then
// closes the fd and frees the memory.
class CudaNicBuffer final : public NicBuffer {
 public:
  CudaNicBuffer(CudaDomain* domain, void* base, uint8_t* p, size_t bytes, int fd)
      : domain_(domain), base_(base), p_(p), bytes_(bytes), fd_(fd) {}
  ~CudaNicBuffer() override;
  uint8_t* data() const override { return p_; }
  size_t size() const override { return bytes_; }
  int dmabuf_fd() const override { return fd_; }

 private:
  CudaDomain* domain_;
  void* base_;  // what cudaMalloc returned (p_ rounded up to the page if it was not aligned)
  uint8_t* p_;
  size_t bytes_;
  int fd_;
};

class CudaDomain final : public MemoryDomain {
 public:
  explicit CudaDomain(const CudaDomainOptions& o) : opts_(o), quantize_(o.quantize) {}

  ~CudaDomain() override {
    (void)cudaSetDevice(opts_.device);
    if (stream_ != nullptr) {
      (void)cudaStreamSynchronize(stream_);  // no copy may outlive the domain
      (void)cudaStreamDestroy(stream_);
    }
    for (cudaEvent_t e : free_) (void)cudaEventDestroy(e);
    for (auto& p : pending_) (void)cudaEventDestroy(p.event);
    if (order_event_ != nullptr) (void)cudaEventDestroy(order_event_);
    if (pool_ != nullptr) (void)cudaMemPoolDestroy(pool_);
  }

  Status Init() {
    INA_CUDA_RETURN_IF_ERROR(cudaSetDevice(opts_.device));
    INA_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    INA_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&order_event_, cudaEventDisableTiming));
    int pools = 0;
    INA_CUDA_RETURN_IF_ERROR(
        cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, opts_.device));
    // Without stream-ordered pools (old drivers, some virtualised GPUs) floats take the copying
    // path: the same results, quantized on the CPU.
    if (pools == 0) quantize_ = false;
    if (pools != 0) {
      // The device scratch of the quantization and CRC calls (exponents, int32 blocks, CRCs)
      // comes from a pool of the domain's own, stream-ordered (cudaMallocFromPoolAsync /
      // cudaFreeAsync on the copy stream), which keeps what it grew to: no allocation, free or
      // synchronisation per call once warm, and the process's default pool (the framework's) is
      // left alone.
      cudaMemPoolProps props{};
      props.allocType = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = opts_.device;
      INA_CUDA_RETURN_IF_ERROR(cudaMemPoolCreate(&pool_, &props));
      uint64_t keep = UINT64_MAX;
      INA_CUDA_RETURN_IF_ERROR(
          cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep));
      // Every kernel this domain may launch is loaded now, not at its first launch: under lazy
      // loading that launch can wait for the device's running kernels, and one of them may be
      // waiting for this domain's all-reduce (NCCL's CollNet kernel with GPU buffers: the hang
      // of docs/nccl.md, "GPU buffers"). The domain is made before any such kernel runs.
      INA_RETURN_IF_ERROR(LoadQuantKernels());
      INA_RETURN_IF_ERROR(LoadCrcKernels());
    }
    return Status::Ok();
  }

  MemoryKind kind() const override { return MemoryKind::kCuda; }
  std::string name() const override { return "cuda:" + std::to_string(opts_.device); }
  size_t chunk_bytes() const override { return opts_.chunk_bytes; }

  Status CheckPointer(const void* p, size_t bytes) const override {
    if (bytes == 0) return Status::Ok();
    cudaPointerAttributes a{};
    INA_CUDA_RETURN_IF_ERROR(cudaPointerGetAttributes(&a, p));
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) {
      return InvalidArgument(
          name() + ": the tensor at " + std::to_string(reinterpret_cast<uintptr_t>(p)) + " is " +
          MemoryTypeName(a.type) + ", not device memory (use the host-memory AllReduce)");
    }
    if (a.device != opts_.device) {
      return InvalidArgument(name() + ": the tensor is on device " + std::to_string(a.device));
    }
    return Status::Ok();
  }

  Result<std::unique_ptr<StagingBuffer>> AllocStaging(size_t bytes) override {
    INA_CUDA_RETURN_IF_ERROR(cudaSetDevice(opts_.device));
    void* p = nullptr;
    const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
    if (err != cudaSuccess) {
      return CudaStatus(err, "cudaHostAlloc(&p, " + std::to_string(bytes) + ")");
    }
    return std::unique_ptr<StagingBuffer>(new PinnedStaging(static_cast<uint8_t*>(p), bytes));
  }

  Status OrderAfter(void* stream) override {
    std::lock_guard<std::mutex> lk(mu_);
    INA_CUDA_RETURN_IF_ERROR(cudaSetDevice(opts_.device));
    INA_CUDA_RETURN_IF_ERROR(cudaEventRecord(order_event_, static_cast<cudaStream_t>(stream)));
    // The wait captures the event's state now, so the event may be recorded again later.
    INA_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_, order_event_, 0));
    return Status::Ok();
  }

  Result<Fence> CopyIn(uint8_t* staging, const void* src, size_t bytes) override {
    return Enqueue([&](cudaStream_t st) {
      return Call(cudaMemcpyAsync(staging, src, bytes, cudaMemcpyDeviceToHost, st),
                  "cudaMemcpyAsync(staging, device, " + std::to_string(bytes) + ", D2H)");
    });
  }
  Result<Fence> CopyOut(void* dst, const uint8_t* staging, size_t bytes) override {
    return Enqueue([&](cudaStream_t st) {
      return Call(cudaMemcpyAsync(dst, staging, bytes, cudaMemcpyHostToDevice, st),
                  "cudaMemcpyAsync(device, staging, " + std::to_string(bytes) + ", H2D)");
    });
  }

  bool quantizes() const override { return quantize_; }

  // Each quantization call: device scratch from the pool, the kernel, the copies between scratch
  // and staging, the scratch freed (stream-ordered), one event: all on the copy stream, so in
  // order with the copies and with each other.
  Result<Fence> BlockExps(const float* src, size_t n, size_t k, uint8_t* exps,
                          uint8_t* nonfinite) override {
    INA_RETURN_IF_ERROR(CheckQuantize(k));
    const size_t blocks = BlockCount(n, static_cast<int>(k));
    return Enqueue([&](cudaStream_t st) -> Status {
      uint8_t* d = nullptr;
      INA_RETURN_IF_ERROR(Alloc(&d, 2 * blocks, st));
      Status s = gpu::BlockExps(src, DType::kFloat32, n, static_cast<int>(k), d, d + blocks, st);
      if (s.ok())
        s = Call(cudaMemcpyAsync(exps, d, blocks, cudaMemcpyDeviceToHost, st), "exps D2H");
      if (s.ok()) {
        s = Call(cudaMemcpyAsync(nonfinite, d + blocks, blocks, cudaMemcpyDeviceToHost, st),
                 "nonfinite D2H");
      }
      return Free(d, st, s);
    });
  }

  // `wire` in one of this domain's NicBuffers: the kernel writes the int32 there (no scratch for
  // them, no copy); in staging: into scratch, then copied to staging.
  Result<Fence> Quantize(const float* src, size_t n, size_t k, const uint8_t* exps, int precision,
                         uint8_t* wire) override {
    INA_RETURN_IF_ERROR(CheckQuantize(k));
    INA_ASSIGN_OR_RETURN(const bool nic, InNicBuffer(wire, 4 * n, "Quantize"));
    const size_t blocks = BlockCount(n, static_cast<int>(k));
    const size_t exp_bytes = (blocks + 15) / 16 * 16;  // the int32 after them 16-byte aligned
    return Enqueue([&](cudaStream_t st) -> Status {
      uint8_t* d = nullptr;
      INA_RETURN_IF_ERROR(Alloc(&d, exp_bytes + (nic ? 0 : 4 * n), st));
      uint8_t* out = nic ? wire : d + exp_bytes;
      Status s = Call(cudaMemcpyAsync(d, exps, blocks, cudaMemcpyHostToDevice, st), "exps H2D");
      if (s.ok()) {
        s = gpu::Quantize(src, DType::kFloat32, n, static_cast<int>(k), d, precision, out, 0, st);
      }
      if (s.ok() && !nic) {
        s = Call(cudaMemcpyAsync(wire, out, 4 * n, cudaMemcpyDeviceToHost, st),
                 "cudaMemcpyAsync(staging, int32 blocks, " + std::to_string(4 * n) + ", D2H)");
      }
      return Free(d, st, s);
    });
  }

  // `wire` in staging (the communicator's receive path) is copied to scratch first; in a
  // NicBuffer it is read where it lies.
  Result<Fence> Dequantize(float* dst, const uint8_t* wire, size_t n, size_t k, const uint8_t* exps,
                           int precision, int divisor) override {
    INA_RETURN_IF_ERROR(CheckQuantize(k));
    INA_ASSIGN_OR_RETURN(const bool nic, InNicBuffer(wire, 4 * n, "Dequantize"));
    const size_t blocks = BlockCount(n, static_cast<int>(k));
    const size_t exp_bytes = (blocks + 15) / 16 * 16;
    return Enqueue([&](cudaStream_t st) -> Status {
      uint8_t* d = nullptr;
      INA_RETURN_IF_ERROR(Alloc(&d, exp_bytes + (nic ? 0 : 4 * n), st));
      const uint8_t* in = nic ? wire : d + exp_bytes;
      Status s = Call(cudaMemcpyAsync(d, exps, blocks, cudaMemcpyHostToDevice, st), "exps H2D");
      if (s.ok() && !nic) {
        s = Call(cudaMemcpyAsync(d + exp_bytes, wire, 4 * n, cudaMemcpyHostToDevice, st),
                 "cudaMemcpyAsync(int32 blocks, staging, " + std::to_string(4 * n) + ", H2D)");
      }
      if (s.ok()) {
        s = gpu::Dequantize(in, 0, n, static_cast<int>(k), d, precision, divisor, dst, st);
      }
      return Free(d, st, s);
    });
  }

  // Device memory exported as a dma-buf (ina/gpu/dmabuf.h), in multiples of kNicAlign.
  Result<std::unique_ptr<NicBuffer>> AllocNicBuffer(size_t bytes) override {
    INA_CUDA_RETURN_IF_ERROR(cudaSetDevice(opts_.device));
    if (Status s = DmaBufSupport(opts_.device); !s.ok()) return s.WithContext(name());
    const size_t size = (std::max<size_t>(bytes, 1) + kNicAlign - 1) / kNicAlign * kNicAlign;
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* base = nullptr;
    Status s = Call(cudaMalloc(&base, size), "cudaMalloc(&p, " + std::to_string(size) + ")");
    if (s.ok() && reinterpret_cast<uintptr_t>(base) % page != 0) {
      // cudaMalloc aligns large allocations to 2 MiB in practice, but does not promise it: retry
      // with room to align by hand.
      (void)cudaFree(base);
      base = nullptr;
      s = Call(cudaMalloc(&base, size + page),
               "cudaMalloc(&p, " + std::to_string(size + page) + ")");
    }
    if (!s.ok()) return s.WithContext(name() + ": NIC buffer");
    const uintptr_t a = (reinterpret_cast<uintptr_t>(base) + page - 1) / page * page;
    auto* p = reinterpret_cast<uint8_t*>(a);
    Result<int> fd = ExportDmaBuf(p, size);
    if (!fd.ok()) {
      (void)cudaFree(base);
      return fd.status().WithContext(name());
    }
    auto buf = std::make_unique<CudaNicBuffer>(this, base, p, size, *fd);
    nic_.Add(a, size);
    return std::unique_ptr<NicBuffer>(std::move(buf));
  }

  // crcs[b] from the BlockCrcs kernel: `wire` in a NicBuffer read where it lies, in staging
  // copied to scratch first; the CRCs copied from scratch to `crcs`.
  Result<Fence> PayloadCrcs(const uint8_t* wire, size_t n, size_t k, uint32_t* crcs) override {
    if (pool_ == nullptr) {
      return Unimplemented(name() + ": PayloadCrcs: no memory pools on the device");
    }
    if (k < 1 || k > INT32_MAX) {
      return InvalidArgument(name() + ": PayloadCrcs: k " + std::to_string(k));
    }
    INA_ASSIGN_OR_RETURN(const bool nic, InNicBuffer(wire, 4 * n, "PayloadCrcs"));
    const size_t blocks = BlockCount(n, static_cast<int>(k));
    const size_t crc_bytes = (4 * blocks + 15) / 16 * 16;
    return Enqueue([&](cudaStream_t st) -> Status {
      uint8_t* d = nullptr;
      INA_RETURN_IF_ERROR(Alloc(&d, crc_bytes + (nic ? 0 : 4 * n), st));
      const uint8_t* in = nic ? wire : d + crc_bytes;
      Status s;
      if (!nic) {
        s = Call(cudaMemcpyAsync(d + crc_bytes, wire, 4 * n, cudaMemcpyHostToDevice, st),
                 "cudaMemcpyAsync(int32 blocks, staging, " + std::to_string(4 * n) + ", H2D)");
      }
      if (s.ok()) s = BlockCrcs(in, n, static_cast<int>(k), reinterpret_cast<uint32_t*>(d), st);
      if (s.ok()) {
        s = Call(cudaMemcpyAsync(crcs, d, 4 * blocks, cudaMemcpyDeviceToHost, st), "crcs D2H");
      }
      return Free(d, st, s);
    });
  }

  // Called by ~CudaNicBuffer: forgets the range, waits for the copy stream (a kernel may still
  // write the buffer), closes the fd and frees the memory.
  void ReleaseNicBuffer(void* base, uint8_t* p, int fd) {
    nic_.Remove(reinterpret_cast<uintptr_t>(p));
    (void)cudaSetDevice(opts_.device);
    (void)cudaStreamSynchronize(stream_);
    if (fd >= 0) (void)close(fd);
    (void)cudaFree(base);
  }

  Result<bool> Wait(Fence f, microseconds timeout) override {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (true) {
      {
        std::lock_guard<std::mutex> lk(mu_);
        INA_RETURN_IF_ERROR(Reap());
        if (f <= completed_) return true;
      }
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(microseconds(20));
    }
  }

 private:
  struct Pending {
    Fence fence;
    cudaEvent_t event;
  };

  static Status Call(cudaError_t err, const std::string& what) {
    return err == cudaSuccess ? Status::Ok() : CudaStatus(err, what);
  }

  // True when [p, p + bytes) lies in one of this domain's NicBuffers, false when it touches none;
  // InvalidArgument when it straddles one's end.
  Result<bool> InNicBuffer(const void* p, size_t bytes, const char* op) const {
    return nic_.Contains(p, bytes, name() + ": " + op);
  }

  Status CheckQuantize(size_t k) const {
    if (!quantize_) {
      return Unimplemented(name() + ": does not quantize (options, or no memory pools)");
    }
    if (k < 1 || k > INT32_MAX) return InvalidArgument(name() + ": k " + std::to_string(k));
    return Status::Ok();
  }

  Status Alloc(uint8_t** p, size_t bytes, cudaStream_t st) {
    void* v = nullptr;
    INA_RETURN_IF_ERROR(Call(cudaMallocFromPoolAsync(&v, bytes == 0 ? 1 : bytes, pool_, st),
                             "cudaMallocFromPoolAsync(&p, " + std::to_string(bytes) + ")"));
    *p = static_cast<uint8_t*>(v);
    return Status::Ok();
  }
  // Frees the scratch after the work enqueued before it; returns the first error.
  static Status Free(uint8_t* p, cudaStream_t st, const Status& s) {
    Status f = Call(cudaFreeAsync(p, st), "cudaFreeAsync(scratch)");
    return s.ok() ? f : s;
  }

  // Runs `work` (which enqueues on the copy stream and returns its first error) under the lock,
  // then records the fence's event after it.
  Result<Fence> Enqueue(const std::function<Status(cudaStream_t)>& work) {
    std::lock_guard<std::mutex> lk(mu_);
    INA_RETURN_IF_ERROR(error_);
    INA_CUDA_RETURN_IF_ERROR(cudaSetDevice(opts_.device));
    cudaEvent_t ev = nullptr;
    if (!free_.empty()) {
      ev = free_.back();
      free_.pop_back();
    } else {
      INA_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    }
    Status s = work(stream_);
    if (s.ok()) s = Call(cudaEventRecord(ev, stream_), "cudaEventRecord(fence)");
    if (!s.ok()) {
      free_.push_back(ev);
      return s;
    }
    pending_.push_back({++enqueued_, ev});
    return enqueued_;
  }

  // Retires the completed events in order. REQUIRES: mu_ held.
  Status Reap() {
    INA_RETURN_IF_ERROR(error_);
    if (pending_.empty()) return Status::Ok();
    INA_CUDA_RETURN_IF_ERROR(cudaSetDevice(opts_.device));
    while (!pending_.empty()) {
      const cudaError_t err = cudaEventQuery(pending_.front().event);
      if (err == cudaErrorNotReady) break;
      if (err != cudaSuccess) {
        error_ =
            CudaStatus(err, "cudaEventQuery(copy " + std::to_string(pending_.front().fence) + ")");
        return error_;
      }
      completed_ = pending_.front().fence;
      free_.push_back(pending_.front().event);
      pending_.pop_front();
    }
    return Status::Ok();
  }

  const CudaDomainOptions opts_;
  bool quantize_;  // opts_.quantize and the device has memory pools; set by Init
  cudaStream_t stream_ = nullptr;
  cudaEvent_t order_event_ = nullptr;  // guarded by mu_
  cudaMemPool_t pool_ = nullptr;       // device scratch of the quantization calls
  std::mutex mu_;
  std::deque<Pending> pending_;    // guarded by mu_: recorded, not yet seen complete
  std::vector<cudaEvent_t> free_;  // guarded by mu_
  Fence enqueued_ = 0;             // guarded by mu_
  Fence completed_ = 0;            // guarded by mu_
  Status error_;                   // guarded by mu_: sticky
  internal::NicRanges nic_;        // the live NicBuffers
};

CudaNicBuffer::~CudaNicBuffer() { domain_->ReleaseNicBuffer(base_, p_, fd_); }

}  // namespace

Result<std::unique_ptr<host::MemoryDomain>> MakeCudaDomain(const CudaDomainOptions& options) {
  if (options.chunk_bytes < 4) {
    return InvalidArgument("cuda domain: chunk_bytes " + std::to_string(options.chunk_bytes) +
                           " < 4");
  }
  INA_ASSIGN_OR_RETURN(const int count, DeviceCount());
  if (options.device < 0 || options.device >= count) {
    return InvalidArgument("cuda domain: device " + std::to_string(options.device) + " of " +
                           std::to_string(count));
  }
  auto d = std::make_unique<CudaDomain>(options);
  INA_RETURN_IF_ERROR(d->Init());
  return std::unique_ptr<host::MemoryDomain>(std::move(d));
}

}  // namespace ina::gpu
