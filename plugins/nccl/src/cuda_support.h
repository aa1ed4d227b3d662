// The NCCL plugin's CUDA memory support (docs/nccl.md, "GPU buffers").
//
// Two peers, chosen by the build (not #ifdef): cuda_support.cc where drivers/gpu's CUDA memory
// domain (ina::gpu_domain) is built, no_cuda_support.cc otherwise, which refuses CUDA memory with
// the reason. Nothing else in the plugin includes a CUDA header.
//
// Threading: thread-safe. The object is process-wide and never destroyed: its per-device memory
// domains must outlive every communicator that staged through them, and NCCL may call the
// plugin from its proxy threads until the process exits.
#pragma once

#include <cstddef>

#include "coll_net.h"
#include "ina/base/status.h"

namespace ina::nccl {

class CudaSupport {
 public:
  virtual ~CudaSupport() = default;

  // OK when the plugin takes CUDA pointers: this build has the CUDA path and the CUDA runtime
  // sees at least one device (evaluated once per process). Otherwise the reason:
  // FailedPrecondition (built without the CUDA path) or Unavailable (no driver, no device).
  virtual Status Available() = 0;

  // The CUDA device that owns `p` (cudaPointerGetAttributes: device or managed memory).
  // InvalidArgument naming what `p` is otherwise (host or unregistered memory).
  virtual Result<int> DeviceOf(const void* p) = 0;

  // CollComm's device-memory path for `device`: one CUDA memory domain
  // (ina::gpu::MakeCudaDomain) and one non-blocking stream per device, made at first use.
  virtual Result<DeviceMemory*> Memory(int device) = 0;

  // Blocking copies between host memory and memory of `device`, on the device's ina-owned
  // non-blocking stream (never the legacy default stream, which would wait for NCCL's running
  // kernels); only that stream is synchronised.
  virtual Status CopyToHost(void* dst, const void* src, size_t bytes, int device) = 0;
  virtual Status CopyToDevice(void* dst, const void* src, size_t bytes, int device) = 0;
};

// The process's instance (created at first use, never destroyed).
CudaSupport& Cuda();

}  // namespace ina::nccl
