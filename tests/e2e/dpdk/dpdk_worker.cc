// One rank for the DPDK end-to-end tests: CommConfig from INA_* (INA_TRANSPORT=udp or dpdk and
// the INA_DPDK_* variables), one float all-reduce of MakeFloatInput(seed, rank, elements) (TYPE
// int32: MakeIntInput with wrapping extremes), then "result rank=R fingerprint=HEX exact=0|1
// packets_per_s=P" on stdout (exact: equal bit for bit to ExpectFloat / ExpectInt over every
// rank's input). Exit 0 when the all-reduce succeeded, 1 otherwise.
// Usage: ina-dpdk-worker ELEMENTS SEED [REPEATS [float|int32]]
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ina/host/communicator.h"
#include "ina/host/config.h"
#include "ina/proto/wire.h"
#include "verify.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s ELEMENTS SEED [REPEATS [float|int32]]\n", argv[0]);
    return 2;
  }
  const size_t n = std::strtoull(argv[1], nullptr, 10);
  const uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 1;
  const bool int32 = argc > 4 && std::strcmp(argv[4], "int32") == 0;
  auto cfg = ina::host::CommConfig::FromEnv({});
  if (!cfg.ok()) {
    std::fprintf(stderr, "config: %s\n", cfg.status().ToString().c_str());
    return 2;
  }
  std::fprintf(stderr, "rank %u: %s\n", cfg->rank, cfg->ToString().c_str());
  auto comm = ina::host::Communicator::Create(*cfg);
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %u: create: %s\n", cfg->rank, comm.status().ToString().c_str());
    return 1;
  }
  const int k = (*comm)->config().k;  // the K in use (the default follows the path MTU)
  // One type's run: inputs, expectation, the calls; exact and fingerprint of the last result.
  bool exact = false;
  uint64_t fp = 0;
  double s = 0;  // seconds of the calls
  auto run = [&](auto make, auto expect, auto& data) -> bool {
    using T = typename std::remove_reference_t<decltype(data)>::value_type;
    std::vector<std::vector<T>> inputs;
    for (int r = 0; r < cfg->world_size; ++r) inputs.push_back(make(r));
    const std::vector<T> want = expect(inputs);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < repeats; ++i) {
      data = inputs[cfg->rank];
      ina::Status st = (*comm)->AllReduce(std::span<T>(data));
      if (!st.ok()) {
        std::fprintf(stderr, "rank %u: all-reduce: %s\n", cfg->rank, st.ToString().c_str());
        return false;
      }
    }
    s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    exact = data.size() == want.size() &&
            std::memcmp(data.data(), want.data(), data.size() * sizeof(T)) == 0;
    fp = ina::bench::Fingerprint(std::span<const uint8_t>(
        reinterpret_cast<const uint8_t*>(data.data()), data.size() * sizeof(T)));
    return true;
  };
  std::vector<float> fdata;
  std::vector<int32_t> idata;
  const bool ok =
      int32 ? run([&](int r) { return ina::bench::MakeIntInput(seed, r, n, true); },
                  [](const auto& in) { return ina::bench::ExpectInt(in); }, idata)
            : run([&](int r) { return ina::bench::MakeFloatInput(seed, r, n); },
                  [&](const auto& in) { return ina::bench::ExpectFloat(in, k).exact; }, fdata);
  if (!ok) return 1;
  // Packets this rank sent per second, first transmissions only: one per block plus one
  // exponent round per slot chain is not counted (a lower bound).
  const double pkts = static_cast<double>(repeats) * ((n + k - 1) / k);
  std::printf("result rank=%u fingerprint=%016" PRIx64 " exact=%d packets_per_s=%.0f\n", cfg->rank,
              fp, exact ? 1 : 0, s > 0 ? pkts / s : 0.0);
  std::fflush(stdout);
  return 0;
}
