// CudaSupport over the CUDA runtime and drivers/gpu's CUDA memory domain (cuda_support.h).
#include "cuda_support.h"

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "ina/gpu/device.h"
#include "ina/gpu/device_streams.h"

namespace ina::nccl {
namespace {

// One device: its memory domain and the stream every ina copy on it is ordered on
// (ina::gpu::DeviceStreams').
class CudaDeviceMemory final : public DeviceMemory {
 public:
  CudaDeviceMemory(int device, gpu::DeviceStreams::Device d)
      : device_(device), domain_(d.domain), stream_(d.stream) {}

  Result<host::Request> StartAllReduce(host::Communicator& comm, const void* send, void* recv,
                                       size_t count, ElemType type) override {
    INA_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    const size_t bytes = count * ElemBytes(type);
    if (send != recv && bytes > 0) {
      // On the device and on ina's stream: the all-reduce's copies into staging start after it.
      INA_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(recv, send, bytes, cudaMemcpyDeviceToDevice, stream_));
    }
    return type == ElemType::kFloat32
               ? comm.AllReduceAsync(std::span<float>(static_cast<float*>(recv), count), *domain_,
                                     stream_)
               : comm.AllReduceAsync(std::span<int32_t>(static_cast<int32_t*>(recv), count),
                                     *domain_, stream_);
  }

  Status ReserveStaging(host::Communicator& comm, size_t bytes) override {
    return comm.ReserveStaging(*domain_, bytes);
  }

  Status Copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (bytes == 0) return Status::Ok();
    std::lock_guard<std::mutex> lock(copy_mu_);
    INA_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    INA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, kind, stream_));
    INA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return Status::Ok();
  }

 private:
  int device_;
  host::MemoryDomain* domain_;  // streams_'s, never destroyed
  cudaStream_t stream_;
  std::mutex copy_mu_;
};

class CudaSupportImpl final : public CudaSupport {
 public:
  Status Available() override {
    std::call_once(available_once_, [this] {
      Result<int> n = gpu::DeviceCount();
      if (!n.ok()) {
        available_ = n.status();
      } else if (*n <= 0) {
        available_ = Unavailable("no CUDA device");
      }
    });
    return available_;
  }

  Result<int> DeviceOf(const void* p) override {
    if (Status st = Available(); !st.ok()) return st;
    cudaPointerAttributes attr{};
    INA_CUDA_RETURN_IF_ERROR(cudaPointerGetAttributes(&attr, p));
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
      return InvalidArgument(std::string("pointer is not CUDA device memory (it is ") +
                             (attr.type == cudaMemoryTypeHost ? "page-locked host memory"
                                                              : "unregistered host memory") +
                             ")");
    }
    return attr.device;
  }

  Result<DeviceMemory*> Memory(int device) override {
    if (Status st = Available(); !st.ok()) return st;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = devices_.find(device);
    if (it != devices_.end()) return static_cast<DeviceMemory*>(it->second.get());
    INA_ASSIGN_OR_RETURN(const gpu::DeviceStreams::Device d, streams_.Get(device));
    auto mem = std::make_unique<CudaDeviceMemory>(device, d);
    DeviceMemory* raw = mem.get();
    devices_[device] = std::move(mem);
    return raw;
  }

  Status CopyToHost(void* dst, const void* src, size_t bytes, int device) override {
    return CopyOn(device, dst, src, bytes, cudaMemcpyDeviceToHost);
  }
  Status CopyToDevice(void* dst, const void* src, size_t bytes, int device) override {
    return CopyOn(device, dst, src, bytes, cudaMemcpyHostToDevice);
  }

 private:
  Status CopyOn(int device, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    Result<DeviceMemory*> mem = Memory(device);
    if (!mem.ok()) return mem.status();
    return static_cast<CudaDeviceMemory*>(*mem)->Copy(dst, src, bytes, kind);
  }

  std::once_flag available_once_;
  Status available_;
  std::mutex mu_;
  gpu::DeviceStreams streams_;
  std::map<int, std::unique_ptr<CudaDeviceMemory>> devices_;  // guarded by mu_
};

}  // namespace

CudaSupport& Cuda() {
  static CudaSupport* const cuda = new CudaSupportImpl();  // never destroyed (cuda_support.h)
  return *cuda;
}

}  // namespace ina::nccl
