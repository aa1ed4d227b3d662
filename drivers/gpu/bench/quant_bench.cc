// ina-gpu-quant-bench: bandwidth of the GPU quantization kernels (ina/gpu/quant.h) as a fraction
// of the same device's device-to-device cudaMemcpy, measured in the same run.
//
// Bandwidth = bytes of input per second: for float32 quantize and memcpy that is 4 bytes per
// element read (and 4 written, so the two move the same traffic); dequantize reads 4 bytes of
// int32 and writes 4 of float per element. Each figure is the median of --iters timed runs
// (CUDA events on one stream) after two warm-up runs.
//
// Prints one JSON line on stdout. Without a usable CUDA device it prints the reason on stderr and
// exits with status 77 (the "skipped" convention of scripts/gpu/quant-check.sh).
//
// Usage: ina-gpu-quant-bench [--elems N] [--k K] [--world W] [--iters I]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ina/gpu/device.h"
#include "ina/gpu/quant.h"

namespace {

using ina::Status;
using ina::gpu::DeviceBuffer;
using ina::gpu::DType;

struct Options {
  size_t elems = size_t{1} << 28;  // 1 GiB of float32
  int k = 256;
  int world = 4;
  int iters = 50;
};

int Usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--elems N] [--k K] [--world W] [--iters I]\n", argv0);
  return 2;
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return false;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(argv[++i], &end, 0);
    if (end == nullptr || *end != '\0' || v == 0) return false;
    if (a == "--elems") {
      o->elems = v;
    } else if (a == "--k" && v <= 65536) {
      o->k = static_cast<int>(v);
    } else if (a == "--world" && v <= 1024) {
      o->world = static_cast<int>(v);
    } else if (a == "--iters" && v <= 10000) {
      o->iters = static_cast<int>(v);
    } else {
      return false;
    }
  }
  return true;
}

int Precision(int world) {  // as ina::host::quant::Precision, without linking libina
  int bits = 0;
  for (unsigned v = static_cast<unsigned>(world - 1); v != 0; v >>= 1) ++bits;
  return 30 - bits;
}

// Median milliseconds of `op` over `iters` runs, timed with events on `stream`.
ina::Result<double> TimeMs(cudaStream_t stream, int iters, const std::function<Status()>& op) {
  cudaEvent_t start, stop;
  INA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  INA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  std::vector<double> ms;
  Status st;
  for (int i = 0; i < iters + 2 && st.ok(); ++i) {
    st = [&]() -> Status {
      INA_CUDA_RETURN_IF_ERROR(cudaEventRecord(start, stream));
      INA_RETURN_IF_ERROR(op());
      INA_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop, stream));
      INA_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop));
      float t = 0;
      INA_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&t, start, stop));
      if (i >= 2) ms.push_back(t);
      return Status::Ok();
    }();
  }
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  if (!st.ok()) return st;
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Gradient-like data: a few magnitudes per block, random signs and mantissas (finite).
void Fill(std::vector<float>* f, std::vector<uint16_t>* bf16, std::vector<uint16_t>* f16) {
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < f->size(); ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    const uint32_t r = static_cast<uint32_t>(s);
    // Exponent field 100..139 (about 2^-27 .. 2^12), random mantissa and sign.
    const uint32_t bits = (r & 0x807fffffu) | ((100u + (r >> 23) % 40u) << 23);
    std::memcpy(&(*f)[i], &bits, 4);
    (*bf16)[i] = static_cast<uint16_t>(bits >> 16);
    // float16: exponent field 1..30, random mantissa and sign.
    (*f16)[i] = static_cast<uint16_t>((r & 0x83ffu) | ((1u + (r >> 10) % 30u) << 10));
  }
}

