// Property tests with printed seeds (INA_SEED=<n> replays one): simulated workers with loss,
// duplication, retransmission, reordering and forged/garbage packets, fed to the reference engine
// and to the fast engine on every kernel set; after every packet the emitted results (destination
// + bytes) and all counters must be identical. Plus: arrival order does not change result bytes,
// a duplicate never counts twice, and garbage aimed at one job never changes another's results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <random>
#include <vector>

#include "../ref/test_util.h"
#include "fast_engine_internal.h"

namespace ina::dp::testing {
namespace {

using proto::Counter;
using Bytes = std::vector<uint8_t>;

uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
uint64_t Hash(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0, uint64_t e = 0) {
  return Mix(a ^ Mix(b ^ Mix(c ^ Mix(d ^ Mix(e)))));
}

// The reference plus every fast variant, fed the same packets; checks they agree after each one.
class Lockstep {
 public:
  explicit Lockstep(const EngineLimits& limits) {
    ref_ = MakeReferenceEngine(limits);
    const fast::AddVariantList list = fast::AddVariants();
    for (size_t i = 0; i < list.size; ++i) {
      fast_.push_back(fast::MakeFastEngineWithKernels(limits, *list.items[i]));
      names_.push_back(list.items[i]->name);
    }
  }

  void AddJob(const JobConfig& j) {
    const StatusCode want = ref_->AddJob(j).code();
    ASSERT_EQ(want, StatusCode::kOk);
    for (auto& f : fast_) ASSERT_EQ(f->AddJob(j).code(), want);
  }

  // Feeds one packet to every engine; returns the reference's emitted results. The jobs the
  // engines ended (rank_mismatch) must agree too; they are collected in failures().
  std::vector<Emitted> Feed(const Bytes& p) {
    RecordingEmitter want;
    ref_->Process(p, want);
    JobFailure f[4];
    const size_t n = ref_->PollFailures(f);
    for (size_t i = 0; i < fast_.size(); ++i) {
      RecordingEmitter got;
      fast_[i]->Process(p, got);
      EXPECT_EQ(got.got, want.got) << "emitted results differ, fast_" << names_[i];
      EXPECT_EQ(fast_[i]->counters(), ref_->counters()) << "counters differ, fast_" << names_[i];
      JobFailure g[4];
      const size_t m = fast_[i]->PollFailures(g);
      EXPECT_EQ(std::vector<JobFailure>(g, g + m), std::vector<JobFailure>(f, f + n))
          << "failed jobs differ, fast_" << names_[i];
    }
    failures_.insert(failures_.end(), f, f + n);
    ++packets_;
    return want.got;
  }
  const std::vector<JobFailure>& failures() const { return failures_; }

  const Engine& ref() const { return *ref_; }
  uint64_t packets() const { return packets_; }

 private:
  std::unique_ptr<Engine> ref_;
  std::vector<std::unique_ptr<Engine>> fast_;
  std::vector<const char*> names_;
  std::vector<JobFailure> failures_;
  uint64_t packets_ = 0;
};

// One job's traffic model: what rank r sends for (slot, gen), deterministic from the seed. The
// shapes are a worker's (docs/protocol.md, "Slot history"): each slot runs a series of calls of
// 1-4 blocks on that slot, float (an exponent round, then the blocks) or int32, the last block
// sometimes short; block j of a call on slot s is block s + j*W of the tensor.
struct JobModel {
  JobConfig cfg;
  uint64_t seed;
  bool clean;  // no forged packets aimed at it: its results must be exactly the model's

