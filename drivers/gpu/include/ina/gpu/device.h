// CUDA runtime boundary of ina::gpu: the one place raw cudaError_t values become Status, device
// discovery, and an owning device buffer.
//
// Every CUDA runtime call in drivers/gpu goes through INA_CUDA_RETURN_IF_ERROR (or CudaStatus),
// so its error carries the call's name: "cuda: cudaMalloc(&p, bytes): cudaErrorMemoryAllocation:
// out of memory". Threading: the functions are thread-safe as the CUDA runtime is; a DeviceBuffer
// belongs to the device that was current when it was allocated.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string_view>

#include "ina/base/status.h"

namespace ina::gpu {

// OK for cudaSuccess; otherwise "cuda: <what>: <error name>: <error string>". The code is
// kUnavailable for a missing driver or device, kResourceExhausted for out-of-memory,
// kInvalidArgument for invalid values or pointers, kInternal otherwise.
Status CudaStatus(cudaError_t err, std::string_view what);

// Returns from the enclosing function if the CUDA call fails, naming the call.
#define INA_CUDA_RETURN_IF_ERROR(call)                     \
  do {                                                     \
    const cudaError_t ina_cuda_err_ = (call);              \
    if (ina_cuda_err_ != cudaSuccess) {                    \
      return ::ina::gpu::CudaStatus(ina_cuda_err_, #call); \
    }                                                      \
  } while (0)

// Number of CUDA devices, or the reason there are none usable (no driver, no device: kUnavailable).
// Never blocks beyond the runtime's own start-up; works on machines without the NVIDIA driver.
Result<int> DeviceCount();

// Owning device allocation (cudaMalloc / cudaFree). Move-only; empty after a move.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // Allocates `bytes` bytes on the current device (0 bytes: an empty buffer, no allocation).
  static Result<DeviceBuffer> Allocate(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  size_t size() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  DeviceBuffer(void* ptr, size_t bytes) : ptr_(ptr), bytes_(bytes) {}
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace ina::gpu
