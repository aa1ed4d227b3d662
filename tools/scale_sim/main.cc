// ina-scale-sim: one all-reduce (ina through one or two levels of switches, or the ring) of one
// or several jobs on a SimGrid flow-level model (model.h), printed as one JSON line. Sweeps run
// it once per point (SimGrid's engine is once per process): scripts/scale-sim.sh, docs/scale.md.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ina/proto/wire.h"
#include "model.h"

namespace {

using ina::scalesim::Algo;
using ina::scalesim::Config;

bool ParseDouble(const std::string& s, double* out) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || errno != 0 || *end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool ParseInt(const std::string& s, int64_t* out) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

// tc's rate syntax: 100mbit, 1gbit, 12.5mbps, or plain bit/s.
bool ParseRate(const std::string& s, double* out) {
  static const struct {
    const char* unit;
    double mult;
  } kUnits[] = {{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1},
                {"gbps", 8e9}, {"mbps", 8e6}, {"kbps", 8e3}, {"bps", 8}};
  for (const auto& u : kUnits) {
    const size_t n = std::strlen(u.unit);
    if (s.size() > n && s.compare(s.size() - n, n, u.unit) == 0) {
      double v = 0;
      if (!ParseDouble(s.substr(0, s.size() - n), &v)) return false;
      *out = v * u.mult;
      return true;
    }
  }
  return ParseDouble(s, out);
}

struct Flag {
  const char* name;
  const char* help;
  std::function<bool(const std::string&)> set;
};

void Usage(const std::vector<Flag>& flags, FILE* f) {
  std::fprintf(f, "usage: ina-scale-sim [--flag value]...\n");
  for (const Flag& fl : flags) std::fprintf(f, "  --%-16s %s\n", fl.name, fl.help);
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  auto int_flag = [](int* dst) {
    return [dst](const std::string& v) {
      int64_t x = 0;
      if (!ParseInt(v, &x) || x < -1000000000 || x > 1000000000) return false;
      *dst = static_cast<int>(x);
      return true;
    };
  };
  auto us_flag = [](double* dst) {
    return [dst](const std::string& v) {
      double x = 0;
      if (!ParseDouble(v, &x)) return false;
      *dst = x * 1e-6;
      return true;
    };
  };
  const std::vector<Flag> flags = {
      {"algo", "ina | ring (default ina)",
       [&](const std::string& v) {
         if (v != "ina" && v != "ring") return false;
         c.algo = v == "ina" ? Algo::kIna : Algo::kRing;
         return true;
       }},
      {"workers", "workers per job (default 8)", int_flag(&c.workers)},
      {"jobs", "jobs at once, same size each (default 1)", int_flag(&c.jobs)},
      {"leaf-size", "workers per leaf switch; 0 = one flat switch (default 0)",
       int_flag(&c.leaf_size)},
      {"placement", "packed | spread over the leaves (default packed)",
       [&](const std::string& v) {
         if (v != "packed" && v != "spread") return false;
         c.spread = v == "spread";
         return true;
       }},
      {"rate", "worker link rate, tc syntax (default 100mbit)",
       [&](const std::string& v) { return ParseRate(v, &c.rate_bps); }},
      {"oversub", "leaf uplink oversubscription (default 1)",
       [&](const std::string& v) { return ParseDouble(v, &c.oversub); }},
      {"elements", "4-byte elements per all-reduce (default 1048576)",
       [&](const std::string& v) {
         int64_t x = 0;
         if (!ParseInt(v, &x)) return false;
         c.elements = x;
         return true;
       }},
      {"dtype", "float | int32 (default float: with the exponent round)",
       [&](const std::string& v) {
         if (v != "float" && v != "int32") return false;
         c.int32 = v == "int32";
         return true;
       }},
      {"k", "elements per data frame (default 256)", int_flag(&c.k)},
      {"window", "ina slots in flight (default 256)", int_flag(&c.window)},
      {"overhead", "wire bytes per frame besides it (default 24)", int_flag(&c.overhead)},
      {"hop-latency-us", "per link crossed (default 1)", us_flag(&c.hop_latency_s)},
      {"host-cost-us", "ina: per packet at a worker (default 0)", us_flag(&c.host_cost_s)},
      {"switch-cost-us", "ina: per packet arriving at a switch, one CPU per switch (default 0)",
       us_flag(&c.switch_cost_s)},
      {"ring-step-us", "ring: per step (default 0)", us_flag(&c.ring_step_s)},
      {"mss", "ring: TCP payload bytes per segment (default 1448)", int_flag(&c.mss)},
      {"tcp-header", "ring: header bytes per TCP segment (default 66)", int_flag(&c.tcp_header)},
      {"acks", "ring: 1 models delayed ACKs, 0 not (default 1)",
       [&](const std::string& v) {
         if (v != "0" && v != "1") return false;
         c.acks = v == "1";
         return true;
       }},
      {"tcp-efficiency", "ring: goodput / line rate of its TCP, (0, 1] (default 1)",
       [&](const std::string& v) { return ParseDouble(v, &c.tcp_efficiency); }},
      {"max-chunks", "ina: most simulated chunks per worker (default 256)",
       int_flag(&c.max_chunks)},
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      Usage(flags, stdout);
      return 0;
    }
    const Flag* f = nullptr;
    for (const Flag& fl : flags) {
      if (a == std::string("--") + fl.name) f = &fl;
    }
    if (f == nullptr) {
      std::fprintf(stderr, "ina-scale-sim: unknown option '%s' (see --help)\n", a.c_str());
      return 2;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "ina-scale-sim: %s wants a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    if (!f->set(v)) {
      std::fprintf(stderr, "ina-scale-sim: bad value '%s' for %s (%s)\n", v.c_str(), a.c_str(),
                   f->help);
      return 2;
    }
  }
  if (const std::string err = ina::scalesim::Validate(c); !err.empty()) {
    std::fprintf(stderr, "ina-scale-sim: %s\n", err.c_str());
    return 2;
  }
  std::fprintf(stderr,
               "ina-scale-sim: algo=%s workers=%d jobs=%d leaf_size=%d placement=%s rate_bps=%.0f "
               "oversub=%g elements=%lld dtype=%s k=%d window=%d overhead=%d hop_latency_us=%g "
               "host_cost_us=%g switch_cost_us=%g ring_step_us=%g mss=%d tcp_header=%d acks=%d "
               "tcp_efficiency=%g "
               "max_chunks=%d "
               "data_frame_bytes=%zu\n",
               c.algo == Algo::kIna ? "ina" : "ring", c.workers, c.jobs, c.leaf_size,
               c.spread ? "spread" : "packed", c.rate_bps, c.oversub,
               static_cast<long long>(c.elements), c.int32 ? "int32" : "float", c.k, c.window,
               c.overhead, c.hop_latency_s * 1e6, c.host_cost_s * 1e6, c.switch_cost_s * 1e6,
               c.ring_step_s * 1e6, c.mss, c.tcp_header, c.acks ? 1 : 0, c.tcp_efficiency,
               c.max_chunks, ina::proto::kFramePrefixBytes + ina::proto::MessageBytes(c.k));

