// ina_egress alone (docs/rtl/ina_egress.md) under random idle input and random m_axis
// backpressure, against the C++ scalar CRC32C:
// - every frame comes out with its bytes unchanged and 4 more: the little-endian CRC32C of bytes
//   42 .. end, in the last beat when it has room, else in one added beat of 4 bytes; tuser kept;
// - AXI-stream rules on m_axis: once valid, data, keep, last and user hold until taken;
// - pushes respect free_o (the producer's contract) and nothing is lost or reordered;
// - with the output never stalled and the input saturated by frames of full last beats, the
//   output takes no more cycles than it has beats plus the first frame's CRC latency (no bubble).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include "ina/proto/crc32c.h"
#include "ina/proto/wire.h"
#include "units_tb.h"

namespace ina::rtl_units {
namespace {

namespace p = proto;

struct Frame {
  std::vector<uint8_t> bytes;  // 64 + 4 * count
  uint32_t user = 0;
};

Frame RandomResult(std::mt19937_64& rng, size_t count) {
  Frame f;
  f.bytes.resize(p::kPayloadOffset + 4 * count);
  for (auto& b : f.bytes) b = static_cast<uint8_t>(rng());
  f.user = static_cast<uint32_t>(rng());
  return f;
}

struct Stats {
  uint64_t cycles = 0;
  uint64_t out_beats = 0;
};

Stats RunEgress(const std::vector<Frame>& frames, double idle, double stall, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  Tb tb;
  constexpr unsigned kDepth = 32;
  size_t fi = 0, off = 0;  // input position
  size_t oi = 0;           // frames checked at the output
  std::vector<uint8_t> cur;
  uint32_t cur_user = 0;
  bool was_stalled = false;
  uint8_t prev[64] = {};
  uint64_t prev_keep = 0;
  bool prev_last = false;
  uint32_t prev_user = 0;
  size_t frame_room = 0;  // beats of the frame being pushed still to go (reserved at its start)
  Stats st;
  for (uint64_t cyc = 0; oi < frames.size(); ++cyc) {
    EXPECT_LT(cyc, 80 * frames.size() + 1000) << "egress stopped";
    if (cyc >= 80 * frames.size() + 1000) break;
    // Input: a frame starts only when free_o holds all of it (ina_agg reserves likewise).
    tb.Settle();
    bool push = false;
    if (fi < frames.size()) {
      const size_t beats = (frames[fi].bytes.size() + 63) / 64;
      if (off == 0 && frame_room == 0 && tb->egr_free_o >= beats && u(rng) >= idle) {
        frame_room = beats;
      }
      push = frame_room > 0 && (off == 0 || u(rng) >= idle);
    }
    uint8_t beat[64];
    for (auto& b : beat) b = static_cast<uint8_t>(rng());
    uint64_t keep = rng();
    bool last = rng() & 1;
    uint32_t user = static_cast<uint32_t>(rng());
    if (push) {
      const auto& f = frames[fi];
      const size_t n = std::min<size_t>(64, f.bytes.size() - off);
      std::copy_n(f.bytes.data() + off, n, beat);
      keep = n == 64 ? ~0ull : (1ull << n) - 1;
      last = off + n == f.bytes.size();
      user = f.user;
    }
    tb->egr_in_valid_i = push;
    SetBeat(tb->egr_in_data_i, beat);
    tb->egr_in_keep_i = keep;
    tb->egr_in_last_i = last;
    tb->egr_in_user_i = user;
    const bool ready = u(rng) >= stall;
    tb->egr_m_axis_tready_i = ready;
    tb.Settle();
    const bool valid = tb->egr_m_axis_tvalid_o;
    uint8_t got[64];
    GetBeat(tb->egr_m_axis_tdata_o, got);
    const uint64_t gkeep = tb->egr_m_axis_tkeep_o;
    const bool glast = tb->egr_m_axis_tlast_o;
    const uint32_t guser = tb->egr_m_axis_tuser_o;
    if (was_stalled) {
      EXPECT_TRUE(valid) << "cycle " << cyc << ": valid fell while stalled";
      EXPECT_TRUE(std::equal(got, got + 64, prev) && gkeep == prev_keep && glast == prev_last &&
                  guser == prev_user)
          << "cycle " << cyc << ": beat changed while stalled";
    }
    if (valid && ready) {
      ++st.out_beats;
      const int n = std::popcount(gkeep);
      EXPECT_EQ(gkeep, n == 64 ? ~0ull : (1ull << n) - 1) << "cycle " << cyc << ": keep";
      if (cur.empty()) cur_user = guser;
      EXPECT_EQ(guser, cur_user) << "cycle " << cyc;
      cur.insert(cur.end(), got, got + n);
      if (glast) {
        const Frame& want = frames[oi];
        std::vector<uint8_t> w = want.bytes;
        w.resize(w.size() + 4);
        p::StoreCrc(w.data() + want.bytes.size(),
                    p::Crc32cScalar(0, want.bytes.data() + p::kFramePrefixBytes,
                                    want.bytes.size() - p::kFramePrefixBytes));
        EXPECT_EQ(cur, w) << "frame " << oi << " of " << want.bytes.size() << " bytes";
        EXPECT_EQ(cur_user, want.user) << "frame " << oi;
        EXPECT_TRUE(p::MessageCrcOk(std::span(cur).subspan(p::kFramePrefixBytes)));
        cur.clear();
        ++oi;
      }
    }
    was_stalled = valid && !ready;
    std::copy_n(got, 64, prev);
    prev_keep = gkeep;
    prev_last = glast;
    prev_user = guser;
    tb.Edge();
    st.cycles = cyc + 1;
    if (push) {
      off += 64;
      --frame_room;
      if (last) {
        ++fi;
        off = 0;
      }
    }
  }
  EXPECT_EQ(oi, frames.size());
  tb->egr_in_valid_i = 0;
  tb.Settle();
  EXPECT_FALSE(tb->egr_busy_o);
  EXPECT_EQ(tb->egr_free_o, kDepth);
  return st;
}

class RtlEgressTest : public ::testing::TestWithParam<std::pair<double, double>> {};

TEST_P(RtlEgressTest, AppendsTheTrailerUnderIdleAndBackpressure) {
  auto [idle, stall] = GetParam();
  std::mt19937_64 rng(Seed());
  std::vector<Frame> frames;
  for (int i = 0; i < 800; ++i) {
    // Header-only results, short last blocks, and full K=64 / K=256 blocks (full last beats).
    const size_t pick = rng() % 4;
    const size_t count = pick == 0 ? 0 : pick == 1 ? rng() % 257 : pick == 2 ? 64 : 256;
    frames.push_back(RandomResult(rng, count));
  }
  RunEgress(frames, idle, stall, rng);
}

INSTANTIATE_TEST_SUITE_P(Traffic, RtlEgressTest,
                         ::testing::Values(std::pair{0.0, 0.0}, std::pair{0.5, 0.0},
                                           std::pair{0.0, 0.5}, std::pair{0.3, 0.7}));

TEST(RtlEgressRateTest, SaturatedInputLosesNoCycle) {
  // Full K=256 results back to back (17 beats in, 18 out each), output never stalled: once the
  // first frame waited for its CRC, the FIFO holds enough to cover the latency.
  std::mt19937_64 rng(Seed());
  std::vector<Frame> frames;
  for (int i = 0; i < 200; ++i) frames.push_back(RandomResult(rng, 256));
  const Stats st = RunEgress(frames, 0.0, 0.0, rng);
  EXPECT_EQ(st.out_beats, 200u * 18);
  // In: 17 beats per frame; out: 18. The output is the bottleneck, so after the first frame it
  // emits one beat per cycle: cycles = out beats + the first frame's latency (a few cycles).
  EXPECT_LE(st.cycles, st.out_beats + 12);
}

}  // namespace
}  // namespace ina::rtl_units