  struct Shape {
    uint32_t offset;
    uint16_t count;
    bool int32;
  };
  Shape ShapeOf(uint16_t slot, uint16_t gen) const {
    const uint32_t g = gen > 4096 ? gen % 64u : gen;  // far generations: forged packets only
    uint32_t start = 0;
    while (true) {
      const uint64_t h = Hash(seed, 5, slot, start);
      const bool int32 = (h & 1) != 0;
      const uint32_t blocks = 1 + static_cast<uint32_t>((h >> 8) % 4);
      const uint32_t uses = blocks + (int32 ? 0 : 1);
      if (g < start + uses) {
        const uint32_t j = g - start;
        if (!int32 && j == 0) return {uint32_t{slot} * cfg.k, 0, false};  // exponent round
        const uint32_t b = int32 ? j : j - 1;
        uint16_t count = cfg.k;
        if (b + 1 == blocks && (h >> 16) % 3 == 0) {
          count = static_cast<uint16_t>(1 + (h >> 24) % cfg.k);  // short last block
        }
        return {(slot + b * cfg.window) * uint32_t{cfg.k}, count, int32};
      }
      start += uses;
    }
  }
  uint16_t Count(uint16_t slot, uint16_t gen) const { return ShapeOf(slot, gen).count; }
  bool Int32(uint16_t slot, uint16_t gen) const { return ShapeOf(slot, gen).int32; }
  uint32_t Offset(uint16_t slot, uint16_t gen) const { return ShapeOf(slot, gen).offset; }
  DataSpec Packet(uint16_t rank, uint16_t slot, uint16_t gen) const {
    DataSpec d;
    d.job = cfg.job_id;
    d.rank = rank;
    d.slot = slot;
    d.gen = gen;
    d.offset = Offset(slot, gen);
    const uint64_t h = Hash(seed, 3, slot, gen, rank);
    d.flags = static_cast<uint8_t>((Int32(slot, gen) ? proto::flags::kInt32 : 0) |
                                   ((h % 16 == 0) ? proto::flags::kNonfinite : 0));
    // A float block's exp is the one every rank agreed (rule 13 compares it); an int32 block's is
    // not compared, so each rank's may differ. next_exp is each rank's local exponent.
    d.exp = Int32(slot, gen) ? static_cast<uint8_t>(h >> 8)
                             : static_cast<uint8_t>(Hash(seed, 6, slot, gen) >> 8);
    d.next_exp = static_cast<uint8_t>(h >> 16);
    const uint16_t n = Count(slot, gen);
    d.elems.resize(n);
    for (uint16_t i = 0; i < n; ++i) {
      const uint64_t v = Hash(seed, 4, slot, (uint64_t{gen} << 16) | rank, i);
      // Mostly small values, sometimes extremes to exercise wrap-around.
      d.elems[i] = (v & 7) == 0 ? static_cast<int32_t>(v >> 32) : static_cast<int32_t>(v >> 50);
    }
    return d;
  }
  // The packet on the wire: d's, sealed as the job's mode asks (use = gen: the runs stay below
  // 65536 generations); `key` other than the job's up key: a forger's.
  Bytes Wire(const DataSpec& d) const { return Wire(d, cfg.security.up); }
  Bytes Wire(const DataSpec& d, const proto::TrafficKey& key) const {
    Bytes b = DataPacket(d);
    if (!proto::IsKeyed(cfg.security.mode)) return b;
    return SealKeyed(b, cfg.security.mode, key, d.gen);
  }
  // The result every rank must get for (slot, gen), as the bytes of an all-ranks result (for a
  // keyed job: destination and seal are the caller's, see ExpectedFor).
  Bytes Expected(uint16_t slot, uint16_t gen) const {
    DataSpec sum = Packet(0, slot, gen);
    sum.flags = 0;
    sum.exp = sum.next_exp = 0;
    std::fill(sum.elems.begin(), sum.elems.end(), 0);
    for (uint16_t r = 0; r < cfg.world_size; ++r) {
      const DataSpec d = Packet(r, slot, gen);
      sum.flags |= d.flags;
      sum.exp = std::max(sum.exp, d.exp);
      sum.next_exp = std::max(sum.next_exp, d.next_exp);
      for (size_t i = 0; i < d.elems.size(); ++i) {
        sum.elems[i] = static_cast<int32_t>(static_cast<uint32_t>(sum.elems[i]) +
                                            static_cast<uint32_t>(d.elems[i]));
      }
    }
    Bytes b = DataPacket(sum);
    proto::SetType(b.data(), proto::MsgType::kResult);
    proto::SetRank(b.data(), proto::kRankAll);
    Reseal(b);
    return b;
  }
  // The result for destination `dest` as the engine must emit it.
  Bytes ExpectedFor(uint16_t slot, uint16_t gen, uint16_t dest) const {
    Bytes want = Expected(slot, gen);
    proto::SetRank(want.data(), dest);
    Reseal(want);
    if (!proto::IsKeyed(cfg.security.mode)) return want;
    return SealKeyed(want, cfg.security.mode, cfg.security.down, gen);
  }
};

struct NetParams {
  double loss;         // data packet lost on the way to the switch
  double result_loss;  // result lost on the way to one rank
  double dup;          // data packet delivered twice
  double retx;         // per step: a waiting worker retransmits
  double forge;        // per step: a forged or garbage packet for a non-clean job
  size_t reorder;      // deliver any of the first `reorder` queued packets
};

// Simulates every job's workers running `rounds` generations on every slot through a lossy,
// reordering network into the lockstep engines.
// keyed: job j runs in sec mode j % 3 (crc, mac, mac_encrypt), with its own keys.
void RunSimulation(uint64_t seed, const NetParams& net, size_t jobs, uint16_t rounds,
                   uint64_t max_packets, bool keyed = false) {
  std::mt19937_64 rng(seed);
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  auto pick = [&](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); };

