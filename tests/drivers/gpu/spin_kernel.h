// SpinKernel (spin_kernel.cu): one thread that sets *started, then spins until *flag != 0 or
// max_cycles clock cycles have passed (then *gave_up = 1). Every pointer is mapped page-locked
// host memory (cudaHostAlloc with cudaHostAllocMapped).
#pragma once

#include <cuda_runtime_api.h>

namespace ina::gpu::testing {

cudaError_t LaunchSpin(volatile int* flag, volatile int* started, long long max_cycles,
                       int* gave_up, cudaStream_t stream);

}  // namespace ina::gpu::testing
