// The one parser of numbers from text that every program's Config uses (command-line flags and
// INA_* environment overrides alike), so that a bad value is refused the same way everywhere:
// InvalidArgument naming what was being parsed, the text, and what was wanted, e.g.
//   "--slots='12x': not an integer in [1, 1048576]".
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ina/base/status.h"

namespace ina {

// The whole of `text` as an integer in [lo, hi]: decimal, or hexadecimal with a 0x prefix; an
// optional leading '-' (only where lo < 0). No spaces, no trailing characters.
Result<long long> ParseInt(std::string_view what, std::string_view text, long long lo,
                           long long hi);
// The same for unsigned values up to UINT64_MAX (seeds). A '-' is refused.
Result<uint64_t> ParseUint(std::string_view what, std::string_view text, uint64_t lo, uint64_t hi);
// A finite real in [lo, hi] (probabilities).
Result<double> ParseReal(std::string_view what, std::string_view text, double lo, double hi);
// 0 or 1 (also "off"/"on", "false"/"true").
Result<bool> ParseBool(std::string_view what, std::string_view text);

// An environment override through ParseInt / ParseUint, errors naming the variable: when `var` is
// set (empty counts as set, and is refused as any malformed value) *field gets its value in
// [lo, hi]; when unset *field keeps what it holds.
template <typename T>
Status EnvInt(const char* var, long long lo, long long hi, T* field) {
  const char* v = std::getenv(var);
  if (v == nullptr) return Status::Ok();
  INA_ASSIGN_OR_RETURN(long long x, ParseInt(var, v, lo, hi));
  *field = static_cast<T>(x);
  return Status::Ok();
}
inline Status EnvUint(const char* var, uint64_t lo, uint64_t hi, uint64_t* field) {
  const char* v = std::getenv(var);
  if (v == nullptr) return Status::Ok();
  INA_ASSIGN_OR_RETURN(*field, ParseUint(var, v, lo, hi));
  return Status::Ok();
}

}  // namespace ina
