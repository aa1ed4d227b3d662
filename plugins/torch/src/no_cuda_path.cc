// DevicePath of a build without drivers/gpu's ina::gpu_domain: every CUDA tensor is refused
// with the reason (device_path.h).
#include "device_path.h"

namespace ina::torch_backend {
namespace {

constexpr char kWhy[] =
    "this ina_torch was built without the CUDA path (drivers/gpu's ina::gpu_domain is built only "
    "where CMake finds a CUDA >= 12 toolkit; see docs/pytorch.md, \"CUDA tensors\")";

class NoCudaPath final : public DevicePath {
 public:
  bool built() const override { return false; }
  Status Prepare(int) override { return FailedPrecondition(kWhy); }
  Status AllReduce(host::Communicator&, int, std::span<float>, void*,
                   const host::AllReduceOptions&) override {
    return FailedPrecondition(kWhy);
  }
  Status AllReduce(host::Communicator&, int, std::span<int32_t>, void*,
                   const host::AllReduceOptions&) override {
    return FailedPrecondition(kWhy);
  }
};

}  // namespace

std::unique_ptr<DevicePath> MakeDevicePath() { return std::make_unique<NoCudaPath>(); }

}  // namespace ina::torch_backend
