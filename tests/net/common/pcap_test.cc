// The pcap codec: what PcapWriter writes PcapReader reads back (frames, lengths, nanosecond
// timestamps); files of the other byte order and microsecond timestamps (as tcpdump writes them)
// are read; bad input (pcapng, unknown magic, another link type, records cut short or too long)
// is refused with an error that says what and where.
#include "ina/net/pcap.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

namespace ina::net {
namespace {

std::string Tmp(const std::string& name) { return ::testing::TempDir() + "/pcap_test_" + name; }

void WriteBytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(b.data(), 1, b.size(), f), b.size());
  std::fclose(f);
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::vector<uint8_t> b;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return b;
  for (int c; (c = std::fgetc(f)) != EOF;) b.push_back(static_cast<uint8_t>(c));
  std::fclose(f);
  return b;
}

TEST(Pcap, RoundTrip) {
  const std::string path = Tmp("rt.pcap");
  std::vector<std::vector<uint8_t>> frames = {{1, 2, 3}, {}, std::vector<uint8_t>(1500, 0xab)};
  {
    auto w = PcapWriter::Create(path);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (size_t i = 0; i < frames.size(); ++i) {
      ASSERT_TRUE((*w)->Write(frames[i], 1'700'000'000'123'456'789ull + i).ok());
    }
    EXPECT_EQ((*w)->records(), 3u);
  }
  EXPECT_EQ(ReadBytes(path).size(), 24u + 3 * 16 + 3 + 0 + 1500);
  auto r = PcapReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  PcapRecord rec;
  for (size_t i = 0; i < frames.size(); ++i) {
    auto more = (*r)->Next(&rec);
    ASSERT_TRUE(more.ok() && *more) << i;
    EXPECT_EQ(rec.frame, frames[i]);
    EXPECT_EQ(rec.orig_len, frames[i].size());
    EXPECT_EQ(rec.ts_ns, 1'700'000'000'123'456'789ull + i);
  }
  auto end = (*r)->Next(&rec);
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(*end);
  std::remove(path.c_str());
}

// A big-endian, microsecond file, byte by byte as such a writer lays it out.
TEST(Pcap, ReadsTheOtherByteOrderAndMicroseconds) {
  const std::string path = Tmp("be.pcap");
  WriteBytes(path, {0xa1, 0xb2, 0xc3, 0xd4, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0,  //
                    0,    0,    0xff, 0xff, 0, 0, 0, 1,                          //
                    0,    0,    0,    5,    0, 0, 0, 7, 0, 0, 0, 2, 0, 0, 0, 60, 0xde, 0xad});
  auto r = PcapReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  PcapRecord rec;
  auto more = (*r)->Next(&rec);
  ASSERT_TRUE(more.ok() && *more);
  EXPECT_EQ(rec.ts_ns, 5'000'007'000u);
  EXPECT_EQ(rec.orig_len, 60u);
  EXPECT_EQ(rec.frame, (std::vector<uint8_t>{0xde, 0xad}));
  std::remove(path.c_str());
}

TEST(Pcap, BadInputIsRefusedWithAClearError) {
  const std::string path = Tmp("bad.pcap");
  auto open_error = [&](const std::vector<uint8_t>& bytes) {
    WriteBytes(path, bytes);
    auto r = PcapReader::Open(path);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_NE(open_error({}).find("not a pcap file"), std::string::npos);
  EXPECT_NE(open_error({0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0}).find("pcapng"), std::string::npos);
  EXPECT_NE(open_error({'h', 'e', 'l', 'l', 'o'}).find("magic"), std::string::npos);
  EXPECT_NE(open_error({0xd4, 0xc3, 0xb2, 0xa1, 2, 0}).find("header cut short"), std::string::npos);
  std::vector<uint8_t> raw_ip = {0xd4, 0xc3, 0xb2, 0xa1, 2,    0,    4, 0, 0,   0, 0, 0,
                                 0,    0,    0,    0,    0xff, 0xff, 0, 0, 101, 0, 0, 0};
  EXPECT_NE(open_error(raw_ip).find("link type 101"), std::string::npos);
  EXPECT_NE(open_error({}).find(path), std::string::npos) << "the error names the file";
  EXPECT_FALSE(PcapReader::Open(Tmp("none.pcap")).ok());

  // Records: cut short, and longer than the snaplen.
  {
    auto w = PcapWriter::Create(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Write(std::vector<uint8_t>(100, 1), 1).ok());
    ASSERT_TRUE((*w)->Write(std::vector<uint8_t>(100, 2), 2).ok());
  }
  std::vector<uint8_t> b = ReadBytes(path);
  b.resize(b.size() - 10);
  WriteBytes(path, b);
  auto r = PcapReader::Open(path);
  ASSERT_TRUE(r.ok());
  PcapRecord rec;
  ASSERT_TRUE((*r)->Next(&rec).ok());
  auto cut = (*r)->Next(&rec);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("record 2 at byte 140"), std::string::npos)
      << cut.status().message();
  EXPECT_NE(cut.status().message().find("cut short"), std::string::npos);
  b.resize(24 + 16);
  b[24 + 8] = 0xff;  // captured length 0x000000ff... over the snaplen 65535
  b[24 + 9] = 0xff;
  b[24 + 10] = 0x01;
  WriteBytes(path, b);
  r = PcapReader::Open(path);
  ASSERT_TRUE(r.ok());
  auto big = (*r)->Next(&rec);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("exceeds the snaplen"), std::string::npos);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ina::net
