// Reads the known-answer vectors gen.py writes (kat.txt): one line per vector, its bytes as hex
// (encoded by Python's struct, independently of the C++ and SystemVerilog views) and its field
// values; each message ends with its CRC32C trailer (crc=). Shared by the C++ decoder test and the
// RTL ingress test.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace ina::proto {

struct Kat {
  std::string name;
  std::vector<uint8_t> bytes;
  std::map<std::string, int64_t> fields;
  std::vector<int32_t> payload;
  uint32_t crc = 0;  // the trailer's value (the message's last 4 bytes, little-endian)
};

inline std::vector<uint8_t> FromHex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// REQUIRES: path names a kat.txt; a test failure (not a crash) if it cannot be read.
inline std::vector<Kat> LoadKats(const char* path = INA_KAT_FILE) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::vector<Kat> kats;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    Kat k;
    std::string hex, tok;
    ss >> k.name >> hex;
    k.bytes = FromHex(hex);
    while (ss >> tok) {
      auto eq = tok.find('=');
      std::string key = tok.substr(0, eq), val = tok.substr(eq + 1);
      if (key == "payload") {
        std::istringstream vs(val);
        std::string v;
        while (std::getline(vs, v, ',')) k.payload.push_back(static_cast<int32_t>(std::stoll(v)));
      } else if (key == "crc") {
        k.crc = static_cast<uint32_t>(std::stoul(val, nullptr, 16));
      } else {
        k.fields[key] = std::stoll(val);
      }
    }
    kats.push_back(std::move(k));
  }
  return kats;
}

}  // namespace ina::proto
