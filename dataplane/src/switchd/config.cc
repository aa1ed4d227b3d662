// The switch loop's flags (see ina/dp/switchd/config.h): one table, from which the parser, --help
// and the start-up print are made.
#include "ina/dp/switchd/config.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string_view>

#include "ina/base/parse.h"
#include "ina/dp/switchd/metrics.h"
#include "ina/net/port.h"
#include "ina/proto/wire.h"

namespace ina::dp::switchd {
namespace {

Status Bad(std::string_view flag, std::string_view want, std::string_view got) {
  return InvalidArgument(std::string(flag) + "='" + std::string(got) + "': not " +
                         std::string(want));
}

struct Flag {
  const char* name;   // "--slots"
  const char* value;  // placeholder in --help and the docs ("N")
  std::string help;   // '\n' starts a continuation line
  const char* key;    // the config print's name; nullptr: not printed (--dpdk sets io too)
  const char* env;    // an INA_* variable that sets it when the flag is absent, or nullptr
  bool rtl_only;      // ina-rtlsim's (EngineMenu::rtl)
  // Sets the field from `v`; `what` names the flag or the variable in errors.
  std::function<Status(Config&, std::string_view what, const std::string& v)> set;
  std::function<std::string(const Config&)> show;
};

template <typename T>
Flag UintFlag(const char* name, const char* value, std::string help, const char* key,
              T Config::*field, uint64_t lo, uint64_t hi, const char* env = nullptr) {
  return {name,
          value,
          std::move(help),
          key,
          env,
          false,
          [=](Config& c, std::string_view what, const std::string& v) -> Status {
            INA_ASSIGN_OR_RETURN(uint64_t x, ParseUint(what, v, lo, hi));
            c.*field = static_cast<T>(x);
            return Status::Ok();
          },
          [=](const Config& c) { return std::to_string(c.*field); }};
}

// A file name (any non-empty string).
Flag PathFlag(const char* name, std::string help, const char* key, std::string Config::*field,
              bool rtl_only) {
  return {name,
          "FILE",
          std::move(help),
          key,
          nullptr,
          rtl_only,
          [=](Config& c, std::string_view what, const std::string& v) -> Status {
            if (v.empty()) return Bad(what, "a file name", v);
            c.*field = v;
            return Status::Ok();
          },
          [=](const Config& c) { return c.*field; }};
}

// A probability in [0, 1], or in [0, 1) for the rtl flags (`rtl_only`).
Flag RateFlag(const char* name, std::string help, const char* key, double Config::*field,
              const char* env = nullptr, bool rtl_only = false) {
  return {name,
          "p",
          std::move(help),
          key,
          env,
          rtl_only,
          [=](Config& c, std::string_view what, const std::string& v) -> Status {
            auto x = ParseReal(what, v, 0, 1);
            if (rtl_only && (!x.ok() || *x >= 1)) return Bad(what, "a number in [0, 1)", v);
            if (!x.ok()) return x.status();
            c.*field = *x;
            return Status::Ok();
          },
          [=](const Config& c) {
            char b[32];
            std::snprintf(b, sizeof(b), "%g", c.*field);
            return std::string(b);
          }};
}

std::vector<Flag> Flags(const EngineMenu& engines) {
  const std::string names(engines.names);
  const std::string slots_help =
      engines.fixed_slots != 0
          ? "slot pool size: fixed at " + std::to_string(engines.fixed_slots) +
                " by this program's engine"
          : "slot pool size (default 16384, 1 .. " + std::to_string(kMaxSlots) + ")";
  std::vector<Flag> f = {
      {"--bind", "ADDR", "address to listen on (default 127.0.0.1)", "bind", nullptr, false,
       [](Config& c, std::string_view what, const std::string& v) -> Status {
         in_addr a4;
         in6_addr a6;
         if (inet_pton(AF_INET, v.c_str(), &a4) != 1 && inet_pton(AF_INET6, v.c_str(), &a6) != 1) {
           return Bad(what, "an IPv4 or IPv6 address", v);
         }
         c.bind = v;
         return Status::Ok();
       },
       [](const Config& c) { return c.bind; }},
      UintFlag("--port", "P", "UDP port (default 47000; 0 = ephemeral)", "port", &Config::port, 0,
               65535),
      {"--engine", "E",
       "aggregation engine: " + names + " (default " + std::string(engines.default_name) + ")",
       "engine", nullptr, false,
       [names](Config& c, std::string_view what, const std::string& v) -> Status {
         bool ok = false;
         const std::string_view all = names;
         for (size_t s = 0; s <= all.size();) {
           size_t e = all.find('|', s);
           if (e == std::string_view::npos) e = all.size();
           ok = ok || all.substr(s, e - s) == v;
           s = e + 1;
         }
         if (!ok) return Bad(what, "one of " + names, v);
         c.engine = v;
         return Status::Ok();
       },
       [](const Config& c) { return c.engine; }},
      UintFlag("--slots", "N", slots_help, "slots", &Config::slots, 1, kMaxSlots),
      UintFlag("--max-jobs", "N", "jobs at once (default 256, 1 .. 4096)", "max_jobs",
               &Config::max_jobs, 1, kMaxJobs),
      UintFlag("--job-timeout-ms", "T", "free a job idle this long (default 30000)",
               "job_timeout_ms", &Config::job_timeout_ms, 1, 86400000),
      UintFlag("--min-window", "N",
               "least window a job is admitted with when the pool is shared\n(default 8; a job "
               "asking fewer gets what it asks)",
               "min_window", &Config::min_window, 1, 65535),
      UintFlag("--lease-calls", "N",
               "all-reduce calls a grant lasts before the ranks re-join for\na new fair share "
               "(default 64; 0 = until the job ends)",
               "lease_calls", &Config::lease_calls, 0, 65535),
      UintFlag("--idle-release-ms", "T",
               "ask a job that sent no data for T ms to release its grant\nwhile another job "
               "waits for slots (default 2000; 0 = never)",
               "idle_release_ms", &Config::idle_release_ms, 0, 86400000),
      UintFlag("--stats-interval-ms", "T", "print a stats line every T ms (default 0 = off)",
               "stats_interval_ms", &Config::stats_interval_ms, 0, 86400000),
      RateFlag("--drop-rate", "drop each received and each sent packet with probability p",
               "drop_rate", &Config::drop_rate),
      RateFlag("--dup-rate", "duplicate each received and each sent packet with prob. p",
               "dup_rate", &Config::dup_rate),
      RateFlag("--reorder-rate",
               "delay each received and each sent packet behind the next\nburst with probability p",
               "reorder_rate", &Config::reorder_rate),
      RateFlag("--corrupt-rate",
               "flip one byte of each received and each sent packet with\nprobability p",
               "corrupt_rate", &Config::corrupt_rate),
      UintFlag("--seed", "s", "fault injection RNG seed (default 1)", "seed", &Config::seed, 0,
               UINT64_MAX),
      UintFlag("--cores", "N",
               "loop threads (default 1): each owns the jobs j % N and a\nsocket on the address "
               "(--io udp) or every N-th DPDK port",
               "cores", &Config::cores, 1, kMaxCores),
      UintFlag("--core-ports", "0|1",
               "1 gives core c its own port, --port + c, for workers\nwith lanes on switch cores "
               "(INA_SWITCH_CORES): one job on\nevery core (default 0); --io dpdk: queue c of "
               "every port",
               "core_ports", &Config::core_ports, 0, 1),
      {"--io", "udp|dpdk|roce",
       "packet I/O (default udp; dpdk when built); roce: RoCEv2 UD\nSENDs on --bind:4791 (a raw "
       "socket: CAP_NET_RAW), docs/rdma.md",
       "io", nullptr, false,
       [](Config& c, std::string_view what, const std::string& v) -> Status {
         if (v != "udp" && v != "dpdk" && v != "roce") return Bad(what, "udp, dpdk or roce", v);
         c.io = v;
         return Status::Ok();
       },
       [](const Config& c) { return c.io; }},
      UintFlag("--roce-qpn", "N", "--io roce: the switch's QP number (default 256 = 0x100)",
               "roce_qpn", &Config::roce_qpn, 2, 0xFFFFFF),
      UintFlag("--roce-qkey", "N", "--io roce: the Q_Key (default 1229865216 = 0x494E4100)",
               "roce_qkey", &Config::roce_qkey, 0, 0xFFFFFFFF),
      UintFlag("--socket-buffer-bytes", "B",
               "--io udp: SO_RCVBUF/SO_SNDBUF request (default 8388608; 0:\nthe kernel's)",
               "socket_buffer_bytes", &Config::socket_buffer_bytes, 0, 1u << 30),
      {"--udp-gso", "0|1", "--io udp: GSO trains out, GRO in (default 1; env INA_UDP_GSO)",
       "udp_gso", "INA_UDP_GSO", false,
       [](Config& c, std::string_view what, const std::string& v) -> Status {
         INA_ASSIGN_OR_RETURN(c.udp_gso, ParseBool(what, v));
         return Status::Ok();
       },
       [](const Config& c) { return std::string(c.udp_gso ? "1" : "0"); }},
      {"--dpdk", "\"EAL ARGS\"",
       "DPDK EAL arguments; implies --io dpdk (with --io roce: RoCE\nover DPDK). Every probed "
       "port (--vdev net_memif...,\nnet_af_packet..., -a PCI) is a switch port; --bind must "
       "then\nbe the switch's IPv4 address, --port != 0 (roce: 4791)",
       "dpdk", nullptr, false,
       [](Config& c, std::string_view, const std::string& v) -> Status {
         c.dpdk_eal = v;
         if (c.io != "roce") c.io = "dpdk";
         return Status::Ok();
       },
       [](const Config& c) { return c.dpdk_eal; }},
      UintFlag("--dpdk-backoff-us", "U", "idle poll back-off ceiling in us (default 1000)",
               "dpdk_backoff_us", &Config::dpdk_backoff_us, 0, 1000000),
      UintFlag("--dpdk-mtu", "M",
               "DPDK ports' IP MTU, 576 .. 9000 (default 1500; 9000: jumbo\nframes, K up to 2048)",
               "dpdk_mtu", &Config::dpdk_mtu, 576, 9000),
      RateFlag("--rtl-idle",
               "probability of an idle input cycle of the core (default 0;\nenv INA_RTLSIM_IDLE)",
               "rtl_idle", &Config::rtl_idle, "INA_RTLSIM_IDLE", true),
      RateFlag("--rtl-stall",
               "probability of a low output ready of the core (default 0;\nenv INA_RTLSIM_STALL)",
               "rtl_stall", &Config::rtl_stall, "INA_RTLSIM_STALL", true),
      {"--upstream", "ADDR:PORT",
       "be a leaf of two-level aggregation under the spine switch at\nADDR:PORT "
       "(docs/hierarchy.md; --io udp; --cores N needs --core-ports 1:\ncore c goes to the "
       "spine's core c at PORT + c)",
       "upstream", nullptr, false,
       [](Config& c, std::string_view what, const std::string& v) -> Status {
         if (!net::ParseEndpoint(v).ok()) return Bad(what, "IPv4:PORT or [IPv6]:PORT", v);
         c.upstream = v;
         return Status::Ok();
       },
       [](const Config& c) { return c.upstream; }},
      UintFlag("--leaf-index", "I", "--upstream: this leaf's rank on the spine (default 0)",
               "leaf_index", &Config::leaf_index, 0, 63),
      UintFlag("--leaves", "L",
               "--upstream: leaves under the spine (default 1); leaf I serves\nthe ranks r "
               "with floor(r L / N) == I",
               "leaves", &Config::leaves, 1, 64),
      UintFlag("--upstream-core-ports", "0|1",
               "--upstream with --cores N --core-ports 1: 1 (default), core c\nto the spine's "
               "core c at PORT + c; 0, every core to PORT as\nlane c of N (a spine of any "
               "cores)",
               "upstream_core_ports", &Config::upstream_core_ports, 0, 1),
      {"--metrics", "ADDR:PORT",
       "serve Prometheus metrics over HTTP at http://ADDR:PORT/metrics\n(docs/switchd.md; "
       "e.g. 127.0.0.1:9470; port 0: ephemeral)",
       "metrics", nullptr, false,
       [](Config& c, std::string_view what, const std::string& v) -> Status {
         if (!ParseListenEndpoint(v).ok()) return Bad(what, "IPv4:PORT or [IPv6]:PORT", v);
         c.metrics = v;
         return Status::Ok();
       },
       [](const Config& c) { return c.metrics.empty() ? std::string("off") : c.metrics; }},
      PathFlag("--record",
               "write every datagram received to FILE (pcap, Ethernet/IPv4/UDP\nframes; --cores 1)",
               "record", &Config::record, false),
      PathFlag("--admin-key-file",
               "the admin channel's secret (hex; mode 0600): operators install\njob keys "
               "with SET_KEY messages sealed under it (docs/security.md)",
               "admin_key_file", &Config::admin_key_file, false),
      PathFlag("--upstream-admin-key-file",
               "--upstream with --admin-key-file: the spine's admin secret; keys\ninstalled "
               "here are passed on to the spine, and acknowledged once\nit has them "
               "(docs/hierarchy.md, \"Keyed jobs\")",
               "upstream_admin_key_file", &Config::upstream_admin_key_file, false),
      {"--require-job-keys", "0|1",
       "1: refuse every JOIN whose job has no key (error unauthorized;\ndocs/security.md; "
       "default 0)",
       "require_job_keys", nullptr, false,
       [](Config& c, std::string_view what, const std::string& v) -> Status {
         INA_ASSIGN_OR_RETURN(c.require_job_keys, ParseBool(what, v));
         return Status::Ok();
       },
       [](const Config& c) { return std::string(c.require_job_keys ? "1" : "0"); }},
      PathFlag("--trace", "FST waveform of the core to FILE (docs/rtl/debugging.md)", "rtl_trace",
               &Config::rtl_trace, true),
      UintFlag("--trace-from", "CYCLE", "first traced cycle (default 0)", "rtl_trace_from",
               &Config::rtl_trace_from, 0, UINT64_MAX),
      UintFlag("--trace-cycles", "N", "cycles traced (default 0 = to the end)", "rtl_trace_cycles",
               &Config::rtl_trace_cycles, 0, UINT64_MAX),
      PathFlag("--replay",
               "replay the frames of a pcap through the core and the reference\n"
               "engine side by side (no serving), report any difference",
               "replay", &Config::replay, true),
      PathFlag("--out", "--replay: write the core's result frames to FILE (pcap)", "replay_out",
               &Config::replay_out, true),
  };
  for (const char* rtl : {"--trace-from", "--trace-cycles"}) {
    for (Flag& flag : f) {
      if (std::string_view(flag.name) == rtl) flag.rtl_only = true;
    }
  }
  std::vector<Flag> out;
  for (auto& flag : f) {
    if (!flag.rtl_only || engines.rtl) out.push_back(std::move(flag));
  }
  return out;
}

// Checks across flags, after all were read.
Status Validate(Config& c, const EngineMenu& engines) {
  if (c.io == "dpdk") {
    in_addr a4;
    if (inet_pton(AF_INET, c.bind.c_str(), &a4) != 1 || a4.s_addr == 0) {
      return Bad("--bind", "the switch's IPv4 address with --io dpdk", c.bind);
    }
    if (c.port == 0) return Bad("--port", "a fixed port (not 0) with --io dpdk", "0");
  }
  if (c.io == "roce") {
    in_addr a4;
    if (inet_pton(AF_INET, c.bind.c_str(), &a4) != 1 || a4.s_addr == 0) {
      return Bad("--bind", "the switch's IPv4 address with --io roce (it is in every ICRC)",
                 c.bind);
    }
    if (c.cores != 1 && c.dpdk_eal.empty()) {
      return Bad("--cores", "1 with --io roce over raw sockets (--dpdk: several)",
                 std::to_string(c.cores));
    }
    c.port = 4791;  // RoCEv2's port, whatever --port said
  }
  if (c.uses_eal() && c.cores > kMaxDpdkCores) {
    return Bad("--cores", "at most " + std::to_string(kMaxDpdkCores) + " with DPDK ports",
               std::to_string(c.cores));
  }
  if (!c.upstream.empty()) {
    if (c.cores != 1 && c.core_ports == 0) {
      return Bad("--cores",
                 "1 with --upstream (a leaf) unless --core-ports 1 (core c to the spine's core c)",
                 std::to_string(c.cores));
    }
    if (auto up = net::ParseEndpoint(c.upstream);
        up.ok() && c.upstream_core_ports != 0 &&
        uint32_t{net::EndpointPort(*up)} + c.cores - 1 > 65535) {
      return Bad("--upstream",
                 "a spine port of at most " + std::to_string(65536 - c.cores) + " with --cores " +
                     std::to_string(c.cores) + " (core c goes to the spine's port + c)",
                 c.upstream);
    }
    if (c.upstream_core_ports == 0 && c.cores > proto::kMaxLanes) {
      return Bad("--cores",
                 "at most " + std::to_string(proto::kMaxLanes) +
                     " with --upstream-core-ports 0 (each core is a lane of the leaf's rank)",
                 std::to_string(c.cores));
    }
    if (c.io != "udp") return Bad("--io", "udp with --upstream (a leaf)", c.io);
    if (c.leaf_index >= c.leaves) {
      return Bad("--leaf-index", "below --leaves (" + std::to_string(c.leaves) + ")",
                 std::to_string(c.leaf_index));
    }
  } else if (c.leaf_index != 0 || c.leaves != 1 || c.upstream_core_ports != 1 ||
             !c.upstream_admin_key_file.empty()) {
    return InvalidArgument(
        "--leaf-index / --leaves / --upstream-core-ports / --upstream-admin-key-file need "
        "--upstream ADDR:PORT");
  }
  if (!c.upstream_admin_key_file.empty() && c.admin_key_file.empty()) {
    return InvalidArgument(
        "--upstream-admin-key-file needs --admin-key-file (the keys it passes on to the spine are "
        "those installed here)");
  }
  if (c.core_ports != 0 && c.io != "udp" && c.io != "dpdk") {
    return Bad("--core-ports", "0 unless --io udp or dpdk (a port or queue per core)",
               std::to_string(c.core_ports));
  }
  if (c.core_ports != 0 && c.io == "dpdk" && c.port == 0) {
    return Bad("--port", "a port number with --io dpdk --core-ports 1 (core c: port + c)", "0");
  }
  if (c.core_ports != 0 && c.port != 0 && c.port + c.cores - 1 > 65535) {
    return Bad(
        "--port",
        "at most " + std::to_string(65536 - c.cores) + " with --core-ports (core c: port + c)",
        std::to_string(c.port));
  }
  if (!c.record.empty() && c.cores != 1) {
    return Bad("--cores", "1 with --record (one capture file, one loop)", std::to_string(c.cores));
  }
  if (c.rtl_trace.empty() && (c.rtl_trace_from != 0 || c.rtl_trace_cycles != 0)) {
    return InvalidArgument("--trace-from / --trace-cycles need --trace FILE");
  }
  if (!c.replay_out.empty() && c.replay.empty()) {
    return InvalidArgument("--out FILE goes with --replay IN.pcap");
  }
  if (engines.fixed_slots != 0 && c.slots != engines.fixed_slots) {
    return Bad("--slots",
               std::to_string(engines.fixed_slots) + ": this program's engine has that pool",
               std::to_string(c.slots));
  }
  if (c.engine.empty()) c.engine = std::string(engines.default_name);
  return Status::Ok();
}

}  // namespace

std::string Usage(const EngineMenu& engines) {
  std::string u = "usage: ina-switchd [flags]\n";
  for (const Flag& f : Flags(engines)) {
    std::string head = std::string(f.name) + " " + f.value;
    std::string_view help = f.help;
    size_t nl = help.find('\n');
    char line[256];
    std::snprintf(line, sizeof(line), "  %-24s %.*s\n", head.c_str(),
                  static_cast<int>(help.substr(0, nl).size()), help.data());
    u += line;
    while (nl != std::string_view::npos) {
      help.remove_prefix(nl + 1);
      nl = help.find('\n');
      u += std::string(27, ' ') + std::string(help.substr(0, nl)) + "\n";
    }
  }
  u += "  --config FILE            read flags from FILE first: 'flag = value' lines (the flag\n"
       "                           without '--'), '#' comments; the command line wins\n"
       "  --help                   this text\n"
       "Flags take --flag value or --flag=value; a flag wins over its environment variable.\n"
       "On start it prints its configuration, then 'ina-switchd listening on ADDR:PORT'.\n"
       "SIGINT/SIGTERM: prints a summary and a last JSON line {\"switch_counters\": {...}},\n"
       "exits 0.\n";
  return u;
}

std::vector<std::string> FlagNames(const EngineMenu& engines) {
  std::vector<std::string> names;
  for (const Flag& f : Flags(engines)) names.push_back(std::string(f.name) + " " + f.value);
  return names;
}

namespace {

std::string Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

// --config FILE: "flag = value" lines (the flag's name without "--"), '#' comments, blank lines.
Result<std::vector<std::pair<std::string, std::string>>> ReadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("--config " + path + ": cannot open (" + std::strerror(errno) + ")");
  std::vector<std::pair<std::string, std::string>> lines;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string s = Trim(line.substr(0, line.find('#')));
    if (s.empty()) continue;
    const size_t eq = s.find('=');
    if (eq == std::string::npos) {
      return InvalidArgument("--config " + path + ":" + std::to_string(n) + ": '" + s +
                             "' is not 'flag = value'");
    }
    lines.emplace_back(path + ":" + std::to_string(n) + ": --" + Trim(s.substr(0, eq)),
                       Trim(s.substr(eq + 1)));
  }
  return lines;
}

}  // namespace

