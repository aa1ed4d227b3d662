// Known-answer vectors from proto/ina.toml, encoded to bytes by gen.py (Python's struct), decoded
// and re-encoded here through the generated C++ accessors.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ina/proto/crc32c.h"
#include "ina/proto/wire.h"
#include "kat_file.h"

namespace ina::proto {
namespace {

Header FromFields(const std::map<std::string, int64_t>& f) {
  Header h;
  h.version = static_cast<uint8_t>(f.at("version"));
  h.type = static_cast<uint8_t>(f.at("type"));
  h.flags = static_cast<uint8_t>(f.at("flags"));
  h.exp = static_cast<uint8_t>(f.at("exp"));
  h.next_exp = static_cast<uint8_t>(f.at("next_exp"));
  h.sec = static_cast<uint8_t>(f.at("sec"));
  h.job = static_cast<uint16_t>(f.at("job"));
  h.rank = static_cast<uint16_t>(f.at("rank"));
  h.slot = static_cast<uint16_t>(f.at("slot"));
  h.gen = static_cast<uint16_t>(f.at("gen"));
  h.count = static_cast<uint16_t>(f.at("count"));
  h.offset = static_cast<uint32_t>(f.at("offset"));
  h.aux = static_cast<uint16_t>(f.at("aux"));
  return h;
}

TEST(ProtoKat, VectorsExist) {
  auto kats = LoadKats();
  EXPECT_GE(kats.size(), 4u);
  for (const auto& k : kats) EXPECT_EQ(k.fields.size(), 13u) << k.name << ": every field named";
}

TEST(ProtoKat, DecodeMatchesFields) {
  for (const auto& k : LoadKats()) {
    SCOPED_TRACE(k.name);
    ASSERT_EQ(k.bytes.size(), MessageBytes(k.payload.size()));
    EXPECT_EQ(DecodeHeader(k.bytes.data()), FromFields(k.fields));
    EXPECT_EQ(LoadCrc(k.bytes.data() + k.bytes.size() - kCrcBytes), k.crc);
    EXPECT_TRUE(MessageCrcOk(k.bytes));
    for (size_t i = 0; i < k.payload.size(); ++i) {
      EXPECT_EQ(static_cast<int32_t>(Load32(k.bytes.data() + kHeaderBytes + 4 * i)), k.payload[i]);
    }
  }
}

TEST(ProtoKat, EncodeMatchesBytes) {
  for (const auto& k : LoadKats()) {
    SCOPED_TRACE(k.name);
    std::vector<uint8_t> out(MessageBytes(k.payload.size()), 0xEE);
    EncodeHeader(FromFields(k.fields), out.data());
    for (size_t i = 0; i < k.payload.size(); ++i) {
      Store32(out.data() + kHeaderBytes + 4 * i, static_cast<uint32_t>(k.payload[i]));
    }
    EXPECT_EQ(SealMessage(out.data(), out.size() - kCrcBytes), out.size());
    EXPECT_EQ(out, k.bytes);
  }
}

TEST(ProtoKat, SingleFieldAccessorsTouchOnlyTheirBytes) {
  uint8_t h[kHeaderBytes] = {};
  SetSlot(h, 0xA1B2);
  for (size_t i = 0; i < kHeaderBytes; ++i) {
    if (i == kSlotOffset)
      EXPECT_EQ(h[i], 0xA1);
    else if (i == kSlotOffset + 1)
      EXPECT_EQ(h[i], 0xB2);
    else
      EXPECT_EQ(h[i], 0) << "byte " << i;
  }
  EXPECT_EQ(GetSlot(h), 0xA1B2);
}

TEST(ProtoKat, TrailerIsLittleEndian) {
  uint8_t b[4];
  StoreCrc(b, 0x11223344u);
  EXPECT_EQ(b[0], 0x44);
  EXPECT_EQ(b[3], 0x11);
  EXPECT_EQ(LoadCrc(b), 0x11223344u);
  EXPECT_EQ(MessageBytes(0), kHeaderBytes + kCrcBytes);
  EXPECT_EQ(kMaxPacketBytes, MessageBytes(kMaxK, static_cast<uint8_t>(SecMode::kMac)));
}

TEST(ProtoKat, LayoutPutsPayloadAtFrameByte64) {
  EXPECT_EQ(kFramePrefixBytes + kHeaderBytes, kPayloadOffset);
  EXPECT_EQ(kPayloadOffset, 64u);
}

std::string Slurp(const char* path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ProtoDocs, CommittedTableIsUpToDate) {
  std::string gen = Slurp(INA_GEN_TABLE);
  ASSERT_FALSE(gen.empty());
  EXPECT_EQ(Slurp(INA_DOCS_TABLE), gen)
      << "docs/protocol_table.md is stale: copy " << INA_GEN_TABLE << " over it";
}

}  // namespace
}  // namespace ina::proto
