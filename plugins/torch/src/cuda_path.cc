// DevicePath over drivers/gpu's CUDA memory domain (device_path.h): per CUDA device, one
// ina::gpu::MakeCudaDomain and one non-blocking stream owned by ina (ina::gpu::DeviceStreams). A
// call makes that stream wait for torch's event (a device-side wait) and hands it to
// Communicator::AllReduce(data, domain, stream), whose copies into pinned staging start after it.
#include <cuda_runtime_api.h>

#include "device_path.h"
#include "ina/gpu/device.h"
#include "ina/gpu/device_streams.h"

namespace ina::torch_backend {
namespace {

class CudaPath final : public DevicePath {
 public:
  bool built() const override { return true; }

  Status Prepare(int device) override { return devices_.Get(device).status(); }

  Status AllReduce(host::Communicator& comm, int device, std::span<float> data, void* ready,
                   const host::AllReduceOptions& options) override {
    return Run(comm, device, data, ready, options);
  }
  Status AllReduce(host::Communicator& comm, int device, std::span<int32_t> data, void* ready,
                   const host::AllReduceOptions& options) override {
    return Run(comm, device, data, ready, options);
  }

 private:
  template <typename T>
  Status Run(host::Communicator& comm, int device, std::span<T> data, void* ready,
             const host::AllReduceOptions& options) {
    INA_ASSIGN_OR_RETURN(const gpu::DeviceStreams::Device d, devices_.Get(device));
    if (ready != nullptr) {
      INA_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(d.stream, static_cast<cudaEvent_t>(ready), 0));
    }
    return comm.AllReduce(data, *d.domain, d.stream, options);
  }

  gpu::DeviceStreams devices_;  // domains outlive the communicator: entries never removed
};

}  // namespace

std::unique_ptr<DevicePath> MakeDevicePath() { return std::make_unique<CudaPath>(); }

}  // namespace ina::torch_backend
