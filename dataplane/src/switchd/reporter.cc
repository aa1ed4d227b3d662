// Printing switch stats (see ina/dp/switchd/reporter.h).
#include "ina/dp/switchd/reporter.h"

#include "ina/proto/wire.h"

namespace ina::dp::switchd {
namespace {

uint64_t Find(const NamedCounters& v, std::string_view name) {
  for (const auto& [n, x] : v) {
    if (n == name) return x;
  }
  return 0;
}

void PrintObject(const NamedCounters& v, std::FILE* out) {
  std::fprintf(out, "{");
  bool first = true;
  for (const auto& [name, value] : v) {
    std::fprintf(out, "%s\"%.*s\": %llu", first ? "" : ", ", static_cast<int>(name.size()),
                 name.data(), static_cast<unsigned long long>(value));
    first = false;
  }
  std::fprintf(out, "}");
}

}  // namespace

void PrintStatsLine(const SwitchStats& s, std::FILE* out) {
  uint64_t drops = Find(s.counters, "drop_foreign_src");
  for (size_t i = static_cast<size_t>(proto::Counter::kDropMalformed); i < proto::kNumCounters;
       ++i) {
    drops += Find(s.counters, proto::kCounterNames[i]);
  }
  auto u = [&](std::string_view n) { return static_cast<unsigned long long>(Find(s.counters, n)); };
  std::fprintf(out,
               "ina-switchd stats: t=%.1fs rx=%llu tx=%llu rx_data=%llu results=%llu "
               "resends=%llu dups=%llu drops=%llu tx_errors=%llu jobs=%zu\n",
               s.uptime_s, u("rx_datagrams"), u("tx_packets"), u("rx_data"), u("results"),
               u("result_resends"), u("duplicates"), static_cast<unsigned long long>(drops),
               u("tx_errors"), s.jobs_open);
}

void PrintSummary(const SwitchStats& s, std::FILE* out) {
  std::fprintf(out, "ina-switchd summary: %.1f s, engine %s, %zu job(s) still open\n", s.uptime_s,
               s.engine.c_str(), s.jobs_open);
  for (const auto& [name, value] : s.counters) {
    if (value != 0) {
      std::fprintf(out, "  %-18.*s %llu\n", static_cast<int>(name.size()), name.data(),
                   static_cast<unsigned long long>(value));
    }
  }
  if (s.per_core.size() > 1) {
    for (size_t c = 0; c < s.per_core.size(); ++c) {
      std::fprintf(out, "  core %zu: rx_datagrams %llu, rx_data %llu, results %llu, jobs %llu\n", c,
                   static_cast<unsigned long long>(Find(s.per_core[c], "rx_datagrams")),
                   static_cast<unsigned long long>(Find(s.per_core[c], "rx_data")),
                   static_cast<unsigned long long>(Find(s.per_core[c], "results")),
                   static_cast<unsigned long long>(Find(s.per_core[c], "jobs_admitted")));
    }
  }
  PrintJson(s, out);
}

void PrintJson(const SwitchStats& s, std::FILE* out) {
  if (s.per_core.size() > 1) {
    std::fprintf(out, "{\"core_counters\": [");
    for (size_t c = 0; c < s.per_core.size(); ++c) {
      if (c > 0) std::fprintf(out, ", ");
      PrintObject(s.per_core[c], out);
    }
    std::fprintf(out, "]}\n");
  }
  if (s.dpdk) {
    std::fprintf(out, "{\"port_counters\": [");
    bool first = true;
    for (const PortSnapshot& p : s.ports) {
      std::fprintf(out,
                   "%s{\"name\": \"%s\", \"rx_frames\": %llu, \"rx_other\": %llu, "
                   "\"rx_bad_csum\": %llu, \"tx_frames\": %llu, \"tx_dropped\": %llu}",
                   first ? "" : ", ", p.name.c_str(),
                   static_cast<unsigned long long>(p.stats.rx_frames),
                   static_cast<unsigned long long>(p.stats.rx_other),
                   static_cast<unsigned long long>(p.stats.rx_bad_csum),
                   static_cast<unsigned long long>(p.stats.tx_packets),
                   static_cast<unsigned long long>(p.stats.tx_dropped));
      first = false;
    }
    std::fprintf(out, "]}\n");
  }
  std::fprintf(out, "{\"switch_counters\": ");
  PrintObject(s.counters, out);
  std::fprintf(out, "}\n");
}

}  // namespace ina::dp::switchd
