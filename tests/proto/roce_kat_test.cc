// The RoCEv2 codec (ina/proto/roce.h, roce_wire.h) against known-answer packets gen.py builds from
// proto/ina.toml: whole IPv4 datagrams whose ICRC Python's zlib.crc32 computed, independently of
// the C++ CRC. Parse, rebuild and the ICRC's coverage (masked fields vs covered fields).
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ina/proto/roce.h"
#include "ina/proto/wire.h"
#include "kat_file.h"

namespace ina::proto::roce {
namespace {

struct RoceKat {
  std::string name;
  std::vector<uint8_t> packet;  // IPv4 datagram with its ICRC
  std::map<std::string, std::string> fields;
  int64_t Num(const std::string& k) const { return std::stoll(fields.at(k), nullptr, 0); }
};

std::vector<RoceKat> LoadRoceKats() {
  std::ifstream in(INA_ROCE_KAT_FILE);
  EXPECT_TRUE(in.good()) << "cannot open " << INA_ROCE_KAT_FILE;
  std::vector<RoceKat> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    RoceKat k;
    std::string hex, kv;
    ss >> k.name >> hex;
    k.packet = FromHex(hex);
    while (ss >> kv) {
      const size_t eq = kv.find('=');
      k.fields[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    out.push_back(std::move(k));
  }
  return out;
}

std::vector<uint8_t> InaMessage(const std::string& kat_name) {
  for (const auto& k : LoadKats()) {
    if (k.name == kat_name) return k.bytes;
  }
  ADD_FAILURE() << "no [[kat]] named " << kat_name;
  return {};
}

TEST(RoceCrc, MatchesZlibCheckValue) {
  // zlib.crc32(b"123456789") == 0xCBF43926, the standard CRC-32 check value.
  const uint8_t s[] = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
  EXPECT_EQ(~Crc32Update(0xFFFFFFFFu, s, sizeof s), 0xCBF43926u);
}

TEST(RoceKat, VectorsExist) { EXPECT_GE(LoadRoceKats().size(), 2u); }

TEST(RoceKat, IcrcMatchesPythonZlib) {
  for (const auto& k : LoadRoceKats()) {
    SCOPED_TRACE(k.name);
    EXPECT_EQ(ComputeIcrc(k.packet), static_cast<uint32_t>(k.Num("icrc")));
    EXPECT_TRUE(IcrcOk(k.packet));
  }
}

TEST(RoceKat, ParseGivesTheFieldsAndTheInaMessage) {
  for (const auto& k : LoadRoceKats()) {
    if (k.fields.count("captured")) continue;
    SCOPED_TRACE(k.name);
    std::span<const uint8_t> udp_payload(k.packet);
    udp_payload = udp_payload.subspan(kIpv4Bytes + kUdpBytes);
    UdSend s;
    ASSERT_EQ(ParseUdSend(udp_payload, &s), ParseError::kOk);
    EXPECT_EQ(s.opcode, k.Num("opcode"));
    EXPECT_EQ(s.pkey, k.Num("pkey"));
    EXPECT_EQ(s.dest_qp, k.Num("dest_qp"));
    EXPECT_EQ(s.psn, k.Num("psn"));
    EXPECT_EQ(s.qkey, static_cast<uint32_t>(k.Num("qkey")));
    EXPECT_EQ(s.src_qp, k.Num("src_qp"));
    const auto msg = InaMessage(k.fields.at("kat"));
    EXPECT_EQ(std::vector<uint8_t>(s.message.begin(), s.message.end()), msg);
    EXPECT_EQ(GetBthPadCount(udp_payload.data()), k.Num("pad_count"));
  }
}

TEST(RoceKat, BuildReproducesThePacketAndItsIcrc) {
  for (const auto& k : LoadRoceKats()) {
    if (k.fields.count("captured")) continue;
    SCOPED_TRACE(k.name);
    const auto msg = InaMessage(k.fields.at("kat"));
    UdSend s;
    s.pkey = static_cast<uint16_t>(k.Num("pkey"));
    s.dest_qp = static_cast<uint32_t>(k.Num("dest_qp"));
    s.psn = static_cast<uint32_t>(k.Num("psn"));
    s.qkey = static_cast<uint32_t>(k.Num("qkey"));
    s.src_qp = static_cast<uint32_t>(k.Num("src_qp"));
    s.message = msg;
    std::vector<uint8_t> pkt(kIpv4Bytes + kUdpBytes + 2048);
    const size_t n = BuildUdSend(s, std::span(pkt).subspan(kIpv4Bytes + kUdpBytes));
    ASSERT_GT(n, 0u);
    in_addr src{}, dst{};
    ASSERT_EQ(inet_pton(AF_INET, k.fields.at("src_ip").c_str(), &src), 1);
    ASSERT_EQ(inet_pton(AF_INET, k.fields.at("dst_ip").c_str(), &dst), 1);
    BuildIpv4Udp(src.s_addr, dst.s_addr, static_cast<uint16_t>(k.Num("src_port")), kUdpPort,
                 static_cast<uint16_t>(k.Num("ip_id")), n, pkt.data());
    pkt.resize(kIpv4Bytes + kUdpBytes + n);
    StoreIcrc(pkt.data() + pkt.size() - kIcrcBytes, ComputeIcrc(pkt));
    ASSERT_EQ(pkt.size(), k.packet.size());
    for (size_t i = 0; i < pkt.size(); ++i) {
      if (i == 8 || i == 10 || i == 11) continue;  // TTL, IP checksum: BuildIpv4Udp leaves 64, 0
      EXPECT_EQ(pkt[i], k.packet[i]) << "byte " << i;
    }
  }
}

// Packets rxe (the kernel's soft-RoCE) sent, captured in the VM by roce_reflector: its ICRC is
// checked by the C++ codec here and by Python's zlib in gen.py, and the ina message is intact. The
// capture predates the CRC32C trailer: its message is protocol version 1 (header and payload only).
TEST(RoceKat, CapturedFromRxeParseAndCheck) {
  int captured = 0;
  for (const auto& k : LoadRoceKats()) {
    if (!k.fields.count("captured")) continue;
    SCOPED_TRACE(k.name);
    ++captured;
    EXPECT_TRUE(IcrcOk(k.packet));
    UdSend s;
    ASSERT_EQ(ParseUdSend(std::span(k.packet).subspan(kIpv4Bytes + kUdpBytes), &s),
              ParseError::kOk);
    ASSERT_GE(s.message.size(), kHeaderBytes);
    EXPECT_EQ(GetVersion(s.message.data()), 1);
    EXPECT_EQ(s.message.size(), kHeaderBytes + size_t{GetCount(s.message.data())} * kElemBytes);
  }
  EXPECT_GE(captured, 1);
}

TEST(RoceIcrc, MaskedFieldsAreNotCoveredOthersAre) {
  const auto kats = LoadRoceKats();
  ASSERT_FALSE(kats.empty());
  const std::vector<uint8_t> base = kats[0].packet;
  for (size_t i : {1u, 8u, 10u, 11u, 26u, 27u, 32u}) {  // TOS TTL csum csum udpcsum udpcsum resv8a
    auto p = base;
    p[i] ^= 0x5A;
    EXPECT_TRUE(IcrcOk(p)) << "byte " << i << " is masked";
  }
  // Every other byte before the ICRC is covered, and so is the ICRC itself.
  for (size_t i = 0; i < base.size(); ++i) {
    if (i == 1 || i == 8 || i == 10 || i == 11 || i == 26 || i == 27 || i == 32) continue;
    auto p = base;
    p[i] ^= 0x01;
    EXPECT_FALSE(IcrcOk(p)) << "byte " << i << " is covered";
  }
}

TEST(RoceParse, RejectsShortWrongOpcodeBadPad) {
  const auto kats = LoadRoceKats();
  ASSERT_FALSE(kats.empty());
  std::vector<uint8_t> udp(kats[0].packet.begin() + kIpv4Bytes + kUdpBytes, kats[0].packet.end());
  UdSend s;
  EXPECT_EQ(ParseUdSend(std::span(udp).first(kUdOverheadBytes - 1), &s), ParseError::kShort);
  auto op = udp;
  SetBthOpcode(op.data(), kOpUcWriteOnlyImm);
  EXPECT_EQ(ParseUdSend(op, &s), ParseError::kOpcode);
  auto tv = udp;
  SetBthTver(tv.data(), 1);
  EXPECT_EQ(ParseUdSend(tv, &s), ParseError::kTver);
  std::vector<uint8_t> empty(udp.begin(), udp.begin() + kUdOverheadBytes);
  SetBthPadCount(empty.data(), 3);
  EXPECT_EQ(ParseUdSend(empty, &s), ParseError::kPad);
  EXPECT_FALSE(IcrcOk(std::span(kats[0].packet).first(30)));
}

}  // namespace
}  // namespace ina::proto::roce
