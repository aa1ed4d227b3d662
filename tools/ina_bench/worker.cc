#include "worker.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <thread>
#include <vector>

#include "coord_client.h"
#include "gloo_ring.h"
#include "ina/base/log_line.h"
#include "ina/host/communicator.h"
#include "ina/host/memory_domain.h"
#include "ina/host/quant.h"
#include "ina/host/transport.h"
#include "launch.h"
#include "verify.h"

namespace ina::bench {
namespace {

using Clock = std::chrono::steady_clock;

void SetError(char* dst, const Status& s) { std::snprintf(dst, 256, "%s", s.ToString().c_str()); }

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

Result<host::CommConfig> MakeConfig(const Options& o, int rank, const std::string& host,
                                    uint16_t port) {
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
  cfg.switch_cores = o.switch_cores;
  cfg.udp_gso = o.udp_gso;
  cfg.quant = o.quant;
  if (o.sec != "crc") {  // the secret never on a command line: INA_JOB_KEY names a file or fd
    const char* key = std::getenv("INA_JOB_KEY");
    if (key == nullptr) {
      return FailedPrecondition("--sec " + o.sec +
                                " needs the job secret: INA_JOB_KEY=FILE (hex, mode 0600) or fd:N");
    }
    cfg.sec = o.sec;
    INA_ASSIGN_OR_RETURN(cfg.job_secret, host::LoadJobSecret(key));
  }
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
    cfg.dpdk.mtu = static_cast<unsigned>(o.dpdk_mtu);
  } else if (o.transport == "verbs") {
    cfg.transport = "verbs";  // the fabric is switch_host (its port is 4791, not switch_port)
    INA_RETURN_IF_ERROR(host::ApplyVerbsEnv(&cfg.verbs));  // each worker's own device
  } else if (o.transport == "dpdk") {
    cfg.transport = "dpdk";
    cfg.dpdk.eal_args = SubstRank(o.dpdk_eal, rank);
    const HostPort local = SplitHostPort(SubstRank(o.dpdk_local, rank));
    cfg.dpdk.local_ip = local.host;
    cfg.dpdk.local_port = local.port;
    cfg.dpdk.backoff_max_us = o.dpdk_backoff_us;
    cfg.dpdk.mtu = static_cast<unsigned>(o.dpdk_mtu);
  }
  return cfg;
}

class SharedMemoryPeers : public Peers {
 public:
  SharedMemoryPeers(SharedView view, std::string store_dir)
      : view_(view), store_dir_(std::move(store_dir)) {}
  Status Barrier() override {
    pthread_barrier_wait(&view_.shared->barrier);
    return Status::Ok();
  }
  Result<std::unique_ptr<GlooRing>> Gloo(int rank, int world, std::chrono::milliseconds timeout,
                                         const std::string& host) override {
    return GlooRing::Create(rank, world, store_dir_, timeout, host);
  }

 private:
  SharedView view_;
  std::string store_dir_;
};

// The coordinator's barriers and store, for a --role worker.
class CoordPeers : public Peers, public RendezvousStore {
 public:
  CoordPeers(CoordClient& client, std::chrono::milliseconds barrier_timeout)
      : client_(client), barrier_timeout_(barrier_timeout) {}
  Status Barrier() override { return client_.Barrier(barrier_timeout_); }
  Result<std::unique_ptr<GlooRing>> Gloo(int rank, int world, std::chrono::milliseconds timeout,
                                         const std::string& host) override {
    return GlooRing::Create(rank, world, *this, timeout, host);
  }
  Status Set(const std::string& key, const std::vector<char>& value,
             std::chrono::milliseconds timeout) override {
    return client_.Set(key, value, timeout);
  }
  Result<std::vector<char>> Get(const std::string& key,
                                std::chrono::milliseconds timeout) override {
    return client_.Get(key, timeout);
  }
  Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    return client_.Wait(keys, timeout);
  }

 private:
  CoordClient& client_;
  std::chrono::milliseconds barrier_timeout_;
};

}  // namespace

std::unique_ptr<Peers> ForkPeers(SharedView view, const std::string& store_dir) {
  return std::make_unique<SharedMemoryPeers>(view, store_dir);
}

