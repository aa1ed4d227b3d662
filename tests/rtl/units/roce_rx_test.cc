// ina_roce_rx alone (docs/rtl/ina_roce_rx.md) under random idle input and random m_axis
// backpressure, against a C++ model of its datasheet built on the software codec
// (ina/proto/roce.h: the ICRC, BTH/DETH layouts):
// - plain frames come out unchanged; RoCEv2 frames whose first beat passes the header checks come
//   out without BTH/DETH, pad and ICRC (bytes 0..41 and 62..end-pad-4), every byte checked;
// - one verdict per frame sent, in order, drop = a length that disagrees or a bad ICRC;
// - each RoCEv2 frame that fails a check counts once, in the first failing check's counter;
// - tuser: set on the last out beat of a frame when any of its in beats had it;
// - AXI-stream rules on m_axis: once valid, data, keep, last and user hold until taken;
// - saturated input and no backpressure: one in beat per cycle.
// Frames: UDP frames, good RoCEv2 frames with every pad count and P_Key membership, and RoCEv2
// frames with a random bit flipped anywhere, cut, lengthened, or with a wrong field resealed.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include "ina/proto/roce.h"
#include "ina/proto/wire.h"
#include "units_tb.h"

namespace ina::rtl_units {
namespace {

namespace p = proto;
namespace r = proto::roce;

constexpr size_t kEth = 14;

struct Regs {
  uint32_t qpn;
  uint32_t qkey;
  uint16_t pkey;
};

struct InFrame {
  std::vector<uint8_t> bytes;
  bool user = false;  // tuser on one of its beats
};

// What the datasheet says happens to a frame.
struct Expect {
  bool sent = false;  // comes out on m_axis
  std::vector<uint8_t> out;
  bool drop = false;  // its verdict
  int counter = -1;   // the roce counter it counts in (-1: none)
};

uint16_t Be16(const std::vector<uint8_t>& b, size_t i) { return p::Load16(&b[i]); }

Expect Model(const InFrame& f, const Regs& regs) {
  const auto& b = f.bytes;
  Expect e;
  // The first beat's bytes, zero beyond the frame (as the test drives them; the RTL's verdict on
  // such a frame does not depend on them: it is short).
  std::vector<uint8_t> h(b);
  h.resize(std::max<size_t>(h.size(), 64), 0);
  const bool roce = b.size() >= 38 && Be16(h, 12) == 0x0800 && (h[14] >> 4) == 4 && h[23] == 17 &&
                    Be16(h, 36) == r::kUdpPort;
  if (!roce) {
    e.sent = true;
    e.out = b;
    return e;
  }
  const uint8_t* bth = h.data() + 42;
  const size_t tot = Be16(h, 16), udp_len = Be16(h, 38), pad = (bth[1] >> 4) & 3;
  const bool hdr_short = b.size() <= 64 || (h[14] & 0xF) != 5 || tot != udp_len + 20 ||
                         udp_len < 8 + r::kUdOverheadBytes ||
                         pad > udp_len - 8 - r::kUdOverheadBytes;
  const bool len_short = b.size() != kEth + tot;
  int cause = -1;
  if (r::GetBthOpcode(bth) != r::kOpUdSendOnly || r::GetBthTver(bth) != 0) {
    cause = static_cast<int>(p::RoceCounter::kRoceBadOpcode);
  } else if (r::GetBthDestQp(bth) != regs.qpn) {
    cause = static_cast<int>(p::RoceCounter::kRoceWrongQpn);
  } else if (r::GetDethQkey(bth + 12) != regs.qkey ||
             (r::GetBthPkey(bth) & 0x7FFF) != (regs.pkey & 0x7FFF)) {
    cause = static_cast<int>(p::RoceCounter::kRoceBadKey);
  }
  // The RTL checks the frame's last 4 bytes against the ICRC of the bytes before them (with equal
  // lengths, exactly the software's IcrcOk).
  const bool icrc_ok = r::IcrcOk(std::span<const uint8_t>(b.data() + kEth, b.size() - kEth));
  if (hdr_short || len_short) {
    e.counter = static_cast<int>(p::RoceCounter::kRoceShort);
  } else if (!icrc_ok) {
    e.counter = static_cast<int>(p::RoceCounter::kRoceBadIcrc);
  } else {
    e.counter = cause;
  }
  if (hdr_short || cause >= 0) return e;  // not forwarded
  e.sent = true;
  e.drop = len_short || !icrc_ok;
  // Bytes 0..41 and 62.., less the pad and ICRC (a frame longer than its IPv4 length says loses
  // its last 4 + pad bytes all the same; one shorter may lose some of bytes 0..41).
  e.out.assign(b.begin(), b.begin() + 42);
  e.out.insert(e.out.end(), b.begin() + 62, b.end());
  e.out.resize(b.size() - 24 - pad);
  return e;
}

void Reseal(std::vector<uint8_t>& f) {
  const size_t tot = Be16(f, 16);
  if (kEth + tot > f.size() || tot < 28 + r::kBthBytes + r::kIcrcBytes) return;
  r::StoreIcrc(&f[kEth + tot - 4], r::ComputeIcrc(std::span<const uint8_t>(&f[kEth], tot)));
}

std::vector<uint8_t> RoceFrame(std::mt19937_64& rng, const Regs& regs, size_t msg_len) {
  std::vector<uint8_t> msg(msg_len);
  for (auto& x : msg) x = static_cast<uint8_t>(rng());
  const size_t pad = (4 - msg_len % 4) % 4;
  const size_t udp_payload = r::kUdOverheadBytes + msg_len + pad;
  std::vector<uint8_t> f(kEth + 28 + udp_payload, 0);
  for (size_t i = 0; i < 12; ++i) f[i] = static_cast<uint8_t>(rng());
  f[12] = 0x08;
  r::BuildIpv4Udp(static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng()),
                  static_cast<uint16_t>(rng()), r::kUdpPort, static_cast<uint16_t>(rng()),
                  udp_payload, &f[kEth]);
  f[kEth + 1] = static_cast<uint8_t>(rng());  // TOS, TTL and checksums are masked in the ICRC
  f[kEth + 8] = static_cast<uint8_t>(rng());
  f[kEth + 10] = static_cast<uint8_t>(rng());
  f[kEth + 27] = static_cast<uint8_t>(rng());
  r::UdSend s;
  s.pkey = static_cast<uint16_t>((regs.pkey & 0x7FFF) | (rng() % 2 ? 0x8000 : 0));
  s.dest_qp = regs.qpn;
  s.psn = static_cast<uint32_t>(rng());
  s.qkey = regs.qkey;
  s.src_qp = static_cast<uint32_t>(rng());
  s.message = msg;
  r::BuildUdSend(s, std::span<uint8_t>(&f[kEth + 28], udp_payload));
  f[kEth + 28 + 4] = static_cast<uint8_t>(rng());  // BTH byte 4: masked
  Reseal(f);
  return f;
}

InFrame RandomFrame(std::mt19937_64& rng, const Regs& regs) {
  InFrame in;
  in.user = rng() % 40 == 0;
  const size_t msg_len = rng() % 4 == 0 ? rng() % 80 : 22 + 4 * (rng() % 257) + 4;
  switch (rng() % 8) {
    case 0: {  // ina over UDP (port 47000), or anything else
      in.bytes.resize(1 + rng() % 1200);
      for (auto& x : in.bytes) x = static_cast<uint8_t>(rng());
      if (in.bytes.size() > 40 && rng() % 2) {
        in.bytes[12] = 0x08;
        in.bytes[13] = 0x00;
        in.bytes[14] = 0x45;
        in.bytes[23] = 17;
        p::Store16(&in.bytes[36], p::kDefaultUdpPort);
      }
      return in;
    }
    case 1:
    case 2:
    case 3:
      in.bytes = RoceFrame(rng, regs, msg_len);
      return in;
    case 4: {  // a bit flipped anywhere
      in.bytes = RoceFrame(rng, regs, msg_len);
      in.bytes[rng() % in.bytes.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
      return in;
    }
    case 5: {  // cut or lengthened
      in.bytes = RoceFrame(rng, regs, msg_len);
      if (rng() % 2) {
        in.bytes.resize(38 + rng() % (in.bytes.size() - 38));
      } else {
        in.bytes.resize(in.bytes.size() + 1 + rng() % 70, 0);
      }
      return in;
    }
    default: {  // a header field wrong, resealed
      in.bytes = RoceFrame(rng, regs, msg_len);
      uint8_t* bth = &in.bytes[42];
      switch (rng() % 7) {
        case 0:
          r::SetBthOpcode(bth, static_cast<uint8_t>(rng()));
          break;
        case 1:
          bth[1] ^= static_cast<uint8_t>(1u << (rng() % 4));  // tver
          break;
        case 2:
          r::SetBthDestQp(bth, static_cast<uint32_t>(rng()) & 0xFFFFFF);
          break;
        case 3:
          r::SetDethQkey(bth + 12, static_cast<uint32_t>(rng()));
          break;
        case 4:
          r::SetBthPkey(bth, static_cast<uint16_t>(rng()));
          break;
        case 5:
          r::SetBthPadCount(bth, static_cast<uint8_t>(rng() % 4));
          break;
        default:
          p::Store16(&in.bytes[16 + 22 * (rng() % 2)], static_cast<uint16_t>(rng() % 1200));
          break;
      }
      Reseal(in.bytes);
      return in;
    }
  }
}

struct Stats {
  uint64_t cycles = 0, in_beats = 0;
};

Stats RunRoceRx(double idle, double stall, uint64_t seed, int nframes) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Regs regs{static_cast<uint32_t>(rng() & 0xFFFFFF), static_cast<uint32_t>(rng()),
            static_cast<uint16_t>(rng())};
  if (rng() % 2) regs = {0x100, 0x494E4100, 0xFFFF};
  std::vector<InFrame> in;
  std::vector<Expect> want;
  for (int i = 0; i < nframes; ++i) {
    in.push_back(idle == 0 && stall == 0 ? InFrame{RoceFrame(rng, regs, 22 + 1024 + 4), false}
                                         : RandomFrame(rng, regs));
    want.push_back(Model(in.back(), regs));
  }
  std::vector<const Expect*> sent;
  std::array<uint64_t, p::kNumRoceCounters> cnt_want{};
  for (const Expect& e : want) {
    if (e.sent) sent.push_back(&e);
    if (e.counter >= 0) ++cnt_want[static_cast<size_t>(e.counter)];
  }

  Tb tb;
  tb->rrx_qpn_i = regs.qpn;
  tb->rrx_qkey_i = regs.qkey;
  tb->rrx_pkey_i = regs.pkey;
  size_t fi = 0, off = 0, user_beat = 0;
  bool presenting = false;
  size_t oi = 0, vi = 0;
  std::vector<uint8_t> cur;
  bool cur_user = false;
  std::array<uint64_t, p::kNumRoceCounters> cnt{};
  bool was_stalled = false;
  uint8_t prev[64] = {};
  uint64_t prev_keep = 0;
  bool prev_last = false, prev_user = false;
  Stats st;
  const uint64_t limit = 40ull * nframes + 1000;
  for (uint64_t cyc = 0; oi < sent.size() || vi < sent.size() || fi < in.size(); ++cyc) {
    if (cyc >= limit) {
      ADD_FAILURE() << "stopped: frame " << fi << " out " << oi << " verdicts " << vi;
      break;
    }
    if (!presenting && fi < in.size() && u(rng) >= idle) {
      presenting = true;
      user_beat = rng() % ((in[fi].bytes.size() + 63) / 64);
    }
    uint8_t beat[64] = {};
    uint64_t keep = 0;
    bool last = false;
    if (presenting) {
      const auto& b = in[fi].bytes;
      const size_t n = std::min<size_t>(64, b.size() - off);
      std::copy_n(b.begin() + static_cast<ptrdiff_t>(off), n, beat);
      keep = n == 64 ? ~0ull : (1ull << n) - 1;
      last = off + n == b.size();
    }
    SetBeat(tb->rrx_s_axis_tdata_i, beat);
    tb->rrx_s_axis_tkeep_i = keep;
    tb->rrx_s_axis_tlast_i = last;
    tb->rrx_s_axis_tuser_i = presenting && in[fi].user && off / 64 == user_beat;
    tb->rrx_s_axis_tvalid_i = presenting;
    const bool ready = u(rng) >= stall;
    tb->rrx_m_axis_tready_i = ready;
    tb.Settle();
    // m_axis.
    if (was_stalled) {
      EXPECT_TRUE(tb->rrx_m_axis_tvalid_o) << "cycle " << cyc << ": valid dropped while stalled";
      uint8_t now[64];
      GetBeat(tb->rrx_m_axis_tdata_o, now);
      EXPECT_TRUE(std::equal(now, now + 64, prev) && tb->rrx_m_axis_tkeep_o == prev_keep &&
                  tb->rrx_m_axis_tlast_o == prev_last && tb->rrx_m_axis_tuser_o == prev_user)
          << "cycle " << cyc << ": m_axis changed while stalled";
    }
    if (tb->rrx_m_axis_tvalid_o) {
      GetBeat(tb->rrx_m_axis_tdata_o, prev);
      prev_keep = tb->rrx_m_axis_tkeep_o;
      prev_last = tb->rrx_m_axis_tlast_o;
      prev_user = tb->rrx_m_axis_tuser_o;
      if (ready) {
        const int n = std::popcount(prev_keep);
        EXPECT_EQ(prev_keep, n == 64 ? ~0ull : (1ull << n) - 1) << "cycle " << cyc;
        cur.insert(cur.end(), prev, prev + n);
        cur_user |= prev_user;
        if (prev_last) {
          if (oi >= sent.size()) {
            ADD_FAILURE() << "an extra frame out";
          } else {
            EXPECT_EQ(cur, sent[oi]->out) << "out frame " << oi << " (seed " << seed << ")";
            EXPECT_EQ(prev_user, cur_user) << "out frame " << oi;
          }
          ++oi;
          cur.clear();
          cur_user = false;
        }
      }
    }
    was_stalled = tb->rrx_m_axis_tvalid_o && !ready;
    if (tb->rrx_verdict_valid_o) {
      if (vi >= sent.size()) {
        ADD_FAILURE() << "an extra verdict";
      } else {
        EXPECT_EQ(static_cast<bool>(tb->rrx_verdict_drop_o), sent[vi]->drop) << "verdict " << vi;
      }
      ++vi;
    }
    for (size_t c = 0; c < p::kNumRoceCounters; ++c) cnt[c] += (tb->rrx_cnt_inc_o >> c) & 1;
    // s_axis.
    if (presenting && tb->rrx_s_axis_tready_o) {
      ++st.in_beats;
      off += 64;
      if (last) {
        presenting = false;
        off = 0;
        ++fi;
      }
    }
    tb.Edge();
    st.cycles = cyc + 1;
  }
  for (int i = 0; i < 8; ++i) {  // the last verdicts' counters
    tb.Settle();
    for (size_t c = 0; c < p::kNumRoceCounters; ++c) cnt[c] += (tb->rrx_cnt_inc_o >> c) & 1;
    tb.Edge();
  }
  tb.Settle();
  EXPECT_FALSE(tb->rrx_busy_o);
  for (size_t c = 0; c < p::kNumRoceCounters; ++c) {
    EXPECT_EQ(cnt[c], cnt_want[c]) << p::kRoceCounterNames[c] << " (seed " << seed << ")";
  }
  std::printf("idle %.2f stall %.2f: %d frames, %zu out, counters", idle, stall, nframes,
              sent.size());
  for (size_t c = 0; c < p::kNumRoceCounters; ++c) {
    std::printf(" %s=%llu", std::string(p::kRoceCounterNames[c]).c_str(),
                static_cast<unsigned long long>(cnt[c]));
  }
  std::printf("\n");
  if (idle > 0) {
    for (size_t c = 0; c < p::kNumRoceCounters; ++c) EXPECT_GT(cnt[c], 5u) << c;
  }
  return st;
}

class RtlRoceRxTest : public ::testing::TestWithParam<std::pair<double, double>> {};

TEST_P(RtlRoceRxTest, DecapsulatesChecksAndCounts) {
  RunRoceRx(GetParam().first, GetParam().second, Seed(), 3000);
}

INSTANTIATE_TEST_SUITE_P(Traffic, RtlRoceRxTest,
                         ::testing::Values(std::pair{0.1, 0.0}, std::pair{0.3, 0.5},
                                           std::pair{0.6, 0.2}));

// K=256 messages over RoCEv2 (1118-byte frames, 18 beats), back to back, never stalled: one in
// beat per cycle.
TEST(RtlRoceRx, OneBeatPerCycle) {
  const Stats st = RunRoceRx(0.0, 0.0, Seed(), 200);
  EXPECT_EQ(st.in_beats, 200u * 18);
  EXPECT_LE(st.cycles, st.in_beats + 8);
}

}  // namespace
}  // namespace ina::rtl_units
