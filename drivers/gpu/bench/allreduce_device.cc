// ina-gpu-allreduce: one rank of an all-reduce of GPU memory through a fabric (ina-switchd),
// checked bit for bit against the host-memory call on the same values (the CPU path).
//
// The rank's settings come from the environment as for any libina program (CommConfig::FromEnv:
// INA_SWITCH=host:port, INA_JOB, INA_RANK, INA_WORLD, ...). Each of --iters rounds fills a host
// tensor of --count float32 values (seeded by rank and round, magnitudes spread over 2^-20..2^20),
// uploads it to the device on a stream without waiting, all-reduces the device tensor through the
// CUDA memory domain (ordered after that stream), then all-reduces the host copy, downloads the
// device result and compares the two bit for bit. Every rank makes the same calls.
//
// The device call quantizes on the GPU (the CUDA domain's default, docs/gpu.md "Quantizing on
// the device"); --copy-float stages float32 and quantizes on the CPU instead. Both put the same
// packets on the wire, so ranks may differ in it.
//
// Prints one JSON line: {"rank":R,"world":W,"count":N,"iters":I,"device_quant":true|false,
// "ok":true|false,"mismatches":M,"device_seconds":S,"host_seconds":S} (seconds: the all-reduce
// calls only, summed over rounds).
// Exit 0 when ok, 1 on a mismatch or error, 77 without a usable CUDA device (reason on stderr).
//
// Usage: ina-gpu-allreduce [--count N] [--iters I] [--copy-float]
#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ina/gpu/device.h"
#include "ina/gpu/memory_domain.h"
#include "ina/host/communicator.h"

namespace {

using ina::Status;
using Clock = std::chrono::steady_clock;

int Fail(const std::string& what) {
  std::fprintf(stderr, "ina-gpu-allreduce: %s\n", what.c_str());
  return 1;
}

std::vector<float> Values(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> scale(-20, 20);
  std::vector<float> v(n);
  int e = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i % 256 == 0) e = scale(rng);  // one magnitude per block, as gradients tend to have
    v[i] = std::ldexp(normal(rng), e);
  }
  return v;
}

int Run(int argc, char** argv) {
  size_t count = size_t{1} << 22;
  int iters = 3;
  bool device_quant = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--copy-float") {
      device_quant = false;
      continue;
    }
    if (i + 1 >= argc) {
      return Fail("usage: ina-gpu-allreduce [--count N] [--iters I] [--copy-float]");
    }
    char* end = nullptr;
    const unsigned long long v = std::strtoull(argv[++i], &end, 0);
    if (end == nullptr || *end != '\0' || v == 0) return Fail("bad value for " + a);
    if (a == "--count" && v < (1ull << 32)) {
      count = v;
    } else if (a == "--iters" && v <= 1000) {
      iters = static_cast<int>(v);
    } else {
      return Fail("unknown option or value out of range: " + a);
    }
  }
  auto n_dev = ina::gpu::DeviceCount();
  if (!n_dev.ok()) {
    std::fprintf(stderr, "ina-gpu-allreduce: skipped: %s\n", n_dev.status().ToString().c_str());
    return 77;
  }
  auto cfg = ina::host::CommConfig::FromEnv({});
  if (!cfg.ok()) return Fail(cfg.status().ToString());
  auto comm = ina::host::Communicator::Create(*cfg);
  if (!comm.ok()) return Fail(comm.status().ToString());
  ina::gpu::CudaDomainOptions dom_opts;
  dom_opts.quantize = device_quant;
  auto dom = ina::gpu::MakeCudaDomain(dom_opts);
  if (!dom.ok()) return Fail(dom.status().ToString());
  auto buf = ina::gpu::DeviceBuffer::Allocate(count * sizeof(float));
  if (!buf.ok()) return Fail(buf.status().ToString());
  cudaStream_t stream = nullptr;
  if (cudaStreamCreate(&stream) != cudaSuccess) return Fail("cudaStreamCreate failed");
  uint64_t mismatches = 0;
  double dev_s = 0, host_s = 0;
  std::vector<float> got(count);
  for (int it = 0; it < iters; ++it) {
    std::vector<float> host = Values((uint64_t{cfg->rank} << 32) + it, count);
    if (cudaMemcpyAsync(buf->data(), host.data(), count * sizeof(float), cudaMemcpyHostToDevice,
                        stream) != cudaSuccess) {
      return Fail("cudaMemcpyAsync upload failed");
    }
    auto t0 = Clock::now();
    Status s = (*comm)->AllReduce(std::span<float>(buf->as<float>(), count), **dom, stream);
    auto t1 = Clock::now();
    if (!s.ok()) return Fail("device all-reduce: " + s.ToString());
    s = (*comm)->AllReduce(std::span<float>(host));
    auto t2 = Clock::now();
    if (!s.ok()) return Fail("host all-reduce: " + s.ToString());
    dev_s += std::chrono::duration<double>(t1 - t0).count();
    host_s += std::chrono::duration<double>(t2 - t1).count();
    if (cudaMemcpy(got.data(), buf->data(), count * sizeof(float), cudaMemcpyDeviceToHost) !=
        cudaSuccess) {
      return Fail("cudaMemcpy download failed");
    }
    for (size_t i = 0; i < count; ++i) {
      uint32_t a, b;
      std::memcpy(&a, &got[i], 4);
      std::memcpy(&b, &host[i], 4);
      if (a != b) ++mismatches;
    }
  }
  (void)cudaStreamDestroy(stream);
  const bool ok = mismatches == 0;
  std::printf(
      "{\"rank\":%u,\"world\":%u,\"count\":%zu,\"iters\":%d,\"device_quant\":%s,\"ok\":%s,"
      "\"mismatches\":%llu,\"device_seconds\":%.4f,\"host_seconds\":%.4f}\n",
      cfg->rank, cfg->world_size, count, iters, device_quant ? "true" : "false",
      ok ? "true" : "false", static_cast<unsigned long long>(mismatches), dev_s, host_s);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