int Worker(const Options& o, int rank, const std::string& host, uint16_t port,
           const std::string& gloo_host, Peers& peers, SharedView view) {
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

  Result<host::CommConfig> cfg = MakeConfig(o, rank, host, port);
  Result<std::unique_ptr<host::Communicator>> comm =
      cfg.ok() ? host::Communicator::Create(*cfg)
               : Result<std::unique_ptr<host::Communicator>>(cfg.status());
  if (!comm.ok()) {
    me.ina_code = static_cast<int>(comm.status().code());
    SetError(me.ina_error, comm.status());
    return 1;
  }
  me.k = (*comm)->config().k;
  // --memory host-async: the tensors go through a memory domain over host memory.
  std::unique_ptr<host::MemoryDomain> domain;
  if (o.memory == "host-async") {
    auto d = host::MakeHostDomain();
    if (!d.ok()) {
      me.ina_code = static_cast<int>(d.status().code());
      SetError(me.ina_error, d.status());
      return 1;
    }
    domain = std::move(d).value();
  }
  // The tensor back to this rank's input (the all-reduce overwrites it). Timed runs do it before
  // the barrier, outside the clock, as the Gloo runs below do: only the all-reduce is timed.
  // An empty input's data() is null, which memcpy must not get even for 0 bytes.
  const void* input = o.int32 ? static_cast<const void*>(iin.data()) : fin.data();
  auto reset = [&] {
    if (bytes > 0) std::memcpy(buf.data(), input, bytes);
  };
  const host::AllReduceOptions opts{.average = o.average};
  auto reduce = [&]() -> Status {
    if (o.int32) {
      const std::span<int32_t> t(reinterpret_cast<int32_t*>(buf.data()), n);
      return domain ? (*comm)->AllReduce(t, *domain, nullptr, opts) : (*comm)->AllReduce(t, opts);
    }
    const std::span<float> t(reinterpret_cast<float*>(buf.data()), n);
    return domain ? (*comm)->AllReduce(t, *domain, nullptr, opts) : (*comm)->AllReduce(t, opts);
  };
  auto run_once = [&]() -> Status {
    reset();
    return reduce();
  };

  // A barrier that fails (another rank or the parent is gone) ends this rank with its error.
  auto barrier = [&](char* error, int* code) {
    Status b = peers.Barrier();
    if (!b.ok()) {
      *code = static_cast<int>(b.code());
      SetError(error, b);
    }
    return b.ok();
  };
  if (o.kill_rank >= 0) {
    // Failure drill: one rank dies mid-call; the others must fail, not hang.
    if (!barrier(me.ina_error, &me.ina_code)) return 1;
    if (rank == o.kill_rank) {
      std::thread([ms = o.kill_after_ms] {
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        raise(SIGKILL);
      }).detach();
    }
    // Every rank keeps calling until the kill lands (a fast machine may finish the first call
    // before it does); a survivor's error time runs from the start of the call that failed.
    // If the kill never lands, the parent's reaping timeout ends the drill.
    auto t0 = Clock::now();
    Status s = run_once();
    while (s.ok()) {
      t0 = Clock::now();
      s = run_once();
    }
    me.error_ms = Ms(t0, Clock::now());
    me.ina_code = static_cast<int>(s.code());
    if (!s.ok()) SetError(me.ina_error, s);
    return s.ok() ? 1 : 0;
  }

  if (!barrier(me.ina_error, &me.ina_code)) return 1;
  Status s = run_once();  // warm-up
  for (int it = 0; it < o.iters && s.ok(); ++it) {
    reset();
    if (!barrier(me.ina_error, &me.ina_code)) return 1;
    auto t0 = Clock::now();
    s = reduce();
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
  me.packets_from_device = st.packets_from_device;
  me.socket_drops = st.socket_drops;
  me.window = (*comm)->window();
  comm->reset();

  if (!o.gloo || o.int32) return 0;
  auto ring = peers.Gloo(rank, o.workers, std::chrono::seconds(60), gloo_host);
  if (!ring.ok()) {
    me.gloo_code = static_cast<int>(ring.status().code());
    SetError(me.gloo_error, ring.status());
    return 1;
  }
  std::span<float> f(reinterpret_cast<float*>(buf.data()), n);
  auto ring_reduce = [&] {  // --average: the ring sums, then every rank divides
    Status st = (*ring)->AllReduce(f);
    if (st.ok() && o.average) host::quant::DivideBy(f.data(), n, o.workers);
    return st;
  };
  if (bytes > 0) std::memcpy(buf.data(), fin.data(), bytes);
  Status g = ring_reduce();  // warm-up
  for (int it = 0; it < o.iters && g.ok(); ++it) {
    if (bytes > 0) std::memcpy(buf.data(), fin.data(), bytes);
    if (!barrier(me.gloo_error, &me.gloo_code)) return 1;
    auto t0 = Clock::now();
    g = ring_reduce();
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

int WorkerMain(Options o) {
  const std::string me = "ina-bench worker rank " + std::to_string(o.rank);
  auto fail = [&](const Status& st) {
    LogLinef("%s: %s", me.c_str(), st.ToString().c_str());
    return 1;
  };
  // The coordinator's connection lost mid-run: nobody can take this rank's results any more.
  auto on_lost = [me](const Status& st) {
    LogLinef("%s: lost the coordinator (%s); exiting", me.c_str(), st.ToString().c_str());
    _exit(1);
  };
  auto client = CoordClient::Connect(o.coordinator, o.rank, GivenRunArgs(o),
                                     std::chrono::seconds(o.join_timeout_s), on_lost);
  if (!client.ok()) return fail(client.status());
  if (o.switch_addr.empty()) o.switch_addr = (*client)->switch_addr();
  if (Status st = ApplyRunArgs(&o, (*client)->run_args()); !st.ok()) return fail(st);
  if (!o.quiet) PrintConfig(o, stdout);
  // The report's region: this rank's own copy, laid out as the parent's.
  std::vector<uint8_t> mem(MapBytes(o));
  const SharedView view = ViewOf(mem.data(), o);
  const HostPort sw = SplitHostPort(o.switch_addr);
  // A barrier waits at most the run's deadline; the coordinator fails it sooner when a rank dies.
  CoordPeers peers(**client, std::chrono::seconds(o.timeout_s));
  const int code = Worker(o, o.rank, sw.host, sw.port, o.gloo_host, peers, view);
  // Rank 0's results, for the parent's verification (it verifies only a run where all succeeded).
  const size_t bytes = o.rank == 0 && code == 0 ? o.elements * 4 : 0;
  const bool gloo_ran = o.gloo && !o.int32;
  Status st = (*client)->Report(
      code, view.shared->ranks[o.rank], o.iters, std::span<const uint8_t>(view.result0, bytes),
      std::span<const uint8_t>(view.gloo0, gloo_ran ? bytes : 0), std::chrono::seconds(60));
  if (!st.ok()) return fail(st);
  return code;
}

}  // namespace ina::bench
