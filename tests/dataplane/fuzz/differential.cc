#include "differential.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "fast_engine_internal.h"
#include "ina/dp/ref_engine.h"
#include "ina/proto/crc32c.h"

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

}  // namespace

std::string DifferentialCheck(const uint8_t* data, size_t size) {
  if (size < 4) return "";
  const EngineLimits limits{8, 4};
  std::vector<std::unique_ptr<Engine>> engines;
  std::vector<std::string> names;
  engines.push_back(MakeReferenceEngine(limits));
  names.push_back("ref");
  const fast::KernelList list = fast::AvailableKernels();
  for (size_t i = 0; i < list.size; ++i) {
    engines.push_back(fast::MakeFastEngineWithKernels(limits, *list.items[i]));
    names.push_back(std::string("fast_") + list.items[i]->name);
  }
  const JobConfig jobs[2] = {
      {0, static_cast<uint16_t>(1 + data[0] % 8), static_cast<uint16_t>(data[2] & 1 ? 256 : 64), 0,
       static_cast<uint16_t>(1 + (data[3] & 3))},
      {1, static_cast<uint16_t>(1 + data[1] % 8), static_cast<uint16_t>(data[2] & 2 ? 256 : 64), 4,
       static_cast<uint16_t>(1 + ((data[3] >> 4) & 3))}};
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
    if (word & 0x8000) {  // the harness appends the CRC32C trailer, so the rules past it run
      sealed.assign(packet.begin(), packet.end());
      sealed.resize(len + proto::kCrcBytes);
      proto::SealMessage(sealed.data(), len);
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

}  // namespace ina::dp::fuzz
