// The known-answer vectors (kat.txt, bytes encoded by gen.py with Python's struct) through the RTL
// header parser: every field ina_ingress decodes must equal the vector's field value, so the
// SystemVerilog view of the wire format is checked against the same answers as the C++ one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "ina/proto/wire.h"
#include "kat_file.h"
#include "units_tb.h"

namespace ina::rtl_units {
namespace {

namespace p = proto;

TEST(RtlIngressKat, DecodesKnownAnswerVectors) {
  const auto kats = p::LoadKats();
  ASSERT_GE(kats.size(), 4u);
  Tb tb;
  tb->ing_pay_ready_i = 1;
  tb->ing_desc_ready_i = 1;
  for (const auto& k : kats) {
    SCOPED_TRACE(k.name);
    // Beat 0: 42 bytes of Ethernet/IPv4/UDP (zeros: the core does not parse them) + the ina
    // header; then the payload, 64 bytes a beat.
    std::vector<uint8_t> frame(p::kFramePrefixBytes, 0);
    frame.insert(frame.end(), k.bytes.begin(), k.bytes.end());
    const size_t beats = (frame.size() + 63) / 64;
    frame.resize(beats * 64, 0);
    bool got_desc = false;
    for (size_t b = 0; b < beats; ++b) {
      const bool last = b + 1 == beats;
      const size_t bytes_in_beat = last ? (p::kFramePrefixBytes + k.bytes.size()) - 64 * b : 64;
      tb->ing_s_axis_tvalid_i = 1;
      SetBeat(tb->ing_s_axis_tdata_i, frame.data() + 64 * b);
      tb->ing_s_axis_tkeep_i = bytes_in_beat == 64 ? ~0ull : (1ull << bytes_in_beat) - 1;
      tb->ing_s_axis_tlast_i = last;
      tb->ing_s_axis_tuser_i = 0;
      tb.Settle();
      ASSERT_TRUE(tb->ing_s_axis_tready_o);
      if (tb->ing_desc_valid_o) {
        ASSERT_TRUE(last) << "descriptor before the frame's last beat";
        const Desc d = UnpackDesc(tb->ing_desc_o);
        EXPECT_EQ(d.version, k.fields.at("version"));
        EXPECT_EQ(d.mtype, k.fields.at("type"));
        EXPECT_EQ(d.flags, k.fields.at("flags"));
        EXPECT_EQ(d.exp, k.fields.at("exp"));
        EXPECT_EQ(d.next_exp, k.fields.at("next_exp"));
        EXPECT_EQ(d.sec, k.fields.at("sec"));
        EXPECT_EQ(d.job, k.fields.at("job"));
        EXPECT_EQ(d.rank, k.fields.at("rank"));
        EXPECT_EQ(d.slot, k.fields.at("slot"));
        EXPECT_EQ(d.gen, k.fields.at("gen"));
        EXPECT_EQ(d.count, k.fields.at("count"));
        EXPECT_EQ(d.offset, k.fields.at("offset"));
        EXPECT_EQ(d.frame_bytes, p::kFramePrefixBytes + k.bytes.size());
        got_desc = true;
      }
      tb.Edge();
    }
    EXPECT_TRUE(got_desc) << "no descriptor for the vector";
  }
  tb->ing_s_axis_tvalid_i = 0;
}

}  // namespace
}  // namespace ina::rtl_units
