// ina-bench: all-reduce through ina and, in the same run over the same processes and data,
// through Gloo's ring; verifies ina's result and prints a summary and one JSON line.
//
//   ina-bench --workers N --elements E --iters I [--drop-rate p] [options]
//
// The parent starts ina-switchd (unless --switch names a running one), forks N worker processes
// that share a memory region with it (barrier, timings, fingerprints, rank 0's results), then
// rebuilds every rank's input itself and checks rank 0's result bit for bit against the exact
// quantized sum and against the float64 sum with the documented bound; every rank's fingerprint
// must equal rank 0's. Run with --help for all options.
//
// Multi-host mode (scripts/testbed.sh): with --worker-netns NS0,NS1,... the parent does not fork
// workers but runs `ip netns exec NSr <this binary> --role worker --rank r --shm FILE ...` for
// each rank. The shared region is then a file (in /dev/shm) that the parent creates and every
// worker maps; the process-shared barrier lives in it as before. Each worker talks to the switch
// address given for it (--worker-switch) and binds Gloo to its own address (--worker-addr).
//
// Transport: --transport dpdk runs each rank's communicator over the DPDK transport instead of
// UDP sockets; --dpdk-eal and --dpdk-local are templates in which "{rank}" becomes the rank, so
// one command line gives every rank its own EAL file prefix, vdev and address.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gloo_ring.h"
#include "ina/host/communicator.h"
#include "ina/proto/wire.h"
#include "process.h"
#include "verify.h"

namespace ina::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kMaxIters = 1000;
constexpr int kMaxWorkers = 64;

struct Options {
  int workers = 4;
  size_t elements = 1 << 20;
  int iters = 5;
  double drop_rate = 0, dup_rate = 0, reorder_rate = 0;
  uint64_t seed = 1;
  int k = 256;
  int window = 256;
  bool int32 = false;
  bool gloo = true;
  std::string switch_addr;  // empty: start our own
  std::string engine = "fast";
  std::string dataplane = "sw";
  int job = 0;  // 0: derived from our pid
  int kill_rank = -1;
  int kill_after_ms = 50;
  int progress_timeout_ms = 5000;
  // CommConfig::progress_threads: lanes (progress threads, one socket each) per worker.
  int progress_threads = 1;
  int rto_min_us = 0;      // 0: CommConfig's default
  int rto_initial_us = 0;  // 0: CommConfig's default
  int timeout_s = 600;
  bool quiet = false;
  // Multi-host mode.
  std::vector<std::string> worker_netns;   // one network namespace per rank
  std::vector<std::string> worker_switch;  // HOST:PORT of the switch as seen from each rank
  std::vector<std::string> worker_addr;    // each rank's own address (Gloo binds it)
  // Internal: a worker exec'd by the parent.
  bool role_worker = false;
  int rank = -1;
  std::string shm_path;
  std::string store_dir;
  std::string gloo_host = "127.0.0.1";
  // Worker transport: "udp" or "dpdk" (templates with {rank}, see SubstRank).
  std::string transport = "udp";
  std::string dpdk_eal;
  std::string dpdk_local;
  int dpdk_backoff_us = 200;
};

