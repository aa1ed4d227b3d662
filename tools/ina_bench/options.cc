#include "options.h"

#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string_view>

#include "ina/host/config.h"
#include "ina/proto/wire.h"

namespace ina::bench {
namespace {

// Sets one option from its value (nullptr for a switch without value).
using Setter = std::function<Status(Options&, const std::string& flag, const char* v)>;

struct Flag {
  const char* name;     // "--workers"
  const char* value;    // placeholder shown in --help ("N"); nullptr: a switch without value
  const char* section;  // --help heading the flag is listed under ("" for the first group)
  const char* help;     // '\n' starts an indented continuation line
  Setter set;
};

// The one integer parser: the whole string, decimal or 0x hex.
bool ParseLong(const char* s, long long* out) {
  char* end = nullptr;
  errno = 0;
  *out = std::strtoll(s, &end, 0);
  return errno == 0 && end != s && *end == '\0';
}

template <typename T>
Setter Int(T Options::*field, long long lo, long long hi) {
  return [=](Options& o, const std::string& flag, const char* v) -> Status {
    long long x;
    if (!ParseLong(v, &x) || x < lo || x > hi) {
      return InvalidArgument(flag + " wants an integer in [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "], got '" + v + "'");
    }
    o.*field = static_cast<T>(x);
    return Status::Ok();
  };
}

Setter Rate(double Options::*field) {
  return [=](Options& o, const std::string& flag, const char* v) -> Status {
    char* end = nullptr;
    const double x = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(x >= 0 && x <= 0.5)) {
      return InvalidArgument(flag + " wants a probability in [0, 0.5], got '" + v + "'");
    }
    o.*field = x;
    return Status::Ok();
  };
}

// One of `allowed`; the message names them ("wants udp or dpdk").
Setter Choice(std::function<void(Options&, std::string_view)> store,
              std::vector<std::string> allowed) {
  return [=](Options& o, const std::string& flag, const char* v) -> Status {
    for (const std::string& a : allowed) {
      if (a == v) {
        store(o, v);
        return Status::Ok();
      }
    }
    std::string names;
    for (size_t i = 0; i < allowed.size(); ++i) {
      names += (i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") + allowed[i];
    }
    return InvalidArgument(flag + " wants " + names);
  };
}
Setter Choice(std::string Options::*field, std::vector<std::string> allowed) {
  return Choice([=](Options& o, std::string_view v) { o.*field = std::string(v); },
                std::move(allowed));
}

Setter Text(std::string Options::*field, bool allow_empty) {
  return [=](Options& o, const std::string& flag, const char* v) -> Status {
    if (!allow_empty && *v == '\0') return InvalidArgument(flag + " wants a non-empty value");
    o.*field = v;
    return Status::Ok();
  };
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

Setter List(std::vector<std::string> Options::*field) {
  return [=](Options& o, const std::string& flag, const char* v) -> Status {
    if (*v == '\0') return InvalidArgument(flag + " wants a non-empty value");
    o.*field = SplitList(v);
    return Status::Ok();
  };
}

Setter Switch(bool Options::*field, bool value) {
  return [=](Options& o, const std::string&, const char*) {
    o.*field = value;
    return Status::Ok();
  };
}

const std::vector<Flag>& Flags() {
  static const std::vector<Flag> flags = {
      {"--workers", "N", "", "worker processes (1..64, default 4)",
       Int(&Options::workers, 1, kMaxWorkers)},
      {"--elements", "E", "", "tensor elements (default 1048576)",
       Int(&Options::elements, 0, 1ll << 31)},
      {"--iters", "I", "", "timed iterations per system (1..1000, default 5)",
       Int(&Options::iters, 1, kMaxIters)},
      {"--dtype", "float|int32", "", "tensor type (default float)",
       Choice([](Options& o, std::string_view v) { o.int32 = v == "int32"; }, {"float", "int32"})},
      {"--drop-rate", "p", "", "switch drops each packet in and out with probability p",
       Rate(&Options::drop_rate)},
      {"--dup-rate", "p", "", "switch duplicates packets with probability p",
       Rate(&Options::dup_rate)},
      {"--reorder-rate", "p", "", "switch delays packets behind later ones with probability p",
       Rate(&Options::reorder_rate)},
      {"--corrupt-rate", "p", "",
       "switch damages one byte of each packet in and out with probability p (the CRC32C "
       "trailer catches it)",
       Rate(&Options::corrupt_rate)},
      {"--seed", "S", "", "input data and fault-injection seed (default 1)",
       Int(&Options::seed, 0, INT64_MAX)},
      {"--k", "K", "", "elements per packet, 64 or 256 (default 256)",
       [](Options& o, const std::string& flag, const char* v) -> Status {
         long long x;
         if (!ParseLong(v, &x) || !proto::IsValidK(static_cast<uint32_t>(x)) || x < 0) {
           return InvalidArgument(flag + " wants 64 or 256, got '" + v + "'");
         }
         o.k = static_cast<int>(x);
         return Status::Ok();
       }},
      {"--window", "W", "", "slots asked per job (default 256)", Int(&Options::window, 1, 65535)},
      {"--engine", "fast|ref", "", "switch engine (default fast)",
       Text(&Options::engine, /*allow_empty=*/true)},
      {"--dataplane", "sw|rtl", "",
       "fabric: sw (ina-switchd) or rtl (ina-rtlsim, the verilated RTL)",
       Choice(&Options::dataplane, {"sw", "rtl"})},
      {"--switch", "HOST:PORT", "", "use a running switch instead of starting one",
       [](Options& o, const std::string& flag, const char* v) -> Status {
         if (std::strchr(v, ':') == nullptr) return InvalidArgument(flag + " wants HOST:PORT");
         o.switch_addr = v;
         return Status::Ok();
       }},
      {"--job", "J", "", "job id (default derived from the pid)", Int(&Options::job, 1, 65535)},
      {"--no-gloo", nullptr, "", "skip the Gloo ring baseline", Switch(&Options::gloo, false)},
      {"--kill-rank", "R", "",
       "rank R kills itself --kill-after-ms into its first all-reduce;\n"
       "checks that every other rank returns an error in bounded time",
       Int(&Options::kill_rank, 0, kMaxWorkers - 1)},
      {"--kill-after-ms", "T", "", "when --kill-rank dies (default 50)",
       Int(&Options::kill_after_ms, 0, 600000)},
      {"--progress-timeout-ms", "T", "", "communicator progress timeout (default 5000)",
       Int(&Options::progress_timeout_ms, 100, 600000)},
      {"--progress-threads", "N", "",
       "progress threads (lanes, one socket each) per worker (default 1)",
       Int(&Options::progress_threads, 1, host::CommConfig::kMaxProgressThreads)},
      {"--rto-min-us", "U", "", "retransmission timeout floor (default: CommConfig's, 500)",
       Int(&Options::rto_min_us, 0, 10000000)},
      {"--rto-initial-us", "U", "", "first retransmission timeout (default: CommConfig's, 5000)",
       Int(&Options::rto_initial_us, 0, 10000000)},
      {"--timeout-s", "S", "", "kill everything after S seconds (default 600)",
       Int(&Options::timeout_s, 1, 86400)},
      {"--quiet", nullptr, "", "only the JSON line", Switch(&Options::quiet, true)},
      {"--worker-netns", "A,B,..",
       "multi-host mode (one network namespace per worker, see scripts/testbed.sh):",
       "run rank r as `ip netns exec <r-th name> ina-bench --role worker`\n"
       "(one name per worker; needs root); shared state in a /dev/shm file",
       List(&Options::worker_netns)},
      {"--worker-switch", "H:P,..", "",
       "the switch address each rank uses (default: --switch for all)",
       List(&Options::worker_switch)},
      {"--worker-addr", "A,B,..", "",
       "each rank's own IPv4 address, bound by Gloo (default 127.0.0.1)",
       List(&Options::worker_addr)},
      {"--transport", "udp|dpdk|memif", "worker transport:",
       "the communicators' transport (default udp); memif: DPDK over net_memif,\n"
       "the switch with one memif port per rank, set up by ina-bench (root)",
       Choice(&Options::transport, {"udp", "dpdk", "memif"})},
      {"--dpdk-eal", "ARGS", "", "EAL arguments per rank; {rank} becomes the rank (dpdk only)",
       Text(&Options::dpdk_eal, /*allow_empty=*/false)},
      {"--dpdk-local", "IP:PORT", "", "each rank's own address on the fabric; {rank} as above",
       Text(&Options::dpdk_local, /*allow_empty=*/false)},
      {"--dpdk-backoff-us", "U", "", "idle RX back-off ceiling (default 200)",
       Int(&Options::dpdk_backoff_us, 0, 1000000)},
      {"--role", "worker", "internal (set by the parent for exec'd workers):",
       "this process is one rank of a multi-host run",
       Choice([](Options& o, std::string_view v) { o.role_worker = v == "worker"; },
              {"worker", "parent"})},
      {"--rank", "R", "", "the rank", Int(&Options::rank, 0, kMaxWorkers - 1)},
      {"--shm", "FILE", "", "the parent's shared state file",
       Text(&Options::shm_path, /*allow_empty=*/true)},
      {"--store", "DIR", "", "Gloo's rendezvous directory",
       Text(&Options::store_dir, /*allow_empty=*/true)},
      {"--gloo-host", "ADDR", "", "the address Gloo binds",
       Text(&Options::gloo_host, /*allow_empty=*/false)},
  };
  return flags;
}

// Checks across options, after every flag was read.
Status Validate(Options& o) {
  if (o.kill_rank >= o.workers) return InvalidArgument("--kill-rank must be < --workers");
  for (const auto& [l, flag] : {std::pair{&o.worker_netns, "--worker-netns"},
                                std::pair{&o.worker_switch, "--worker-switch"},
                                std::pair{&o.worker_addr, "--worker-addr"}}) {
    if (!l->empty() && static_cast<int>(l->size()) != o.workers) {
      return InvalidArgument(std::string(flag) + " names " + std::to_string(l->size()) +
                             " ranks, --workers is " + std::to_string(o.workers));
    }
    for (const auto& x : *l) {
      if (x.empty()) return InvalidArgument(std::string(flag) + " has an empty entry");
    }
  }
  for (const auto& hp : o.worker_switch) {
    if (hp.find(':') == std::string::npos) {
      return InvalidArgument("--worker-switch wants HOST:PORT entries, got '" + hp + "'");
    }
  }
  if (!o.worker_netns.empty() && o.switch_addr.empty() && o.worker_switch.empty()) {
    return InvalidArgument(
        "--worker-netns needs --switch or --worker-switch (a switch the namespaces can reach)");
  }
  if (o.transport == "dpdk" &&
      (o.dpdk_eal.empty() || o.dpdk_local.find(':') == std::string::npos)) {
    return InvalidArgument("--transport dpdk needs --dpdk-eal and --dpdk-local IP:PORT");
  }
  if (o.transport == "memif" && (!o.worker_netns.empty() || !o.switch_addr.empty() ||
                                 !o.worker_switch.empty() || o.role_worker)) {
    return InvalidArgument(
        "--transport memif starts its own switch on this host (not with --switch, "
        "--worker-switch or --worker-netns)");
  }
  if (o.role_worker && (o.rank < 0 || o.rank >= o.workers || o.shm_path.empty() ||
                        o.store_dir.empty() || o.switch_addr.empty() || o.job == 0)) {
    return InvalidArgument(
        "--role worker needs --rank < --workers, --shm, --store, --switch and --job");
  }
  if (o.job == 0) o.job = 1 + static_cast<int>(getpid() % 65000);
  return Status::Ok();
}

}  // namespace

Result<Options> ParseArgs(int argc, char** argv, bool* help) {
  Options o;
  *help = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      *help = true;
      return Options{};
    }
    const Flag* flag = nullptr;
    for (const Flag& f : Flags()) {
      if (a == f.name) flag = &f;
    }
    if (flag == nullptr) return InvalidArgument("unknown option '" + a + "' (see --help)");
    const char* v = nullptr;
    if (flag->value != nullptr) {
      if (i + 1 >= argc) return InvalidArgument(a + " needs a value");
      v = argv[++i];
    }
    INA_RETURN_IF_ERROR(flag->set(o, a, v));
  }
  INA_RETURN_IF_ERROR(Validate(o));
  return o;
}

