#include "worker.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <thread>
#include <vector>

#include "gloo_ring.h"
#include "ina/host/communicator.h"
#include "launch.h"
#include "verify.h"

namespace ina::bench {
namespace {

using Clock = std::chrono::steady_clock;

void SetError(char* dst, const Status& s) { std::snprintf(dst, 256, "%s", s.ToString().c_str()); }

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

host::CommConfig MakeConfig(const Options& o, int rank, const std::string& host, uint16_t port) {
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
  if (o.transport == "memif") {
    cfg.transport = "dpdk";
    cfg.dpdk.eal_args = MemifEal(o, rank);
    const HostPort local = SplitHostPort(MemifWorkerAddress(rank));
    cfg.dpdk.local_ip = local.host;
    cfg.dpdk.local_port = local.port;
    cfg.dpdk.backoff_max_us = o.dpdk_backoff_us;
  } else if (o.transport == "dpdk") {
    cfg.transport = "dpdk";
    cfg.dpdk.eal_args = SubstRank(o.dpdk_eal, rank);
    const HostPort local = SplitHostPort(SubstRank(o.dpdk_local, rank));
    cfg.dpdk.local_ip = local.host;
    cfg.dpdk.local_port = local.port;
    cfg.dpdk.backoff_max_us = o.dpdk_backoff_us;
  }
  return cfg;
}

}  // namespace

size_t MapBytes(const Options& o) { return sizeof(Shared) + 2 * o.elements * 4 + 64; }

SharedView ViewOf(void* mem, const Options& o) {
  auto* result0 = static_cast<uint8_t*>(mem) + sizeof(Shared);
  return SharedView{static_cast<Shared*>(mem), result0, result0 + o.elements * 4};
}

int Worker(const Options& o, int rank, const std::string& host, uint16_t port,
           const std::string& gloo_host, const std::string& store_dir, SharedView view) {
  Shared* sh = view.shared;
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

  auto comm = host::Communicator::Create(MakeConfig(o, rank, host, port));
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
  if (rank == 0) std::memcpy(view.result0, buf.data(), bytes);
  auto st = (*comm)->stats();
  me.retransmissions = st.retransmissions;
  me.packets_sent = st.packets_sent;
  me.bad_crc = st.bad_crc;
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
  if (rank == 0) std::memcpy(view.gloo0, buf.data(), bytes);
  return 0;
}

int WorkerMain(const Options& o) {
  int fd = open(o.shm_path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    std::perror(("ina-bench worker: " + o.shm_path).c_str());
    return 1;
  }
  void* mem = mmap(nullptr, MapBytes(o), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) {
    std::perror("ina-bench worker: mmap");
    return 1;
  }
  const HostPort sw = SplitHostPort(o.switch_addr);  // Shared initialised by the parent
  return Worker(o, o.rank, sw.host, sw.port, o.gloo_host, o.store_dir, ViewOf(mem, o));
}

}  // namespace ina::bench
