// ina-engine-bench: packets/s per core of the aggregation engines, in process, no sockets.
//
// Workload: one job of world size N and K elements per packet over a window of W slots; every
// round each rank sends one packet per slot, the round's generation stamped into the headers
// before the round (so every packet is accepted and every slot completes once per round, emitting
// its result to a no-op emitter). Packets go in bursts of 32 through ProcessBurst. Reported
// items/s = packets/s. Beside the engines, "ceiling" runs only the SIMD swap-add of the same
// payloads into the same slot memory: the cost of the arithmetic alone, and "fast_<kernel>_nocrc"
// the fast engine with the CRC32C trailer neither checked nor computed (what the check costs; not
// a usable fabric). Every packet carries its trailer; the generation stamped each round updates it
// through the CRC's linearity (16 precomputed deltas), so stamping costs no CRC pass.
// "fast_<kernel>_mac" and "_mac_encrypt": the same job keyed (docs/security.md): every packet
// carries an AES-GCM tag for its round (its slot's use), which the engine verifies (and, in
// mac_encrypt, decrypts), and every result is sealed (encrypted). The workers' sealing of each
// round happens with the timer paused. The engine's tags run ina's own AES-GCM where the CPU has
// one (proto::GcmPath::kBest: vaes_avx512 or aesni); "..._aesni" and "..._libcrypto" the same with
// the AES-NI variant and with OpenSSL's (INA_GCM set while the job is installed), side by side.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "add.h"
#include "fast_engine_internal.h"
#include "ina/dp/ref_engine.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/sec.h"
#include "ina/proto/wire.h"

namespace ina::dp {
namespace {

constexpr size_t kBurst = 32;

class NullEmitter final : public Emitter {
 public:
  void OnResult(uint16_t, uint16_t, std::span<const uint8_t> packet) override {
    bytes += packet.size();
  }
  uint64_t bytes = 0;
};

struct Workload {
  uint16_t world, k, window;
  std::vector<std::vector<uint8_t>> packets;  // window * world, slot-major
  std::vector<std::span<const uint8_t>> spans;
  std::vector<uint32_t> base_crc;  // each packet's trailer with gen 0
  uint32_t gen_delta[16] = {};     // trailer change of each gen bit (same for every packet)

  JobSecurity sec;                               // keyed rows: mode and keys
  std::unique_ptr<proto::MessageSealer> sealer;  // the workers' up key
  std::vector<std::vector<uint8_t>> plain;       // mac_encrypt: each packet's clear payload