void PrintUsage(std::FILE* out) {
  std::fprintf(out, "usage: ina-bench [--workers N] [--elements E] [--iters I] [--drop-rate p]\n");
  for (const Flag& f : Flags()) {
    if (*f.section != '\0') std::fprintf(out, "%s\n", f.section);
    std::string head = f.name;
    if (f.value != nullptr) head += std::string(" ") + f.value;
    std::string_view help = f.help;
    const size_t nl = help.find('\n');
    std::fprintf(out, "  %-20s %.*s\n", head.c_str(), static_cast<int>(help.substr(0, nl).size()),
                 help.data());
    while (help.find('\n') != std::string_view::npos) {
      help.remove_prefix(help.find('\n') + 1);
      const size_t next = help.find('\n');
      std::fprintf(out, "%23s%.*s\n", "", static_cast<int>(help.substr(0, next).size()),
                   help.data());
    }
  }
}

void Say(const Options& o, const char* fmt, ...) {
  if (o.quiet) return;
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stdout, fmt, ap);
  va_end(ap);
  std::fflush(stdout);
}

std::string SubstRank(std::string t, int rank) {
  const std::string key = "{rank}", r = std::to_string(rank);
  for (size_t at = t.find(key); at != std::string::npos; at = t.find(key, at + r.size())) {
    t.replace(at, key.size(), r);
  }
  return t;
}

HostPort SplitHostPort(const std::string& hp) {
  const size_t colon = hp.rfind(':');
  HostPort out;
  out.host = hp.substr(0, colon);
  if (colon != std::string::npos) {
    out.port = static_cast<uint16_t>(std::strtoul(hp.c_str() + colon + 1, nullptr, 10));
  }
  return out;
}

}  // namespace ina::bench
