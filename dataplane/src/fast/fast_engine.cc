// The fast engine. Same rules as engine.h, in the same order; see fast_engine.h for the layout.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "add.h"
#include "fast_engine_internal.h"
#include "ina/proto/crc32c.h"

namespace ina::dp::fast {
namespace {

using proto::Counter;

constexpr proto::MsgType kTypeData = proto::MsgType::kData;
constexpr proto::MsgType kTypeResult = proto::MsgType::kResult;
constexpr uint8_t kKnownFlags =
    proto::flags::kRetx | proto::flags::kNonfinite | proto::flags::kInt32;

// State of one slot copy besides its elements. Index: (pool slot) * 2 + (gen % 2).
struct CopyMeta {
  uint64_t ranks;  // bit r: rank r contributed to generation `gen`
  uint64_t use;    // the slot's generation without wrapping (keyed jobs' nonces)
  uint32_t offset;
  uint16_t gen;
  uint16_t count;
  uint8_t flags;
  uint8_t exp;
  uint8_t next_exp;
  uint8_t contributions;
};

struct JobEntry {
  uint32_t* data;   // the job's slot memory: window x 2 copies x K int32 (AddJob allocates it)
  uint64_t stride;  // window * K: from one block of a slot to its next
  uint32_t slot_base;
  uint16_t window;
  uint16_t k;
  uint16_t world;
  uint16_t job_id;
  uint8_t mode;                  // proto::SecMode; 0: CRC only
  proto::MessageOpener* opener;  // keyed jobs: the up key (owned; AddJob/RemoveJob)
  proto::MessageSealer* sealer;  // keyed jobs: the down key (owned)
};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

template <typename T>
std::unique_ptr<T[], FreeDeleter> AllocAligned(size_t n) {
  size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
  return std::unique_ptr<T[], FreeDeleter>(static_cast<T*>(std::aligned_alloc(64, bytes)));
}

class FastEngine final : public Engine {
 public:
  FastEngine(const EngineLimits& limits, const AddKernels& kernels, const FastOptions& options)
      : limits_(limits),
        check_crc_(options.check_crc),
        crc_(options.crc != nullptr ? options.crc : proto::Crc32cBest().fn),
        swap_copy_(kernels.swap_copy),
        swap_add_(kernels.swap_add),
        meta_(AllocAligned<CopyMeta>(size_t{limits.pool_slots} * 2)),
        job_index_(AllocAligned<uint16_t>(65536)),
        jobs_(AllocAligned<JobEntry>(size_t{limits.max_jobs} + 1)),
        result_(AllocAligned<uint8_t>(proto::kMaxPacketBytes)),
        plain_(AllocAligned<uint8_t>(size_t{proto::kMaxK} * proto::kElemBytes)) {
    std::memset(counters_, 0, sizeof(counters_));
    if (ok()) std::memset(job_index_.get(), 0, 65536 * sizeof(uint16_t));
    for (uint16_t i = limits.max_jobs; i >= 1; --i) free_entries_.push_back(i);
    installed_.reserve(limits.max_jobs);
  }

  ~FastEngine() override {
    for (uint16_t idx : installed_) FreeEntry(jobs_[idx]);
  }

  bool ok() const { return meta_ && job_index_ && jobs_ && result_ && plain_; }

