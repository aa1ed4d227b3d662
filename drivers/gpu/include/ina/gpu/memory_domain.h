// The CUDA memory domain (ina/host/memory_domain.h): Communicator::AllReduce on tensors in GPU
// memory (docs/gpu.md, "The memory domain").
//
// Copies between the device and page-locked host staging (cudaHostAlloc) run on one non-blocking
// stream the domain owns, cudaMemcpyAsync each, with one CUDA event recorded after every copy as
// its fence (no cudaDeviceSynchronize, no stream synchronisation: Wait queries or spins on the
// events). OrderAfter(stream) records an event on the caller's stream and makes the copy stream
// wait for it (cudaStreamWaitEvent: a device-side dependency, the host does not wait).
// CheckPointer accepts device and managed memory of this domain's device
// (cudaPointerGetAttributes) and names what anything else is.
// With `quantize` (the default) float all-reduces quantize on the GPU (quantizes() true):
// BlockExps, Quantize and Dequantize run the kernels of ina/gpu/quant.h on the same stream, each
// with device scratch from a stream-ordered memory pool of the domain's own, and the int32 blocks
// (and exponents) move between that scratch and staging with cudaMemcpyAsync; one event per call.
// A device without memory pools (cudaDevAttrMemoryPoolsSupported 0) takes the copying path
// instead (quantizes() false): the same results, quantized on the CPU.
// GPUDirect RDMA (docs/gpu.md, "In the CUDA domain"): AllocNicBuffer returns device memory
// (cudaMalloc, rounded up to 2 MiB, page-aligned) exported as a dma-buf (ina/gpu/dmabuf.h), or a
// one-line Status saying why not (no dma-buf support on the device, no or too old a driver, the
// export's CUresult). The domain keeps the live NicBuffers' ranges: Quantize with `wire` inside
// one writes the int32 there (no scratch for them, no copy), Dequantize reads one where it lies,
// and PayloadCrcs (the BlockCrcs kernel of ina/gpu/crc.h) reads a NicBuffer directly or copies a
// staging `wire` to scratch first; a range that runs past a NicBuffer's end is InvalidArgument.
// PayloadCrcs needs the memory pool (Unimplemented without one). A NicBuffer's destructor waits
// for the copy stream, closes the fd and frees the memory.
//
// Built only with a CUDA compiler (target ina::gpu_domain, links ina::host and the CUDA runtime);
// libina itself never depends on CUDA. Threading: thread-safe (one mutex around the fence queue;
// every call makes the domain's device current on the calling thread first).
// Not yet run on a device: see docs/gpu.md, "What is verified where".
#pragma once

#include <memory>

#include "ina/base/status.h"
#include "ina/host/memory_domain.h"

namespace ina::gpu {

struct CudaDomainOptions {
  int device = 0;
  size_t chunk_bytes = size_t{4} << 20;  // per copy: large enough for full PCIe bandwidth
  bool quantize = true;                  // quantize on the GPU (false: stage float32, CPU kernels)
};

// Errors: Unavailable without a driver or device (the reason from cudaGetDeviceCount),
// InvalidArgument for a device index out of range or chunk_bytes < 4, the CUDA error of creating
// the stream or events.
Result<std::unique_ptr<host::MemoryDomain>> MakeCudaDomain(const CudaDomainOptions& options = {});

}  // namespace ina::gpu
