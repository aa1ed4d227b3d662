// The CUDA memory domain (ina/gpu/memory_domain.h). Plain C++ over the CUDA runtime API: no
// kernels, so no nvcc compile.
#include "ina/gpu/memory_domain.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ina/gpu/device.h"

namespace ina::gpu {
namespace {

using host::MemoryDomain;
using host::MemoryKind;
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

class CudaDomain final : public MemoryDomain {
 public:
  explicit CudaDomain(const CudaDomainOptions& o) : opts_(o) {}

  ~CudaDomain() override {
    (void)cudaSetDevice(opts_.device);
    if (stream_ != nullptr) {
      (void)cudaStreamSynchronize(stream_);  // no copy may outlive the domain
      (void)cudaStreamDestroy(stream_);
    }
    for (cudaEvent_t e : free_) (void)cudaEventDestroy(e);
    for (auto& p : pending_) (void)cudaEventDestroy(p.event);
    if (order_event_ != nullptr) (void)cudaEventDestroy(order_event_);
  }

  Status Init() {
    INA_CUDA_RETURN_IF_ERROR(cudaSetDevice(opts_.device));
    INA_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    INA_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&order_event_, cudaEventDisableTiming));
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
    return Copy(staging, src, bytes, cudaMemcpyDeviceToHost);
  }
  Result<Fence> CopyOut(void* dst, const uint8_t* staging, size_t bytes) override {
    return Copy(dst, staging, bytes, cudaMemcpyHostToDevice);
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

  Result<Fence> Copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
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
    cudaError_t err = cudaMemcpyAsync(dst, src, bytes, kind, stream_);
    if (err == cudaSuccess) err = cudaEventRecord(ev, stream_);
    if (err != cudaSuccess) {
      free_.push_back(ev);
      return CudaStatus(
          err, kind == cudaMemcpyDeviceToHost
                   ? "cudaMemcpyAsync(staging, device, " + std::to_string(bytes) + ", D2H)"
                   : "cudaMemcpyAsync(device, staging, " + std::to_string(bytes) + ", H2D)");
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
  cudaStream_t stream_ = nullptr;
  cudaEvent_t order_event_ = nullptr;  // guarded by mu_
  std::mutex mu_;
  std::deque<Pending> pending_;    // guarded by mu_: recorded, not yet seen complete
  std::vector<cudaEvent_t> free_;  // guarded by mu_
  Fence enqueued_ = 0;             // guarded by mu_
  Fence completed_ = 0;            // guarded by mu_
  Status error_;                   // guarded by mu_: sticky
};

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
