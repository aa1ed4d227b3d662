// ina_crc32c alone (docs/rtl/ina_crc32c.md), both modes, under random idle cycles between beats,
// against the C++ scalar CRC32C (ina/proto/crc32c.h):
// - Check = 1: for every frame one crc_valid_o pulse exactly 4 cycles after the cycle that took its
//   last beat, crc_ok_o = (its last 4 bytes are the little-endian CRC32C of bytes 42 .. end-5);
//   frames of any byte length (one-beat frames included), half of them good, the others with one
//   bit flipped anywhere from byte 42 on, or with a wrong trailer;
// - Check = 0: one pulse 5 cycles after the last beat, crc_o = CRC32C of bytes 42 .. end-1, for
//   frames of 64 + 4n bytes (the result frames ina_egress feeds it);
// - no pulse at any other time; busy_o falls once everything came out.
#include "ina/proto/crc32c.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include "ina/proto/wire.h"
#include "kat_file.h"
#include "units_tb.h"

namespace ina::rtl_units {
namespace {

namespace p = proto;

constexpr size_t kStart = p::kFramePrefixBytes;  // first covered byte

struct Case {
  std::vector<uint8_t> frame;
  bool ok = false;   // Check: the trailer matches
  uint32_t crc = 0;  // Value: CRC32C of frame[42..]
};

Case CheckCase(std::mt19937_64& rng) {
  Case c;
  // 43 .. 1200 bytes, some of them a single beat.
  const size_t len = rng() % 6 == 0 ? 46 + rng() % 19 : 46 + rng() % 1155;
  c.frame.resize(len);
  for (auto& b : c.frame) b = static_cast<uint8_t>(rng());
  p::SealMessage(c.frame.data() + kStart, len - kStart - p::kCrcBytes, p::Crc32cScalar);
  c.ok = true;
  switch (rng() % 4) {
    case 0:  // one bit flipped in the covered bytes or the trailer
      c.frame[kStart + rng() % (len - kStart)] ^= static_cast<uint8_t>(1u << (rng() % 8));
      c.ok = false;
      break;
    case 1:  // a trailer of another message
      c.frame[len - 1 - rng() % 4] += static_cast<uint8_t>(1 + rng() % 255);
      c.ok = false;
      break;
    case 2:  // bytes before the header are not covered
      c.frame[rng() % kStart] ^= 0x5A;
      break;
    default:
      break;
  }
  return c;
}

Case ValueCase(std::mt19937_64& rng) {
  Case c;
  const size_t count = rng() % 5 == 0 ? rng() % 3 : rng() % 257;
  c.frame.resize(p::kPayloadOffset + 4 * count);
  for (auto& b : c.frame) b = static_cast<uint8_t>(rng());
  c.crc = p::Crc32cScalar(0, c.frame.data() + kStart, c.frame.size() - kStart);
  return c;
}

// Feeds the frames one beat per cycle (a beat held back with probability `idle`) into the
// module of the chosen mode and checks every cycle's outputs.
void RunCrc(bool check, const std::vector<Case>& cases, double idle, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  Tb tb;
  const uint64_t latency = check ? 4 : 5;
  std::deque<std::pair<uint64_t, size_t>> due;  // (cycle the pulse is due, case)
  size_t ci = 0, off = 0, seen = 0;
  uint64_t beats = 0;
  for (const Case& c : cases) beats += (c.frame.size() + 63) / 64;
  // Twice the expected cycles (a beat every 1 / (1 - idle) cycles), plus the pipeline.
  const auto bound = static_cast<uint64_t>(2.0 * static_cast<double>(beats) / (1.0 - idle)) + 1000;
  for (uint64_t cyc = 0; seen < cases.size(); ++cyc) {
    ASSERT_LT(cyc, bound) << "results stopped coming";
    const bool valid = ci < cases.size() && u(rng) >= idle;
    uint8_t beat[64];
    for (auto& b : beat) b = static_cast<uint8_t>(rng());
    uint64_t keep = rng();
    bool last = rng() & 1;
    if (valid) {
      const auto& f = cases[ci].frame;
      const size_t n = std::min<size_t>(64, f.size() - off);
      std::copy_n(f.data() + off, n, beat);  // bytes past the frame stay random: masked by keep
      keep = n == 64 ? ~0ull : (1ull << n) - 1;
      last = off + n == f.size();
    }
    if (check) {
      tb->crck_s_axis_tvalid_i = valid;
      SetBeat(tb->crck_s_axis_tdata_i, beat);
      tb->crck_s_axis_tkeep_i = keep;
      tb->crck_s_axis_tlast_i = last;
    } else {
      tb->crcv_s_axis_tvalid_i = valid;
      SetBeat(tb->crcv_s_axis_tdata_i, beat);
      tb->crcv_s_axis_tkeep_i = keep;
      tb->crcv_s_axis_tlast_i = last;
    }
    tb.Settle();
    const bool pulse = check ? tb->crck_valid_o : tb->crcv_valid_o;
    const bool want = !due.empty() && due.front().first == cyc;
    ASSERT_EQ(pulse, want) << "cycle " << cyc;
    if (want) {
      const Case& c = cases[due.front().second];
      if (check) {
        ASSERT_EQ(static_cast<bool>(tb->crck_ok_o), c.ok)
            << "case " << due.front().second << " of " << c.frame.size() << " bytes";
      } else {
        ASSERT_EQ(tb->crcv_crc_o, c.crc)
            << "case " << due.front().second << " of " << c.frame.size() << " bytes";
      }
      due.pop_front();
      ++seen;
    }
    tb.Edge();
    if (valid) {
      off += 64;
      if (last) {
        due.push_back({cyc + latency, ci});
        ++ci;
        off = 0;
      }
    }
  }
  // Drained: nothing in flight.
  tb->crck_s_axis_tvalid_i = 0;
  tb->crcv_s_axis_tvalid_i = 0;
  tb.Settle();
  EXPECT_FALSE(check ? tb->crck_busy_o : tb->crcv_busy_o);
}

class RtlCrcTest : public ::testing::TestWithParam<double> {};

TEST_P(RtlCrcTest, CheckModeMatchesTheScalarCrc) {
  std::mt19937_64 rng(Seed());
  std::vector<Case> cases;
  for (int i = 0; i < 1500; ++i) cases.push_back(CheckCase(rng));
  size_t good = 0;
  for (const auto& c : cases) good += c.ok;
  ASSERT_GT(good, 300u);
  ASSERT_GT(cases.size() - good, 300u);
  RunCrc(true, cases, GetParam(), rng);
}

TEST_P(RtlCrcTest, ValueModeMatchesTheScalarCrc) {
  std::mt19937_64 rng(Seed());
  std::vector<Case> cases;
  for (int i = 0; i < 1500; ++i) cases.push_back(ValueCase(rng));
  RunCrc(false, cases, GetParam(), rng);
}

INSTANTIATE_TEST_SUITE_P(Idle, RtlCrcTest, ::testing::Values(0.0, 0.3, 0.8));

TEST(RtlCrcKat, TheKnownAnswerMessagesPass) {
  // gen.py's messages (kat.txt, trailers by Python) and the check string with the spec's check
  // value as its trailer, each behind a 42-byte prefix.
  std::mt19937_64 rng(Seed());
  std::vector<Case> cases;
  for (const auto& k : p::LoadKats()) {
    Case c;
    c.frame.assign(kStart, 0xA5);
    c.frame.insert(c.frame.end(), k.bytes.begin(), k.bytes.end());
    c.ok = true;
    cases.push_back(c);
  }
  ASSERT_GE(cases.size(), 4u);
  const uint8_t s[] = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
  Case c;
  c.frame.assign(kStart, 0);
  c.frame.insert(c.frame.end(), s, s + sizeof s);
  c.frame.resize(c.frame.size() + p::kCrcBytes);
  p::StoreCrc(c.frame.data() + kStart + sizeof s, p::kCrc32cCheck);
  c.ok = true;
  cases.push_back(c);
  RunCrc(true, cases, 0.0, rng);
}

}  // namespace
}  // namespace ina::rtl_units