  Status AddJob(const JobConfig& job) override {
    INA_RETURN_IF_ERROR(CheckJobConfig(job, limits_.pool_slots, limits_.max_k));
    const uint64_t end = uint64_t{job.slot_base} + job.window;
    if (job_index_[job.job_id] != 0) {
      return AlreadyExists("AddJob: job " + std::to_string(job.job_id) + " already installed");
    }
    for (uint16_t idx : installed_) {
      const JobEntry& other = jobs_[idx];
      const uint64_t other_end = uint64_t{other.slot_base} + other.window;
      if (job.slot_base < other_end && other.slot_base < end) {
        return AlreadyExists("AddJob: slots of job " + std::to_string(job.job_id) +
                             " overlap job " + std::to_string(other.job_id));
      }
    }
    if (free_entries_.empty()) {
      return ResourceExhausted("AddJob: job table full (" + std::to_string(limits_.max_jobs) +
                               " jobs)");
    }
    std::unique_ptr<proto::MessageOpener> opener;
    std::unique_ptr<proto::MessageSealer> sealer;
    if (proto::IsKeyed(job.security.mode)) {
      INA_ASSIGN_OR_RETURN(opener, proto::MessageOpener::Create(job.security.up));
      INA_ASSIGN_OR_RETURN(sealer, proto::MessageSealer::Create(job.security.down));
    }
    // Slot memory sized by the job's K (8 KiB a copy at K=2048, 256 B at K=64); allocated here,
    // on the control path, so a pool of large-K jobs costs only what they use.
    uint32_t* data = AllocAligned<uint32_t>(size_t{job.window} * 2 * job.k).release();
    if (data == nullptr) {
      return ResourceExhausted("AddJob: no memory for job " + std::to_string(job.job_id) + "'s " +
                               std::to_string(job.window) + " slots of K " + std::to_string(job.k));
    }
    const uint16_t idx = free_entries_.back();
    free_entries_.pop_back();
    jobs_[idx] = {data,
                  uint64_t{job.window} * job.k,
                  job.slot_base,
                  job.window,
                  job.k,
                  job.world_size,
                  job.job_id,
                  static_cast<uint8_t>(job.security.mode),
                  opener.release(),
                  sealer.release()};
    for (uint64_t s = job.slot_base; s < end; ++s) {
      for (uint16_t c = 0; c < 2; ++c) {
        CopyMeta& m = meta_[s * 2 + c];
        m = {};
        m.gen = static_cast<uint16_t>(0xFFFE + c);
        m.use = ~uint64_t{1} + c;  // -2 and -1: the first use (gen 0) is use 0
      }
    }
    installed_.push_back(idx);
    job_index_[job.job_id] = idx;
    return Status::Ok();
  }

  Status RemoveJob(uint16_t job_id) override {
    const uint16_t idx = job_index_[job_id];
    if (idx == 0) return NotFound("RemoveJob: job " + std::to_string(job_id) + " not installed");
    job_index_[job_id] = 0;
    FreeEntry(jobs_[idx]);
    for (size_t i = 0; i < installed_.size(); ++i) {
      if (installed_[i] == idx) {
        installed_[i] = installed_.back();
        installed_.pop_back();
        break;
      }
    }
    free_entries_.push_back(idx);
    return Status::Ok();
  }

  void Process(std::span<const uint8_t> packet, Emitter& out) override {
    ProcessOne(packet.data(), packet.size(), out);
  }

  void ProcessBurst(std::span<const std::span<const uint8_t>> packets, Emitter& out) override {
    const size_t n = packets.size();
    for (size_t i = 0; i < n; ++i) {
      // Fetch the next packet's slot metadata and elements while this one is added.
      if (i + 1 < n) Prefetch(packets[i + 1]);
      ProcessOne(packets[i].data(), packets[i].size(), out);
    }
  }

  size_t PollFailures(std::span<JobFailure> out) override {
    if (failures_.empty()) return 0;
    const size_t n = std::min(out.size(), failures_.size());
    std::copy_n(failures_.begin(), n, out.begin());
    failures_.erase(failures_.begin(), failures_.begin() + static_cast<ptrdiff_t>(n));
    return n;
  }

  CounterSnapshot counters() const override {
    CounterSnapshot c;
    for (size_t i = 0; i < proto::kNumCounters; ++i) c[i] = counters_[i];
    return c;
  }
  uint32_t pool_slots() const override { return limits_.pool_slots; }
  uint16_t max_k() const override { return limits_.max_k; }

