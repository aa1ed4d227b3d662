// Lockstep co-simulation: the same random traffic into the RTL core (Verilator) and the reference
// engine (ina::dp_ref); the result frames must be identical and in the same order (hence the same
// per-slot order), with the job's multicast group / destination rank in tuser, and every counter
// must match. Traffic: several jobs (K 64 and 256, world 1..8, windows 1..4), loss then
// retransmission, duplicates, reordering, stale generations, mismatches, malformed frames, frames
// damaged after their CRC32C trailer was computed (bit flips anywhere, a wrong trailer: dropped as
// bad CRC before they touch a slot, by ina_crc32c in the RTL and the scalar CRC in the reference);
// random input idle cycles and output backpressure. Result frames carry the trailer ina_egress
// appends; it must equal the reference's byte for byte. INA_SEED replays a run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "ina/dp/ref_engine.h"
#include "ina/drv/job_table.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/wire.h"
#include "ina/sim/core_sim.h"
#include "support/seed.h"

namespace ina::sim {
namespace {

namespace p = proto;

uint64_t Seed() { return ina::tests::Seed(); }

struct RefOut {
  uint16_t job;
  uint16_t dest;
  std::vector<uint8_t> bytes;
};

class Collect : public dp::Emitter {
 public:
  void OnResult(uint16_t job_id, uint16_t dest_rank, std::span<const uint8_t> packet) override {
    out.push_back({job_id, dest_rank, {packet.begin(), packet.end()}});
  }
  std::vector<RefOut> out;
};

struct Job {
  dp::JobConfig cfg;
  uint16_t group;
};

// Packets (UDP payloads) of a random workload; mac_err marks frames sent with tuser set (the
// reference gets a truncated copy, which it also counts as malformed).
struct Traffic {
  std::vector<std::vector<uint8_t>> packets;
};

void Reseal(std::vector<uint8_t>& b) { p::SealMessage(b.data(), b.size() - p::kCrcBytes); }

std::vector<uint8_t> DataPacket(std::mt19937_64& rng, const Job& j, uint16_t rank, uint16_t slot,
                                uint16_t gen, uint16_t count, uint32_t offset, uint8_t flags) {
  std::vector<uint8_t> b(p::MessageBytes(count));
  p::Header h;
  h.version = p::kVersion;
  h.type = 1;
  h.flags = flags;
  h.exp = static_cast<uint8_t>(rng() % 256);
  h.next_exp = static_cast<uint8_t>(rng() % 256);
  h.job = j.cfg.job_id;
  h.rank = rank;
  h.slot = slot;
  h.gen = gen;
  h.count = count;
  h.offset = offset;
  p::EncodeHeader(h, b.data());
  for (size_t i = 0; i < count; ++i) {
    uint32_t v =
        (rng() % 4 == 0) ? static_cast<uint32_t>(rng()) : static_cast<uint32_t>(rng() % 64);
    p::Store32(&b[p::kHeaderBytes + 4 * i], v);
  }
  Reseal(b);
  return b;
}

void Mutate(std::mt19937_64& rng, std::vector<uint8_t>& b) {
  switch (rng() % 11) {
    case 0:
      b.resize(rng() % p::MessageBytes(0));
      return;  // short
    case 1:
      b[0] = static_cast<uint8_t>(3 + rng() % 250);
      return;  // version
    case 2:
      b[1] = static_cast<uint8_t>(rng() % 7);
      break;  // type
    case 3:
      b.insert(b.end() - p::kCrcBytes, 4 * (1 + rng() % 3), 0);
      break;  // too long
    case 4:
      p::Store16(&b[6], static_cast<uint16_t>(rng()));
      break;  // job
    case 5:
      p::Store16(&b[8], static_cast<uint16_t>(rng() % 80));
      break;  // rank
    case 6:
      p::Store16(&b[10], static_cast<uint16_t>(rng() % 6));
      break;  // slot
    case 7:
      p::Store16(&b[12], static_cast<uint16_t>(p::Load16(&b[12]) + rng() % 5));
      break;
    case 8:  // damaged in flight: one bit anywhere after the version byte
      b[1 + rng() % (b.size() - 1)] ^= static_cast<uint8_t>(1u << (rng() % 8));
      return;
    case 9:  // damaged in flight: a burst of bytes in the payload or header
      for (size_t i = 0, at = 1 + rng() % (b.size() - 1); i < 4 && at + i < b.size(); ++i) {
        b[at + i] = static_cast<uint8_t>(rng());
      }
      return;
    default:  // a trailer that belongs to another message
      p::StoreCrc(&b[b.size() - p::kCrcBytes], static_cast<uint32_t>(rng()));
      return;
  }
  Reseal(b);  // a well-formed (sealed) packet that breaks one of the other rules
}

Traffic MakeTraffic(std::mt19937_64& rng, const std::vector<Job>& jobs, int rounds) {
  Traffic t;
  for (int r = 0; r < rounds; ++r) {
    for (const Job& j : jobs) {
      for (uint16_t s = 0; s < j.cfg.window; ++s) {
        uint16_t gen = static_cast<uint16_t>(r);
        uint16_t count = static_cast<uint16_t>(rng() % 3 == 0 ? j.cfg.k : rng() % (j.cfg.k + 1));
        uint32_t offset = static_cast<uint32_t>(r * 1000 + s);
        uint8_t base_flags = (rng() % 4 == 0) ? p::flags::kInt32 : 0;
        std::vector<std::vector<uint8_t>> round;
        for (uint16_t rank = 0; rank < j.cfg.world_size; ++rank) {
          uint8_t f = base_flags | ((rng() % 16 == 0) ? p::flags::kNonfinite : 0);
          auto pkt = DataPacket(rng, j, rank, s, gen, count, offset, f);
          if (rng() % 40 == 0) {  // mismatch
            p::Store32(&pkt[16], offset + 1);
            Reseal(pkt);
          }
          bool lost = rng() % 10 == 0;
          if (!lost) round.push_back(pkt);
          if (lost || rng() % 10 == 0) {  // retransmission (of a lost or a delivered packet)
            pkt[2] |= p::flags::kRetx;
            Reseal(pkt);
            round.push_back(pkt);
          }
          if (rng() % 15 == 0) {
            auto bad = pkt;
            Mutate(rng, bad);
            round.push_back(bad);
          }
        }
        std::shuffle(round.begin(), round.end(), rng);
        for (auto& x : round) t.packets.push_back(std::move(x));
      }
    }
  }
  // Local reordering across rounds: swap neighbours now and then.
  for (size_t i = 1; i < t.packets.size(); ++i) {
    if (rng() % 8 == 0) std::swap(t.packets[i - 1], t.packets[i]);
  }
  return t;
}

std::vector<Job> MakeJobs(std::mt19937_64& rng) {
  std::vector<Job> jobs;
  uint32_t next_slot = 0;
  for (uint16_t i = 0; i < 3; ++i) {
    Job j;
    j.cfg.job_id = static_cast<uint16_t>(100 + 7 * i + rng() % 5);
    j.cfg.world_size = static_cast<uint16_t>(1 + rng() % 8);
    j.cfg.k = (rng() % 2) ? 64 : 256;
    j.cfg.window = static_cast<uint16_t>(1 + rng() % 4);
    j.cfg.slot_base = next_slot + static_cast<uint32_t>(rng() % 3);
    next_slot = j.cfg.slot_base + j.cfg.window;
    j.group = static_cast<uint16_t>(rng());
    jobs.push_back(j);
  }
  return jobs;
}

class CosimTest : public ::testing::TestWithParam<std::pair<double, double>> {};

TEST_P(CosimTest, RtlMatchesReferencePacketForPacket) {
  uint64_t seed = Seed();
  std::mt19937_64 rng(seed);
  uint64_t bad_crc = 0;
  for (int iter = 0; iter < 16; ++iter) {
    SCOPED_TRACE("iteration " + std::to_string(iter));
    auto ref = dp::MakeReferenceEngine(dp::EngineLimits{kRtlPoolSlots, kRtlJobs});
    CoreSim rtl(CoreSim::Options{GetParam().first, GetParam().second, rng()});
    auto jobs = MakeJobs(rng);
    for (size_t i = 0; i < jobs.size(); ++i) {
      ASSERT_TRUE(ref->AddJob(jobs[i].cfg).ok());
      ASSERT_TRUE(drv::ProgramJob(rtl, static_cast<uint32_t>(i), jobs[i].cfg, jobs[i].group).ok());
    }
    Traffic t = MakeTraffic(rng, jobs, 12);
    Collect want;
    for (const auto& pkt : t.packets) {
      ref->Process(pkt, want);
      rtl.SendFrame(MakeFrame(pkt));
    }
    Status s = rtl.Run(50'000'000);
    ASSERT_TRUE(s.ok()) << s.ToString();
    auto got = rtl.TakeOutput();
    ASSERT_EQ(got.size(), want.out.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const RefOut& w = want.out[i];
      ASSERT_GE(got[i].bytes.size(), p::kFramePrefixBytes);
      std::vector<uint8_t> payload(got[i].bytes.begin() + p::kFramePrefixBytes, got[i].bytes.end());
      ASSERT_EQ(payload, w.bytes) << "result " << i;
      EXPECT_EQ(got[i].dest_rank, w.dest) << "result " << i;
      auto it = std::find_if(jobs.begin(), jobs.end(),
                             [&](const Job& j) { return j.cfg.job_id == w.job; });
      ASSERT_NE(it, jobs.end());
      EXPECT_EQ(got[i].group, it->group) << "result " << i;
    }
    auto rc = drv::ReadCounters(rtl);
    ASSERT_TRUE(rc.ok());
    auto wc = ref->counters();
    for (size_t c = 0; c < p::kNumCounters; ++c) {
      EXPECT_EQ((*rc)[c], wc[c] & 0xFFFFFFFFu) << p::kCounterNames[c];
    }
    EXPECT_GT(dp::Get(wc, p::Counter::kResults), 0u);
    bad_crc += dp::Get(wc, p::Counter::kDropBadCrc);
    std::printf("iteration %d: %zu packets, %zu results, %llu cycles\n", iter, t.packets.size(),
                got.size(), static_cast<unsigned long long>(rtl.cycles()));
  }
  // About 1 packet in 15 is mutated, 4 mutations in 11 damage it: dozens per run of 16.
  EXPECT_GT(bad_crc, 10u) << "the traffic damaged (almost) no frame";
}

INSTANTIATE_TEST_SUITE_P(Traffic, CosimTest,
                         ::testing::Values(std::pair{0.0, 0.0}, std::pair{0.25, 0.0},
                                           std::pair{0.0, 0.4}, std::pair{0.3, 0.6}));

}  // namespace
}  // namespace ina::sim