  const EngineLimits limits{256, 16};
  Lockstep engines(limits);
  std::vector<JobModel> models;
  uint32_t next_slot = static_cast<uint32_t>(pick(8));
  for (size_t j = 0; j < jobs; ++j) {
    JobModel m;
    m.cfg.job_id = static_cast<uint16_t>(j == 0 ? pick(65536) : models[0].cfg.job_id + j);
    m.cfg.world_size = static_cast<uint16_t>(chance(0.3) ? 1 + pick(64) : 1 + pick(8));
    m.cfg.k = proto::kKValues[pick(proto::kKValues.size())];  // every K, 64 .. 2048
    m.cfg.window = static_cast<uint16_t>(1 + pick(6));
    m.cfg.slot_base = next_slot;
    next_slot += m.cfg.window + static_cast<uint32_t>(pick(3));
    m.seed = Hash(seed, 100 + j);
    if (keyed) {
      m.cfg.security = TestSecurity(static_cast<proto::SecMode>(j % 3), static_cast<uint8_t>(j));
    }
    m.clean = (j % 2 == 0);  // job 0 always clean; odd jobs receive forgeries
    engines.AddJob(m.cfg);
    if (::testing::Test::HasFatalFailure()) return;
    models.push_back(m);
  }

  // Worker state: per (job, rank, slot) the generation it is on; done when == rounds.
  struct Worker {
    size_t job;
    uint16_t rank, slot, gen;
  };
  std::vector<Worker> workers;
  for (size_t j = 0; j < jobs; ++j) {
    for (uint16_t r = 0; r < models[j].cfg.world_size; ++r) {
      for (uint16_t s = 0; s < models[j].cfg.window; ++s) workers.push_back({j, r, s, 0});
    }
  }
  std::map<std::tuple<size_t, uint16_t, uint16_t>, size_t> worker_at;  // (job, rank, slot)
  for (size_t i = 0; i < workers.size(); ++i) {
    worker_at[{workers[i].job, workers[i].rank, workers[i].slot}] = i;
  }
  auto job_of = [&](uint16_t id) -> size_t {
    for (size_t j = 0; j < jobs; ++j) {
      if (models[j].cfg.job_id == id) return j;
    }
    return jobs;
  };

  std::deque<Bytes> wire;
  auto send = [&](const Worker& w, bool retx) {
    if (chance(net.loss)) return;
    DataSpec d = models[w.job].Packet(w.rank, w.slot, w.gen);
    if (retx) d.flags |= proto::flags::kRetx;
    wire.push_back(models[w.job].Wire(d));
  };
  for (const Worker& w : workers) send(w, false);

