// Reading fields back from the flat one-line JSON objects ina-bench, ina-switchd and the testbed
// print ({"key": value, ...}, no nesting needed for the keys looked up). For tests and scripts'
// helpers, not a JSON parser: a key is found by its quoted name followed by ": ".
#pragma once

#include <cmath>
#include <cstdlib>
#include <string>

namespace ina::bench {

// The number after "key": ; NaN when the key is absent.
inline double JsonNumber(const std::string& line, const std::string& key) {
  const auto at = line.find("\"" + key + "\": ");
  if (at == std::string::npos) return std::nan("");
  return std::strtod(line.c_str() + at + key.size() + 4, nullptr);
}

// Whether "key": true appears.
inline bool JsonTrue(const std::string& line, const std::string& key) {
  return line.find("\"" + key + "\": true") != std::string::npos;
}

// The string after "key": ; empty when absent.
inline std::string JsonString(const std::string& line, const std::string& key) {
  const auto at = line.find("\"" + key + "\": \"");
  if (at == std::string::npos) return "";
  const auto from = at + key.size() + 5;
  return line.substr(from, line.find('"', from) - from);
}

}  // namespace ina::bench