Result<Config> ParseArgs(const std::vector<std::string>& args, const EngineMenu& engines,
                         GetEnv getenv) {
  Config c;
  if (engines.fixed_slots != 0) c.slots = engines.fixed_slots;
  const std::vector<Flag> flags = Flags(engines);
  std::vector<const Flag*> given;
  // `what` names the flag in errors (with the file and line for --config's).
  auto apply = [&](std::string_view what, std::string_view name, const std::string& value) {
    const Flag* flag = nullptr;
    for (const Flag& f : flags) {
      if (name == f.name) flag = &f;
    }
    if (flag == nullptr)
      return InvalidArgument("unknown flag '" + std::string(what) + "' (see --help)");
    given.push_back(flag);
    return flag->set(c, what, value);
  };
  // The file first: flags on the command line win over its lines.
  std::vector<std::pair<std::string, std::string>> rest;  // (flag, value) from the command line
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i];
    std::string value;
    bool has_value = false;
    if (const size_t eq = name.find('='); name.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (name == "--help" || name == "-h") {
      c.help = true;
      continue;
    }
    if (!has_value) {
      if (i + 1 >= args.size()) {
        return InvalidArgument(name.rfind("--", 0) == 0
                                   ? name + ": missing value"
                                   : "unknown flag '" + name + "' (see --help)");
      }
      value = args[++i];
    }
    if (name == "--config") {
      if (!c.config.empty()) return InvalidArgument("--config given twice");
      c.config = value;
      INA_ASSIGN_OR_RETURN(auto lines, ReadConfigFile(value));
      for (const auto& [where, v] : lines) {
        const std::string_view flag = std::string_view(where).substr(where.rfind(": ") + 2);
        if (flag == "--config")
          return InvalidArgument(where + ": a config file cannot include another");
        INA_RETURN_IF_ERROR(apply(where, flag, v));
      }
      continue;
    }
    rest.emplace_back(std::move(name), std::move(value));
  }
  for (const auto& [name, value] : rest) INA_RETURN_IF_ERROR(apply(name, name, value));
  // Environment overrides, for the flags the command line did not give.
  for (const Flag& f : flags) {
    if (f.env == nullptr || std::find(given.begin(), given.end(), &f) != given.end()) continue;
    const char* v = getenv != nullptr ? getenv(f.env) : std::getenv(f.env);
    if (v != nullptr) INA_RETURN_IF_ERROR(f.set(c, f.env, v));
  }
  INA_RETURN_IF_ERROR(Validate(c, engines));
  return c;
}

void PrintConfig(const Config& c, std::string_view engine_description, std::FILE* out,
                 const EngineMenu& engines) {
  std::fprintf(out, "ina-switchd config:\n");
  for (const Flag& f : Flags(engines)) {
    if (std::string_view(f.key) == "dpdk" && !c.uses_eal()) continue;
    if (std::string_view(f.key) == "dpdk_backoff_us" && !c.uses_eal()) continue;
    if (std::string_view(f.key) == "dpdk_mtu" && !c.uses_eal()) continue;
    if (std::string_view(f.key).starts_with("roce_") && c.io != "roce") continue;
    const std::string v = f.show(c);
    if (std::string_view(f.key) == "engine") {
      std::fprintf(out, "  engine = %s [%.*s]\n", v.c_str(),
                   static_cast<int>(engine_description.size()), engine_description.data());
    } else {
      std::fprintf(out, "  %s = %s\n", f.key, v.c_str());
    }
  }
}

}  // namespace ina::dp::switchd
