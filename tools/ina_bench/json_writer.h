// The one-line JSON objects ina-bench prints ({"key": value, ...}, read back by json_line.h and
// the scripts): keys in insertion order, strings escaped, numbers in the printf format the caller
// gives (so that a figure keeps its precision), nested objects passed in as JSON text.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace ina::bench {

class JsonObject {
 public:
  JsonObject& Int(std::string_view key, long long v) { return Raw(key, std::to_string(v)); }
  JsonObject& Uint(std::string_view key, unsigned long long v) {
    return Raw(key, std::to_string(v));
  }
  // `fmt` formats one double, e.g. "%.4f" or "%g".
  JsonObject& Num(std::string_view key, double v, const char* fmt = "%g") {
    char buf[64];
    std::snprintf(buf, sizeof(buf), fmt, v);
    return Raw(key, buf);
  }
  JsonObject& Bool(std::string_view key, bool v) { return Raw(key, v ? "true" : "false"); }
  JsonObject& Str(std::string_view key, std::string_view v) { return Raw(key, Quote(v)); }
  JsonObject& StrList(std::string_view key, const std::vector<std::string>& v) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + Quote(v[i]);
    return Raw(key, out + "]");
  }
  // REQUIRES: json is a complete JSON value.
  JsonObject& Raw(std::string_view key, std::string_view json) {
    body_ += body_.empty() ? "" : ", ";
    body_ += Quote(key);
    body_ += ": ";
    body_ += json;
    return *this;
  }
  std::string str() const { return "{" + body_ + "}"; }

  static std::string Quote(std::string_view s) {
    std::string out = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out += buf;
      } else {
        out += c;
      }
    }
    return out + "\"";
  }

 private:
  std::string body_;
};

}  // namespace ina::bench
