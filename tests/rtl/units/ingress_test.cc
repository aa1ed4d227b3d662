// ina_ingress alone (docs/rtl/ina_ingress.md) under random s_axis idle cycles and random
// payload/descriptor FIFO backpressure, against a model of its datasheet:
// - s_axis_tready_o = pay_ready_i && desc_ready_i, whatever tvalid is;
// - every accepted beat after a frame's first is pushed as a payload beat in its own cycle, data
//   unchanged, up to MaxK / 16 (kMaxBeats, 32 at the model's MaxK 512) per frame; nothing is pushed
//   while stalled;
// - at the accepted tlast beat (same cycle, latency 0) one descriptor: the ina header of the first
//   beat, the frame's byte count from tkeep (saturating at 2^20 - 1), the payload beats kept, and
//   the OR of tuser over the frame; in_frame_o between a frame's first and last beat.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include "ina/proto/wire.h"
#include "units_tb.h"

namespace ina::rtl_units {
namespace {

namespace p = proto;

struct Beat {
  uint8_t data[64];
  uint64_t keep = ~0ull;
  bool last = false;
  bool user = false;
};
using Frame = std::vector<Beat>;

Desc Expected(const Frame& f) {
  const uint8_t* h = f[0].data + p::kFramePrefixBytes;
  Desc d;
  d.version = p::GetVersion(h);
  d.mtype = h[p::kTypeOffset];  // the descriptor carries the raw byte
  d.flags = p::GetFlags(h);
  d.exp = p::GetExp(h);
  d.next_exp = p::GetNextExp(h);
  d.sec = p::GetSec(h);
  d.job = p::GetJob(h);
  d.rank = p::GetRank(h);
  d.slot = p::GetSlot(h);
  d.gen = p::GetGen(h);
  d.count = p::GetCount(h);
  d.offset = p::GetOffset(h);
  uint64_t bytes = 0;
  for (const Beat& b : f) {
    bytes += std::popcount(b.keep);
    d.mac_err |= b.user;
  }
  d.frame_bytes = static_cast<uint32_t>(std::min<uint64_t>(bytes, kFrameBytesMax));
  d.stored_beats = static_cast<uint16_t>(std::min<size_t>(f.size() - 1, kMaxBeats));
  return d;
}

Frame RandomFrame(std::mt19937_64& rng, size_t beats) {
  std::uniform_int_distribution<int> byte(0, 255);
  Frame f(beats);
  for (Beat& b : f) {
    for (uint8_t& x : b.data) x = static_cast<uint8_t>(byte(rng));
    b.user = rng() % 20 == 0;
  }
  f.back().last = true;
  unsigned tail = 1 + rng() % 64;  // bytes in the last beat
  f.back().keep = tail == 64 ? ~0ull : (1ull << tail) - 1;
  return f;
}

// Drives `frames` through ina_ingress and checks every cycle against the model.
void RunIngress(const std::vector<Frame>& frames, double idle, double stall, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  Tb tb;
  size_t fi = 0, bi = 0;  // frame and beat on offer
  bool presenting = false, in_frame = false;
  uint64_t bytes_model = 0;
  size_t pays = 0, descs = 0, stalled_cycles = 0;
  for (uint64_t cyc = 0; fi < frames.size(); ++cyc) {
    ASSERT_LT(cyc, 100000 + 8 * frames.size() * 20) << "ingress stopped taking beats";
    bool valid = presenting || u(rng) >= idle;
    uint8_t junk[64];
    for (uint8_t& x : junk) x = static_cast<uint8_t>(rng());
    const Beat& b = frames[fi][bi];
    tb->ing_s_axis_tvalid_i = valid;
    SetBeat(tb->ing_s_axis_tdata_i, valid ? b.data : junk);
    tb->ing_s_axis_tkeep_i = valid ? b.keep : rng();
    tb->ing_s_axis_tlast_i = valid ? b.last : (rng() & 1);
    tb->ing_s_axis_tuser_i = valid ? b.user : (rng() & 1);
    bool pay_ready = u(rng) >= stall, desc_ready = u(rng) >= stall;
    tb->ing_pay_ready_i = pay_ready;
    tb->ing_desc_ready_i = desc_ready;
    tb.Settle();
    ASSERT_EQ(tb->ing_s_axis_tready_o, pay_ready && desc_ready) << "cycle " << cyc;
    ASSERT_EQ(tb->ing_in_frame_o, in_frame) << "cycle " << cyc;
    bool take = valid && pay_ready && desc_ready;
    stalled_cycles += valid && !take;
    bool want_pay = take && bi > 0 && bi <= kMaxBeats;
    ASSERT_EQ(tb->ing_pay_valid_o, want_pay)
        << "cycle " << cyc << " frame " << fi << " beat " << bi;
    if (want_pay) {
      uint8_t got[64];
      GetBeat(tb->ing_pay_data_o, got);
      ASSERT_TRUE(std::equal(got, got + 64, b.data)) << "cycle " << cyc << " beat " << bi;
      ++pays;
    }
    bool want_desc = take && b.last;
    ASSERT_EQ(tb->ing_desc_valid_o, want_desc) << "cycle " << cyc << " frame " << fi;
    if (want_desc) {
      Desc got = UnpackDesc(tb->ing_desc_o), want = Expected(frames[fi]);
      ASSERT_EQ(got.frame_bytes, want.frame_bytes) << "frame " << fi;
      ASSERT_EQ(got.stored_beats, want.stored_beats) << "frame " << fi;
      ASSERT_EQ(got.mac_err, want.mac_err) << "frame " << fi;
      ASSERT_TRUE(got == want) << "frame " << fi << " header fields differ";
      ++descs;
    }
    tb.Edge();
    presenting = valid && !take;
    if (take) {
      bytes_model += std::popcount(b.keep);
      in_frame = !b.last;
      if (b.last) {
        ++fi;
        bi = 0;
      } else {
        ++bi;
      }
    }
  }
  EXPECT_EQ(descs, frames.size());
  size_t want_pays = 0;
  for (const Frame& f : frames) want_pays += std::min<size_t>(f.size() - 1, kMaxBeats);
  EXPECT_EQ(pays, want_pays);
  if (stall > 0) {
    EXPECT_GT(stalled_cycles, 0u) << "backpressure never hit a beat";
  }
}

class RtlIngressTest : public ::testing::TestWithParam<std::pair<double, double>> {};

TEST_P(RtlIngressTest, SplitsFramesUnderIdleAndBackpressure) {
  auto [idle, stall] = GetParam();
  std::mt19937_64 rng(Seed());
  std::vector<Frame> frames;
  for (int i = 0; i < 2000; ++i) {
    // Mostly frames of 1..kMaxBeats + 1 beats (header only up to K = MaxK), some over-long
    // (dropped beats).
    size_t beats = rng() % 8 == 0 ? kMaxBeats + 2 + rng() % 6 : 1 + rng() % (kMaxBeats + 1);
    frames.push_back(RandomFrame(rng, beats));
  }
  RunIngress(frames, idle, stall, rng);
}

INSTANTIATE_TEST_SUITE_P(Traffic, RtlIngressTest,
                         ::testing::Values(std::pair{0.0, 0.0}, std::pair{0.5, 0.0},
                                           std::pair{0.0, 0.5}, std::pair{0.3, 0.6}));

TEST(RtlIngressSaturationTest, FrameByteCountSaturates) {
  std::mt19937_64 rng(Seed());
  // 2^20 / 64 = 16384 full beats reach the 20-bit limit; a few more must stay at 2^20 - 1.
  std::vector<Frame> frames{RandomFrame(rng, 16400), RandomFrame(rng, 3)};
  frames[0].back().keep = ~0ull;
  RunIngress(frames, 0.1, 0.1, rng);
}

}  // namespace
}  // namespace ina::rtl_units
