// Command-line parsing for the switch loop (see ina/dp/switchd/config.h).
#include "ina/dp/switchd/config.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string_view>

namespace ina::dp::switchd {
namespace {

Status Bad(std::string_view flag, std::string_view want, std::string_view got) {
  return InvalidArgument(std::string(flag) + ": expected " + std::string(want) + ", got '" +
                         std::string(got) + "'");
}

Result<uint64_t> ParseUint(std::string_view flag, const std::string& v, uint64_t lo, uint64_t hi) {
  const std::string want = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (v.empty() || v[0] == '-' || v[0] == '+' || v[0] == ' ') return Bad(flag, want, v);
  errno = 0;
  char* end = nullptr;
  const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || x < lo || x > hi) return Bad(flag, want, v);
  return static_cast<uint64_t>(x);
}

Result<double> ParseRate(std::string_view flag, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const double x = v.empty() ? -1 : std::strtod(v.c_str(), &end);
  if (v.empty() || errno != 0 || *end != '\0' || !std::isfinite(x) || x < 0 || x > 1) {
    return Bad(flag, "a probability in [0, 1]", v);
  }
  return x;
}

}  // namespace

std::string Usage(const EngineMenu& engines) {
  return std::string(
             "usage: ina-switchd [flags]\n"
             "  --bind ADDR              address to listen on (default 127.0.0.1)\n"
             "  --port P                 UDP port (default 47000; 0 = ephemeral)\n"
             "  --engine E               aggregation engine: ") +
         std::string(engines.names) + " (default " + std::string(engines.default_name) + ")\n" +
         "  --slots N                slot pool size (default 16384)\n"
         "  --max-jobs N             jobs at once (default 256)\n"
         "  --job-timeout-ms T       free a job idle this long (default 30000)\n"
         "  --stats-interval-ms T    print a stats line every T ms (default 0 = off)\n"
         "  --drop-rate p            drop each received and each sent packet with probability p\n"
         "  --dup-rate p             duplicate each received and each sent packet with prob. p\n"
         "  --reorder-rate p         delay each received and each sent packet behind the next\n"
         "                           burst with probability p\n"
         "  --corrupt-rate p         flip one byte of each received and each sent packet with\n"
         "                           probability p\n"
         "  --seed s                 fault injection RNG seed (default 1)\n"
         "  --cores N                loop threads (default 1; > 1 needs --io udp): each owns a\n"
         "                           socket on the address and the jobs steered to it (job % N)\n"
         "  --io udp|dpdk            packet I/O (default udp; dpdk when built)\n"
         "  --dpdk \"EAL ARGS\"        DPDK EAL arguments; implies --io dpdk. Every probed port\n"
         "                           (--vdev net_memif..., net_af_packet...) is a switch port;\n"
         "                           --bind must then be the switch's IPv4 address, --port != 0\n"
         "  --dpdk-backoff-us U      idle poll back-off ceiling in us (default 1000)\n"
         "  --help                   this text\n"
         "On start it prints its configuration, then 'ina-switchd listening on ADDR:PORT'.\n"
         "SIGINT/SIGTERM: prints a summary and a last JSON line {\"switch_counters\": {...}},\n"
         "exits 0.\n";
}