  Workload(uint16_t world_size, uint16_t k_elems, uint16_t window_slots)
      : world(world_size), k(k_elems), window(window_slots) {
    uint64_t x = 12345;
    for (uint16_t s = 0; s < window; ++s) {
      for (uint16_t r = 0; r < world; ++r) {
        std::vector<uint8_t> p(proto::MessageBytes(k));
        proto::DataMsg{.exp = 130,
                       .next_exp = 131,
                       .job = 1,
                       .rank = r,
                       .slot = s,
                       .count = k,
                       .offset = uint32_t{s} * k}
            .Encode(p.data());
        for (size_t i = proto::kHeaderBytes; i < p.size() - proto::kCrcBytes; ++i) {
          x = x * 6364136223846793005ull + 1442695040888963407ull;
          p[i] = static_cast<uint8_t>(x >> 56);
        }
        proto::SealMessage(p.data(), p.size() - proto::kCrcBytes);
        base_crc.push_back(proto::LoadCrc(p.data() + p.size() - proto::kCrcBytes));
        packets.push_back(std::move(p));
      }
    }
    spans.assign(packets.begin(), packets.end());
    // CRC(m ^ e) = CRC(m) ^ CRC(e) ^ CRC(0) for messages of one length.
    std::vector<uint8_t> m = packets[0];
    const size_t n = m.size() - proto::kCrcBytes;
    for (int b = 0; b < 16; ++b) {
      proto::SetGen(m.data(), static_cast<uint16_t>(1u << b));
      gen_delta[b] = proto::Crc32c(0, m.data(), n) ^ base_crc[0];
    }
  }
  // Makes the packets keyed packets of `mode` (their trailers become tags; Seal stamps them).
  void MakeKeyed(proto::SecMode mode) {
    sec.mode = mode;
    for (size_t i = 0; i < proto::kKeyBytes; ++i) {
      sec.up[i] = static_cast<uint8_t>(i * 7 + 1);
      sec.down[i] = static_cast<uint8_t>(i * 13 + 5);
    }
    sealer = std::move(proto::MessageSealer::Create(sec.up).value());
    for (auto& p : packets) {
      p.resize(p.size() - proto::kCrcBytes + proto::kTagBytes);
      proto::SetSec(p.data(), static_cast<uint8_t>(mode));
      plain.emplace_back(p.begin() + proto::kHeaderBytes, p.end() - proto::kTagBytes);
    }
    spans.assign(packets.begin(), packets.end());
  }
  // Keyed rows: every packet of round `use` (gen = its low 16 bits) sealed as its worker would.
  void Seal(uint64_t use) {
    for (size_t i = 0; i < packets.size(); ++i) {
      uint8_t* p = packets[i].data();
      const size_t len = packets[i].size() - proto::kTagBytes;
      proto::SetGen(p, static_cast<uint16_t>(use));
      std::copy(plain[i].begin(), plain[i].end(), p + proto::kHeaderBytes);
      sealer->Seal(sec.mode, p, len, proto::MakeNonce(proto::GetRank(p), proto::GetSlot(p), use));
    }
  }
  void StampGen(uint16_t gen) {
    uint32_t delta = 0;
    for (int b = 0; b < 16; ++b) {
      if (gen & (1u << b)) delta ^= gen_delta[b];
    }
    for (size_t i = 0; i < packets.size(); ++i) {
      uint8_t* p = packets[i].data();
      proto::SetGen(p, gen);
      proto::StoreCrc(p + packets[i].size() - proto::kCrcBytes, base_crc[i] ^ delta);
    }
  }
};

void RunEngine(benchmark::State& state, Engine& engine, Workload& w) {
  JobConfig job{1, w.world, w.k, 0, w.window};
  job.security = w.sec;
  if (!engine.AddJob(job).ok()) {
    state.SkipWithError("AddJob failed");
    return;
  }
  const bool keyed = proto::IsKeyed(w.sec.mode);
  NullEmitter out;
  uint64_t gen = 0;
  uint64_t packets = 0;
  for (auto _ : state) {
    if (keyed) {
      state.PauseTiming();
      w.Seal(gen++);
      state.ResumeTiming();
    } else {
      w.StampGen(static_cast<uint16_t>(gen++));
    }
    const size_t n = w.spans.size();
    for (size_t i = 0; i < n; i += kBurst) {
      engine.ProcessBurst(std::span(w.spans).subspan(i, std::min(kBurst, n - i)), out);
    }
    packets += n;
  }
  const CounterSnapshot c = engine.counters();
  if (Get(c, proto::Counter::kRxData) != Get(c, proto::Counter::kRxPackets)) {
    state.SkipWithError("not every packet was accepted");
  }
  state.SetItemsProcessed(static_cast<int64_t>(packets));
  state.counters["results"] = static_cast<double>(Get(c, proto::Counter::kResults));
  benchmark::DoNotOptimize(out.bytes);
}

void BM_Fast(benchmark::State& state, const fast::AddKernels* k, uint16_t world, uint16_t kk,
             uint16_t window, bool check_crc) {
  Workload w(world, kk, window);
  fast::FastOptions options;
  options.check_crc = check_crc;
  auto engine = fast::MakeFastEngineWithKernels({16384, 256}, *k, options);
  RunEngine(state, *engine, w);
}

void BM_FastKeyed(benchmark::State& state, const fast::AddKernels* k, uint16_t world, uint16_t kk,
                  uint16_t window, proto::SecMode mode, const char* gcm) {
  Workload w(world, kk, window);
  w.MakeKeyed(mode);
  auto engine = fast::MakeFastEngineWithKernels({16384, 256}, *k);
  if (gcm != nullptr) setenv("INA_GCM", gcm, 1);  // read when the job's sealers are made
  RunEngine(state, *engine, w);
  unsetenv("INA_GCM");
}

void BM_Ref(benchmark::State& state, uint16_t world, uint16_t kk, uint16_t window) {
  Workload w(world, kk, window);
  auto engine = MakeReferenceEngine({16384, 256});
  RunEngine(state, *engine, w);
}

// The arithmetic alone: swap-copy the first contribution, swap-add the rest, into slot memory of
// the same shape (2 copies x 256 int32 per slot), no header parsing, rules or results.
void BM_Ceiling(benchmark::State& state, const fast::AddKernels* k, uint16_t world, uint16_t kk,
                uint16_t window) {
  Workload w(world, kk, window);
  auto* mem = static_cast<uint32_t*>(std::aligned_alloc(64, size_t{window} * 2 * 256 * 4));
  uint16_t gen = 0;
  uint64_t packets = 0;
  for (auto _ : state) {
    const size_t copy = gen++ & 1;
    for (size_t i = 0; i < w.packets.size(); ++i) {
      const size_t slot = i / world;
      uint32_t* acc = mem + (slot * 2 + copy) * 256;
      const uint8_t* payload = w.packets[i].data() + proto::kHeaderBytes;
      if (i % world == 0) {
        k->swap_copy(acc, payload, kk);
      } else {
        k->swap_add(acc, payload, kk);
      }
    }
    benchmark::ClobberMemory();
    packets += w.packets.size();
  }
  state.SetItemsProcessed(static_cast<int64_t>(packets));
  std::free(mem);
}

void Register() {
  const fast::AddVariantList list = fast::AddVariants();
  constexpr uint16_t kWindow = 64;
  for (uint16_t kk : {64, 256}) {
    for (uint16_t world : {4, 8}) {
      const std::string shape =
          "/K" + std::to_string(kk) + "/N" + std::to_string(world) + "/W" + std::to_string(kWindow);
      for (size_t i = 0; i < list.size; ++i) {
        const fast::AddKernels* k = list.items[i];
        benchmark::RegisterBenchmark(("fast_" + std::string(k->name) + shape).c_str(), BM_Fast, k,
                                     world, kk, kWindow, true);
      }
      benchmark::RegisterBenchmark(
          ("fast_" + std::string(list.items[0]->name) + "_nocrc" + shape).c_str(), BM_Fast,
          list.items[0], world, kk, kWindow, false);
      for (proto::SecMode mode : {proto::SecMode::kMac, proto::SecMode::kMacEncrypt}) {
        for (const char* gcm : {static_cast<const char*>(nullptr), "aesni", "libcrypto"}) {
          benchmark::RegisterBenchmark(
              ("fast_" + std::string(list.items[0]->name) + "_" +
               std::string(proto::SecModeName(static_cast<uint8_t>(mode))) +
               (gcm != nullptr ? "_" + std::string(gcm) : "") + shape)
                  .c_str(),
              BM_FastKeyed, list.items[0], world, kk, kWindow, mode, gcm);
        }
      }
      benchmark::RegisterBenchmark(("ceiling_" + std::string(list.items[0]->name) + shape).c_str(),
                                   BM_Ceiling, list.items[0], world, kk, kWindow);
      benchmark::RegisterBenchmark(("ref" + shape).c_str(), BM_Ref, world, kk, kWindow);
    }
  }
}

}  // namespace
}  // namespace ina::dp

int main(int argc, char** argv) {
  ina::dp::Register();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  auto gcm = ina::proto::MessageSealer::Create(ina::proto::TrafficKey{});
  std::printf("fast engine kernel on this CPU: %s; CRC32C: %s; AES-GCM: %s\n",
              std::string(ina::dp::FastEngineKernelName()).c_str(), ina::proto::Crc32cBest().name,
              gcm.ok() ? (*gcm)->path_name() : "unavailable");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