 private:
  void Count(Counter which) { ++counters_[static_cast<size_t>(which)]; }

  static void FreeEntry(JobEntry& j) {
    std::free(j.data);
    delete j.opener;
    delete j.sealer;
    j.data = nullptr;
    j.opener = nullptr;
    j.sealer = nullptr;
  }

  void Prefetch(std::span<const uint8_t> p) const {
    if (p.size() < proto::kHeaderBytes) return;
    const uint8_t* h = p.data();
    const uint16_t idx = job_index_[proto::GetJob(h)];
    if (idx == 0) return;
    const JobEntry& j = jobs_[idx];
    const uint16_t slot = proto::GetSlot(h);
    if (slot >= j.window) return;
    const size_t copy = size_t{slot} * 2 + (proto::GetGen(h) & 1);
    __builtin_prefetch(&meta_[size_t{j.slot_base} * 2 + copy], 1);
    const uint8_t* d = reinterpret_cast<const uint8_t*>(&j.data[copy * j.k]);
    // The first KiB: enough to start the add; the hardware prefetcher follows a longer block.
    const size_t bytes = std::min<size_t>(size_t{proto::GetCount(h)}, j.k) * 4;
    for (size_t off = 0; off < bytes && off < 1024; off += 64) __builtin_prefetch(d + off, 1);
  }

