// DeviceStreams: per CUDA device, one CUDA memory domain (MakeCudaDomain) and one non-blocking
// stream owned by ina, made at first use: what the framework plugins (plugins/torch, the NCCL
// plugin) order their calls on. The stream is never the legacy default stream, which would wait
// for the framework's running kernels.
//
// Lifetimes: entries are never removed, so a domain outlives every communicator that staged
// through it; the destructor destroys the streams (a process-wide holder that is never destroyed,
// as NCCL's, keeps them to the end). Pointers returned stay valid until then.
// Threading: thread-safe (one mutex around the table; Get makes `device` current on the calling
// thread).
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <mutex>

#include "ina/base/status.h"
#include "ina/gpu/memory_domain.h"
#include "ina/host/memory_domain.h"

namespace ina::gpu {

class DeviceStreams {
 public:
  struct Device {
    host::MemoryDomain* domain = nullptr;
    cudaStream_t stream = nullptr;
  };

  DeviceStreams() = default;
  ~DeviceStreams();
  DeviceStreams(const DeviceStreams&) = delete;
  DeviceStreams& operator=(const DeviceStreams&) = delete;

  // Device `device`'s domain and stream, made at the first call for it; `device` is current on
  // the calling thread afterwards. Errors: MakeCudaDomain's, the CUDA error of cudaSetDevice or
  // of creating the stream.
  Result<Device> Get(int device);

 private:
  struct Entry {
    std::unique_ptr<host::MemoryDomain> domain;
    cudaStream_t stream = nullptr;
  };

  std::mutex mu_;
  std::map<int, Entry> devices_;  // guarded by mu_; entries never removed
};

}  // namespace ina::gpu
