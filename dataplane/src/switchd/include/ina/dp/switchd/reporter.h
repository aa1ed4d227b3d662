// Printing the switch's stats (a SwitchStats snapshot, switch.h): the periodic line, the exit
// summary and the JSON lines scripts and tests parse. The switch itself prints nothing.
#pragma once

#include <cstdio>

#include "ina/dp/switchd/switch.h"

namespace ina::dp::switchd {

// "ina-switchd stats: t=1.0s rx=.. tx=.. rx_data=.. results=.. resends=.. dups=.. drops=..
// tx_errors=.. jobs=.." (drops: drop_foreign_src plus every engine drop cause).
void PrintStatsLine(const SwitchStats& s, std::FILE* out);
// A human summary (non-zero counters; per core too when there are several), then PrintJson.
void PrintSummary(const SwitchStats& s, std::FILE* out);
// With several cores a {"core_counters": [{...}, ...]} line; with --io dpdk a
// {"port_counters": [...]} line (per port: name, rx_frames, rx_other, rx_bad_csum, tx_frames,
// tx_dropped); then, always last, {"switch_counters": {...}} with every counter by name.
void PrintJson(const SwitchStats& s, std::FILE* out);

}  // namespace ina::dp::switchd
