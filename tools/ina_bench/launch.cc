#include "launch.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <thread>

#include "coordinator.h"

namespace ina::bench {
namespace {

using Clock = std::chrono::steady_clock;

// A SIGINT/SIGTERM that arrives outside RunWorkers' wait (which takes them itself) only sets
// this: the run finishes and cleans up as usual.
volatile sig_atomic_t g_late_stop = 0;
void OnStopSignal(int) { g_late_stop = 1; }

// The command line that runs rank r in its namespace: the worker takes the run's options from
// the coordinator listening at `coordinator` inside that namespace.
std::vector<std::string> WorkerArgv(const Options& o, int r, const std::string& coordinator,
                                    const HostPort& sw, const std::string& gloo_host) {
  std::vector<std::string> a = {"ip", "netns", "exec", o.worker_netns[r], SelfDir() + "/ina-bench"};
  auto add = [&](const char* flag, const std::string& v) {
    a.push_back(flag);
    a.push_back(v);
  };
  add("--role", "worker");
  add("--coordinator", coordinator);
  add("--rank", std::to_string(r));
  add("--switch", sw.host + ":" + std::to_string(sw.port));
  add("--gloo-host", gloo_host);
  add("--join-timeout-s", std::to_string(o.join_timeout_s));
  if (o.quiet) a.push_back("--quiet");
  return a;
}

// The EAL file prefix of the switch (rank -1) or rank r: unique per run, from the socket folder's
// random suffix.
std::string MemifPrefix(const Options& o, int rank) {
  const std::string run = "inab" + o.memif_dir.substr(o.memif_dir.rfind('-') + 1);
  return run + (rank < 0 ? "s" : "w" + std::to_string(rank));
}

void KillAndReap(const std::vector<pid_t>& kids) {
  for (pid_t k : kids) kill(k, SIGKILL);
  for (pid_t k : kids) waitpid(k, nullptr, 0);
}

}  // namespace

std::string MemifWorkerAddress(int rank) {
  return "10.77.1." + std::to_string(rank + 1) + ":40000";
}

std::string MemifEal(const Options& o, int rank) {
  // Pinned when every process can have a CPU of its own (the switch on CPU 0, rank r on r+1):
  // two busy-polling processes on one CPU take turns by time slice, a round trip per slice.
  // Otherwise every process may run on any CPU.
  const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  const std::string cpuset =
      o.workers + 1 <= cpus ? std::to_string(rank + 1) : "(0-" + std::to_string(cpus - 1) + ")";
  std::string eal = "--no-huge -m 256 --no-pci --no-telemetry --log-level=*:warning --lcores 0@" +
                    cpuset + " --file-prefix " + MemifPrefix(o, rank);
  // One memif link per lane of each rank: the worker's lane l opens its l-th port (net_memif<l>,
  // DpdkLanePorts), the switch has a port per (rank, lane), all on its one core.
  const int lanes = o.progress_threads;
  auto sock = [&](int r, int l) {
    return o.memif_dir + "/w" + std::to_string(r) + (l > 0 ? "l" + std::to_string(l) : "") +
           ".sock";
  };
  // Jumbo frames: memif buffers that hold a whole frame, so none is chained over several
  // descriptors (DPDK 22.11's memif delivered some chained jumbo frames damaged: net/dpdk.h).
  const std::string bsize = o.dpdk_mtu > 1500 ? ",bsize=16384" : "";
  if (rank >= 0) {
    for (int l = 0; l < lanes; ++l) {
      eal +=
          " --vdev net_memif" + std::to_string(l) + ",role=client,socket=" + sock(rank, l) + bsize;
    }
    return eal;
  }
  for (int r = 0; r < o.workers; ++r) {
    for (int l = 0; l < lanes; ++l) {
      eal += " --vdev net_memif" + std::to_string(r * lanes + l) +
             ",role=server,id=0,socket=" + sock(r, l) + bsize;
    }
  }
  return eal;
}

void RemoveMemifState(const Options& o) {
  if (o.memif_dir.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(o.memif_dir, ec);
  for (int r = -1; r < o.workers; ++r) {
    std::filesystem::remove_all("/var/run/dpdk/" + MemifPrefix(o, r), ec);
  }
}

// --sec keyed: a fresh admin key and job secret (32 random bytes each, hex) in files only we may
// read, in a directory of their own.
Result<std::string> MakeKeyFiles() {
  char tmpl[] = "/tmp/ina-bench-keys-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return ErrnoStatus("mkdtemp for the key files", errno);
  const std::string dir = tmpl;
  std::ifstream random("/dev/urandom", std::ios::binary);
  for (const char* name : {"/admin.key", "/job.key"}) {
    uint8_t bytes[32];
    if (!random.read(reinterpret_cast<char*>(bytes), sizeof(bytes))) {
      return Internal("reading /dev/urandom for " + dir + name);
    }
    std::string hex;
    char b[3];
    for (uint8_t x : bytes) {
      std::snprintf(b, sizeof(b), "%02x", x);
      hex += b;
    }
    explicit_bzero(bytes, sizeof(bytes));
    const std::string path = dir + name;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return ErrnoStatus(path, errno);
    const bool ok = ::write(fd, hex.data(), hex.size()) == static_cast<ssize_t>(hex.size());
    explicit_bzero(hex.data(), hex.size());
    ::close(fd);
    if (!ok) return Internal("writing " + path);
  }
  return dir;
}

// --sec keyed: installs the job's secret in the switch with ina-jobkey (next to us), and points
// the workers we start at it (INA_JOB_KEY, inherited).
Status InstallJobKey(const Options& o, const Fabric& f) {
  const std::string tool = SelfDir() + "/ina-jobkey";
  const std::string cmd =
      tool + " --switch " + f.host + ":" + std::to_string(f.port) + " --admin-key-file " +
      f.key_dir + "/admin.key --job " + std::to_string(o.job) + " --secret-file " + f.key_dir +
      "/job.key --mode " + o.sec + " --cores " + std::to_string(o.switch_cores) + " > /dev/null";
  const int rc = std::system(cmd.c_str());
  if (rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 3) {
    return Unimplemented(tool + ": the fabric refused the job key: its engine cannot run --sec " +
                         o.sec + " (ina-jobkey said why above)");
  }
  if (rc != 0)
    return Unavailable(tool + " could not install the job key (status " + std::to_string(rc) + ")");
  setenv("INA_JOB_KEY", (f.key_dir + "/job.key").c_str(), 1);
  return Status::Ok();
}

Result<Fabric> StartFabric(const Options& o) {
  Fabric f;
  if (!o.switch_addr.empty() || !o.worker_switch.empty()) {
    const HostPort hp = SplitHostPort(o.switch_addr.empty() ? o.worker_switch[0] : o.switch_addr);
    f.host = hp.host;
    f.port = hp.port;
    return f;
  }
  const std::string fabric = o.dataplane == "rtl" ? "/ina-rtlsim" : "/ina-switchd";
  if (o.sec != "crc") {
    INA_ASSIGN_OR_RETURN(f.key_dir, MakeKeyFiles());
  }
  const bool memif = o.transport == "memif";
  std::vector<std::string> args = {SelfDir() + fabric,
                                   "--bind",
                                   memif ? kMemifSwitchIp : "127.0.0.1",
                                   "--port",
                                   memif ? std::to_string(kMemifSwitchPort) : "0",
                                   "--engine",
                                   o.engine,
                                   "--seed",
                                   std::to_string(o.seed),
                                   "--udp-gso",
                                   o.udp_gso ? "1" : "0"};
  if (!f.key_dir.empty()) {
    args.insert(args.end(),
                {"--admin-key-file", f.key_dir + "/admin.key", "--require-job-keys", "1"});
  }
  if (o.switch_cores > 1) {
    args.insert(args.end(), {"--cores", std::to_string(o.switch_cores), "--core-ports", "1"});
  }
  if (memif) {
    args.insert(args.end(),
                {"--dpdk", MemifEal(o, -1), "--dpdk-backoff-us", std::to_string(o.dpdk_backoff_us),
                 "--dpdk-mtu", std::to_string(o.dpdk_mtu)});
  }
  for (const auto& [flag, p] :
       {std::pair{"--drop-rate", o.drop_rate}, std::pair{"--dup-rate", o.dup_rate},
        std::pair{"--reorder-rate", o.reorder_rate}, std::pair{"--corrupt-rate", o.corrupt_rate}}) {
    if (p > 0) {
      args.push_back(flag);
      args.push_back(std::to_string(p));
    }
  }
  auto p = Process::Start(args);
  if (!p.ok())
    return Status(p.status().code(), "starting " + args[0] + ": " + p.status().message());
  f.process.emplace(std::move(*p));
  // ina-switchd and ina-rtlsim announce themselves the same way.
  auto line = f.process->WaitForLine("", std::chrono::seconds(60));
  while (line.ok() && line->find(" listening on ") == std::string::npos) {
    line = f.process->WaitForLine("", std::chrono::seconds(60));
  }
  if (!line.ok()) {
    return Status(line.status().code(), "switch did not come up: " + line.status().ToString());
  }
  if (memif) {
    f.host = kMemifSwitchIp;
    f.port = kMemifSwitchPort;
  } else {
    f.port = SplitHostPort(*line).port;
  }
  if (!f.key_dir.empty()) INA_RETURN_IF_ERROR(InstallJobKey(o, f));
  return f;
}

std::string StopFabric(const Options& o, Fabric& fabric) {
  if (!fabric.key_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(fabric.key_dir, ec);
    fabric.key_dir.clear();
  }
  std::string counters = "{}";
  if (!fabric.process) return counters;
  // Let it see the workers' LEAVEs before it stops.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  (void)fabric.process->Stop(SIGTERM, std::chrono::seconds(10));
  for (const auto& line : fabric.process->Drain(std::chrono::seconds(2))) {
    const std::string key = "{\"switch_counters\": ";
    if (line.rfind(key, 0) == 0) counters = line.substr(key.size(), line.size() - key.size() - 1);
    if (line.rfind("{", 0) != 0) Say(o, "  switch: %s\n", line.c_str());
  }
  return counters;
}

Result<SharedRegion> MakeSharedRegion(const Options& o) {
  SharedRegion region;
  void* mem = mmap(nullptr, MapBytes(o), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return ErrnoStatus("mmap", errno);
  new (mem) Shared();
  region.view = ViewOf(mem, o);
  pthread_barrierattr_t battr;
  pthread_barrierattr_init(&battr);
  pthread_barrierattr_setpshared(&battr, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&region.view.shared->barrier, &battr, static_cast<unsigned>(o.workers));
  return region;
}

Result<Reaped> RunWorkers(const Options& o, const Fabric& fabric, const SharedRegion& region,
                          const std::string& store_dir) {
  const bool netns = !o.worker_netns.empty();
  const bool remote = !o.listen.empty();
  std::unique_ptr<Coordinator> coord;
  if (netns || remote) {
    CoordinatorSetup cs;
    cs.workers = o.workers;
    cs.iters = o.iters;
    cs.elements = o.elements;
    cs.run_args = RunArgs(o);
    cs.switch_addr = fabric.host + ":" + std::to_string(fabric.port);
    cs.join_timeout = std::chrono::seconds(o.join_timeout_s);
    cs.say = [&o](const std::string& line) { Say(o, "%s\n", line.c_str()); };
    cs.warn = [](const std::string& line) {
      std::fprintf(stderr, "ina-bench: %s\n", line.c_str());
    };
    INA_ASSIGN_OR_RETURN(coord, Coordinator::Create(std::move(cs), o.listen, o.worker_netns));
    if (remote) {
      // Always printed (also with --quiet): whoever starts the workers needs the port.
      std::printf(
          "ina-bench: coordinator listening on %s; start each worker with: ina-bench "
          "--role worker --coordinator <this host>:%s --rank R\n",
          coord->address(0).c_str(),
          coord->address(0).substr(coord->address(0).rfind(':') + 1).c_str());
      std::fflush(stdout);
    }
  }
  struct sigaction stop_action = {};
  stop_action.sa_handler = OnStopSignal;
  sigaction(SIGINT, &stop_action, nullptr);
  sigaction(SIGTERM, &stop_action, nullptr);
  // Blocked before the first fork and before the coordinator's thread starts, so that no child's
  // exit, stop signal or coordinator event is missed; the wait below takes them with
  // sigtimedwait. Children get the old mask back.
  sigset_t waited, old_mask;
  sigemptyset(&waited);
  sigaddset(&waited, SIGCHLD);
  sigaddset(&waited, SIGINT);
  sigaddset(&waited, SIGTERM);
  sigaddset(&waited, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &waited, &old_mask);
  if (coord) coord->Start(region.view, [] { kill(getpid(), SIGUSR1); });

  std::vector<pid_t> kids;
  for (int r = 0; r < o.workers && !remote; ++r) {
    HostPort sw{fabric.host, fabric.port};
    if (!o.worker_switch.empty()) sw = SplitHostPort(o.worker_switch[r]);
    const std::string gloo_host = o.worker_addr.empty() ? "127.0.0.1" : o.worker_addr[r];
    std::vector<std::string> argv;
    if (netns) argv = WorkerArgv(o, r, coord->address(r), sw, gloo_host);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
      if (netns) {
        execvp(cargv[0], cargv.data());
        std::perror("ina-bench: exec ip netns exec");
        _exit(127);
      }
      auto peers = ForkPeers(region.view, store_dir);
      _exit(Worker(o, r, sw.host, sw.port, gloo_host, *peers, region.view));
    }
    if (pid < 0) {
      const int err = errno;
      KillAndReap(kids);
      if (coord) coord->Stop("not started: fork failed");
      pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
      return ErrnoStatus("fork", err);
    }
    kids.push_back(pid);
  }

  Reaped out;
  out.exit_status.assign(o.workers, -1);
  out.lost.assign(o.workers, "");
  const auto deadline = Clock::now() + std::chrono::seconds(o.timeout_s);
  const auto grace = std::chrono::milliseconds(o.progress_timeout_ms + 2000);
  auto kill_at = deadline;
  std::vector<bool> alive(kids.size(), true);
  int running = static_cast<int>(kids.size());
  bool killed = false;
  while (running > 0 || (coord && !coord->done())) {
    if (coord && o.kill_rank < 0) {
      if (auto failed = coord->first_failure()) kill_at = std::min(kill_at, *failed + grace);
    }
    const auto now = Clock::now();
    if (!killed && (out.stopped || now >= kill_at)) {
      out.timed_out = !out.stopped;
      out.after_failure = out.timed_out && kill_at < deadline;
      for (size_t r = 0; r < kids.size(); ++r) {
        if (alive[r]) kill(kids[r], SIGKILL);
      }
      if (coord) {
        coord->Stop(out.stopped         ? "stopped by a signal before it reported"
                    : out.after_failure ? "given up after another rank failed"
                                        : "still running at the --timeout-s deadline");
      }
      killed = true;
    }
    if (coord && netns && running == 0 && !coord->done()) {
      coord->Stop("its process exited without reporting");
    }
    // After the kill, SIGKILLed children exit at once; the 1 s wait only bounds a lost signal.
    const auto left = killed ? std::chrono::nanoseconds(std::chrono::seconds(1))
                             : std::chrono::nanoseconds(kill_at - now);
    timespec ts{static_cast<time_t>(left.count() / 1000000000),
                static_cast<long>(left.count() % 1000000000)};
    siginfo_t info;
    const int sig = sigtimedwait(&waited, &info, &ts);
    if (sig == SIGINT || sig == SIGTERM) {
      out.stopped = true;  // the workers are killed at the top of the loop
      continue;
    }
    // SIGCHLD (several exits may share one), SIGUSR1, a timeout or EINTR: reap whoever is done.
    for (size_t r = 0; r < kids.size(); ++r) {
      int status;
      if (!alive[r] || waitpid(kids[r], &status, WNOHANG) != kids[r]) continue;
      alive[r] = false;
      --running;
      out.exit_status[r] = status;
      // A failed worker leaves the others in a barrier: give them the communicator's progress
      // timeout to report their own error, then stop them.
      const bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
      if (failed && o.kill_rank < 0) kill_at = std::min(kill_at, Clock::now() + grace);
    }
  }
  if (coord) {
    coord->Stop("coordinator stopped");
    for (int r = 0; r < o.workers; ++r) {
      const RankOutcome& rk = coord->outcomes()[r];
      if (rk.state == RankOutcome::State::kLost) {
        out.lost[r] = rk.why + (rk.peer.empty() ? "" : " [" + rk.peer + "]");
      }
      if (remote && rk.state == RankOutcome::State::kReported) {
        out.exit_status[r] = W_EXITCODE(rk.exit_code & 0xFF, 0);
      }
    }
  }
  // SIGUSR1s the coordinator sent after the last wait are still pending: take them while they
  // are blocked (delivered, one would end the process).
  timespec zero{0, 0};
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  while (sigtimedwait(&usr1, nullptr, &zero) == SIGUSR1) {
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  return out;
}

}  // namespace ina::bench