Result<Config> ParseArgs(const std::vector<std::string>& args, const EngineMenu& engines) {
  Config c;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    bool has_value = false;
    if (const size_t eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_value = true;
    }
    if (flag == "--help" || flag == "-h") {
      c.help = true;
      continue;
    }
    static const char* const kFlags[] = {"--bind",
                                         "--port",
                                         "--engine",
                                         "--slots",
                                         "--max-jobs",
                                         "--job-timeout-ms",
                                         "--stats-interval-ms",
                                         "--drop-rate",
                                         "--dup-rate",
                                         "--reorder-rate",
                                         "--corrupt-rate",
                                         "--cores",
                                         "--seed",
                                         "--io",
                                         "--dpdk",
                                         "--dpdk-backoff-us"};
    bool known = false;
    for (const char* f : kFlags) known = known || flag == f;
    if (!known) return InvalidArgument("unknown flag '" + args[i] + "' (see --help)");
    if (!has_value) {
      if (i + 1 >= args.size()) return InvalidArgument(flag + ": missing value");
      value = args[++i];
    }
    if (flag == "--bind") {
      in_addr a4;
      in6_addr a6;
      if (inet_pton(AF_INET, value.c_str(), &a4) != 1 &&
          inet_pton(AF_INET6, value.c_str(), &a6) != 1) {
        return Bad(flag, "an IPv4 or IPv6 address", value);
      }
      c.bind = value;
    } else if (flag == "--port") {
      INA_ASSIGN_OR_RETURN(c.port, ParseUint(flag, value, 0, 65535));
    } else if (flag == "--engine") {
      bool ok = false;
      const std::string_view names = engines.names;
      for (size_t s = 0; s <= names.size();) {
        size_t e = names.find('|', s);
        if (e == std::string_view::npos) e = names.size();
        ok = ok || names.substr(s, e - s) == value;
        s = e + 1;
      }
      if (!ok) return Bad(flag, "one of " + std::string(names), value);
      c.engine = value;
    } else if (flag == "--slots") {
      INA_ASSIGN_OR_RETURN(c.slots, ParseUint(flag, value, 1, kMaxSlots));
    } else if (flag == "--max-jobs") {
      INA_ASSIGN_OR_RETURN(c.max_jobs, ParseUint(flag, value, 1, kMaxJobs));
    } else if (flag == "--job-timeout-ms") {
      INA_ASSIGN_OR_RETURN(c.job_timeout_ms, ParseUint(flag, value, 1, 86400000));
    } else if (flag == "--stats-interval-ms") {
      INA_ASSIGN_OR_RETURN(c.stats_interval_ms, ParseUint(flag, value, 0, 86400000));
    } else if (flag == "--drop-rate") {
      INA_ASSIGN_OR_RETURN(c.drop_rate, ParseRate(flag, value));
    } else if (flag == "--dup-rate") {
      INA_ASSIGN_OR_RETURN(c.dup_rate, ParseRate(flag, value));
    } else if (flag == "--reorder-rate") {
      INA_ASSIGN_OR_RETURN(c.reorder_rate, ParseRate(flag, value));
    } else if (flag == "--corrupt-rate") {
      INA_ASSIGN_OR_RETURN(c.corrupt_rate, ParseRate(flag, value));
    } else if (flag == "--cores") {
      INA_ASSIGN_OR_RETURN(c.cores, ParseUint(flag, value, 1, kMaxCores));
    } else if (flag == "--seed") {
      INA_ASSIGN_OR_RETURN(c.seed, ParseUint(flag, value, 0, UINT64_MAX));
    } else if (flag == "--io") {
      if (value != "udp" && value != "dpdk") return Bad(flag, "udp or dpdk", value);
      c.io = value;
    } else if (flag == "--dpdk") {
      c.dpdk_eal = value;
      c.io = "dpdk";
    } else if (flag == "--dpdk-backoff-us") {
      INA_ASSIGN_OR_RETURN(c.dpdk_backoff_us, ParseUint(flag, value, 0, 1000000));
    }
  }
  if (c.io == "dpdk") {
    in_addr a4;
    if (inet_pton(AF_INET, c.bind.c_str(), &a4) != 1 || a4.s_addr == 0) {
      return Bad("--bind", "the switch's IPv4 address with --io dpdk", c.bind);
    }
    if (c.port == 0) return Bad("--port", "a fixed port (not 0) with --io dpdk", "0");
    if (c.cores != 1) {
      return Bad("--cores", "1 with --io dpdk (one RSS queue per core is a follow-up)",
                 std::to_string(c.cores));
    }
  }
  if (c.engine.empty()) c.engine = std::string(engines.default_name);
  return c;
}

void PrintConfig(const Config& c, std::string_view engine_description, std::FILE* out) {
  std::fprintf(out, "ina-switchd config:\n");
  std::fprintf(out, "  bind = %s\n  port = %u\n", c.bind.c_str(), c.port);
  std::fprintf(out, "  engine = %s [%.*s]\n", c.engine.c_str(),
               static_cast<int>(engine_description.size()), engine_description.data());
  std::fprintf(out, "  slots = %u\n  max_jobs = %u\n", c.slots, c.max_jobs);
  std::fprintf(out, "  job_timeout_ms = %u\n  stats_interval_ms = %u\n", c.job_timeout_ms,
               c.stats_interval_ms);
  std::fprintf(out, "  drop_rate = %g\n  dup_rate = %g\n  reorder_rate = %g\n", c.drop_rate,
               c.dup_rate, c.reorder_rate);
  std::fprintf(out, "  corrupt_rate = %g\n  cores = %u\n", c.corrupt_rate, c.cores);
  std::fprintf(out, "  seed = %llu\n", static_cast<unsigned long long>(c.seed));
  std::fprintf(out, "  io = %s\n", c.io.c_str());
  if (c.io == "dpdk") {
    std::fprintf(out, "  dpdk = %s\n  dpdk_backoff_us = %u\n", c.dpdk_eal.c_str(),
                 c.dpdk_backoff_us);
  }
}

}  // namespace ina::dp::switchd
