// ina-crc32c-bench: throughput of the CRC32C variants (ina/proto/crc32c.h), each one this CPU runs
// side by side with the scalar twin, on the message sizes of the wire (a control message, K=64
// and K=256 data packets with header and trailer) and on long buffers. Bytes/s counts the bytes
// the CRC covers; items/s = messages/s.
//   ina-crc32c-bench [--benchmark_filter=...] [--benchmark_min_time=...]
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "ina/proto/crc32c.h"
#include "ina/proto/wire.h"

namespace ina::proto {
namespace {

void BM_Crc(benchmark::State& state, Crc32cFn fn) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> buf(n + 1);
  uint64_t x = 42;
  for (auto& b : buf) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    b = static_cast<uint8_t>(x >> 56);
  }
  uint32_t acc = 0;
  for (auto _ : state) {
    acc ^= fn(0, buf.data() + (acc & 1), n);  // a data dependence: no call is skipped
    benchmark::DoNotOptimize(acc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

void Register() {
  const Crc32cVariantList list = Crc32cVariants();
  // A control message and the K=64 / K=256 data messages without their trailer; then long runs.
  const int64_t sizes[] = {static_cast<int64_t>(kHeaderBytes),
                           static_cast<int64_t>(MessageBytes(64) - kCrcBytes),
                           static_cast<int64_t>(MessageBytes(256) - kCrcBytes), 4096, 65536};
  for (int64_t n : sizes) {
    for (size_t i = 0; i < list.size; ++i) {
      benchmark::RegisterBenchmark(("crc32c_" + std::string(list.items[i]->name)).c_str(), BM_Crc,
                                   list.items[i]->fn)
          ->Arg(n);
    }
  }
}

}  // namespace
}  // namespace ina::proto

int main(int argc, char** argv) {
  ina::proto::Register();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::printf("CRC32C variant Crc32c uses on this CPU: %s\n", ina::proto::Crc32cBest().name);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
