// Exporting device memory as a dma-buf (GPUDirect RDMA: the NIC registers the fd with
// ibv_reg_dmabuf_mr; docs/gpu.md, "In the CUDA domain"). The one place drivers/gpu calls the CUDA
// driver API: its entry points come from the runtime at run time
// (cudaGetDriverEntryPointByVersion, CUDA 11.7 ABI), never from linking libcuda, so the library
// loads on machines without a driver. Raw CUresult values become Status here, named.
//
// Every error is one line saying why there is no dma-buf ("no dma-buf support on device 0
// (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0)", "the driver (CUDA 11.4) has no
// cuMemGetHandleForAddressRange: needs a CUDA >= 11.7 driver", the failing call and its CUresult
// name), for the communicator's fallback message. Code kUnavailable where the machine cannot do
// it (no driver, no support, the export refused), the runtime's code otherwise.
// Threading: thread-safe (the entry points are looked up once, on first use).
#pragma once

#include <cstddef>

#include "ina/base/status.h"

namespace ina::gpu {

// OK when CUDA device `device` can export device memory as a dma-buf.
Status DmaBufSupport(int device);

// A new dma-buf fd (owned by the caller: close() it) exporting [dptr, dptr + bytes) of device
// memory from cudaMalloc on the current device (cuMemGetHandleForAddressRange, DMA_BUF_FD, flags
// 0). REQUIRES: dptr and bytes multiples of the host page size (kInvalidArgument otherwise).
Result<int> ExportDmaBuf(const void* dptr, size_t bytes);

}  // namespace ina::gpu
