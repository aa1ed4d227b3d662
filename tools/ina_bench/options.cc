#include "options.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string_view>
#include <type_traits>

#include "coord_wire.h"
#include "ina/base/parse.h"
#include "ina/host/config.h"
#include "ina/proto/wire.h"

namespace ina::bench {
namespace {

// Sets one option from its value (nullptr for a switch without value).
using Setter = std::function<Status(Options&, const std::string& flag, const char* v)>;
// The option's value as the parser reads it back ("true"/"false" for a switch; "" when unset).
using Getter = std::function<std::string(const Options&)>;

// Who takes an option (bits).
enum Scope : unsigned {
  kParent = 1,   // the parent: it starts the fabric and the workers or coordinates them
  kWorker = 2,   // a worker (--role worker)
  kRun = 4,      // a run option: the coordinator sends it, a worker's own must agree
  kDefault = 8,  // a per-host default the coordinator sends, for workers that give none
  kBoth = kParent | kWorker,
  kShared = kParent | kWorker | kRun,
};

struct Flag {
  const char* name;     // "--workers"
  const char* value;    // placeholder shown in --help ("N"); nullptr: a switch without value
  const char* section;  // --help heading the flag is listed under ("" for the first group)
  const char* help;     // '\n' starts an indented continuation line
  Setter set;
  unsigned scope = kParent;
  Getter get = nullptr;       // kRun and kDefault options
  const char* env = nullptr;  // an INA_* variable that sets it when the flag is absent
};

template <typename T>
Getter Get(T Options::*field) {
  return [=](const Options& o) -> std::string {
    if constexpr (std::is_same_v<T, std::string>) {
      return o.*field;
    } else if constexpr (std::is_same_v<T, bool>) {
      return o.*field ? "1" : "0";
    } else if constexpr (std::is_same_v<T, double>) {
      char b[32];
      std::snprintf(b, sizeof(b), "%g", o.*field);
      return b;
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      std::string all;
      for (const auto& x : o.*field) all += (all.empty() ? "" : ",") + x;
      return all;
    } else {
      return std::to_string(o.*field);
    }
  };
}

template <typename T>
Setter Int(T Options::*field, long long lo, long long hi) {
  return [=](Options& o, const std::string& flag, const char* v) -> Status {
    INA_ASSIGN_OR_RETURN(long long x, ParseInt(flag, v, lo, hi));
    o.*field = static_cast<T>(x);
    return Status::Ok();
  };
}

Setter Rate(double Options::*field) {
  return [=](Options& o, const std::string& flag, const char* v) -> Status {
    INA_ASSIGN_OR_RETURN(o.*field, ParseReal(flag, v, 0, 0.5));
    return Status::Ok();
  };
}

Setter Bool(bool Options::*field) {
  return [=](Options& o, const std::string& flag, const char* v) -> Status {
    INA_ASSIGN_OR_RETURN(o.*field, ParseBool(flag, v));
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
       Int(&Options::workers, 1, kMaxWorkers), kShared, Get(&Options::workers)},
      {"--elements", "E", "", "tensor elements (default 1048576)",
       Int(&Options::elements, 0, 1ll << 31), kShared, Get(&Options::elements)},
      {"--iters", "I", "", "timed iterations per system (1..1000, default 5)",
       Int(&Options::iters, 1, kMaxIters), kShared, Get(&Options::iters)},
      {"--dtype", "float|int32", "", "tensor type (default float)",
       Choice([](Options& o, std::string_view v) { o.int32 = v == "int32"; }, {"float", "int32"}),
       kShared, [](const Options& o) { return std::string(o.int32 ? "int32" : "float"); }},
      {"--drop-rate", "p", "", "switch drops each packet in and out with probability p",
       Rate(&Options::drop_rate), kParent, Get(&Options::drop_rate)},
      {"--dup-rate", "p", "", "switch duplicates packets with probability p",
       Rate(&Options::dup_rate), kParent, Get(&Options::dup_rate)},
      {"--reorder-rate", "p", "", "switch delays packets behind later ones with probability p",
       Rate(&Options::reorder_rate), kParent, Get(&Options::reorder_rate)},
      {"--corrupt-rate", "p", "",
       "switch damages one byte of each packet in and out with probability p (the CRC32C "
       "trailer catches it)",
       Rate(&Options::corrupt_rate), kParent, Get(&Options::corrupt_rate)},
      {"--seed", "S", "", "input data and fault-injection seed (default 1)",
       Int(&Options::seed, 0, INT64_MAX), kShared, Get(&Options::seed)},
      {"--k", "auto|K", "",
       "elements per packet, 64, 256, 512, 1024 or 2048; auto (default): the largest whose "
       "message the path carries unfragmented (2048 on loopback, 256 on a 1500-byte MTU), as "
       "each worker's libina resolves it",
       [](Options& o, const std::string& flag, const char* v) -> Status {
         if (std::string_view(v) == "auto") {
           o.k = 0;
           return Status::Ok();
         }
         INA_ASSIGN_OR_RETURN(long long x, ParseInt(flag, v, 0, 65535));
         if (!proto::IsValidK(static_cast<uint32_t>(x))) {
           return InvalidArgument(flag + "='" + v + "': not " + std::string(proto::kKValuesText));
         }
         o.k = static_cast<int>(x);
         return Status::Ok();
       },
       kShared, [](const Options& o) { return o.k > 0 ? std::to_string(o.k) : "auto"; }},
      {"--window", "W", "", "slots asked per job (default 256)", Int(&Options::window, 1, 65535),
       kShared, Get(&Options::window)},
      {"--engine", "fast|ref", "", "switch engine (default fast)",
       Text(&Options::engine, /*allow_empty=*/true), kParent, Get(&Options::engine)},
      {"--dataplane", "sw|rtl", "",
       "fabric: sw (ina-switchd) or rtl (ina-rtlsim, the verilated RTL)",
       Choice(&Options::dataplane, {"sw", "rtl"}), kParent, Get(&Options::dataplane)},
      {"--switch", "HOST:PORT", "",
       "use a running switch instead of starting one (a worker: the switch's\n"
       "address as this host reaches it; default: the coordinator's)",
       [](Options& o, const std::string& flag, const char* v) -> Status {
         if (std::strchr(v, ':') == nullptr) return InvalidArgument(flag + " wants HOST:PORT");
         o.switch_addr = v;
         return Status::Ok();
       },
       kBoth, Get(&Options::switch_addr)},
      {"--job", "J", "", "job id (default derived from the pid)", Int(&Options::job, 1, 65535),
       kShared, Get(&Options::job)},
      {"--no-gloo", nullptr, "", "skip the Gloo ring baseline", Switch(&Options::gloo, false),
       kShared, [](const Options& o) { return std::string(o.gloo ? "false" : "true"); }},
      {"--average", nullptr, "",
       "average instead of sum (AllReduceOptions::average; float: the sum / float(workers)\n"
       "correctly rounded, int32: truncated); Gloo's ring divides its sum, timed",
       Switch(&Options::average, true), kShared,
       [](const Options& o) { return std::string(o.average ? "true" : "false"); }},
      {"--kill-rank", "R", "",
       "rank R kills itself --kill-after-ms into the drill, every rank calling\n"
       "all-reduce until it does;\n"
       "checks that every other rank returns an error in bounded time",
       Int(&Options::kill_rank, 0, kMaxWorkers - 1), kShared,
       [](const Options& o) { return o.kill_rank < 0 ? "" : std::to_string(o.kill_rank); }},
      {"--kill-after-ms", "T", "", "when --kill-rank dies (default 50)",
       Int(&Options::kill_after_ms, 0, 600000), kShared, Get(&Options::kill_after_ms)},
      {"--progress-timeout-ms", "T", "", "communicator progress timeout (default 5000)",
       Int(&Options::progress_timeout_ms, 100, 600000), kShared,
       Get(&Options::progress_timeout_ms)},
      {"--progress-threads", "N", "",
       "progress threads (lanes, one socket or memif link each) per worker\n(default 1)",
       Int(&Options::progress_threads, 1, host::CommConfig::kMaxProgressThreads), kShared,
       Get(&Options::progress_threads)},
      {"--switch-cores", "N", "",
       "one job on N switch cores: lane l to core l at the switch's port + l\n"
       "(udp; implies --progress-threads N; the switch started here runs\n"
       "--cores N --core-ports 1; default 1)",
       Int(&Options::switch_cores, 1, host::CommConfig::kMaxProgressThreads), kShared,
       Get(&Options::switch_cores)},
      {"--rto-min-us", "U", "", "retransmission timeout floor (default: CommConfig's, 500)",
       Int(&Options::rto_min_us, 0, 10000000), kShared, Get(&Options::rto_min_us)},
      {"--rto-initial-us", "U", "", "first retransmission timeout (default: CommConfig's, 5000)",
       Int(&Options::rto_initial_us, 0, 10000000), kShared, Get(&Options::rto_initial_us)},
      {"--timeout-s", "S", "", "kill everything after S seconds (default 600)",
       Int(&Options::timeout_s, 1, 86400), kShared, Get(&Options::timeout_s)},
      {"--quiet", nullptr, "", "only the JSON line", Switch(&Options::quiet, true), kBoth,
       Get(&Options::quiet)},
      {"--worker-netns", "A,B,..",
       "workers elsewhere (they meet the parent over TCP; docs/testbed.md):",
       "run rank r as `ip netns exec <r-th name> ina-bench --role worker`\n"
       "(one name per worker; needs root, see scripts/testbed.sh); the parent\n"
       "listens on 127.0.0.1 inside each namespace",
       List(&Options::worker_netns), kParent, Get(&Options::worker_netns)},
      {"--worker-switch", "H:P,..", "",
       "the switch address each rank uses (default: --switch for all)",
       List(&Options::worker_switch), kParent, Get(&Options::worker_switch)},
      {"--worker-addr", "A,B,..", "",
       "each rank's own IPv4 address, bound by Gloo (default 127.0.0.1)",
       List(&Options::worker_addr), kParent, Get(&Options::worker_addr)},
      {"--listen", "HOST:PORT", "",
       "start no workers: wait for --workers workers started on their hosts\n"
       "(ina-bench --role worker --coordinator THIS_HOST:PORT --rank R);\n"
       "port 0: any (printed)",
       [](Options& o, const std::string& flag, const char* v) -> Status {
         auto a = ParseTcpAddress(v);
         if (!a.ok()) return InvalidArgument(flag + ": " + a.status().message());
         o.listen = v;
         return Status::Ok();
       },
       kParent, Get(&Options::listen)},
      {"--join-timeout-s", "S", "",
       "parent: every worker connected within S s; worker: the parent\n"
       "reached within S s (default 60)",
       Int(&Options::join_timeout_s, 1, 86400), kBoth, Get(&Options::join_timeout_s)},
      {"--transport", "udp|dpdk|memif|verbs", "worker transport:",
       "the communicators' transport (default udp); memif: DPDK over net_memif,\n"
       "the switch with one memif port per rank, set up by ina-bench (root);\n"
       "verbs: RoCEv2 UD SENDs to --switch IP:4791 (ina-switchd --io roce),\n"
       "each worker's device from its INA_VERBS_* (docs/rdma.md)",
       Choice(&Options::transport, {"udp", "dpdk", "memif", "verbs"}), kShared,
       Get(&Options::transport)},
      {"--dpdk-eal", "ARGS", "", "EAL arguments per rank; {rank} becomes the rank (dpdk only)",
       Text(&Options::dpdk_eal, /*allow_empty=*/false), kBoth | kDefault, Get(&Options::dpdk_eal)},
      {"--dpdk-local", "IP:PORT", "", "each rank's own address on the fabric; {rank} as above",
       Text(&Options::dpdk_local, /*allow_empty=*/false), kBoth | kDefault,
       Get(&Options::dpdk_local)},
      {"--dpdk-backoff-us", "U", "", "idle RX back-off ceiling (default 200)",
       Int(&Options::dpdk_backoff_us, 0, 1000000), kShared, Get(&Options::dpdk_backoff_us)},
      {"--dpdk-mtu", "M", "",
       "memif / dpdk: the frames' IP MTU, 576 .. 9000 (default 1500; 9000:\n"
       "jumbo frames, --k up to 2048)",
       Int(&Options::dpdk_mtu, 576, 9000), kShared, Get(&Options::dpdk_mtu)},
      {"--udp-gso", "0|1", "",
       "UDP GSO trains out, GRO in, in the workers and the switch started\n"
       "here (default 1; env INA_UDP_GSO)",
       Bool(&Options::udp_gso), kShared,
       [](const Options& o) { return std::string(o.udp_gso ? "1" : "0"); }, "INA_UDP_GSO"},
      {"--quant", "auto|scalar|avx2|avx512", "",
       "the workers' quantization kernels (default auto; env INA_QUANT)",
       Choice(&Options::quant, {"auto", "scalar", "avx2", "avx512"}), kShared, Get(&Options::quant),
       "INA_QUANT"},
      {"--sec", "crc|mac|mac_encrypt", "",
       "authenticated job (docs/security.md; default crc): a switch started\n"
       "here gets a fresh admin key file and the job a fresh secret, which\n"
       "ina-jobkey installs and the workers read from INA_JOB_KEY (with\n"
       "--switch, install it yourself and set INA_JOB_KEY; env INA_JOB_SEC)",
       Choice(&Options::sec, {"crc", "mac", "mac_encrypt"}), kShared, Get(&Options::sec),
       "INA_JOB_SEC"},
      {"--memory", "host|host-async", "",
       "where the workers' tensors live: host (default) or host-async, a\n"
       "memory domain over host memory (the staged path a GPU's tensors take;\n"
       "over verbs, payloads sent from the domain's NIC buffer: docs/gpu.md)",
       Choice(&Options::memory, {"host", "host-async"}), kShared, Get(&Options::memory)},
      {"--role", "worker", "a worker (started by the parent, or by hand on its host):",
       "this process is one rank; it takes the run options from the\n"
       "coordinator (any it is given must agree with the coordinator's)",
       Choice([](Options& o, std::string_view v) { o.role_worker = v == "worker"; },
              {"worker", "parent"}),
       kBoth, [](const Options& o) { return std::string(o.role_worker ? "worker" : "parent"); }},
      {"--coordinator", "HOST:PORT", "", "the parent to report to (its --listen address)",
       [](Options& o, const std::string& flag, const char* v) -> Status {
         auto a = ParseTcpAddress(v);
         if (!a.ok() || a->port == 0) {
           return InvalidArgument(flag + " wants HOST:PORT with a port, got '" + v + "'");
         }
         o.coordinator = v;
         return Status::Ok();
       },
       kWorker, Get(&Options::coordinator)},
      {"--rank", "R", "", "the rank", Int(&Options::rank, 0, kMaxWorkers - 1), kWorker,
       Get(&Options::rank)},
      {"--gloo-host", "ADDR", "", "the address Gloo binds (default 127.0.0.1)",
       Text(&Options::gloo_host, /*allow_empty=*/false), kWorker, Get(&Options::gloo_host)},
  };
  return flags;
}

const Flag* FindFlag(std::string_view name) {
  for (const Flag& f : Flags()) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

bool Given(const Options& o, std::string_view flag) {
  return std::find(o.given.begin(), o.given.end(), flag) != o.given.end();
}

// Checks across options, after every flag was read.
// A worker's command line alone is `complete` = false: the run options come from the coordinator.
Status Validate(Options& o, bool complete) {
  for (const std::string& f : o.given) {
    const Flag* flag = FindFlag(f);
    if (o.role_worker && (flag->scope & kWorker) == 0) {
      return InvalidArgument(f + " is an option of the parent (the coordinator), not of a worker");
    }
    if (!o.role_worker && (flag->scope & kParent) == 0) {
      return InvalidArgument(f + " is an option of a worker (--role worker)");
    }
  }
  if (complete && o.kill_rank >= o.workers) {
    return InvalidArgument("--kill-rank must be < --workers");
  }
  if (o.switch_cores > 1) {
    if (o.transport != "udp") return InvalidArgument("--switch-cores needs --transport udp");
    const bool threads_given =
        std::find(o.given.begin(), o.given.end(), "--progress-threads") != o.given.end();
    if (threads_given && o.progress_threads != o.switch_cores) {
      return InvalidArgument("--switch-cores " + std::to_string(o.switch_cores) +
                             " needs --progress-threads " + std::to_string(o.switch_cores) +
                             " (a lane per switch core)");
    }
    o.progress_threads = o.switch_cores;
  }
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
  if (complete && o.transport == "dpdk" &&
      (o.dpdk_eal.empty() || o.dpdk_local.find(':') == std::string::npos)) {
    return InvalidArgument("--transport dpdk needs --dpdk-eal and --dpdk-local IP:PORT");
  }
  if (o.transport == "memif" && (!o.worker_netns.empty() || !o.switch_addr.empty() ||
                                 !o.worker_switch.empty() || o.role_worker)) {
    return InvalidArgument(
        "--transport memif starts its own switch on this host (not with --switch, "
        "--worker-switch or --worker-netns)");
  }
  if (complete && o.transport == "verbs" && o.switch_addr.empty() && o.worker_switch.empty()) {
    return InvalidArgument(
        "--transport verbs needs --switch IP:4791 (a running ina-switchd --io roce)");
  }
  if (o.role_worker && (o.coordinator.empty() || o.rank < 0)) {
    return InvalidArgument("--role worker needs --coordinator HOST:PORT and --rank");
  }
  if (!o.listen.empty() && (!o.worker_netns.empty() || o.transport == "memif")) {
    return InvalidArgument(
        "--listen waits for workers started elsewhere: not with --worker-netns "
        "or --transport memif");
  }
  if (o.role_worker) return Status::Ok();  // the rest once the coordinator's options are in
  if (o.job == 0) o.job = 1 + static_cast<int>(getpid() % 65000);
  return Status::Ok();
}

// A worker's options once the coordinator's are in.
Status ValidateWorker(const Options& o) {
  if (o.rank >= o.workers) {
    return InvalidArgument("--rank " + std::to_string(o.rank) + " is not below the run's " +
                           std::to_string(o.workers) + " workers");
  }
  if (o.job == 0) return InvalidArgument("the coordinator sent no --job");
  if (o.switch_addr.empty())
    return InvalidArgument("no --switch here and none from the coordinator");
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
    if (!Given(o, a)) o.given.push_back(a);
  }
  // Environment overrides (documented with each flag), read once here, for flags not given. A
  // worker takes them from the coordinator instead.
  for (const Flag& f : Flags()) {
    if (f.env == nullptr || Given(o, f.name) || o.role_worker) continue;
    if (const char* v = std::getenv(f.env)) INA_RETURN_IF_ERROR(f.set(o, f.env, v));
  }
  INA_RETURN_IF_ERROR(Validate(o, /*complete=*/!o.role_worker));
  return o;
}

Args RunArgs(const Options& o) {
  Args out;
  for (const Flag& f : Flags()) {
    if ((f.scope & kRun) != 0 || ((f.scope & kDefault) != 0 && !f.get(o).empty())) {
      out.emplace_back(f.name, f.get(o));
    }
  }
  return out;
}

Args GivenRunArgs(const Options& o) {
  Args out;
  for (const Flag& f : Flags()) {
    if ((f.scope & kRun) != 0 && Given(o, f.name)) out.emplace_back(f.name, f.get(o));
  }
  return out;
}

Status ApplyRunArgs(Options* o, const Args& args) {
  for (const auto& [name, value] : args) {
    const Flag* f = FindFlag(name);
    if (f == nullptr || (f->scope & (kRun | kDefault)) == 0) {
      return InvalidArgument("the coordinator sent an option this build does not take: " + name);
    }
    if (value.empty() || ((f->scope & kDefault) != 0 && Given(*o, name))) continue;
    if (f->value == nullptr) {  // a switch
      if (value == "true") INA_RETURN_IF_ERROR(f->set(*o, name, nullptr));
      continue;
    }
    INA_RETURN_IF_ERROR(f->set(*o, name, value.c_str()).WithContext("from the coordinator"));
  }
  INA_RETURN_IF_ERROR(Validate(*o, /*complete=*/true));
  return ValidateWorker(*o);
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

void PrintConfig(const Options& o, std::FILE* out) {
  std::fprintf(out, "ina-bench config (%s):\n", o.role_worker ? "worker" : "parent");
  for (const Flag& f : Flags()) {
    const unsigned side = o.role_worker ? kWorker : kParent;
    if ((f.scope & side) == 0) continue;
    std::fprintf(out, "  %-22s %s%s\n", f.name, f.get(o).c_str(),
                 Given(o, f.name)                         ? ""
                 : f.env != nullptr && std::getenv(f.env) ? " (env)"
                                                          : "");
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