// `t` with every "{rank}" replaced by the rank's number.
std::string SubstRank(std::string t, int rank) {
  const std::string key = "{rank}", r = std::to_string(rank);
  for (size_t at = t.find(key); at != std::string::npos; at = t.find(key, at + r.size())) {
    t.replace(at, key.size(), r);
  }
  return t;
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

void Usage() {
  std::printf(
      "usage: ina-bench [--workers N] [--elements E] [--iters I] [--drop-rate p]\n"
      "  --workers N          worker processes (1..64, default 4)\n"
      "  --elements E         tensor elements (default 1048576)\n"
      "  --iters I            timed iterations per system (1..1000, default 5)\n"
      "  --dtype float|int32  tensor type (default float)\n"
      "  --drop-rate p        switch drops each packet in and out with probability p\n"
      "  --dup-rate p         switch duplicates packets with probability p\n"
      "  --reorder-rate p     switch delays packets behind later ones with probability p\n"
      "  --seed S             input data and fault-injection seed (default 1)\n"
      "  --k K                elements per packet, 64 or 256 (default 256)\n"
      "  --window W           slots asked per job (default 256)\n"
      "  --engine fast|ref    switch engine (default fast)\n"
      "  --dataplane sw|rtl   fabric: sw (ina-switchd) or rtl (ina-rtlsim, the verilated RTL)\n"
      "  --switch HOST:PORT   use a running switch instead of starting one\n"
      "  --job J              job id (default derived from the pid)\n"
      "  --no-gloo            skip the Gloo ring baseline\n"
      "  --kill-rank R        rank R kills itself --kill-after-ms into its first all-reduce;\n"
      "                       checks that every other rank returns an error in bounded time\n"
      "  --progress-timeout-ms T  communicator progress timeout (default 5000)\n"
      "  --progress-threads N progress threads (lanes, one socket each) per worker (default 1)\n"
      "  --rto-min-us U       retransmission timeout floor (default: CommConfig's, 500)\n"
      "  --rto-initial-us U   first retransmission timeout (default: CommConfig's, 5000)\n"
      "  --timeout-s S        kill everything after S seconds (default 600)\n"
      "  --quiet              only the JSON line\n"
      "multi-host mode (one network namespace per worker, see scripts/testbed.sh):\n"
      "  --worker-netns A,B,..  run rank r as `ip netns exec <r-th name> ina-bench --role worker`\n"
      "                       (one name per worker; needs root); shared state in a /dev/shm file\n"
      "  --worker-switch H:P,.. the switch address each rank uses (default: --switch for all)\n"
      "  --worker-addr A,B,..   each rank's own IPv4 address, bound by Gloo (default 127.0.0.1)\n"
      "worker transport:\n"
      "  --transport udp|dpdk   the communicators' transport (default udp)\n"
      "  --dpdk-eal ARGS        EAL arguments per rank; {rank} becomes the rank (dpdk only)\n"
      "  --dpdk-local IP:PORT   each rank's own address on the fabric; {rank} as above\n"
      "  --dpdk-backoff-us U    idle RX back-off ceiling (default 200)\n"
      "internal (set by the parent for exec'd workers): --role worker --rank R --shm FILE\n"
      "  --store DIR --gloo-host ADDR\n");
}

bool ParseDouble(const char* s, double* out) {
  char* end = nullptr;
  *out = std::strtod(s, &end);
  return end && *end == '\0';
}
bool ParseLong(const char* s, long long* out) {
  char* end = nullptr;
  *out = std::strtoll(s, &end, 0);
  return end && *end == '\0';
}

std::optional<Options> ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto need = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ina-bench: %s needs a value\n", what);
        return nullptr;
      }
      return argv[++i];
    };
    auto num = [&](long long lo, long long hi, auto* dst) -> bool {
      const char* v = need(a.c_str());
      long long x;
      if (!v || !ParseLong(v, &x) || x < lo || x > hi) {
        std::fprintf(stderr, "ina-bench: %s wants an integer in [%lld, %lld], got '%s'\n",
                     a.c_str(), lo, hi, v ? v : "");
        return false;
      }
      *dst = static_cast<std::remove_pointer_t<decltype(dst)>>(x);
      return true;
    };
    auto rate = [&](double* dst) -> bool {
      const char* v = need(a.c_str());
      if (!v || !ParseDouble(v, dst) || *dst < 0 || *dst > 0.5) {
        std::fprintf(stderr, "ina-bench: %s wants a probability in [0, 0.5], got '%s'\n", a.c_str(),
                     v ? v : "");
        return false;
      }
      return true;
    };
    bool ok = true;
    if (a == "--help" || a == "-h") {
      Usage();
      std::exit(0);
    } else if (a == "--workers")
      ok = num(1, kMaxWorkers, &o.workers);
    else if (a == "--elements")
      ok = num(0, 1ll << 31, &o.elements);
    else if (a == "--iters")
      ok = num(1, kMaxIters, &o.iters);
    else if (a == "--drop-rate")
      ok = rate(&o.drop_rate);
    else if (a == "--dup-rate")
      ok = rate(&o.dup_rate);
    else if (a == "--reorder-rate")
      ok = rate(&o.reorder_rate);
    else if (a == "--seed")
      ok = num(0, INT64_MAX, &o.seed);
    else if (a == "--k")
      ok = num(64, 256, &o.k) && proto::IsValidK(o.k);
    else if (a == "--window")
      ok = num(1, 65535, &o.window);
    else if (a == "--job")
      ok = num(1, 65535, &o.job);
    else if (a == "--kill-rank")
      ok = num(0, kMaxWorkers - 1, &o.kill_rank);
    else if (a == "--kill-after-ms")
      ok = num(0, 600000, &o.kill_after_ms);
    else if (a == "--progress-timeout-ms")
      ok = num(100, 600000, &o.progress_timeout_ms);
    else if (a == "--progress-threads")
      ok = num(1, host::CommConfig::kMaxProgressThreads, &o.progress_threads);
    else if (a == "--rto-min-us")
      ok = num(0, 10000000, &o.rto_min_us);
    else if (a == "--rto-initial-us")
      ok = num(0, 10000000, &o.rto_initial_us);
    else if (a == "--timeout-s")
      ok = num(1, 86400, &o.timeout_s);
    else if (a == "--no-gloo")
      o.gloo = false;
    else if (a == "--quiet")
      o.quiet = true;
    else if (a == "--dtype") {
      const char* v = need("--dtype");
      ok = v && (std::string(v) == "float" || std::string(v) == "int32");
      if (ok)
        o.int32 = std::string(v) == "int32";
      else
        std::fprintf(stderr, "ina-bench: --dtype wants float or int32\n");
    } else if (a == "--engine") {
      const char* v = need("--engine");
      ok = v != nullptr;
      if (ok) o.engine = v;
    } else if (a == "--dataplane") {
      const char* v = need("--dataplane");
      ok = v && (std::string(v) == "sw" || std::string(v) == "rtl");
      if (ok)
        o.dataplane = v;
      else
        std::fprintf(stderr, "ina-bench: --dataplane wants sw or rtl\n");
    } else if (a == "--worker-netns" || a == "--worker-switch" || a == "--worker-addr") {
      const char* v = need(a.c_str());
      ok = v != nullptr && *v != '\0';
      if (ok) {
        auto list = SplitList(v);
        (a == "--worker-netns"    ? o.worker_netns
         : a == "--worker-switch" ? o.worker_switch
                                  : o.worker_addr) = list;
      }
    } else if (a == "--transport") {
      const char* v = need("--transport");
      ok = v && (std::string(v) == "udp" || std::string(v) == "dpdk");
      if (ok)
        o.transport = v;
      else
        std::fprintf(stderr, "ina-bench: --transport wants udp or dpdk\n");
    } else if (a == "--dpdk-eal" || a == "--dpdk-local") {
      const char* v = need(a.c_str());
      ok = v != nullptr && *v != '\0';
      if (ok) (a == "--dpdk-eal" ? o.dpdk_eal : o.dpdk_local) = v;
    } else if (a == "--dpdk-backoff-us")
      ok = num(0, 1000000, &o.dpdk_backoff_us);
    else if (a == "--role") {
      const char* v = need("--role");
      ok = v && (std::string(v) == "worker" || std::string(v) == "parent");
      if (ok)
        o.role_worker = std::string(v) == "worker";
      else
        std::fprintf(stderr, "ina-bench: --role wants worker or parent\n");
    } else if (a == "--rank")
      ok = num(0, kMaxWorkers - 1, &o.rank);
    else if (a == "--shm") {
      const char* v = need("--shm");
      ok = v != nullptr;
      if (ok) o.shm_path = v;
    } else if (a == "--gloo-host") {
      const char* v = need("--gloo-host");
      ok = v != nullptr && *v != '\0';
      if (ok) o.gloo_host = v;
    } else if (a == "--store") {
      const char* v = need("--store");
      ok = v != nullptr;
      if (ok) o.store_dir = v;
    } else if (a == "--switch") {
      const char* v = need("--switch");
      ok = v && std::strchr(v, ':') != nullptr;
      if (ok)
        o.switch_addr = v;
      else
        std::fprintf(stderr, "ina-bench: --switch wants HOST:PORT\n");
    } else {
      std::fprintf(stderr, "ina-bench: unknown option '%s' (see --help)\n", a.c_str());
      ok = false;
    }
    if (!ok) return std::nullopt;
  }
  if (o.kill_rank >= o.workers) {
    std::fprintf(stderr, "ina-bench: --kill-rank must be < --workers\n");
    return std::nullopt;
  }
  auto check_list = [&](const std::vector<std::string>& l, const char* flag) {
    if (!l.empty() && static_cast<int>(l.size()) != o.workers) {
      std::fprintf(stderr, "ina-bench: %s names %zu ranks, --workers is %d\n", flag, l.size(),
                   o.workers);
      return false;
    }
    for (const auto& x : l) {
      if (x.empty()) {
        std::fprintf(stderr, "ina-bench: %s has an empty entry\n", flag);
        return false;
      }
    }
    return true;
  };
  if (!check_list(o.worker_netns, "--worker-netns") ||
      !check_list(o.worker_switch, "--worker-switch") ||
      !check_list(o.worker_addr, "--worker-addr")) {
    return std::nullopt;
  }
  for (const auto& hp : o.worker_switch) {
    if (hp.find(':') == std::string::npos) {
      std::fprintf(stderr, "ina-bench: --worker-switch wants HOST:PORT entries, got '%s'\n",
                   hp.c_str());
      return std::nullopt;
    }
  }
  if (!o.worker_netns.empty() && o.switch_addr.empty() && o.worker_switch.empty()) {
    std::fprintf(stderr,
                 "ina-bench: --worker-netns needs --switch or --worker-switch (a switch "
                 "the namespaces can reach)\n");
    return std::nullopt;
  }
  if (o.transport == "dpdk" &&
      (o.dpdk_eal.empty() || o.dpdk_local.find(':') == std::string::npos)) {
    std::fprintf(stderr, "ina-bench: --transport dpdk needs --dpdk-eal and --dpdk-local IP:PORT\n");
    return std::nullopt;
  }
  if (o.role_worker && (o.rank < 0 || o.rank >= o.workers || o.shm_path.empty() ||
                        o.store_dir.empty() || o.switch_addr.empty() || o.job == 0)) {
    std::fprintf(stderr,
                 "ina-bench: --role worker needs --rank < --workers, --shm, --store, "
                 "--switch and --job\n");
    return std::nullopt;
  }
  if (o.job == 0) o.job = 1 + static_cast<int>(getpid() % 65000);
  return o;
}