  const auto t0 = std::chrono::steady_clock::now();
  const ina::scalesim::Result r = ina::scalesim::RunModel(c);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double worst = 0;
  std::string jobs = "[";
  for (size_t j = 0; j < r.job_s.size(); ++j) {
    worst = std::max(worst, r.job_s[j]);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.4f", j ? "," : "", r.job_s[j] * 1e3);
    jobs += buf;
  }
  jobs += "]";
  std::printf(
      "{\"algo\":\"%s\",\"levels\":%d,\"workers\":%d,\"jobs\":%d,\"leaf_size\":%d,"
      "\"placement\":\"%s\",\"oversub\":%g,\"rate_bps\":%.0f,\"elements\":%lld,\"bytes\":%lld,"
      "\"time_ms\":%.4f,\"job_ms\":%s,\"bound_ms\":%.4f,\"wire_bytes_per_worker\":%.0f,"
      "\"chunk_packets\":%lld,\"window_chunks\":%lld,\"window_limited\":%s,\"items\":%lld,"
      "\"sim_wall_s\":%.3f}\n",
      c.algo == Algo::kIna ? "ina" : "ring", r.levels, c.workers, c.jobs, c.leaf_size,
      c.spread ? "spread" : "packed", c.oversub, c.rate_bps, static_cast<long long>(c.elements),
      static_cast<long long>(4 * c.elements), worst * 1e3, jobs.c_str(), r.bound_s * 1e3,
      r.wire_bytes, static_cast<long long>(r.chunk_packets),
      static_cast<long long>(r.window_chunks),
      c.algo == Algo::kIna && ina::scalesim::WindowLimited(c, r.levels) ? "true" : "false",
      static_cast<long long>(r.items), wall);
  return 0;
}
