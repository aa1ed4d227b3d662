// ina-nccl-allreduce: one rank of an NCCL all-reduce, for scripts/gpu-check.sh.
//
//   ina-nccl-allreduce --rank R --nranks N --id-file PATH [--count C] [--iters I]
//
// Rank 0 writes the ncclUniqueId to PATH (atomically); the others wait for it (60 s at most).
// Each rank uses GPU R % cudaGetDeviceCount, all-reduces (sum) a float32 and an int32 buffer of
// C elements I times, and checks the result against the sum computed on the host: the float
// inputs are multiples of 1/4 below 16 in magnitude, so the sum is exact in float and through
// ina's block quantization (any world up to 2^20 ranks). Prints one JSON line and exits 0 when
// every check passed, 1 otherwise (with the reason on stderr).
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

bool Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "ina-nccl-allreduce: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

bool Check(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return true;
  std::fprintf(stderr, "ina-nccl-allreduce: %s: %s\n", what, ncclGetErrorString(r));
  return false;
}

float FloatInput(size_t i, int rank) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(rank) * 13) % 64) - 32) *
         0.25f;
}
int32_t IntInput(size_t i, int rank) {
  return static_cast<int32_t>(i * 31 % 100003) - 50000 + rank;
}

bool WriteId(const std::string& path, const ncclUniqueId& id) {
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return false;
  bool ok = std::fwrite(&id, sizeof(id), 1, f) == 1;
  ok = std::fclose(f) == 0 && ok;
  return ok && std::rename(tmp.c_str(), path.c_str()) == 0;
}

bool ReadId(const std::string& path, ncclUniqueId* id) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
      bool ok = std::fread(id, sizeof(*id), 1, f) == 1;
      std::fclose(f);
      if (ok) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  int rank = -1, nranks = 0, iters = 3;
  size_t count = size_t{1} << 20;
  std::string id_file;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--rank")
      rank = std::atoi(argv[i + 1]);
    else if (a == "--nranks")
      nranks = std::atoi(argv[i + 1]);
    else if (a == "--count")
      count = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--iters")
      iters = std::atoi(argv[i + 1]);
    else if (a == "--id-file")
      id_file = argv[i + 1];
    else {
      std::fprintf(stderr, "ina-nccl-allreduce: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (rank < 0 || nranks < 1 || rank >= nranks || id_file.empty() || count == 0 || iters < 1) {
    std::fprintf(stderr,
                 "usage: ina-nccl-allreduce --rank R --nranks N --id-file PATH [--count C] "
                 "[--iters I]\n");
    return 2;
  }
  int ndev = 0;
  if (!Check(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount") || ndev < 1) return 1;
  if (!Check(cudaSetDevice(rank % ndev), "cudaSetDevice")) return 1;

  ncclUniqueId id;
  if (rank == 0) {
    if (!Check(ncclGetUniqueId(&id), "ncclGetUniqueId")) return 1;
    if (!WriteId(id_file, id)) {
      std::fprintf(stderr, "ina-nccl-allreduce: cannot write %s\n", id_file.c_str());
      return 1;
    }
  } else if (!ReadId(id_file, &id)) {
    std::fprintf(stderr, "ina-nccl-allreduce: no id in %s after 60 s\n", id_file.c_str());
    return 1;
  }
  ncclComm_t comm;
  if (!Check(ncclCommInitRank(&comm, nranks, id, rank), "ncclCommInitRank")) return 1;

  std::vector<float> hf(count), ef(count);
  std::vector<int32_t> hi(count), ei(count);
  for (size_t i = 0; i < count; ++i) {
    double s = 0;
    uint32_t si = 0;
    for (int r = 0; r < nranks; ++r) {
      s += FloatInput(i, r);
      si += static_cast<uint32_t>(IntInput(i, r));
    }
    ef[i] = static_cast<float>(s);
    ei[i] = static_cast<int32_t>(si);
  }
  float* df = nullptr;
  int32_t* di = nullptr;
  cudaStream_t stream;
  if (!Check(cudaMalloc(&df, count * sizeof(float)), "cudaMalloc") ||
      !Check(cudaMalloc(&di, count * sizeof(int32_t)), "cudaMalloc") ||
      !Check(cudaStreamCreate(&stream), "cudaStreamCreate")) {
    return 1;
  }
  bool float_ok = true, int_ok = true;
  double max_abs_err = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int it = 0; it < iters; ++it) {
    for (size_t i = 0; i < count; ++i) hf[i] = FloatInput(i, rank);
    for (size_t i = 0; i < count; ++i) hi[i] = IntInput(i, rank);
    if (!Check(cudaMemcpy(df, hf.data(), count * 4, cudaMemcpyHostToDevice), "cudaMemcpy") ||
        !Check(cudaMemcpy(di, hi.data(), count * 4, cudaMemcpyHostToDevice), "cudaMemcpy") ||
        !Check(ncclAllReduce(df, df, count, ncclFloat32, ncclSum, comm, stream), "float") ||
        !Check(ncclAllReduce(di, di, count, ncclInt32, ncclSum, comm, stream), "int32") ||
        !Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize") ||
        !Check(cudaMemcpy(hf.data(), df, count * 4, cudaMemcpyDeviceToHost), "cudaMemcpy") ||
        !Check(cudaMemcpy(hi.data(), di, count * 4, cudaMemcpyDeviceToHost), "cudaMemcpy")) {
      return 1;
    }
    for (size_t i = 0; i < count; ++i) {
      double e = std::fabs(static_cast<double>(hf[i]) - ef[i]);
      max_abs_err = std::isnan(e) ? INFINITY : std::max(max_abs_err, e);
      if (hf[i] != ef[i] && float_ok) {
        float_ok = false;
        std::fprintf(stderr, "rank %d iter %d: float[%zu] = %g, expected %g\n", rank, it, i, hf[i],
                     ef[i]);
      }
      if (hi[i] != ei[i] && int_ok) {
        int_ok = false;
        std::fprintf(stderr, "rank %d iter %d: int32[%zu] = %d, expected %d\n", rank, it, i, hi[i],
                     ei[i]);
      }
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ncclCommDestroy(comm);
  cudaFree(df);
  cudaFree(di);
  std::printf(
      "{\"rank\":%d,\"nranks\":%d,\"count\":%zu,\"iters\":%d,\"float_ok\":%s,\"int_ok\":%s,"
      "\"max_abs_err\":%g,\"seconds\":%.3f}\n",
      rank, nranks, count, iters, float_ok ? "true" : "false", int_ok ? "true" : "false",
      max_abs_err, secs);
  return float_ok && int_ok ? 0 : 1;
}
