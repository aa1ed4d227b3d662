// Known-answer vectors from proto/ina.toml, encoded to bytes by gen.py (Python's struct), decoded
// and re-encoded here through the generated C++ accessors.
#include <gtest/gtest.h>

#include <algorithm>
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
  h.type = static_cast<MsgType>(f.at("type"));
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

// Each vector read through its type's typed message (generated from the type's `view`) and
// written back: the same header, the same bytes. A typed message changes names, never bytes.
// A typed message writes this protocol's version: a vector of another version (error_bad_version)
// comes back with it, every other byte the same.
template <class Msg>
void ExpectTypedRoundTrip(const Kat& k) {
  Header h = DecodeHeader(k.bytes.data());
  h.version = kVersion;
  const Msg m = Msg::Decode(k.bytes.data());
  EXPECT_EQ(m.ToHeader(), h);
  std::vector<uint8_t> out(kHeaderBytes, 0xEE);
  m.Encode(out.data());
  EXPECT_EQ(out[kVersionOffset], kVersion);
  EXPECT_TRUE(std::equal(out.begin() + 1, out.end(), k.bytes.begin() + 1));
}

TEST(ProtoKat, TypedMessagesReencodeTheVectorsByteForByte) {
  int typed = 0;
  for (const auto& k : LoadKats()) {
    SCOPED_TRACE(k.name);
    switch (GetType(k.bytes.data())) {
      case MsgType::kData:
        ExpectTypedRoundTrip<DataMsg>(k);
        break;
      case MsgType::kResult:
        ExpectTypedRoundTrip<ResultMsg>(k);
        break;
      case MsgType::kJoin:
        ExpectTypedRoundTrip<JoinMsg>(k);
        break;
      case MsgType::kJoinAck:
        ExpectTypedRoundTrip<JoinAckMsg>(k);
        break;
      case MsgType::kError:
        ExpectTypedRoundTrip<ErrorMsg>(k);
        break;
      case MsgType::kHelloAck:
        ExpectTypedRoundTrip<HelloAckMsg>(k);
        EXPECT_EQ(HelloAckMsg::Decode(k.bytes.data()).core_ports, 4);
        EXPECT_EQ(HelloAckMsg::Decode(k.bytes.data()).max_k, 2048);
        break;
      default:
        ADD_FAILURE() << "a vector of type " << MsgTypeName(GetType(k.bytes.data()))
                      << ": add its typed message here";
        continue;
    }
    ++typed;
  }
  EXPECT_GE(typed, 6);
}

// The names a type gives the fields land in the fields the spec maps them to.
TEST(ProtoKat, TypedMessageNamesMapToTheSpecsFields) {
  uint8_t h[kHeaderBytes] = {};
  JoinMsg{.rejoin_epoch = 9,
          .job = 7,
          .rank = 2,
          .lane = 1,
          .lanes = 3,
          .k = 256,
          .window = 64,
          .world_size = 5}
      .Encode(h);
  EXPECT_EQ(GetVersion(h), kVersion);
  EXPECT_EQ(GetType(h), MsgType::kJoin);
  EXPECT_EQ(GetExp(h), 9);
  EXPECT_EQ(GetJob(h), 7);
  EXPECT_EQ(GetRank(h), 2);
  EXPECT_EQ(GetSlot(h), 1);
  EXPECT_EQ(GetGen(h), 3);
  EXPECT_EQ(GetCount(h), 256);
  EXPECT_EQ(GetOffset(h), 64u);
  EXPECT_EQ(GetAux(h), 5);

  JoinAckMsg{.epoch = 4, .k = 512, .window = 32, .lease = 100}.Encode(h);
  EXPECT_EQ(GetType(h), MsgType::kJoinAck);
  EXPECT_EQ(GetGen(h), 4);
  EXPECT_EQ(GetCount(h), 512);
  EXPECT_EQ(GetOffset(h), 32u);
  EXPECT_EQ(GetAux(h), 100);

  LeaveMsg{.calls = 12, .reason = 4}.Encode(h);
  EXPECT_EQ(GetType(h), MsgType::kLeave);
  EXPECT_EQ(GetOffset(h), 12u);
  EXPECT_EQ(GetAux(h), 4);

  AllocJobMsg{.hint = 0x1234, .nonce = 0xBEEF}.Encode(h);
  EXPECT_EQ(GetJob(h), 0x1234);
  EXPECT_EQ(GetGen(h), 0xBEEF);

  ResultMsg{.dest_rank = kRankAll}.Encode(h);
  EXPECT_EQ(GetRank(h), kRankAll);

  // The error message: the code in aux, each code's names on the fields the spec gives them.
  ErrorMsg{.code = ErrorCode::kPeerRefused}
      .set_join_param(JoinParam::kWindow)
      .set_refused_rank(6)
      .set_refused_value(99)
      .Encode(h);
  EXPECT_EQ(GetAux(h), static_cast<uint16_t>(ErrorCode::kPeerRefused));
  EXPECT_EQ(GetSlot(h), static_cast<uint16_t>(JoinParam::kWindow));
  EXPECT_EQ(GetCount(h), 6);
  EXPECT_EQ(GetOffset(h), 99u);
  const ErrorMsg e = ErrorMsg::Decode(h);
  EXPECT_EQ(e.code, ErrorCode::kPeerRefused);
  EXPECT_EQ(e.join_param(), JoinParam::kWindow);
  EXPECT_EQ(e.refused_rank(), 6);
  EXPECT_EQ(e.refused_value(), 99u);
  const ErrorMsg m = ErrorMsg{}.set_mismatch_slot(3).set_mismatch_gen(8).set_proving_rank(1);
  EXPECT_EQ(m.slot, 3);
  EXPECT_EQ(m.gen, 8);
  EXPECT_EQ(m.count, 1);
  EXPECT_EQ(ErrorMsg{}.set_left_rank(2).set_calls(40).offset, 40u);
}

// A type byte that names no message type reads as itself and names "unknown".
TEST(ProtoKat, UnknownTypeBytesStayThemselves) {
  uint8_t h[kHeaderBytes] = {};
  h[kTypeOffset] = 0xEE;
  EXPECT_EQ(static_cast<uint8_t>(GetType(h)), 0xEE);
  EXPECT_EQ(MsgTypeName(GetType(h)), "unknown");
  EXPECT_FALSE(IsType(h, MsgType::kData));
  Header x = DecodeHeader(h);
  uint8_t out[kHeaderBytes] = {};
  EncodeHeader(x, out);
  EXPECT_EQ(out[kTypeOffset], 0xEE);
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