  inline void ProcessOne(const uint8_t* p, size_t size, Emitter& out) {
    Count(Counter::kRxPackets);
    if (size < proto::kHeaderBytes + proto::kCrcBytes) [[unlikely]] {
      return Count(Counter::kDropMalformed);
    }
    if (proto::GetVersion(p) != proto::kVersion) [[unlikely]] {
      return Count(Counter::kDropBadVersion);
    }
    const uint16_t idx = job_index_[proto::GetJob(p)];
    const JobEntry& job = jobs_[idx];  // entry 0: no job (mode 0)
    const uint8_t mode = idx == 0 ? 0 : job.mode;
    const uint8_t sec = proto::GetSec(p);
    const uint16_t count = proto::GetCount(p);
    if (mode == 0) [[likely]] {
      if (check_crc_ && crc_(0, p, size - proto::kCrcBytes) !=
                            proto::LoadCrc(p + size - proto::kCrcBytes)) [[unlikely]] {
        return Count(Counter::kDropBadCrc);
      }
      if (proto::GetType(p) != kTypeData || size != proto::MessageBytes(count)) [[unlikely]] {
        return Count(Counter::kDropMalformed);
      }
      if (idx == 0) [[unlikely]] {
        return Count(Counter::kDropUnknownJob);
      }
      if (sec != 0) [[unlikely]] {
        return Count(Counter::kDropCrossJob);
      }
    } else {
      if (sec != mode) [[unlikely]] {
        return Count(Counter::kDropCrossJob);
      }
      if (proto::GetType(p) != kTypeData || size != proto::MessageBytes(count, sec)) [[unlikely]] {
        return Count(Counter::kDropMalformed);
      }
    }
    if (count > job.k) [[unlikely]] {
      return Count(Counter::kDropMalformed);
    }
    const uint16_t rank = proto::GetRank(p);
    if (rank >= job.world) [[unlikely]] {
      return Count(Counter::kDropBadRank);
    }
    const uint16_t slot = proto::GetSlot(p);
    if (slot >= job.window) [[unlikely]] {
      return Count(Counter::kDropBadSlot);
    }
    const uint8_t flags = proto::GetFlags(p);
    if (mode == 0 && (flags & proto::flags::kRetx)) Count(Counter::kRetransmissions);

    // Rules 11-13 of engine.h: the generation window, the slot's history, disagreeing ranks.
    const uint16_t gen = proto::GetGen(p);
    const size_t copy = size_t{slot} * 2 + (gen & 1);
    const size_t c = size_t{job.slot_base} * 2 + copy;
    CopyMeta& m = meta_[c];
    const CopyMeta& prev = meta_[c ^ 1];  // generation gen - 1, when in the window
    uint32_t* elems = &job.data[copy * job.k];
    const uint64_t bit = uint64_t{1} << rank;
    const uint32_t offset = proto::GetOffset(p);
    const bool in_progress = gen == m.gen && m.contributions != 0;
    const bool next_use = !in_progress && gen == static_cast<uint16_t>(m.gen + 2) &&
                          prev.gen == static_cast<uint16_t>(gen - 1) &&
                          (prev.contributions == 0 || prev.contributions == job.world);
    if (!in_progress && !next_use) [[unlikely]] {
      const uint16_t cur = prev.gen == static_cast<uint16_t>(m.gen + 1) ? prev.gen : m.gen;
      const auto ahead = static_cast<uint16_t>(gen - cur);
      return Count(ahead - 1u < 0x7FFFu ? Counter::kDropEarly : Counter::kDropStale);
    }
    // Rule K4: the tag, for the slot's use this packet claims.
    const uint8_t* payload = p + proto::kHeaderBytes;
    const uint64_t use = in_progress ? m.use : prev.use + 1;
    if (mode != 0) {
      const auto sm = static_cast<proto::SecMode>(mode);
      const std::span<const uint8_t> msg(p, size);
      if (!job.opener->Open(sm, msg, proto::MakeNonce(rank, slot, use), plain_.get()))
          [[unlikely]] {
        const bool replayed =
            use >= 0x10000 &&
            job.opener->Open(sm, msg, proto::MakeNonce(rank, slot, use - 0x10000), plain_.get());
        return Count(replayed ? Counter::kDropReplayed : Counter::kDropForged);
      }
      if (sm == proto::SecMode::kMacEncrypt) payload = plain_.get();
      if (flags & proto::flags::kRetx) Count(Counter::kRetransmissions);
    }
    if (in_progress && (m.ranks & bit)) {
      if (m.contributions == job.world) {
        Count(Counter::kResultResends);
        Emit(job, slot, m, elems, rank, out);
      } else {
        Count(Counter::kDuplicates);
      }
      return;
    }
    // History: block s (offset s*K) starts a call; else the block W after gen-1's full block.
    const uint32_t first = uint32_t{slot} * job.k;
    const bool fits =
        (flags & ~kKnownFlags) == 0 &&
        (count == 0 ? offset == first && (flags & proto::flags::kInt32) == 0
                    : offset == first || (prev.contributions != 0 && prev.count == job.k &&
                                          offset == uint64_t{prev.offset} + job.stride &&
                                          ((prev.flags ^ flags) & proto::flags::kInt32) == 0));
    if (!fits) [[unlikely]] {
      return Count(Counter::kDropHistory);
    }
    // Rule 13: a float block's exponent too (an int32 block's exp is not compared).
    if (in_progress && (m.offset != offset || m.count != count ||
                        ((m.flags ^ flags) & proto::flags::kInt32) != 0 ||
                        ((flags & proto::flags::kInt32) == 0 && m.exp != proto::GetExp(p))))
        [[unlikely]] {
      Count(Counter::kDropMismatch);
      failures_.push_back({job.job_id, proto::ErrorCode::kRankMismatch, slot, gen, rank});
      RemoveJob(job.job_id).IgnoreError();  // control path, once per failed job
      return;
    }
    if (next_use) {
      m.gen = gen;
      m.use = use;
      m.ranks = 0;
      m.contributions = 0;
    }

    const uint8_t f = flags & static_cast<uint8_t>(~proto::flags::kRetx);
    if (m.contributions == 0) {
      m.offset = offset;
      m.count = count;
      m.flags = f;
      m.exp = proto::GetExp(p);
      m.next_exp = proto::GetNextExp(p);
      swap_copy_(elems, payload, count);
    } else {
      m.flags |= f;
      const uint8_t exp = proto::GetExp(p);
      const uint8_t next_exp = proto::GetNextExp(p);
      if (exp > m.exp) m.exp = exp;
      if (next_exp > m.next_exp) m.next_exp = next_exp;
      swap_add_(elems, payload, count);
    }
    m.ranks |= bit;
    ++m.contributions;
    Count(Counter::kRxData);
    if (m.contributions == job.world) {
      Count(Counter::kResults);
      Emit(job, slot, m, elems, proto::kRankAll, out);
    }
  }