  auto forged = [&]() -> Bytes {
    std::vector<size_t> dirty;
    for (size_t j = 0; j < jobs; ++j) {
      if (!models[j].clean) dirty.push_back(j);
    }
    const JobModel& m = models[dirty[pick(dirty.size())]];
    const bool m_keyed = proto::IsKeyed(m.cfg.security.mode);
    // A keyed job's forger: someone with another key (or a CRC-only packet) half the time; else
    // an insider (a member rank with a bug), whose packets carry good tags.
    proto::TrafficKey key = m.cfg.security.up;
    if (m_keyed && chance(0.5)) key[pick(key.size())] ^= static_cast<uint8_t>(1 + pick(255));
    Bytes b;
    switch (pick(5)) {
      case 0: {  // random garbage, but naming the dirty job
        b.resize(pick(proto::kMaxPacketBytes + 8));
        for (auto& x : b) x = static_cast<uint8_t>(rng());
        if (b.size() >= 8) proto::SetJob(b.data(), m.cfg.job_id);
        return b;
      }
      case 1: {  // a valid-looking packet with random rank/slot/gen
        DataSpec d = m.Packet(static_cast<uint16_t>(pick(m.cfg.world_size + 2)),
                              static_cast<uint16_t>(pick(m.cfg.window + 2)),
                              static_cast<uint16_t>(pick(8) - 2));
        d.rank = std::min<uint16_t>(d.rank, 0xFFFF);
        return m_keyed && chance(0.3) ? DataPacket(d) : m.Wire(d, key);
      }
      case 2: {  // mismatched offset / count / int32 flag / exponent for a live generation: against
                 // the slot's history (drop_history) or, when it fits, a disagreement that ends the
                 // job (an exponent only for a float block)
        DataSpec d = m.Packet(static_cast<uint16_t>(pick(m.cfg.world_size)),
                              static_cast<uint16_t>(pick(m.cfg.window)),
                              static_cast<uint16_t>(pick(rounds)));
        const uint64_t what = pick(4);
        if (what == 0) d.offset += 1;
        if (what == 1) d.elems.resize(pick(m.cfg.k + 1));
        if (what == 2) d.flags ^= proto::flags::kInt32;
        if (what == 3) d.exp = static_cast<uint8_t>(d.exp + 1 + pick(255));
        return m.Wire(d, key);
      }
      case 3: {  // a bit-flipped real packet, job kept: damage in flight (the trailer no longer
                 // matches) or, half the time, a sender's bug (sealed after the flip)
        const DataSpec d = m.Packet(static_cast<uint16_t>(pick(m.cfg.world_size)),
                                    static_cast<uint16_t>(pick(m.cfg.window)),
                                    static_cast<uint16_t>(pick(rounds)));
        b = m.Wire(d, key);
        const size_t trailer = proto::TrailerBytes(proto::GetSec(b.data()));
        const size_t bit = pick((b.size() - trailer) * 8);
        b[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
        proto::SetJob(b.data(), m.cfg.job_id);
        if (chance(0.5)) {
          if (!m_keyed) {
            Reseal(b);
          } else {  // the insider seals the flipped packet (its nonce: the header's rank, slot)
            b.resize(b.size() - trailer + proto::kCrcBytes);
            b = SealKeyed(b, m.cfg.security.mode, key, proto::GetGen(b.data()));
          }
        }
        return b;
      }
      default: {  // stale generations
        DataSpec d = m.Packet(static_cast<uint16_t>(pick(m.cfg.world_size)),
                              static_cast<uint16_t>(pick(m.cfg.window)),
                              static_cast<uint16_t>(0xFFF0 + pick(16)));
        return m.Wire(d, key);
      }
    }
  };

  uint64_t clean_results_checked = 0;
  while (engines.packets() < max_packets) {
    if (::testing::Test::HasFailure()) return;
    bool all_clean_done = true;
    for (const Worker& w : workers) {
      if (models[w.job].clean && w.gen < rounds) all_clean_done = false;
    }
    if (all_clean_done) break;

    if (chance(net.forge)) {
      engines.Feed(forged());
      continue;
    }
    if (wire.empty() || chance(net.retx)) {
      const Worker& w = workers[pick(workers.size())];
      if (w.gen < rounds) send(w, true);
      continue;
    }
    const size_t i = pick(std::min(net.reorder, wire.size()));
    Bytes p = wire[i];
    if (!chance(net.dup)) wire.erase(wire.begin() + static_cast<long>(i));
    for (const Emitted& e : engines.Feed(p)) {
      const size_t j = job_of(e.job);
      ASSERT_LT(j, jobs);
      const uint16_t slot = proto::GetSlot(e.bytes.data());
      const uint16_t gen = proto::GetGen(e.bytes.data());
      if (models[j].clean) {
        const Bytes want = models[j].ExpectedFor(slot, gen, e.dest);
        ASSERT_EQ(e.bytes, want) << "job " << e.job << " slot " << slot << " gen " << gen;
        ++clean_results_checked;
      }
      // Deliver to the destination rank(s); a rank moves on when it gets its generation.
      for (uint16_t r = 0; r < models[j].cfg.world_size; ++r) {
        if (e.dest != proto::kRankAll && e.dest != r) continue;
        if (chance(net.result_loss)) continue;
        Worker& w = workers[worker_at[{j, r, slot}]];
        if (w.gen == gen && w.gen < rounds) {
          ++w.gen;
          if (w.gen < rounds) send(w, false);
        }
      }
    }
  }
  // Only forged packets end a job, and never a clean one.
  for (const JobFailure& f : engines.failures()) {
    const size_t j = job_of(f.job_id);
    ASSERT_LT(j, jobs);
    EXPECT_FALSE(models[j].clean) << "clean job " << f.job_id << " ended";
  }
  // Clean jobs must finish: retransmission recovers every loss.
  for (const Worker& w : workers) {
    if (models[w.job].clean) {
      ASSERT_EQ(w.gen, rounds) << "clean job " << models[w.job].cfg.job_id << " rank " << w.rank
                               << " slot " << w.slot << " stuck after " << engines.packets();
    }
  }
  EXPECT_GT(clean_results_checked, 0u);
  const CounterSnapshot c = engines.ref().counters();
  std::printf(
      "  packets %llu results %llu resends %llu dups %llu retx %llu stale %llu early %llu "
      "history %llu mismatch %llu malformed %llu forged %llu replayed %llu cross_job %llu "
      "checked %llu\n",
      (unsigned long long)c[0], (unsigned long long)Get(c, Counter::kResults),
      (unsigned long long)Get(c, Counter::kResultResends),
      (unsigned long long)Get(c, Counter::kDuplicates),
      (unsigned long long)Get(c, Counter::kRetransmissions),
      (unsigned long long)Get(c, Counter::kDropStale),
      (unsigned long long)Get(c, Counter::kDropEarly),
      (unsigned long long)Get(c, Counter::kDropHistory),
      (unsigned long long)Get(c, Counter::kDropMismatch),
      (unsigned long long)Get(c, Counter::kDropMalformed),
      (unsigned long long)Get(c, Counter::kDropForged),
      (unsigned long long)Get(c, Counter::kDropReplayed),
      (unsigned long long)Get(c, Counter::kDropCrossJob),
      (unsigned long long)clean_results_checked);
}

TEST(Differential, CleanNetwork) {
  const uint64_t seed = TestSeed();
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 10 && !HasFailure(); ++iter) {
    RunSimulation(rng(), {0, 0, 0, 0.01, 0, 1}, 1 + iter % 3, 60, 400000);
  }
}

TEST(Differential, LossDupReorderRetx) {
  const uint64_t seed = TestSeed();
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 16 && !HasFailure(); ++iter) {
    RunSimulation(rng(), {0.1, 0.1, 0.1, 0.05, 0, 16}, 1 + iter % 3, 40, 400000);
  }
}