struct RankSlot {
  int ina_code;  // StatusCode of the first failed ina call (0: all fine)
  char ina_error[256];
  double ina_ms[kMaxIters];
  double error_ms;  // with --kill-rank: time from the call's start to its error
  uint64_t fingerprint;
  uint64_t retransmissions, packets_sent;
  int gloo_code;
  char gloo_error[256];
  double gloo_ms[kMaxIters];
};

struct Shared {
  pthread_barrier_t barrier;
  RankSlot ranks[kMaxWorkers];
};

void SetError(char* dst, const Status& s) { std::snprintf(dst, 256, "%s", s.ToString().c_str()); }

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Runs in a forked child, or in a worker exec'd by the parent (--role worker). Returns the exit
// code.
// `gloo_host`: the address Gloo binds for this rank.
int Worker(const Options& o, int rank, const std::string& host, uint16_t port,
           const std::string& gloo_host, const std::string& store_dir, Shared* sh, uint8_t* result0,
           uint8_t* gloo0) {
  RankSlot& me = sh->ranks[rank];
  const size_t n = o.elements;
  const size_t bytes = n * 4;
  std::vector<float> fin;
  std::vector<int32_t> iin;
  if (o.int32)
    iin = MakeIntInput(o.seed, rank, n, true);
  else
    fin = MakeFloatInput(o.seed, rank, n);
  std::vector<uint8_t> buf(bytes + 1);

  host::CommConfig cfg;
  cfg.switch_host = host;
  cfg.switch_port = port;
  cfg.job_id = static_cast<uint16_t>(o.job);
  cfg.rank = static_cast<uint16_t>(rank);
  cfg.world_size = static_cast<uint16_t>(o.workers);
  cfg.k = static_cast<uint16_t>(o.k);
  cfg.window = static_cast<uint16_t>(o.window);
  cfg.progress_timeout_ms = o.progress_timeout_ms;
  cfg.progress_threads = o.progress_threads;
  if (o.rto_min_us > 0) cfg.rto_min_us = o.rto_min_us;
  if (o.rto_initial_us > 0) cfg.rto_initial_us = o.rto_initial_us;
  cfg.rto_initial_us = std::max(cfg.rto_initial_us, cfg.rto_min_us);
  cfg.rto_max_us = std::max(cfg.rto_max_us, cfg.rto_initial_us);
  if (o.transport == "dpdk") {
    cfg.transport = "dpdk";
    cfg.dpdk.eal_args = SubstRank(o.dpdk_eal, rank);
    const std::string local = SubstRank(o.dpdk_local, rank);
    cfg.dpdk.local_ip = local.substr(0, local.rfind(':'));
    cfg.dpdk.local_port = static_cast<uint16_t>(std::atoi(local.c_str() + local.rfind(':') + 1));
    cfg.dpdk.backoff_max_us = o.dpdk_backoff_us;
  }
  auto comm = host::Communicator::Create(cfg);
  if (!comm.ok()) {
    me.ina_code = static_cast<int>(comm.status().code());
    SetError(me.ina_error, comm.status());
    return 1;
  }
  auto run_once = [&]() -> Status {
    if (o.int32) {
      std::memcpy(buf.data(), iin.data(), bytes);
      return (*comm)->AllReduce(std::span<int32_t>(reinterpret_cast<int32_t*>(buf.data()), n));
    }
    std::memcpy(buf.data(), fin.data(), bytes);
    return (*comm)->AllReduce(std::span<float>(reinterpret_cast<float*>(buf.data()), n));
  };

  if (o.kill_rank >= 0) {
    // Failure drill: one rank dies mid-call; the others must fail, not hang.
    pthread_barrier_wait(&sh->barrier);
    if (rank == o.kill_rank) {
      std::thread([ms = o.kill_after_ms] {
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        raise(SIGKILL);
      }).detach();
    }
    auto t0 = Clock::now();
    Status s = run_once();
    if (rank == o.kill_rank) {  // finished before the kill: keep going until it lands
      for (;;) s = run_once();
    }
    me.error_ms = Ms(t0, Clock::now());
    me.ina_code = static_cast<int>(s.code());
    if (!s.ok()) SetError(me.ina_error, s);
    return s.ok() ? 1 : 0;
  }

  pthread_barrier_wait(&sh->barrier);
  Status s = run_once();  // warm-up
  for (int it = 0; it < o.iters && s.ok(); ++it) {
    pthread_barrier_wait(&sh->barrier);
    auto t0 = Clock::now();
    s = run_once();
    me.ina_ms[it] = Ms(t0, Clock::now());
    if (rank == 0 && !o.quiet) {  // the progress line
      std::printf("  ina iteration %d/%d: %.3f ms (rank 0)%s\n", it + 1, o.iters, me.ina_ms[it],
                  s.ok() ? "" : " FAILED");
      std::fflush(stdout);
    }
  }
  if (!s.ok()) {
    me.ina_code = static_cast<int>(s.code());
    SetError(me.ina_error, s);
    return 1;  // the others will be killed by the parent's deadline if stuck in a barrier
  }
  me.fingerprint = Fingerprint(std::span<const uint8_t>(buf.data(), bytes));
  if (rank == 0) std::memcpy(result0, buf.data(), bytes);
  auto st = (*comm)->stats();
  me.retransmissions = st.retransmissions;
  me.packets_sent = st.packets_sent;
  comm->reset();

  if (!o.gloo || o.int32) return 0;
  auto ring = GlooRing::Create(rank, o.workers, store_dir, std::chrono::seconds(60), gloo_host);
  if (!ring.ok()) {
    me.gloo_code = static_cast<int>(ring.status().code());
    SetError(me.gloo_error, ring.status());
    return 1;
  }
  std::span<float> f(reinterpret_cast<float*>(buf.data()), n);
  std::memcpy(buf.data(), fin.data(), bytes);
  Status g = (*ring)->AllReduce(f);  // warm-up
  for (int it = 0; it < o.iters && g.ok(); ++it) {
    std::memcpy(buf.data(), fin.data(), bytes);
    pthread_barrier_wait(&sh->barrier);
    auto t0 = Clock::now();
    g = (*ring)->AllReduce(f);
    me.gloo_ms[it] = Ms(t0, Clock::now());
  }
  if (!g.ok()) {
    me.gloo_code = static_cast<int>(g.code());
    SetError(me.gloo_error, g);
    return 1;
  }
  if (rank == 0) std::memcpy(gloo0, buf.data(), bytes);
  return 0;
}

