// A kernel that stands in for NCCL's CollNet kernel in lazy_load_gpu_test.cc: it spins until the
// host writes its flag (mapped page-locked memory), or gives up after `max_cycles` clock cycles so
// that a failing test never leaves the GPU busy.
#include "spin_kernel.h"

namespace ina::gpu::testing {
namespace {

__global__ void SpinKernel(volatile int* flag, volatile int* started, long long max_cycles,
                           int* gave_up) {
  *started = 1;
  __threadfence_system();
  const long long t0 = clock64();
  while (*flag == 0) {
    if (clock64() - t0 > max_cycles) {
      *gave_up = 1;
      return;
    }
  }
}

}  // namespace

cudaError_t LaunchSpin(volatile int* flag, volatile int* started, long long max_cycles,
                       int* gave_up, cudaStream_t stream) {
  SpinKernel<<<1, 1, 0, stream>>>(flag, started, max_cycles, gave_up);
  return cudaGetLastError();
}

}  // namespace ina::gpu::testing
