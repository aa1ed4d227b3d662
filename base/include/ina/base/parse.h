// The one parser of numbers from text that every program's Config uses (command-line flags and
// INA_* environment overrides alike), so that a bad value is refused the same way everywhere:
// InvalidArgument naming what was being parsed, the text, and what was wanted, e.g.
//   "--slots='12x': not an integer in [1, 1048576]".
#pragma once

#include <cstdint>
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

}  // namespace ina