// Set by SIGINT/SIGTERM in the parent: stop the workers, clean up, fail.
volatile sig_atomic_t g_stop = 0;
void OnStopSignal(int) { g_stop = 1; }

// Per iteration, the slowest rank's time; then the median over iterations.
double MedianOfMax(const Shared* sh, int workers, int iters, bool gloo) {
  std::vector<double> per_iter;
  for (int it = 0; it < iters; ++it) {
    double m = 0;
    for (int r = 0; r < workers; ++r) {
      m = std::max(m, gloo ? sh->ranks[r].gloo_ms[it] : sh->ranks[r].ina_ms[it]);
    }
    per_iter.push_back(m);
  }
  std::sort(per_iter.begin(), per_iter.end());
  size_t mid = per_iter.size() / 2;
  return per_iter.size() % 2 ? per_iter[mid] : (per_iter[mid - 1] + per_iter[mid]) / 2;
}

// Bytes of the region shared by the parent and its workers: Shared, rank 0's ina result, rank 0's
// Gloo result.
size_t MapBytes(const Options& o) { return sizeof(Shared) + 2 * o.elements * 4 + 64; }

// The command line that runs rank r in its namespace.
std::vector<std::string> WorkerArgv(const Options& o, int r, const std::string& host, uint16_t port,
                                    const std::string& gloo_host, const std::string& shm,
                                    const std::string& store) {
  std::vector<std::string> a = {"ip",
                                "netns",
                                "exec",
                                o.worker_netns[r],
                                SelfDir() + "/ina-bench",
                                "--role",
                                "worker",
                                "--rank",
                                std::to_string(r),
                                "--shm",
                                shm,
                                "--store",
                                store,
                                "--gloo-host",
                                gloo_host,
                                "--switch",
                                host + ":" + std::to_string(port),
                                "--workers",
                                std::to_string(o.workers),
                                "--elements",
                                std::to_string(o.elements),
                                "--iters",
                                std::to_string(o.iters),
                                "--dtype",
                                o.int32 ? "int32" : "float",
                                "--seed",
                                std::to_string(o.seed),
                                "--k",
                                std::to_string(o.k),
                                "--window",
                                std::to_string(o.window),
                                "--job",
                                std::to_string(o.job),
                                "--kill-after-ms",
                                std::to_string(o.kill_after_ms),
                                "--progress-timeout-ms",
                                std::to_string(o.progress_timeout_ms),
                                "--progress-threads",
                                std::to_string(o.progress_threads),
                                "--rto-min-us",
                                std::to_string(o.rto_min_us),
                                "--rto-initial-us",
                                std::to_string(o.rto_initial_us),
                                "--transport",
                                o.transport,
                                "--dpdk-backoff-us",
                                std::to_string(o.dpdk_backoff_us)};
  if (o.transport == "dpdk") {
    for (const std::string& x :
         {std::string("--dpdk-eal"), o.dpdk_eal, std::string("--dpdk-local"), o.dpdk_local}) {
      a.push_back(x);
    }
  }
  if (o.kill_rank >= 0) {
    a.push_back("--kill-rank");
    a.push_back(std::to_string(o.kill_rank));
  }
  if (!o.gloo) a.push_back("--no-gloo");
  if (o.quiet) a.push_back("--quiet");
  return a;
}