Status Run(const Options& o) {
  INA_ASSIGN_OR_RETURN(int devices, ina::gpu::DeviceCount());
  (void)devices;
  int dev = 0;
  INA_CUDA_RETURN_IF_ERROR(cudaGetDevice(&dev));
  cudaDeviceProp prop;
  INA_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, dev));

  const size_t n = o.elems;
  const size_t blocks = ina::gpu::BlockCount(n, o.k);
  const int p = Precision(o.world);
  std::vector<float> hf(n);
  std::vector<uint16_t> hbf(n), hh(n);
  Fill(&hf, &hbf, &hh);

  INA_ASSIGN_OR_RETURN(DeviceBuffer x, DeviceBuffer::Allocate(n * 4));
  INA_ASSIGN_OR_RETURN(DeviceBuffer xbf, DeviceBuffer::Allocate(n * 2));
  INA_ASSIGN_OR_RETURN(DeviceBuffer xh, DeviceBuffer::Allocate(n * 2));
  INA_ASSIGN_OR_RETURN(DeviceBuffer q, DeviceBuffer::Allocate(n * 4));
  INA_ASSIGN_OR_RETURN(DeviceBuffer out, DeviceBuffer::Allocate(n * 4));
  INA_ASSIGN_OR_RETURN(DeviceBuffer exps, DeviceBuffer::Allocate(blocks));
  INA_ASSIGN_OR_RETURN(DeviceBuffer exps16, DeviceBuffer::Allocate(blocks));
  INA_ASSIGN_OR_RETURN(DeviceBuffer flags, DeviceBuffer::Allocate(blocks));
  INA_CUDA_RETURN_IF_ERROR(cudaMemcpy(x.data(), hf.data(), n * 4, cudaMemcpyHostToDevice));
  INA_CUDA_RETURN_IF_ERROR(cudaMemcpy(xbf.data(), hbf.data(), n * 2, cudaMemcpyHostToDevice));
  INA_CUDA_RETURN_IF_ERROR(cudaMemcpy(xh.data(), hh.data(), n * 2, cudaMemcpyHostToDevice));

  cudaStream_t stream;
  INA_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto* e = exps.as<uint8_t>();
  auto* e16 = exps16.as<uint8_t>();
  auto* nf = flags.as<uint8_t>();

  struct Figure {
    const char* name;
    double bytes;
    double ms = 0;
  };
  std::vector<Figure> figs;
  Status st;
  auto measure = [&](const char* name, double bytes, const std::function<Status()>& op) {
    if (!st.ok()) return;
    ina::Result<double> ms = TimeMs(stream, o.iters, op);
    if (!ms.ok()) {
      st = ms.status().WithContext(name);
      return;
    }
    figs.push_back({name, bytes, *ms});
  };
  const double f32_bytes = 4.0 * static_cast<double>(n);
  const double h_bytes = 2.0 * static_cast<double>(n);
  measure("memcpy_d2d", f32_bytes, [&] {
    INA_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(out.data(), x.data(), n * 4, cudaMemcpyDeviceToDevice, stream));
    return Status::Ok();
  });
  measure("block_exp_f32", f32_bytes,
          [&] { return ina::gpu::BlockExps(x.data(), DType::kFloat32, n, o.k, e, nf, stream); });
  measure("quantize_f32", f32_bytes, [&] {
    return ina::gpu::Quantize(x.data(), DType::kFloat32, n, o.k, e, p, q.as<uint8_t>(), 0, stream);
  });
  measure("dequantize", f32_bytes, [&] {
    return ina::gpu::Dequantize(q.as<uint8_t>(), 0, n, o.k, e, p, 1, out.as<float>(), stream);
  });
  measure("dequantize_avg", f32_bytes, [&] {
    return ina::gpu::Dequantize(q.as<uint8_t>(), 0, n, o.k, e, p, o.world, out.as<float>(), stream);
  });
  measure("block_exp_bf16", h_bytes, [&] {
    return ina::gpu::BlockExps(xbf.data(), DType::kBFloat16, n, o.k, e16, nf, stream);
  });
  measure("quantize_bf16", h_bytes, [&] {
    return ina::gpu::Quantize(xbf.data(), DType::kBFloat16, n, o.k, e16, p, q.as<uint8_t>(), 0,
                              stream);
  });
  measure("block_exp_f16", h_bytes,
          [&] { return ina::gpu::BlockExps(xh.data(), DType::kFloat16, n, o.k, e16, nf, stream); });
  measure("quantize_f16", h_bytes, [&] {
    return ina::gpu::Quantize(xh.data(), DType::kFloat16, n, o.k, e16, p, q.as<uint8_t>(), 0,
                              stream);
  });
  (void)cudaStreamDestroy(stream);
  INA_RETURN_IF_ERROR(st);

  auto gbps = [&](const char* name) {
    for (const Figure& f : figs) {
      if (std::strcmp(f.name, name) == 0) return f.bytes / (f.ms * 1e-3) / 1e9;
    }
    return 0.0;
  };
  const double copy = gbps("memcpy_d2d");
  std::string json = "{\"bench\":\"gpu_quant\",\"device\":\"";
  for (const char* c = prop.name; *c != '\0'; ++c) {
    if (*c != '"' && *c != '\\') json += *c;
  }
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "\",\"cc\":\"%d.%d\",\"elems\":%zu,\"k\":%d,\"world\":%d,"
                "\"iters\":%d,\"unit\":\"GB/s of input\"",
                prop.major, prop.minor, n, o.k, o.world, o.iters);
  json += buf;
  for (const Figure& f : figs) {
    std::snprintf(buf, sizeof(buf), ",\"%s_GBps\":%.1f", f.name, gbps(f.name));
    json += buf;
  }
  std::snprintf(buf, sizeof(buf),
                ",\"quantize_ratio\":%.3f,\"dequantize_ratio\":%.3f,\"dequantize_avg_ratio\":%.3f,"
                "\"block_exp_ratio\":%.3f,\"target_ratio\":0.8}",
                gbps("quantize_f32") / copy, gbps("dequantize") / copy,
                gbps("dequantize_avg") / copy, gbps("block_exp_f32") / copy);
  json += buf;
  std::printf("%s\n", json.c_str());
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) return Usage(argv[0]);
  if (ina::Result<int> count = ina::gpu::DeviceCount(); !count.ok()) {
    std::fprintf(stderr, "ina-gpu-quant-bench: needs a CUDA device: %s\n",
                 count.status().ToString().c_str());
    return 77;
  }
  const Status st = Run(o);
  if (!st.ok()) {
    std::fprintf(stderr, "ina-gpu-quant-bench: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
