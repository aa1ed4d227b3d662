#include "differential.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "fast_engine_internal.h"
#include "ina/dp/ref_engine.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/sec.h"

namespace ina::dp::fuzz {
namespace {

struct Out {
  uint16_t job, dest;
  std::vector<uint8_t> bytes;
  bool operator==(const Out&) const = default;
};

class Recorder final : public Emitter {
 public:
  void OnResult(uint16_t job, uint16_t dest, std::span<const uint8_t> p) override {
    got.push_back({job, dest, std::vector<uint8_t>(p.begin(), p.end())});
  }
  std::vector<Out> got;
};

// The engines, built once per thread: a fresh set per input spent most of a fuzzer's time mapping
// and zeroing their tables. Each input installs its two jobs (AddJob starts a job's slots empty)
// and removes them at the end; the counters carry on, equal in every engine as long as they
// agreed.
struct Engines {
  std::vector<std::unique_ptr<Engine>> engines;
  std::vector<std::string> names;
};

// After a difference the engines' counters disagree for good: the next check builds new ones.
thread_local std::unique_ptr<Engines> shared_engines;

Engines& SharedEngines() {
  if (shared_engines == nullptr) {
    auto e = std::make_unique<Engines>();
    const EngineLimits limits{8, 4};
    e->engines.push_back(MakeReferenceEngine(limits));
    e->names.push_back("ref");
    const fast::AddVariantList list = fast::AddVariants();
    for (size_t i = 0; i < list.size; ++i) {
      e->engines.push_back(fast::MakeFastEngineWithKernels(limits, *list.items[i]));
      e->names.push_back(std::string("fast_") + list.items[i]->name);
    }
    shared_engines = std::move(e);
  }
  return *shared_engines;
}

std::string Check(Engines& shared, const uint8_t* data, size_t size);

}  // namespace

std::string DifferentialCheck(const uint8_t* data, size_t size) {
  if (size < 4) return "";
  Engines& shared = SharedEngines();
  std::string diff = Check(shared, data, size);
  for (auto& engine : shared.engines) {
    (void)engine->RemoveJob(0);
    (void)engine->RemoveJob(1);
  }
  if (!diff.empty()) shared_engines.reset();
  return diff;
}

namespace {

std::string Check(Engines& shared, const uint8_t* data, size_t size) {
  std::vector<std::unique_ptr<Engine>>& engines = shared.engines;
  const std::vector<std::string>& names = shared.names;
  JobConfig jobs[2] = {
      {0, static_cast<uint16_t>(1 + data[0] % 8), static_cast<uint16_t>(data[2] & 1 ? 256 : 64), 0,
       static_cast<uint16_t>(1 + (data[3] & 3))},
      {1, static_cast<uint16_t>(1 + data[1] % 8), static_cast<uint16_t>(data[2] & 2 ? 256 : 64), 4,
       static_cast<uint16_t>(1 + ((data[3] >> 4) & 3))}};
  for (int j = 0; j < 2; ++j) {
    jobs[j].security.mode = static_cast<proto::SecMode>(((data[2] >> (2 + 2 * j)) & 3) % 3);
    for (size_t i = 0; i < proto::kKeyBytes; ++i) {
      jobs[j].security.up[i] = static_cast<uint8_t>(17 * j + i);
      jobs[j].security.down[i] = static_cast<uint8_t>(29 * j + 3 * i + 1);
    }
  }
  for (const JobConfig& j : jobs) {
    for (auto& e : engines) {
      if (!e->AddJob(j).ok()) return "AddJob failed";
    }
  }
  size_t pos = 4;
  size_t index = 0;
  std::vector<uint8_t> sealed;
  while (pos + 2 <= size) {
    const size_t word = (size_t{data[pos]} << 8) | data[pos + 1];
    size_t len = (word & 0x7FFF) % 1100;
    pos += 2;
    if (len > size - pos) len = size - pos;
    std::span<const uint8_t> packet(data + pos, len);
    pos += len;
    if (word & 0x8000) {  // the harness appends the trailer, so the rules past it run
      sealed.assign(packet.begin(), packet.end());
      const JobConfig* keyed = nullptr;
      if (len >= proto::kHeaderBytes && proto::GetJob(packet.data()) < 2 &&
          proto::IsKeyed(jobs[proto::GetJob(packet.data())].security.mode)) {
        keyed = &jobs[proto::GetJob(packet.data())];
      }
      if (keyed != nullptr) {
        sealed.resize(len + proto::kTagBytes);
        const uint8_t* h = packet.data();
        if (!proto::SealOnce(
                keyed->security.up, keyed->security.mode, sealed.data(), len,
                proto::MakeNonce(proto::GetRank(h), proto::GetSlot(h), proto::GetGen(h)))) {
          return "sealing failed";
        }
      } else {
        sealed.resize(len + proto::kCrcBytes);
        proto::SealMessage(sealed.data(), len);
      }
      packet = sealed;
    }
    Recorder want;
    engines[0]->Process(packet, want);
    JobFailure f[2], g[2];
    const size_t nf = engines[0]->PollFailures(f);
    for (size_t i = 1; i < engines.size(); ++i) {
      Recorder got;
      engines[i]->Process(packet, got);
      const size_t ng = engines[i]->PollFailures(g);
      if (ng != nf || !std::equal(f, f + nf, g)) {
        return "packet " + std::to_string(index) + ": jobs ended by " + names[i] +
               " differ from ref";
      }
      if (!(got.got == want.got)) {
        return "packet " + std::to_string(index) + ": results of " + names[i] + " differ from ref";
      }
      if (engines[i]->counters() != engines[0]->counters()) {
        return "packet " + std::to_string(index) + ": counters of " + names[i] + " differ from ref";
      }
    }
    ++index;
  }
  return "";
}

}  // namespace

}  // namespace ina::dp::fuzz
