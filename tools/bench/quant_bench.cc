// ina-quant-bench: throughput of the quantization kernels, per variant, in K = 256 blocks (one
// packet's payload each). Bytes counted are float bytes (4 per element) in and out of the kernel.
// Each variant the CPU runs is registered; the `size` argument is elements per call over all
// blocks.
// The send path's quantize + payload CRC, in K = 2048 blocks (8 KiB payloads), two ways in the same
// run: quantize+crc_2pass (the whole chunk quantized, then each block's CRC32C in a second pass,
// as the staged path did) and quantize_crc (the fused kernel: each block's CRC while it is in L1).
//   ina-quant-bench [--benchmark_filter=...] [--benchmark_min_time=...]
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ina/host/quant.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/wire.h"

namespace ina::host::quant {
namespace {

constexpr size_t kK = 256;
constexpr int kPrecision = 27;  // Precision(8)

std::vector<float> Data(size_t n) {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1e-3f);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  return x;
}

void BM_BlockExp(benchmark::State& state, const Kernels* k) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<float> x = Data(n);
  bool nonfinite = false;
  for (auto _ : state) {
    for (size_t b = 0; b < n; b += kK) {
      benchmark::DoNotOptimize(k->block_exp(x.data() + b, kK, &nonfinite));
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n * 4);
}

void BM_Quantize(benchmark::State& state, const Kernels* k) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<float> x = Data(n);
  std::vector<uint8_t> exps(n / kK);
  for (size_t b = 0; b < n; b += kK) exps[b / kK] = k->block_exp(x.data() + b, kK, nullptr);
  std::vector<uint8_t> wire(n * 4);
  for (auto _ : state) {
    for (size_t b = 0; b < n; b += kK) {
      k->quantize(x.data() + b, kK, exps[b / kK], kPrecision, wire.data() + 4 * b);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n * 4);
}

void BM_Dequantize(benchmark::State& state, const Kernels* k) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<float> x = Data(n);
  std::vector<uint8_t> exps(n / kK);
  std::vector<uint8_t> wire(n * 4);
  for (size_t b = 0; b < n; b += kK) {
    exps[b / kK] = k->block_exp(x.data() + b, kK, nullptr);
    k->quantize(x.data() + b, kK, exps[b / kK], kPrecision, wire.data() + 4 * b);
  }
  std::vector<float> out(n);
  for (auto _ : state) {
    for (size_t b = 0; b < n; b += kK) {
      k->dequantize(wire.data() + 4 * b, kK, exps[b / kK], kPrecision, out.data() + b);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n * 4);
}

constexpr size_t kCrcK = 2048;

// REQUIRES: n a multiple of kCrcK.
struct CrcInput {
  explicit CrcInput(const Kernels* k, size_t n)
      : x(Data(n)), exps(n / kCrcK), wire(4 * n), crcs(n / kCrcK) {
    for (size_t b = 0; b < n; b += kCrcK) {
      exps[b / kCrcK] = k->block_exp(x.data() + b, kCrcK, nullptr);
    }
  }
  std::vector<float> x;
  std::vector<uint8_t> exps;
  std::vector<uint8_t> wire;
  std::vector<uint32_t> crcs;
};

void BM_QuantizeThenCrcPass(benchmark::State& state, const Kernels* k) {
  const size_t n = static_cast<size_t>(state.range(0));
  CrcInput in(k, n);
  for (auto _ : state) {
    for (size_t b = 0; b < n; b += kCrcK) {
      k->quantize(in.x.data() + b, kCrcK, in.exps[b / kCrcK], kPrecision, in.wire.data() + 4 * b);
    }
    for (size_t b = 0; b < n; b += kCrcK) {
      in.crcs[b / kCrcK] = proto::Crc32c(0, in.wire.data() + 4 * b, 4 * kCrcK);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n * 4);
}

void BM_QuantizeCrc(benchmark::State& state, const Kernels* k) {
  const size_t n = static_cast<size_t>(state.range(0));
  CrcInput in(k, n);
  for (auto _ : state) {
    for (size_t b = 0; b < n; b += kCrcK) {
      in.crcs[b / kCrcK] = k->quantize_crc(in.x.data() + b, kCrcK, in.exps[b / kCrcK], kPrecision,
                                           in.wire.data() + 4 * b);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n * 4);
}

// Averaging as the slot window does it (AllReduceOptions::average): each K = 2048 block
// dequantized, then divided by the world size (3: not a power of two) while in L1. `divide`:
// the kernels' own divide (multiply and correct); `divide_plain`: one division per element (what
// DivideBy did before the kernels had divide).
template <bool kPlain>
void BM_DequantizeAvg(benchmark::State& state, const Kernels* k) {
  const size_t n = static_cast<size_t>(state.range(0));
  CrcInput in(k, n);
  for (size_t b = 0; b < n; b += kCrcK) {
    k->quantize(in.x.data() + b, kCrcK, in.exps[b / kCrcK], kPrecision, in.wire.data() + 4 * b);
  }
  const auto divide = kPlain ? ScalarKernels().divide : k->divide;
  std::vector<float> out(n);
  for (auto _ : state) {
    for (size_t b = 0; b < n; b += kCrcK) {
      k->dequantize(in.wire.data() + 4 * b, kCrcK, in.exps[b / kCrcK], kPrecision, out.data() + b);
      divide(out.data() + b, kCrcK, 3.0f);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n * 4);
}

void RegisterAll() {
  for (const Kernels* k : {&ScalarKernels(), Avx2Kernels(), Avx512Kernels()}) {
    if (k == nullptr) continue;
    const std::string name(k->name);
    for (auto [label, fn] :
         {std::pair{"block_exp", &BM_BlockExp}, std::pair{"quantize", &BM_Quantize},
          std::pair{"dequantize", &BM_Dequantize},
          std::pair{"quantize+crc_2pass", &BM_QuantizeThenCrcPass},
          std::pair{"quantize_crc", &BM_QuantizeCrc},
          std::pair{"dequantize+divide", &BM_DequantizeAvg<false>},
          std::pair{"dequantize+divide_plain", &BM_DequantizeAvg<true>}}) {
      benchmark::RegisterBenchmark((std::string(label) + "/" + name).c_str(), fn, k)
          ->Arg(64 * 1024)         // 256 KiB of floats: L2-resident
          ->Arg(4 * 1024 * 1024);  // 16 MiB: memory-bound
    }
  }
}

}  // namespace
}  // namespace ina::host::quant

int main(int argc, char** argv) {
  ina::host::quant::RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::printf("active kernels: %s\n", std::string(ina::host::quant::ActiveKernels().name).c_str());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
