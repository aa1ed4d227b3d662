// Helpers shared by the dataplane engine tests: data packet builder, recording emitter, and the
// list of engines a test binary runs against (defined once per binary, see engines_*.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "ina/dp/engine.h"
#include "ina/dp/ref_engine.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/sec.h"
#include "ina/proto/wire.h"

namespace ina::dp::testing {

struct DataSpec {
  uint16_t job = 1;
  uint16_t rank = 0;
  uint16_t slot = 0;
  uint16_t gen = 0;
  uint32_t offset = 0;
  uint8_t flags = 0;
  uint8_t exp = 0;
  uint8_t next_exp = 0;
  std::vector<int32_t> elems;
};

// Encodes a data packet: header (count = elems.size()), the elements, big-endian, then the CRC32C
// trailer.
inline std::vector<uint8_t> DataPacket(const DataSpec& d) {
  std::vector<uint8_t> p(proto::MessageBytes(d.elems.size()));
  proto::DataMsg{.flags = d.flags,
                 .exp = d.exp,
                 .next_exp = d.next_exp,
                 .job = d.job,
                 .rank = d.rank,
                 .slot = d.slot,
                 .gen = d.gen,
                 .count = static_cast<uint16_t>(d.elems.size()),
                 .offset = d.offset}
      .Encode(p.data());
  for (size_t i = 0; i < d.elems.size(); ++i) {
    proto::Store32(p.data() + proto::kHeaderBytes + proto::kElemBytes * i,
                   static_cast<uint32_t>(d.elems[i]));
  }
  proto::SealMessage(p.data(), p.size() - proto::kCrcBytes);
  return p;
}

// Seals `packet` again after a test edited it (the trailer is its last kCrcBytes bytes).
inline void Reseal(std::vector<uint8_t>& packet) {
  proto::SealMessage(packet.data(), packet.size() - proto::kCrcBytes);
}

// A keyed job's copy of a CRC-sealed message (data or result, as DataPacket builds them): the
// trailer replaced by the AES-GCM tag of `mode` under `key`, nonce (the header's rank and slot,
// `use`), the header's sec set to the mode; in mac_encrypt the payload encrypted.
inline std::vector<uint8_t> SealKeyed(const std::vector<uint8_t>& crc_packet, proto::SecMode mode,
                                      const proto::TrafficKey& key, uint64_t use) {
  const size_t len = crc_packet.size() - proto::kCrcBytes;
  std::vector<uint8_t> p(crc_packet.begin(), crc_packet.begin() + static_cast<long>(len));
  p.resize(len + proto::kTagBytes);
  proto::SetSec(p.data(), static_cast<uint8_t>(mode));
  const bool ok =
      proto::SealOnce(key, mode, p.data(), len,
                      proto::MakeNonce(proto::GetRank(p.data()), proto::GetSlot(p.data()), use));
  if (!ok) p.clear();  // a test comparing bytes fails on it
  return p;
}

// Traffic keys of a test job (the control plane derives them from the job's secret).
inline JobSecurity TestSecurity(proto::SecMode mode, uint8_t seed) {
  JobSecurity s;
  s.mode = mode;
  for (size_t i = 0; i < proto::kKeyBytes; ++i) {
    s.up[i] = static_cast<uint8_t>(seed + i);
    s.down[i] = static_cast<uint8_t>(seed * 7 + 3 * i + 1);
  }
  return s;
}

// Decodes the elements of a result packet (between the header and the trailer).
inline std::vector<int32_t> Elements(const std::vector<uint8_t>& packet) {
  std::vector<int32_t> v;
  for (size_t i = proto::kHeaderBytes; i + proto::kElemBytes + proto::kCrcBytes <= packet.size();
       i += proto::kElemBytes) {
    v.push_back(static_cast<int32_t>(proto::Load32(packet.data() + i)));
  }
  return v;
}

struct Emitted {
  uint16_t job = 0;
  uint16_t dest = 0;
  std::vector<uint8_t> bytes;
  friend bool operator==(const Emitted&, const Emitted&) = default;
};

class RecordingEmitter final : public Emitter {
 public:
  void OnResult(uint16_t job_id, uint16_t dest_rank, std::span<const uint8_t> packet) override {
    got.push_back({job_id, dest_rank, std::vector<uint8_t>(packet.begin(), packet.end())});
  }
  std::vector<Emitted> got;
};

struct EngineFactory {
  std::string name;
  std::function<std::unique_ptr<Engine>(const EngineLimits&)> make;
};
inline void PrintTo(const EngineFactory& f, std::ostream* os) { *os << f.name; }

// The engines this test binary checks; defined in the binary's engines_*.cc.
std::vector<EngineFactory> EnginesUnderTest();

// Seed for property tests: fixed unless INA_SEED says otherwise (tests/support/seed.h); printed,
// with `what` when given.
uint64_t TestSeed(const char* what = nullptr);

}  // namespace ina::dp::testing
