// DevicePath over drivers/gpu's CUDA memory domain (device_path.h): per CUDA device, one
// ina::gpu::MakeCudaDomain and one non-blocking stream owned by ina. A call makes that stream wait
// for torch's event (a device-side wait) and hands it to Communicator::AllReduce(data, domain,
// stream), whose copies into pinned staging start after it.
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <string>

#include "device_path.h"
#include "ina/gpu/device.h"
#include "ina/gpu/memory_domain.h"

namespace ina::torch_backend {
namespace {

class CudaPath final : public DevicePath {
 public:
  ~CudaPath() override {
    for (auto& [device, d] : devices_) {
      if (d.stream != nullptr) {
        cudaSetDevice(device);
        cudaStreamDestroy(d.stream);
      }
    }
  }

  bool built() const override { return true; }

  Status Prepare(int device) override {
    std::lock_guard<std::mutex> lock(mu_);
    return PrepareLocked(device);
  }

  Status AllReduce(host::Communicator& comm, int device, std::span<float> data, void* ready,
                   const host::AllReduceOptions& options) override {
    return Run(comm, device, data, ready, options);
  }
  Status AllReduce(host::Communicator& comm, int device, std::span<int32_t> data, void* ready,
                   const host::AllReduceOptions& options) override {
    return Run(comm, device, data, ready, options);
  }

 private:
  struct Device {
    std::unique_ptr<host::MemoryDomain> domain;
    cudaStream_t stream = nullptr;
  };

  Status PrepareLocked(int device) {
    if (devices_.count(device) != 0) return Status::Ok();
    gpu::CudaDomainOptions options;
    options.device = device;
    Result<std::unique_ptr<host::MemoryDomain>> domain = gpu::MakeCudaDomain(options);
    if (!domain.ok()) return domain.status();
    INA_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
    cudaStream_t stream = nullptr;
    INA_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    devices_[device] = Device{std::move(*domain), stream};
    return Status::Ok();
  }

  template <typename T>
  Status Run(host::Communicator& comm, int device, std::span<T> data, void* ready,
             const host::AllReduceOptions& options) {
    host::MemoryDomain* domain;
    cudaStream_t stream;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (Status st = PrepareLocked(device); !st.ok()) return st;
      domain = devices_[device].domain.get();
      stream = devices_[device].stream;
    }
    INA_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
    if (ready != nullptr) {
      INA_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(ready), 0));
    }
    return comm.AllReduce(data, *domain, stream, options);
  }

  std::mutex mu_;
  std::map<int, Device> devices_;  // entries never removed: domains outlive the communicator
};

}  // namespace

std::unique_ptr<DevicePath> MakeDevicePath() { return std::make_unique<CudaPath>(); }

}  // namespace ina::torch_backend