TEST(Differential, ForgedAndGarbagePackets) {
  const uint64_t seed = TestSeed();
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 16 && !HasFailure(); ++iter) {
    RunSimulation(rng(), {0.05, 0.05, 0.05, 0.05, 0.2, 8}, 2 + iter % 3, 40, 400000);
  }
}

// Keyed jobs (mac, mac_encrypt) beside a CRC-only one, with loss and forgeries: forgers with
// another key or none, insiders with the key, damage in flight. The clean jobs' results, tags and
// ciphertext included, are exactly the model's, in both engines.
TEST(Differential, KeyedJobsLossAndForgeries) {
  const uint64_t seed = TestSeed();
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 12 && !HasFailure(); ++iter) {
    RunSimulation(rng(), {0.05, 0.05, 0.05, 0.05, iter % 2 ? 0.2 : 0.0, 8}, 3 + iter % 4, 30,
                  400000, /*keyed=*/true);
  }
}

// The same contributions (with duplicates and retransmissions) in any order give identical
// result bytes, and every extra copy is a duplicate or a re-send, never a second add.
TEST(Properties, OrderIndependenceAndNoDoubleCounting) {
  const uint64_t seed = TestSeed();
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 200 && !HasFailure(); ++iter) {
    JobModel m;
    m.cfg = {static_cast<uint16_t>(rng()), static_cast<uint16_t>(1 + rng() % 64),
             static_cast<uint16_t>(rng() % 2 ? 64 : 256), 3, 2};
    m.seed = rng();
    m.clean = true;
    const uint16_t slot = rng() % 2;
    std::vector<Bytes> packets;
    for (uint16_t r = 0; r < m.cfg.world_size; ++r) {
      const uint64_t copies = 1 + rng() % 3;
      for (uint64_t c = 0; c < copies; ++c) {
        DataSpec d = m.Packet(r, slot, 0);
        if (c > 0 && rng() % 2) d.flags |= proto::flags::kRetx;
        packets.push_back(DataPacket(d));
      }
    }
    Bytes first_result;
    for (int perm = 0; perm < 3; ++perm) {
      std::shuffle(packets.begin(), packets.end(), rng);
      Lockstep engines({8, 4});
      engines.AddJob(m.cfg);
      ASSERT_FALSE(HasFatalFailure());
      std::vector<Emitted> all;
      for (const Bytes& p : packets) {
        for (Emitted& e : engines.Feed(p)) all.push_back(std::move(e));
      }
      ASSERT_FALSE(all.empty());
      const auto it = std::find_if(all.begin(), all.end(),
                                   [](const Emitted& e) { return e.dest == proto::kRankAll; });
      ASSERT_NE(it, all.end());
      EXPECT_EQ(std::count_if(all.begin(), all.end(),
                              [](const Emitted& e) { return e.dest == proto::kRankAll; }),
                1);
      EXPECT_EQ(it->bytes, m.Expected(slot, 0));
      if (perm == 0) first_result = it->bytes;
      EXPECT_EQ(it->bytes, first_result) << "result depends on arrival order";
      const CounterSnapshot c = engines.ref().counters();
      EXPECT_EQ(Get(c, Counter::kRxData), m.cfg.world_size);
      EXPECT_EQ(Get(c, Counter::kDuplicates) + Get(c, Counter::kResultResends),
                packets.size() - m.cfg.world_size);
      EXPECT_EQ(Get(c, Counter::kResultResends), all.size() - 1);
    }
  }
}

