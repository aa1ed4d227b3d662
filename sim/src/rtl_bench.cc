// ina-rtl-bench: figures of the RTL core from its Verilator model.
//   - beat efficiency under saturated input (no idle, no backpressure): s_axis beats / cycles
//     from the first to the last input beat, for every K of proto/ina.toml up to the model's MaxK
//     (64 .. 2048; full packets, world 4, window 8; 20000 x 64 / K packets, at least 640),
//     in two orders: same-slot (the 4 ranks of a slot back to back: each packet's header op reads
//     the metadata and adds to the slot data the previous packet just wrote) and interleaved (each
//     rank sends its 8 slots in turn: consecutive packets on different slots); each for a CRC-only
//     job and for keyed ones (sec modes mac and mac_encrypt, docs/security.md: the packets' AES-GCM
//     tags checked and the results sealed in the core, in mac_encrypt the payloads decrypted and
//     the results encrypted too; the orders then read same-slot+mac, interleaved+mac_encrypt, ...);
//   - cycles per packet and the implied line rate at 250 MHz (512-bit beats);
//   - Verilator simulation speed: cycles per wall-clock second, and per second of this thread's CPU
//     time (the figure that holds on a loaded machine, where wall time includes waiting for a
//     core).
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "ina/drv/job_table.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/sec.h"
#include "ina/proto/wire.h"
#include "ina/sim/core_sim.h"

namespace {

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

int RunK(uint16_t k, int packets, bool same_slot, ina::proto::SecMode mode) {
  namespace p = ina::proto;
  const bool keyed = p::IsKeyed(mode);
  ina::sim::CoreSim sim(ina::sim::CoreSim::Options{});
  // The top 8 slots of the pool: the highest RAM addresses.
  ina::dp::JobConfig job{1, 4, k, ina::sim::kRtlPoolSlots - 8, 8};
  if (keyed) {
    job.security.mode = mode;
    for (size_t i = 0; i < p::kKeyBytes; ++i) {
      job.security.up[i] = static_cast<uint8_t>(0x11 * i + 1);
      job.security.down[i] = static_cast<uint8_t>(0x23 * i + 7);
    }
  }
  const uint8_t sec = static_cast<uint8_t>(job.security.mode);
  if (!ina::drv::ProgramJob(sim, 0, job, 1).ok()) return 1;
  uint64_t start_cycle = sim.cycles();
  std::vector<uint8_t> pkt(p::MessageBytes(k, sec));
  size_t complete = 0;
  for (int i = 0; i < packets; ++i) {
    p::DataMsg h{.sec = sec,
                 .job = 1,
                 .rank = static_cast<uint16_t>(same_slot ? i % 4 : (i / 8) % 4),
                 .slot = static_cast<uint16_t>(same_slot ? (i / 4) % 8 : i % 8),
                 .gen = static_cast<uint16_t>(i / 32),
                 .count = k};
    complete += h.rank == 3;
    h.offset = uint32_t{h.slot} * k;  // block `slot`: each gen a call's first use of the slot
    h.Encode(pkt.data());
    for (size_t e = 0; e < k; ++e) p::Store32(&pkt[p::kHeaderBytes + 4 * e], uint32_t(i + e));
    if (!keyed) {
      p::SealMessage(pkt.data(), pkt.size() - p::kCrcBytes);
    } else if (!p::SealOnce(job.security.up, mode, pkt.data(), pkt.size() - p::kTagBytes,
                            p::MakeNonce(h.rank, h.slot, h.gen))) {
      return 1;  // (the use of a slot is its gen: fewer than 65536 here)
    }
    sim.SendFrame(ina::sim::MakeFrame(pkt));
  }
  auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = ThreadCpuSeconds();
  uint64_t c0 = sim.cycles();
  ina::Status s = sim.Run(100'000'000, 256);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu_secs = ThreadCpuSeconds() - cpu0;
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  // One result per slot and generation whose 4 ranks all sent: one per rank-3 packet.
  const size_t results = sim.TakeOutput().size();
  uint64_t in_cycles = sim.last_in_cycle() - start_cycle;
  double eff = double(sim.in_beats()) / double(in_cycles);
  double cpp = double(in_cycles) / packets;
  double gbps = 250e6 / cpp * (p::kPayloadOffset + 4.0 * k + p::TrailerBytes(sec)) * 8 / 1e9;
  const std::string name = std::string(same_slot ? "same-slot" : "interleaved") +
                           (keyed ? "+" + std::string(p::SecModeName(sec)) : "");
  std::printf(
      "%-23s K=%-4u packets=%d in_beats=%llu cycles=%llu beat_efficiency=%.4f cycles/packet=%.3f "
      "line_rate@250MHz=%.1f Gbit/s results=%zu sim_speed=%.0f cycles/s "
      "sim_speed_cpu=%.0f cycles/cpu-s\n",
      name.c_str(), k, packets, (unsigned long long)sim.in_beats(), (unsigned long long)in_cycles,
      eff, cpp, gbps, results, double(sim.cycles() - c0) / secs,
      double(sim.cycles() - c0) / cpu_secs);
  if (results != complete) {
    std::fprintf(stderr, "ina-rtl-bench: %zu results, want %zu\n", results, complete);
    return 3;
  }
  return eff >= 0.99 ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  namespace p = ina::proto;
  // `ina-rtl-bench [MODE...]`: the sec modes to run (crc, mac, mac_encrypt), all by default.
  std::vector<p::SecMode> modes;
  for (int i = 1; i < argc; ++i) {
    const std::string m = argv[i];
    if (m == "crc" || m == "mac" || m == "mac_encrypt") {
      modes.push_back(m == "crc"   ? p::SecMode::kCrc
                      : m == "mac" ? p::SecMode::kMac
                                   : p::SecMode::kMacEncrypt);
    } else {
      std::fprintf(stderr, "usage: ina-rtl-bench [crc|mac|mac_encrypt]...\n");
      return 64;
    }
  }
  if (modes.empty()) modes = {p::SecMode::kCrc, p::SecMode::kMac, p::SecMode::kMacEncrypt};
  std::printf("ina_core PoolSlots=%u MaxK=%u\n", ina::sim::kRtlPoolSlots, ina::sim::kRtlMaxK);
  int rc = 0;
  for (const auto mode : modes) {
    for (bool same_slot : {true, false}) {
      for (uint16_t k : ina::proto::kKValues) {
        if (k > ina::sim::kRtlMaxK) continue;
        // 20000 packets at K 64, 5000 at 256, ... 640 at 2048 (20 generations of 32 packets).
        rc |= RunK(k, std::max(640, 20000 * 64 / int{k}), same_slot, mode);
      }
    }
  }
  return rc;
}