  void Emit(const JobEntry& job, uint16_t slot, const CopyMeta& m, const uint32_t* elems,
            uint16_t dest, Emitter& out) {
    uint8_t* h = result_.get();
    proto::SetVersion(h, proto::kVersion);
    proto::SetType(h, kTypeResult);
    proto::SetFlags(h, m.flags);
    proto::SetExp(h, m.exp);
    proto::SetNextExp(h, m.next_exp);
    proto::SetSec(h, job.mode);
    proto::SetJob(h, job.job_id);
    proto::SetRank(h, dest);
    proto::SetSlot(h, slot);
    proto::SetGen(h, m.gen);
    proto::SetCount(h, m.count);
    proto::SetOffset(h, m.offset);
    proto::SetAux(h, 0);
    swap_copy_(h + proto::kHeaderBytes, elems, m.count);
    const size_t len = proto::kHeaderBytes + size_t{m.count} * 4;
    if (job.mode != 0) {
      if (!job.sealer->Seal(static_cast<proto::SecMode>(job.mode), h, len,
                            proto::MakeNonce(dest, slot, m.use))) [[unlikely]] {
        return;  // libcrypto failed (never seen): no result rather than an unsealed one
      }
      out.OnResult(job.job_id, dest, std::span<const uint8_t>(h, len + proto::kTagBytes));
      return;
    }
    if (check_crc_) {
      proto::StoreCrc(h + len, crc_(0, h, len));
    } else {
      proto::StoreCrc(h + len, 0);
    }
    out.OnResult(job.job_id, dest, std::span<const uint8_t>(h, len + proto::kCrcBytes));
  }

  const EngineLimits limits_;
  const bool check_crc_;
  const proto::Crc32cFn crc_;
  void (*const swap_copy_)(void*, const void*, size_t);
  void (*const swap_add_)(uint32_t*, const void*, size_t);
  uint64_t counters_[proto::kNumCounters];
  std::unique_ptr<CopyMeta[], FreeDeleter> meta_;
  std::unique_ptr<uint16_t[], FreeDeleter> job_index_;  // job id -> entry (0: none)
  std::unique_ptr<JobEntry[], FreeDeleter> jobs_;       // entries 1 .. max_jobs
  std::unique_ptr<uint8_t[], FreeDeleter> result_;
  std::unique_ptr<uint8_t[], FreeDeleter> plain_;  // a mac_encrypt packet's decrypted payload
  std::vector<uint16_t> free_entries_;             // control path only
  std::vector<uint16_t> installed_;
  std::vector<JobFailure> failures_;  // ended by rule 13, not yet polled (control path)
};

}  // namespace

std::unique_ptr<Engine> MakeFastEngineWithKernels(const EngineLimits& limits,
                                                  const AddKernels& kernels,
                                                  const FastOptions& options) {
  auto engine = std::make_unique<FastEngine>(limits, kernels, options);
  if (!engine->ok()) return nullptr;
  return engine;
}

}  // namespace ina::dp::fast

namespace ina::dp {

std::unique_ptr<Engine> MakeFastEngine(const EngineLimits& limits) {
  return fast::MakeFastEngineWithKernels(limits, fast::AddVariants().best());
}

std::string_view FastEngineKernelName() { return fast::AddVariants().best().name; }

}  // namespace ina::dp
