// CudaSupport of a build without drivers/gpu's CUDA memory domain: CUDA memory is refused with
// the reason (cuda_support.h).
#include "cuda_support.h"

namespace ina::nccl {
namespace {

constexpr char kWhy[] =
    "this libnccl-net-ina.so was built without the CUDA path (drivers/gpu's ina::gpu_domain is "
    "built only where CMake finds a CUDA >= 12 toolkit; docs/nccl.md, \"GPU buffers\")";

class NoCuda final : public CudaSupport {
 public:
  Status Available() override { return FailedPrecondition(kWhy); }
  Result<int> DeviceOf(const void*) override { return FailedPrecondition(kWhy); }
  Result<DeviceMemory*> Memory(int) override { return FailedPrecondition(kWhy); }
  Status CopyToHost(void*, const void*, size_t, int) override { return FailedPrecondition(kWhy); }
  Status CopyToDevice(void*, const void*, size_t, int) override { return FailedPrecondition(kWhy); }
};

}  // namespace

CudaSupport& Cuda() {
  static CudaSupport* const cuda = new NoCuda();  // never destroyed (cuda_support.h)
  return *cuda;
}

}  // namespace ina::nccl
