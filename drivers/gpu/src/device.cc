// The CUDA runtime boundary (ina/gpu/device.h).
#include "ina/gpu/device.h"

#include <string>
#include <utility>

namespace ina::gpu {

Status CudaStatus(cudaError_t err, std::string_view what) {
  if (err == cudaSuccess) return Status::Ok();
  StatusCode code = StatusCode::kInternal;
  switch (err) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInitializationError:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      code = StatusCode::kUnavailable;
      break;
    case cudaErrorMemoryAllocation:
      code = StatusCode::kResourceExhausted;
      break;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidConfiguration:
      code = StatusCode::kInvalidArgument;
      break;
    default:
      break;
  }
  std::string msg = "cuda: ";
  msg.append(what);
  msg += ": ";
  msg += cudaGetErrorName(err);
  msg += ": ";
  msg += cudaGetErrorString(err);
  return Status(code, std::move(msg));
}

Result<int> DeviceCount() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // Clear the sticky "last error" so later calls do not report this one.
    (void)cudaGetLastError();
    return CudaStatus(err, "cudaGetDeviceCount(&count)");
  }
  if (count == 0) return Unavailable("cuda: cudaGetDeviceCount: no CUDA device");
  return count;
}

Result<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes) {
  if (bytes == 0) return DeviceBuffer();
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    return CudaStatus(err, "cudaMalloc(&p, " + std::to_string(bytes) + ")");
  }
  return DeviceBuffer(p, bytes);
}

DeviceBuffer::~DeviceBuffer() {
  // A failing cudaFree at destruction has no caller to report to; the runtime keeps the error
  // for the next call.
  if (ptr_ != nullptr) (void)cudaFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

}  // namespace ina::gpu
