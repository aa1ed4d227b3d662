// DevicePath: the PyTorch backend's way to all-reduce tensors in GPU memory through the fabric
// (docs/pytorch.md, "CUDA tensors").
//
// Two peers behind this interface, chosen by the build, not by #ifdef: cuda_path.cc where
// drivers/gpu's ina::gpu_domain is built (a CUDA >= 12 toolkit was found), no_cuda_path.cc
// otherwise. The backend itself never includes a CUDA header and needs no c10_cuda: torch's
// streams and events reach it through c10's device-generic interface
// (c10::impl::VirtualGuardImpl), and this interface takes torch's event as an opaque pointer
// (a cudaEvent_t for CUDA).
//
// Threading: thread-safe (Prepare runs on callers' threads, AllReduce on the backend thread).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "ina/base/status.h"
#include "ina/host/communicator.h"

namespace ina::torch_backend {

class DevicePath {
 public:
  virtual ~DevicePath() = default;

  // Whether this build has a CUDA path at all (false: no_cuda_path.cc).
  virtual bool built() const = 0;

  // OK when tensors on CUDA device `device` can go through the fabric: makes (once per device)
  // the CUDA memory domain (ina::gpu::MakeCudaDomain) and an ina-owned stream. Errors name the
  // reason: FailedPrecondition (built without the CUDA path), MakeCudaDomain's (Unavailable
  // without a driver or device, InvalidArgument for a bad index), the CUDA error of making the
  // stream. Blocks only for the CUDA calls.
  virtual Status Prepare(int device) = 0;

  // In-place all-reduce (sum, or with options.average the average, fused into the result's
  // dequantization: Communicator's AllReduceOptions) of `data`, memory of Prepare()d CUDA device
  // `device`, through `comm`. The copies out of `data` start after `ready` (a cudaEvent_t as
  // void*, recorded by the caller on the stream that wrote `data`): the ina stream waits for it on
  // the device (cudaStreamWaitEvent), the host does not. Blocks until the result is in `data`
  // (every copy back done, so any stream's later work sees it). Errors: Communicator::AllReduce's;
  // the CUDA error of the stream wait.
  // REQUIRES: `comm` is destroyed before this object (its staging belongs to the domain).
  virtual Status AllReduce(host::Communicator& comm, int device, std::span<float> data, void* ready,
                           const host::AllReduceOptions& options) = 0;
  virtual Status AllReduce(host::Communicator& comm, int device, std::span<int32_t> data,
                           void* ready, const host::AllReduceOptions& options) = 0;
};

// The peer this build has.
std::unique_ptr<DevicePath> MakeDevicePath();

}  // namespace ina::torch_backend
