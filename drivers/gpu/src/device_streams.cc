// DeviceStreams: see ina/gpu/device_streams.h.
#include "ina/gpu/device_streams.h"

#include <utility>

#include "ina/gpu/device.h"

namespace ina::gpu {

DeviceStreams::~DeviceStreams() {
  for (auto& [device, e] : devices_) {
    if (e.stream != nullptr) {
      cudaSetDevice(device);
      cudaStreamDestroy(e.stream);
    }
  }
}

Result<DeviceStreams::Device> DeviceStreams::Get(int device) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = devices_.find(device);
  if (it == devices_.end()) {
    CudaDomainOptions options;
    options.device = device;
    Result<std::unique_ptr<host::MemoryDomain>> domain = MakeCudaDomain(options);
    if (!domain.ok()) return domain.status();
    INA_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
    cudaStream_t stream = nullptr;
    INA_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    it = devices_.emplace(device, Entry{std::move(*domain), stream}).first;
  } else {
    INA_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  }
  return Device{it->second.domain.get(), it->second.stream};
}

}  // namespace ina::gpu