// --role worker: map the parent's file and run one rank.
int WorkerMain(const Options& o) {
  int fd = open(o.shm_path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    std::perror(("ina-bench worker: " + o.shm_path).c_str());
    return 1;
  }
  const size_t map_bytes = MapBytes(o);
  void* mem = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) {
    std::perror("ina-bench worker: mmap");
    return 1;
  }
  auto* sh = static_cast<Shared*>(mem);  // initialised by the parent
  uint8_t* result0 = static_cast<uint8_t*>(mem) + sizeof(Shared);
  uint8_t* gloo0 = result0 + o.elements * 4;
  const auto colon = o.switch_addr.rfind(':');
  const std::string host = o.switch_addr.substr(0, colon);
  const auto port = static_cast<uint16_t>(std::stoi(o.switch_addr.substr(colon + 1)));
  return Worker(o, o.rank, host, port, o.gloo_host, o.store_dir, sh, result0, gloo0);
}

int Main(int argc, char** argv) {
  auto parsed = ParseArgs(argc, argv);
  if (!parsed) return 2;
  const Options o = *parsed;
  if (o.role_worker) return WorkerMain(o);
  const bool say = !o.quiet;
  auto log = [&](const char* fmt, auto... args) {
    if (say) {
      std::printf(fmt, args...);
      std::fflush(stdout);
    }
  };

  // The switch.
  std::optional<Process> sw;
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  if (o.switch_addr.empty() && o.worker_switch.empty()) {
    const std::string fabric = o.dataplane == "rtl" ? "/ina-rtlsim" : "/ina-switchd";
    std::vector<std::string> args = {SelfDir() + fabric, "--bind", "127.0.0.1",
                                     "--port",           "0",      "--engine",
                                     o.engine,           "--seed", std::to_string(o.seed)};
    auto add_rate = [&](const char* flag, double p) {
      if (p > 0) {
        args.push_back(flag);
        args.push_back(std::to_string(p));
      }
    };
    add_rate("--drop-rate", o.drop_rate);
    add_rate("--dup-rate", o.dup_rate);
    add_rate("--reorder-rate", o.reorder_rate);
    auto p = Process::Start(args);
    if (!p.ok()) {
      std::fprintf(stderr, "ina-bench: starting %s: %s\n", args[0].c_str(),
                   p.status().ToString().c_str());
      return 1;
    }
    sw.emplace(std::move(*p));
    // ina-switchd and ina-rtlsim announce themselves the same way.
    auto line = sw->WaitForLine("", std::chrono::seconds(60));
    while (line.ok() && line->find(" listening on ") == std::string::npos) {
      line = sw->WaitForLine("", std::chrono::seconds(60));
    }
    if (!line.ok()) {
      std::fprintf(stderr, "ina-bench: switch did not come up: %s\n",
                   line.status().ToString().c_str());
      return 1;
    }
    port = static_cast<uint16_t>(std::stoi(line->substr(line->rfind(':') + 1)));
  } else {
    const std::string& hp = o.switch_addr.empty() ? o.worker_switch[0] : o.switch_addr;
    auto colon = hp.rfind(':');
    host = hp.substr(0, colon);
    port = static_cast<uint16_t>(std::stoi(hp.substr(colon + 1)));
  }
  log("ina-bench: %d workers, %zu %s elements, %d iterations, K=%d, window=%d, drop=%.3g, "
      "switch %s:%u, job %d\n",
      o.workers, o.elements, o.int32 ? "int32" : "float", o.iters, o.k, o.window, o.drop_rate,
      host.c_str(), port, o.job);

  // Shared memory and workers.
  const size_t bytes = o.elements * 4;
  const size_t map_bytes = MapBytes(o);
  const bool multi_host = !o.worker_netns.empty();
  void* mem = MAP_FAILED;
  std::string shm_path;
  if (multi_host) {
    // A file the exec'd workers can map: they share the parent's filesystem, not its memory.
    shm_path = "/dev/shm/ina-bench-" + std::to_string(getpid()) + "-" + std::to_string(o.job);
    int fd = open(shm_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(map_bytes)) != 0) {
      std::perror(("ina-bench: " + shm_path).c_str());
      if (fd >= 0) close(fd);
      unlink(shm_path.c_str());
      return 1;
    }
    mem = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
  } else {
    mem = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  }
  if (mem == MAP_FAILED) {
    std::perror("ina-bench: mmap");
    if (multi_host) unlink(shm_path.c_str());
    return 1;
  }
  auto* sh = new (mem) Shared();
  uint8_t* result0 = static_cast<uint8_t*>(mem) + sizeof(Shared);
  uint8_t* gloo0 = result0 + bytes;
  pthread_barrierattr_t battr;
  pthread_barrierattr_init(&battr);
  pthread_barrierattr_setpshared(&battr, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&sh->barrier, &battr, static_cast<unsigned>(o.workers));
  char tmpl[] = "/tmp/ina-bench-XXXXXX";
  std::string store_dir = mkdtemp(tmpl) ? tmpl : "/tmp";

  std::vector<pid_t> kids;
  struct sigaction stop_action = {};
  stop_action.sa_handler = OnStopSignal;
  sigaction(SIGINT, &stop_action, nullptr);
  sigaction(SIGTERM, &stop_action, nullptr);
  for (int r = 0; r < o.workers; ++r) {
    std::string whost = host;
    uint16_t wport = port;
    if (!o.worker_switch.empty()) {
      const std::string& hp = o.worker_switch[r];
      whost = hp.substr(0, hp.rfind(':'));
      wport = static_cast<uint16_t>(std::stoi(hp.substr(hp.rfind(':') + 1)));
    }
    const std::string gloo_host = o.worker_addr.empty() ? "127.0.0.1" : o.worker_addr[r];
    std::vector<std::string> argv;
    if (multi_host) argv = WorkerArgv(o, r, whost, wport, gloo_host, shm_path, store_dir);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      if (multi_host) {
        execvp(cargv[0], cargv.data());
        std::perror("ina-bench: exec ip netns exec");
        _exit(127);
      }
      _exit(Worker(o, r, whost, wport, gloo_host, store_dir, sh, result0, gloo0));
    }
    if (pid < 0) {
      std::perror("ina-bench: fork");
      for (pid_t k : kids) kill(k, SIGKILL);
      for (pid_t k : kids) waitpid(k, nullptr, 0);
      if (multi_host) unlink(shm_path.c_str());
      return 1;
    }
    kids.push_back(pid);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(o.timeout_s);
  std::vector<int> exit_status(o.workers, -1);
  int alive = o.workers;
  bool timed_out = false;
  auto kill_at = deadline;
  while (alive > 0) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < o.workers; ++r) {
        if (kids[r] == pid) {
          exit_status[r] = status;
          --alive;
          // A failed worker leaves the others in a barrier: give them the communicator's
          // progress timeout to report their own error, then stop them.
          const bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
          if (failed && o.kill_rank < 0) {
            kill_at = std::min(
                kill_at, Clock::now() + std::chrono::milliseconds(o.progress_timeout_ms + 2000));
          }
        }
      }
      continue;
    }
    if (g_stop || Clock::now() > kill_at) {
      timed_out = !g_stop;
      for (int r = 0; r < o.workers; ++r) {
        if (exit_status[r] == -1) kill(kids[r], SIGKILL);
      }
    }
    usleep(2000);
  }
  std::error_code ec;
  std::filesystem::remove_all(store_dir, ec);
  if (multi_host) unlink(shm_path.c_str());  // the mapping stays valid until we exit
  if (g_stop) {
    std::fprintf(stderr, "ina-bench: stopped by a signal; workers killed\n");
    return 1;  // ~Process stops the switch if we started one
  }

  // The switch's counters.
  std::string counters = "{}";
  if (sw) {
    // Let it see the workers' LEAVEs before it stops.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto st = sw->Stop(SIGTERM, std::chrono::seconds(10));
    for (const auto& line : sw->Drain(std::chrono::seconds(2))) {
      const std::string key = "{\"switch_counters\": ";
      if (line.rfind(key, 0) == 0) counters = line.substr(key.size(), line.size() - key.size() - 1);
      if (say && line.rfind("{", 0) != 0) log("  switch: %s\n", line.c_str());
    }
  }

  // Failure drill verdict.
  if (o.kill_rank >= 0) {
    bool all_failed = !timed_out;
    double max_ms = 0;
    std::string codes;
    for (int r = 0; r < o.workers; ++r) {
      if (r == o.kill_rank) continue;
      const auto& rs = sh->ranks[r];
      all_failed &= rs.ina_code != 0;
      max_ms = std::max(max_ms, rs.error_ms);
      codes += (codes.empty() ? "\"" : ", \"") +
               std::string(StatusCodeName(static_cast<StatusCode>(rs.ina_code))) + "\"";
      log("  rank %d: %s after %.0f ms\n", r, rs.ina_error, rs.error_ms);
    }
    log("%s: every surviving rank returned an error within %.0f ms\n", all_failed ? "PASS" : "FAIL",
        max_ms);
    std::printf(
        "{\"workers\": %d, \"killed_rank\": %d, \"survivors_failed\": %s, "
        "\"max_error_ms\": %.1f, \"progress_timeout_ms\": %d, \"codes\": [%s], "
        "\"switch_counters\": %s}\n",
        o.workers, o.kill_rank, all_failed ? "true" : "false", max_ms, o.progress_timeout_ms,
        codes.c_str(), counters.c_str());
    return all_failed ? 0 : 1;
  }

  bool ok = !timed_out;
  for (int r = 0; r < o.workers; ++r) {
    const auto& rs = sh->ranks[r];
    const int st = exit_status[r];
    if (st != -1 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
      if (WIFSIGNALED(st)) {
        std::fprintf(stderr, "ina-bench: rank %d killed by signal %d\n", r, WTERMSIG(st));
      } else {
        std::fprintf(stderr, "ina-bench: rank %d exited with %d\n", r, WEXITSTATUS(st));
      }
      ok = false;
    }
    if (rs.ina_code != 0) {
      std::fprintf(stderr, "ina-bench: rank %d: ina: %s\n", r, rs.ina_error);
      ok = false;
    }
    if (rs.gloo_code != 0) {
      std::fprintf(stderr, "ina-bench: rank %d: gloo: %s\n", r, rs.gloo_error);
      ok = false;
    }
  }
  if (timed_out) {
    std::fprintf(stderr, "ina-bench: stopped workers still running %s\n",
                 kill_at < deadline ? "after another worker failed"
                                    : ("at the --timeout-s deadline (" +
                                       std::to_string(o.timeout_s) + " s)").c_str());
  }

  // Verification: rebuild the inputs here.
  bool bit_identical = ok;
  for (int r = 1; r < o.workers; ++r) {
    bit_identical &= sh->ranks[r].fingerprint == sh->ranks[0].fingerprint;
  }
  bool exact = false, within_bound = false;
  double max_rel_err = -1, gloo_rel_err = -1;
  std::string detail;
  if (ok) {
    if (o.int32) {
      std::vector<std::vector<int32_t>> in;
      for (int r = 0; r < o.workers; ++r) in.push_back(MakeIntInput(o.seed, r, o.elements, true));
      auto want = ExpectInt(in);
      exact = within_bound = std::memcmp(want.data(), result0, bytes) == 0;
      max_rel_err = exact ? 0 : 1;
    } else {
      std::vector<std::vector<float>> in;
      for (int r = 0; r < o.workers; ++r) in.push_back(MakeFloatInput(o.seed, r, o.elements));
      auto want = ExpectFloat(in, o.k);
      auto c =
          CheckFloat(std::span<const float>(reinterpret_cast<float*>(result0), o.elements), want);
      exact = c.exact;
      within_bound = c.within_bound;
      max_rel_err = c.max_rel_err;
      detail = c.detail;
      if (o.gloo) {
        auto g =
            CheckFloat(std::span<const float>(reinterpret_cast<float*>(gloo0), o.elements), want);
        gloo_rel_err = g.max_rel_err;
      }
    }
  }
  uint64_t retx = 0, sent = 0;
  for (int r = 0; r < o.workers; ++r) {
    retx += sh->ranks[r].retransmissions;
    sent += sh->ranks[r].packets_sent;
  }
  const bool gloo_ran = ok && o.gloo && !o.int32;
  const double ina_ms = ok ? MedianOfMax(sh, o.workers, o.iters, false) : -1;
  const double gloo_ms = gloo_ran ? MedianOfMax(sh, o.workers, o.iters, true) : -1;
  const double speedup = gloo_ran && ina_ms > 0 ? gloo_ms / ina_ms : -1;
  const double gbps = ina_ms > 0 ? bytes * 8 / (ina_ms * 1e6) : 0;
  const bool verified = ok && bit_identical && exact && within_bound;
  // Bytes each worker sends (and receives) per all-reduce as a link shaper counts them: every
  // frame's Ethernet, IPv4, UDP and ina headers, the payload, and for floats the exponent round
  // (one header-only frame per slot used; assumes the switch granted the window asked for).
  const uint64_t blocks = (o.elements + o.k - 1) / o.k;
  const uint64_t frame_headers = 14 + 20 + 8 + proto::kHeaderBytes;
  const uint64_t exp_frames = o.int32 ? 0 : std::min<uint64_t>(blocks, o.window);
  const uint64_t wire_bytes = bytes + (blocks + exp_frames) * frame_headers;
  if (!detail.empty()) log("  first difference: %s\n", detail.c_str());
  log("ina:  median %.3f ms per all-reduce (%.2f Gbit/s of tensor per worker), %llu "
      "retransmissions of %llu packets\n",
      ina_ms, gbps, static_cast<unsigned long long>(retx), static_cast<unsigned long long>(sent));
  if (gloo_ran)
    log("gloo: median %.3f ms per ring all-reduce; ina speed-up %.2fx\n", gloo_ms, speedup);
  log("%s: bit-identical on all %d workers: %s; exact quantized sum: %s; within bound: %s; "
      "max relative error %.3g\n",
      verified ? "VERIFIED" : "FAILED", o.workers, bit_identical ? "yes" : "no",
      exact ? "yes" : "no", within_bound ? "yes" : "no", max_rel_err);
  std::printf(
      "{\"workers\": %d, \"elements\": %zu, \"dtype\": \"%s\", \"k\": %d, \"window\": %d, "
      "\"iters\": %d, \"drop_rate\": %g, \"ina_ms_median\": %.4f, \"gloo_ms_median\": %.4f, "
      "\"speedup_vs_gloo\": %.3f, \"ina_gbps\": %.3f, \"bit_identical\": %s, \"exact\": %s, "
      "\"within_bound\": %s, \"max_rel_err\": %.4g, \"gloo_max_rel_err\": %.4g, "
      "\"retransmissions\": %llu, \"packets_sent\": %llu, \"verified\": %s, "
      "\"dataplane\": \"%s\", \"transport\": \"%s\", \"fingerprint\": \"%016llx\", "
      "\"launch\": \"%s\", \"wire_bytes_per_worker\": %llu, \"wire_frames_per_worker\": %llu, "
      "\"switch_counters\": %s}\n",
      o.workers, o.elements, o.int32 ? "int32" : "float", o.k, o.window, o.iters, o.drop_rate,
      ina_ms, gloo_ms, speedup, gbps, bit_identical ? "true" : "false", exact ? "true" : "false",
      within_bound ? "true" : "false", max_rel_err, gloo_rel_err,
      static_cast<unsigned long long>(retx), static_cast<unsigned long long>(sent),
      verified ? "true" : "false", o.dataplane.c_str(), o.transport.c_str(),
      static_cast<unsigned long long>(sh->ranks[0].fingerprint), multi_host ? "netns" : "fork",
      static_cast<unsigned long long>(wire_bytes),
      static_cast<unsigned long long>(blocks + exp_frames), counters.c_str());
  return verified ? 0 : 1;
}

}  // namespace
}  // namespace ina::bench

int main(int argc, char** argv) { return ina::bench::Main(argc, argv); }
