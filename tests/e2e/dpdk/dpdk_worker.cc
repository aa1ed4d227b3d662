// One rank for the DPDK end-to-end tests: CommConfig from INA_* (INA_TRANSPORT=udp or dpdk and
// the INA_DPDK_* variables), one float all-reduce of MakeFloatInput(seed, rank, elements), then
// "result rank=R fingerprint=HEX exact=0|1 packets_per_s=P" on stdout (exact: equal bit for bit
// to ExpectFloat over every rank's input). Exit 0 when the all-reduce succeeded, 1 otherwise.
// Usage: ina-dpdk-worker ELEMENTS SEED [REPEATS]
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ina/host/communicator.h"
#include "ina/host/config.h"
#include "ina/proto/wire.h"
#include "verify.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s ELEMENTS SEED [REPEATS]\n", argv[0]);
    return 2;
  }
  const size_t n = std::strtoull(argv[1], nullptr, 10);
  const uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 1;
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
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < cfg->world_size; ++r)
    inputs.push_back(ina::bench::MakeFloatInput(seed, r, n));
  const ina::bench::FloatExpectation want = ina::bench::ExpectFloat(inputs, cfg->k);
  std::vector<float> data;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < repeats; ++i) {
    data = inputs[cfg->rank];
    ina::Status st = (*comm)->AllReduce(std::span<float>(data));
    if (!st.ok()) {
      std::fprintf(stderr, "rank %u: all-reduce: %s\n", cfg->rank, st.ToString().c_str());
      return 1;
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const bool exact = data.size() == want.exact.size() &&
                     std::memcmp(data.data(), want.exact.data(), data.size() * sizeof(float)) == 0;
  const uint64_t fp = ina::bench::Fingerprint(std::span<const uint8_t>(
      reinterpret_cast<const uint8_t*>(data.data()), data.size() * sizeof(float)));
  // Packets this rank sent per second, first transmissions only: one per block plus one
  // exponent round per slot chain is not counted (a lower bound).
  const double pkts = static_cast<double>(repeats) * ((n + cfg->k - 1) / cfg->k);
  std::printf("result rank=%u fingerprint=%016" PRIx64 " exact=%d packets_per_s=%.0f\n", cfg->rank,
              fp, exact ? 1 : 0, s > 0 ? pkts / s : 0.0);
  std::fflush(stdout);
  return 0;
}