// One rank's float block at an exponent the others did not use (say its result's next_exp was
// changed on the way), among retransmissions and duplicates, in any order: the reference and
// every fast variant end the job at the first packet that proves it (one failure, nothing of the
// job emitted), and the neighbour job's result is the model's. An int32 block whose ranks' exp
// differ completes: its exp is not compared (max-reduced, as ever).
TEST(Properties, RanksWithDifferentExponentsEndTheJobInAnyOrder) {
  const uint64_t seed = TestSeed();
  std::mt19937_64 rng(seed);
  uint64_t ended = 0, int32_done = 0;
  for (int iter = 0; iter < 200 && !HasFailure(); ++iter) {
    JobModel a, b;
    a.cfg = {30, static_cast<uint16_t>(2 + rng() % 63), 64, 0, 4};
    b.cfg = {31, static_cast<uint16_t>(1 + rng() % 8), 64, 4, 4};
    a.seed = rng();
    b.seed = rng();
    // The first use of slot s in job a's model that is a float block (an int32 one every 4th
    // iteration; either exists within a few uses).
    const bool int32 = iter % 4 == 0;
    const uint16_t slot = rng() % 4;
    uint16_t gen = 0;
    while (a.Int32(slot, gen) != int32 || a.Count(slot, gen) == 0) ++gen;
    const uint16_t odd = rng() % a.cfg.world_size;
    std::vector<Bytes> packets;
    uint8_t max_exp = 0;
    for (uint16_t r = 0; r < a.cfg.world_size; ++r) {
      DataSpec d = a.Packet(r, slot, gen);
      if (r == odd || int32) d.exp = static_cast<uint8_t>(d.exp + 1 + rng() % 255);
      max_exp = std::max(max_exp, d.exp);
      packets.push_back(DataPacket(d));
      if (rng() % 3 == 0) {
        d.flags |= proto::flags::kRetx;
        packets.push_back(DataPacket(d));
      }
    }
    for (uint16_t r = 0; r < b.cfg.world_size; ++r)
      packets.push_back(DataPacket(b.Packet(r, 1, 0)));
    std::shuffle(packets.begin(), packets.end(), rng);
    Lockstep engines({8, 4});
    engines.AddJob(a.cfg);
    engines.AddJob(b.cfg);
    ASSERT_FALSE(HasFatalFailure());
    // Job a's generations before `gen` on the slot, complete (all ranks, the model's shapes).
    for (uint16_t g = 0; g < gen; ++g) {
      for (uint16_t r = 0; r < a.cfg.world_size; ++r)
        engines.Feed(DataPacket(a.Packet(r, slot, g)));
    }
    ASSERT_TRUE(engines.failures().empty());
    std::vector<Emitted> a_out, b_out;
    for (const Bytes& p : packets) {
      for (Emitted& e : engines.Feed(p)) (e.job == a.cfg.job_id ? a_out : b_out).push_back(e);
    }
    ASSERT_EQ(b_out.size(), 1u);
    Bytes want_b = b.Expected(1, 0);
    EXPECT_EQ(b_out[0].bytes, want_b);
    const CounterSnapshot c = engines.ref().counters();
    if (int32) {
      EXPECT_TRUE(engines.failures().empty());
      const auto all = std::find_if(a_out.begin(), a_out.end(),
                                    [](const Emitted& e) { return e.dest == proto::kRankAll; });
      ASSERT_NE(all, a_out.end());
      const Bytes want = a.Expected(slot, gen);
      EXPECT_EQ(Elements(all->bytes), Elements(want));
      EXPECT_EQ(proto::GetExp(all->bytes.data()), max_exp);
      ++int32_done;
      continue;
    }
    EXPECT_TRUE(a_out.empty()) << "a block of the disagreeing ranks was emitted";
    ASSERT_EQ(engines.failures().size(), 1u);
    const JobFailure f = engines.failures()[0];
    EXPECT_EQ(f.job_id, a.cfg.job_id);
    EXPECT_EQ(f.code, proto::ErrorCode::kRankMismatch);
    EXPECT_EQ(f.slot, slot);
    EXPECT_EQ(f.gen, gen);
    EXPECT_EQ(Get(c, Counter::kDropMismatch), 1u);
    ++ended;
  }
  std::printf("  jobs ended %llu, int32 blocks completed %llu\n", (unsigned long long)ended,
              (unsigned long long)int32_done);
  EXPECT_GT(ended, 50u);
}

