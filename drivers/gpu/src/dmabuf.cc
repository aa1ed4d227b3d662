// The CUDA driver API boundary of ina/gpu/dmabuf.h.
#include "ina/gpu/dmabuf.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "ina/gpu/device.h"

namespace ina::gpu {
namespace {

// The ABI the entry points are requested at: cuMemGetHandleForAddressRange appeared in 11.7.
constexpr unsigned kAbi = 11070;

struct DriverApi {
  PFN_cuGetErrorName_v6000 get_error_name = nullptr;
  PFN_cuDeviceGet_v2000 device_get = nullptr;
  PFN_cuDeviceGetAttribute_v2000 device_get_attribute = nullptr;
  PFN_cuMemGetHandleForAddressRange_v11070 get_handle = nullptr;
  Status status;  // why the table is incomplete
};

std::string DriverVersionText() {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess || v == 0) return "no driver";
  return "CUDA " + std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

template <typename Fn>
Status Lookup(const char* symbol, Fn* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, &p, kAbi, cudaEnableDefault, &q);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return CudaStatus(err, std::string("cudaGetDriverEntryPointByVersion(") + symbol + ", 11070)")
        .WithContext(DriverVersionText() == "no driver"
                         ? "no CUDA driver"
                         : "the driver (" + DriverVersionText() + ") is too old");
  }
  if (q != cudaDriverEntryPointSuccess || p == nullptr) {
    return Unavailable("cuda: the driver (" + DriverVersionText() + ") has no " + symbol +
                       ": needs a CUDA >= 11.7 driver");
  }
  *fn = reinterpret_cast<Fn>(p);
  return Status::Ok();
}

DriverApi Load() {
  DriverApi a;
  a.status = Lookup("cuGetErrorName", &a.get_error_name);
  if (a.status.ok()) a.status = Lookup("cuDeviceGet", &a.device_get);
  if (a.status.ok()) a.status = Lookup("cuDeviceGetAttribute", &a.device_get_attribute);
  if (a.status.ok()) a.status = Lookup("cuMemGetHandleForAddressRange", &a.get_handle);
  return a;
}

const DriverApi& Api() {
  static const DriverApi api = Load();
  return api;
}

// "cuda: <what>: CUDA_ERROR_...".
Status DriverStatus(CUresult r, const std::string& what) {
  if (r == CUDA_SUCCESS) return Status::Ok();
  const char* name = nullptr;
  if (Api().get_error_name == nullptr || Api().get_error_name(r, &name) != CUDA_SUCCESS ||
      name == nullptr) {
    name = "CUresult";
  }
  const StatusCode code = r == CUDA_ERROR_INVALID_VALUE   ? StatusCode::kInvalidArgument
                          : r == CUDA_ERROR_OUT_OF_MEMORY ? StatusCode::kResourceExhausted
                                                          : StatusCode::kUnavailable;
  return Status(code, "cuda: " + what + ": " + name + " (" + std::to_string(r) + ")");
}

}  // namespace

Status DmaBufSupport(int device) {
  const DriverApi& api = Api();
  INA_RETURN_IF_ERROR(api.status);
  CUdevice dev = 0;
  INA_RETURN_IF_ERROR(DriverStatus(api.device_get(&dev, device),
                                   "cuDeviceGet(&dev, " + std::to_string(device) + ")"));
  int supported = 0;
  INA_RETURN_IF_ERROR(
      DriverStatus(api.device_get_attribute(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev),
                   "cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)"));
  if (supported == 0) {
    return Unavailable("cuda: no dma-buf support on device " + std::to_string(device) +
                       " (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0; driver " +
                       DriverVersionText() + ")");
  }
  return Status::Ok();
}

Result<int> ExportDmaBuf(const void* dptr, size_t bytes) {
  const DriverApi& api = Api();
  INA_RETURN_IF_ERROR(api.status);
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const auto addr = reinterpret_cast<uintptr_t>(dptr);
  if (bytes == 0 || addr % page != 0 || bytes % page != 0) {
    return InvalidArgument("cuda: dma-buf export of " + std::to_string(bytes) + " bytes at " +
                           std::to_string(addr) + ": address and size must be multiples of the " +
                           std::to_string(page) + "-byte host page");
  }
  int fd = -1;
  INA_RETURN_IF_ERROR(DriverStatus(
      api.get_handle(&fd, static_cast<CUdeviceptr>(addr), bytes,
                     CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0),
      "cuMemGetHandleForAddressRange(&fd, dptr, " + std::to_string(bytes) + ", DMA_BUF_FD, 0)"));
  if (fd < 0)
    return Internal("cuda: cuMemGetHandleForAddressRange returned fd " + std::to_string(fd));
  return fd;
}

}  // namespace ina::gpu
