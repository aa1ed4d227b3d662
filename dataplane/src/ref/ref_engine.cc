// The reference engine: each rule of engine.h written out in order, with std containers.
#include "ina/dp/ref_engine.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ina/proto/crc32c.h"

namespace ina::dp {
namespace {

using proto::Counter;

// One of the two shadow copies of a slot.
struct Copy {
  uint16_t gen = 0;
  uint64_t use = 0;          // the slot's generation without wrapping (keyed jobs' nonces)
  std::set<uint16_t> ranks;  // ranks that contributed to generation `gen`
  uint32_t offset = 0;
  uint16_t count = 0;
  uint8_t flags = 0;
  uint8_t exp = 0;
  uint8_t next_exp = 0;
  std::vector<int32_t> sum;  // `count` elements
};

struct Slot {
  Copy copy[2];
};

struct Job {
  JobConfig config;
  std::vector<Slot> slots;  // config.window of them
};

class ReferenceEngine final : public Engine {
 public:
  explicit ReferenceEngine(const EngineLimits& limits) : limits_(limits) { counters_.fill(0); }

  Status AddJob(const JobConfig& job) override {
    INA_RETURN_IF_ERROR(CheckJobConfig(job, limits_.pool_slots, limits_.max_k));
    const uint64_t end = uint64_t{job.slot_base} + job.window;
    if (jobs_.count(job.job_id) != 0) {
      return AlreadyExists("AddJob: job " + std::to_string(job.job_id) + " already installed");
    }
    for (const auto& [id, other] : jobs_) {
      const uint64_t other_begin = other.config.slot_base;
      const uint64_t other_end = other_begin + other.config.window;
      if (job.slot_base < other_end && other_begin < end) {
        return AlreadyExists("AddJob: slots of job " + std::to_string(job.job_id) +
                             " overlap job " + std::to_string(id));
      }
    }
    if (jobs_.size() >= limits_.max_jobs) {
      return ResourceExhausted("AddJob: job table full (" + std::to_string(limits_.max_jobs) +
                               " jobs)");
    }
    Job entry;
    entry.config = job;
    entry.slots.resize(job.window);
    for (Slot& s : entry.slots) {
      s.copy[0].gen = 0xFFFE;
      s.copy[1].gen = 0xFFFF;
      s.copy[0].use = ~uint64_t{1};  // -2 and -1: the first use (gen 0) is use 0
      s.copy[1].use = ~uint64_t{0};
    }
    jobs_.emplace(job.job_id, std::move(entry));
    return Status::Ok();
  }

  Status RemoveJob(uint16_t job_id) override {
    if (jobs_.erase(job_id) == 0) {
      return NotFound("RemoveJob: job " + std::to_string(job_id) + " not installed");
    }
    return Status::Ok();
  }