// Garbage aimed at job A never changes what job B emits: B's traffic alone and B's traffic
// interleaved with A garbage give identical B results.
TEST(Properties, JobsIsolatedFromGarbage) {
  const uint64_t seed = TestSeed();
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 50 && !HasFailure(); ++iter) {
    JobModel b;
    b.cfg = {20, static_cast<uint16_t>(1 + rng() % 16), 64, 4, 3};
    b.seed = rng();
    const JobConfig a = {21, static_cast<uint16_t>(1 + rng() % 16), 256, 0, 4};  // slots [0, 4)
    std::vector<Bytes> b_traffic;
    for (uint16_t gen = 0; gen < 4; ++gen) {
      for (uint16_t s = 0; s < b.cfg.window; ++s) {
        for (uint16_t r = 0; r < b.cfg.world_size; ++r) {
          b_traffic.push_back(DataPacket(b.Packet(r, s, gen)));
          if (rng() % 4 == 0) b_traffic.push_back(b_traffic.back());  // duplicate
        }
      }
    }
    auto run = [&](bool with_garbage) {
      Lockstep engines({16, 4});
      engines.AddJob(a);
      engines.AddJob(b.cfg);
      std::mt19937_64 g(seed + iter);
      std::vector<Emitted> b_out;
      for (const Bytes& p : b_traffic) {
        if (with_garbage) {
          for (int k = 0; k < 3; ++k) {
            Bytes junk(g() % (proto::kMaxPacketBytes + 4));
            for (auto& x : junk) x = static_cast<uint8_t>(g());
            const bool plausible = junk.size() >= proto::kHeaderBytes && g() % 2;
            if (plausible) {
              // Make it a plausible, sealed data packet for A (any rank/slot/gen/count).
              junk[0] = proto::kVersion;
              proto::SetType(junk.data(), proto::MsgType::kData);
              junk.resize(proto::MessageBytes(g() % 300));
              proto::SetCount(junk.data(),
                              static_cast<uint16_t>((junk.size() - proto::MessageBytes(0)) / 4));
            }
            if (junk.size() >= 8) proto::SetJob(junk.data(), a.job_id);
            if (plausible) Reseal(junk);
            for (const Emitted& e : engines.Feed(junk)) EXPECT_EQ(e.job, a.job_id);
          }
        }
        for (Emitted& e : engines.Feed(p)) b_out.push_back(std::move(e));
      }
      return b_out;
    };
    const std::vector<Emitted> alone = run(false);
    const std::vector<Emitted> mixed = run(true);
    ASSERT_FALSE(HasFailure());
    EXPECT_EQ(alone, mixed);
    EXPECT_EQ(std::count_if(alone.begin(), alone.end(),
                            [](const Emitted& e) { return e.dest == proto::kRankAll; }),
              4 * b.cfg.window);
  }
}

}  // namespace
}  // namespace ina::dp::testing
