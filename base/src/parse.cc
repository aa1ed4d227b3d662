#include "ina/base/parse.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ina {
namespace {

Status Bad(std::string_view what, std::string_view text, const std::string& want) {
  return InvalidArgument(std::string(what) + "='" + std::string(text) + "': not " + want);
}

// strtoull over the whole text (base 10, or 16 after 0x); false for anything else.
bool Digits(std::string_view text, unsigned long long* out) {
  if (text.empty() || text[0] == '-' || text[0] == '+' || text[0] == ' ') return false;
  const std::string s(text);
  const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  if (hex && (s[2] == '-' || s[2] == '+' || s[2] == ' ')) return false;
  errno = 0;
  char* end = nullptr;
  *out = std::strtoull(hex ? s.c_str() + 2 : s.c_str(), &end, hex ? 16 : 10);
  return errno == 0 && end != s.c_str() + (hex ? 2 : 0) && *end == '\0';
}

}  // namespace

Result<long long> ParseInt(std::string_view what, std::string_view text, long long lo,
                           long long hi) {
  const std::string want = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  const bool negative = !text.empty() && text[0] == '-';
  unsigned long long mag = 0;
  if (!Digits(negative ? text.substr(1) : text, &mag)) return Bad(what, text, want);
  long long v;
  if (negative) {
    if (mag > static_cast<unsigned long long>(INT64_MAX) + 1) return Bad(what, text, want);
    v = mag == static_cast<unsigned long long>(INT64_MAX) + 1 ? INT64_MIN
                                                              : -static_cast<long long>(mag);
  } else {
    if (mag > static_cast<unsigned long long>(INT64_MAX)) return Bad(what, text, want);
    v = static_cast<long long>(mag);
  }
  if (v < lo || v > hi) return Bad(what, text, want);
  return v;
}

Result<uint64_t> ParseUint(std::string_view what, std::string_view text, uint64_t lo, uint64_t hi) {
  unsigned long long v = 0;
  if (!Digits(text, &v) || v < lo || v > hi) {
    return Bad(what, text,
               "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return static_cast<uint64_t>(v);
}

Result<double> ParseReal(std::string_view what, std::string_view text, double lo, double hi) {
  const std::string s(text);
  errno = 0;
  char* end = nullptr;
  const double x = s.empty() || s[0] == ' ' ? NAN : std::strtod(s.c_str(), &end);
  // end stays null when strtod was not called (empty, or a leading space strtod would skip).
  if (end == nullptr || errno != 0 || *end != '\0' || !std::isfinite(x) || x < lo || x > hi) {
    char range[64];
    std::snprintf(range, sizeof(range), "a number in [%g, %g]", lo, hi);
    return Bad(what, text, range);
  }
  return x;
}

Result<bool> ParseBool(std::string_view what, std::string_view text) {
  if (text == "1" || text == "on" || text == "true") return true;
  if (text == "0" || text == "off" || text == "false") return false;
  return Bad(what, text, "0 or 1 (off or on)");
}

}  // namespace ina