  void Process(std::span<const uint8_t> packet, Emitter& out) override {
    Count(Counter::kRxPackets);
    if (packet.size() < proto::kHeaderBytes + proto::kCrcBytes) {
      return Count(Counter::kDropMalformed);
    }
    const proto::Header h = proto::DecodeHeader(packet.data());
    if (h.version != proto::kVersion) return Count(Counter::kDropBadVersion);
    auto it = jobs_.find(h.job);
    const proto::SecMode mode =
        it == jobs_.end() ? proto::SecMode::kCrc : it->second.config.security.mode;
    const bool keyed = proto::IsKeyed(mode);
    if (!keyed) {
      // The scalar twin: the oracle shares no CRC code with the fast engine's SIMD variant.
      if (!proto::MessageCrcOk(packet, proto::Crc32cScalar)) return Count(Counter::kDropBadCrc);
      if (h.type != proto::MsgType::kData) {
        return Count(Counter::kDropMalformed);
      }
      if (packet.size() != proto::MessageBytes(h.count)) return Count(Counter::kDropMalformed);
      if (it == jobs_.end()) return Count(Counter::kDropUnknownJob);
      if (h.sec != 0) return Count(Counter::kDropCrossJob);
    } else {
      if (h.sec != static_cast<uint8_t>(mode)) return Count(Counter::kDropCrossJob);
      if (h.type != proto::MsgType::kData || packet.size() != proto::MessageBytes(h.count, h.sec)) {
        return Count(Counter::kDropMalformed);
      }
    }
    Job& job = it->second;
    if (h.count > job.config.k) return Count(Counter::kDropMalformed);
    if (h.rank >= job.config.world_size) return Count(Counter::kDropBadRank);
    if (h.slot >= job.config.window) return Count(Counter::kDropBadSlot);
    if (!keyed && (h.flags & proto::flags::kRetx)) Count(Counter::kRetransmissions);

    // Rule 11: the generation window.
    Slot& slot = job.slots[h.slot];
    Copy& copy = slot.copy[h.gen % 2];
    const Copy& prev = slot.copy[(h.gen + 1) % 2];  // generation gen - 1, when in the window
    const bool in_progress = h.gen == copy.gen && !copy.ranks.empty();
    const bool next_use = h.gen == static_cast<uint16_t>(copy.gen + 2) &&
                          prev.gen == static_cast<uint16_t>(h.gen - 1) &&
                          (prev.ranks.empty() || prev.ranks.size() == job.config.world_size);
    if (!in_progress && !next_use) {
      const uint16_t cur = prev.gen == static_cast<uint16_t>(copy.gen + 1) ? prev.gen : copy.gen;
      const uint16_t ahead = static_cast<uint16_t>(h.gen - cur);
      return Count(ahead >= 1 && ahead <= 0x7FFF ? Counter::kDropEarly : Counter::kDropStale);
    }
    // Rule K4: the tag, for the slot's use this packet claims.
    const uint8_t* payload = packet.data() + proto::kHeaderBytes;
    std::vector<uint8_t> plain;
    const uint64_t use = in_progress ? copy.use : prev.use + 1;
    if (keyed) {
      plain.resize(size_t{h.count} * proto::kElemBytes);
      const proto::TrafficKey& key = job.config.security.up;
      if (!proto::OpenOnce(key, mode, packet, proto::MakeNonce(h.rank, h.slot, use),
                           plain.data())) {
        const bool replayed =
            use >= 0x10000 &&
            proto::OpenOnce(key, mode, packet, proto::MakeNonce(h.rank, h.slot, use - 0x10000),
                            plain.data());
        return Count(replayed ? Counter::kDropReplayed : Counter::kDropForged);
      }
      if (mode == proto::SecMode::kMacEncrypt) payload = plain.data();
      if (h.flags & proto::flags::kRetx) Count(Counter::kRetransmissions);
    }
    if (in_progress && copy.ranks.count(h.rank) != 0) {
      if (copy.ranks.size() == job.config.world_size) {
        Count(Counter::kResultResends);
        Emit(job, h.slot, copy, h.rank, out);
      } else {
        Count(Counter::kDuplicates);
      }
      return;
    }
    // Rule 12: the slot's history.
    if (!FitsHistory(job.config, h, prev)) return Count(Counter::kDropHistory);
    // Rule 13: two ranks' blocks that each fit the history but differ: the ranks disagree. A float
    // block (or exponent round) must also carry the copy's exponent; an int32 block has none.
    const bool int32 = (h.flags & proto::flags::kInt32) != 0;
    if (in_progress &&
        (copy.offset != h.offset || copy.count != h.count ||
         ((copy.flags & proto::flags::kInt32) != 0) != int32 || (!int32 && copy.exp != h.exp))) {
      Count(Counter::kDropMismatch);
      failures_.push_back({h.job, proto::ErrorCode::kRankMismatch, h.slot, h.gen, h.rank});
      jobs_.erase(it);
      return;
    }
    if (next_use) {
      copy = Copy();
      copy.gen = h.gen;
      copy.use = use;
    }

    // Add.
    const uint8_t flags = h.flags & static_cast<uint8_t>(~proto::flags::kRetx);
    if (copy.ranks.empty()) {
      copy.offset = h.offset;
      copy.count = h.count;
      copy.flags = flags;
      copy.exp = h.exp;
      copy.next_exp = h.next_exp;
      copy.sum.assign(h.count, 0);
      for (size_t i = 0; i < h.count; ++i) {
        copy.sum[i] = static_cast<int32_t>(proto::Load32(payload + proto::kElemBytes * i));
      }
    } else {
      copy.flags |= flags;
      copy.exp = std::max(copy.exp, h.exp);
      copy.next_exp = std::max(copy.next_exp, h.next_exp);
      for (size_t i = 0; i < h.count; ++i) {
        // Wrapping int32 addition, done in uint32 where overflow is defined.
        const uint32_t a = static_cast<uint32_t>(copy.sum[i]);
        const uint32_t b = proto::Load32(payload + proto::kElemBytes * i);
        copy.sum[i] = static_cast<int32_t>(a + b);
      }
    }
    copy.ranks.insert(h.rank);
    Count(Counter::kRxData);
    if (copy.ranks.size() == job.config.world_size) {
      Count(Counter::kResults);
      Emit(job, h.slot, copy, proto::kRankAll, out);
    }
  }

  size_t PollFailures(std::span<JobFailure> out) override {
    size_t n = 0;
    while (n < out.size() && !failures_.empty()) {
      out[n++] = failures_.front();
      failures_.pop_front();
    }
    return n;
  }

  CounterSnapshot counters() const override { return counters_; }
  uint32_t pool_slots() const override { return limits_.pool_slots; }
  uint16_t max_k() const override { return limits_.max_k; }

 private:
  void Count(Counter which) { ++counters_[static_cast<size_t>(which)]; }

  // Rule 12 of engine.h: can slot h.slot carry this block after generation gen - 1 (`prev`)?
  static bool FitsHistory(const JobConfig& job, const proto::Header& h, const Copy& prev) {
    constexpr uint8_t kKnown =
        proto::flags::kRetx | proto::flags::kNonfinite | proto::flags::kInt32;
    if ((h.flags & ~kKnown) != 0) return false;
    const bool int32 = (h.flags & proto::flags::kInt32) != 0;
    const uint64_t first = uint64_t{h.slot} * job.k;       // block s: where the slot starts a call
    if (h.count == 0) return h.offset == first && !int32;  // the exponent round
    if (h.offset == first) return true;
    const bool prev_int32 = (prev.flags & proto::flags::kInt32) != 0;
    return !prev.ranks.empty() && prev.count == job.k &&
           h.offset == uint64_t{prev.offset} + uint64_t{job.window} * job.k && int32 == prev_int32;
  }

  static void Emit(const Job& job, uint16_t slot, const Copy& copy, uint16_t dest, Emitter& out) {
    const proto::SecMode mode = job.config.security.mode;
    const uint8_t sec = static_cast<uint8_t>(mode);
    std::vector<uint8_t> packet(proto::MessageBytes(copy.sum.size(), sec));
    proto::ResultMsg{.flags = copy.flags,
                     .exp = copy.exp,
                     .next_exp = copy.next_exp,
                     .sec = sec,
                     .job = job.config.job_id,
                     .dest_rank = dest,
                     .slot = slot,
                     .gen = copy.gen,
                     .count = copy.count,
                     .offset = copy.offset}
        .Encode(packet.data());
    for (size_t i = 0; i < copy.sum.size(); ++i) {
      proto::Store32(packet.data() + proto::kHeaderBytes + proto::kElemBytes * i,
                     static_cast<uint32_t>(copy.sum[i]));
    }
    const size_t len = packet.size() - proto::TrailerBytes(sec);
    if (!proto::IsKeyed(mode)) {
      proto::SealMessage(packet.data(), len, proto::Crc32cScalar);
    } else if (!proto::SealOnce(job.config.security.down, mode, packet.data(), len,
                                proto::MakeNonce(dest, slot, copy.use))) {
      return;  // libcrypto failed (never seen): no result rather than an unsealed one
    }
    out.OnResult(job.config.job_id, dest, packet);
  }

  EngineLimits limits_;
  std::map<uint16_t, Job> jobs_;
  std::deque<JobFailure> failures_;  // ended by rule 13, not yet polled
  CounterSnapshot counters_;
};

}  // namespace

std::unique_ptr<Engine> MakeReferenceEngine(const EngineLimits& limits) {
  return std::make_unique<ReferenceEngine>(limits);
}

}  // namespace ina::dp
