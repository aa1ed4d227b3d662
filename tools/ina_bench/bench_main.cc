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
// Workers elsewhere (docs/testbed.md): they meet the parent's coordinator over TCP (coordinator.h),
// which hands them the run's options, holds their barriers and Gloo's rendezvous, and takes their
// reports (timings, errors, fingerprints, rank 0's results) for the same verification.
//   - --worker-netns NS0,NS1,... (scripts/testbed.sh): the parent runs `ip netns exec NSr <this
//     binary> --role worker --coordinator 127.0.0.1:P --rank r ...` for each rank, listening on
//     127.0.0.1 inside each namespace; each worker talks to the switch address given for it
//     (--worker-switch) and binds Gloo to its own address (--worker-addr).
//   - --listen HOST:PORT: the parent starts no workers; each is started on its host with
//     `ina-bench --role worker --coordinator HOST:PORT --rank r [--switch ...] [--gloo-host ...]`.
//
// Transport: --transport dpdk runs each rank's communicator over the DPDK transport instead of
// UDP sockets; --dpdk-eal and --dpdk-local are templates in which "{rank}" becomes the rank, so
// one command line gives every rank its own EAL file prefix, vdev and address. --transport memif
// does that itself on one host: a net_memif port per rank on the switch (ina-switchd --io dpdk),
// the client end in each rank, sockets in a temporary folder removed at the end.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "launch.h"
#include "options.h"
#include "report.h"
#include "worker.h"

// Parts: options.h (the command line), worker.h (one rank), launch.h (fabric, shared region,
// starting and waiting for the workers), report.h (verification, summary, the JSON line).
namespace ina::bench {
namespace {

int Run(const Options& o);

int Main(int argc, char** argv) {
  bool help = false;
  auto parsed = ParseArgs(argc, argv, &help);
  if (help) {
    PrintUsage(stdout);
    return 0;
  }
  if (!parsed.ok()) {
    std::fprintf(stderr, "ina-bench: %s\n", parsed.status().message().c_str());
    return 2;
  }
  Options o = *parsed;
  if (o.role_worker) return WorkerMain(o);
  if (!o.quiet) PrintConfig(o, stdout);
  if (o.transport == "memif") {
    char dir[] = "/tmp/ina-memif-XXXXXX";
    if (mkdtemp(dir) == nullptr) {
      std::perror("ina-bench: mkdtemp");
      return 1;
    }
    o.memif_dir = dir;
  }
  const int rc = Run(o);
  RemoveMemifState(o);
  return rc;
}

int Run(const Options& o) {
  auto fabric = StartFabric(o);
  if (!fabric.ok()) {
    std::fprintf(stderr, "ina-bench: %s\n", fabric.status().message().c_str());
    return 1;
  }
  Say(o,
      "ina-bench: %d workers, %zu %s elements, %d iterations, K=%s, window=%d, drop=%.3g, "
      "switch %s:%u, job %d\n",
      o.workers, o.elements, o.int32 ? "int32" : "float", o.iters,
      o.k > 0 ? std::to_string(o.k).c_str() : "auto", o.window, o.drop_rate, fabric->host.c_str(),
      fabric->port, o.job);

  auto region = MakeSharedRegion(o);
  if (!region.ok()) {
    std::fprintf(stderr, "ina-bench: %s\n", region.status().ToString().c_str());
    return 1;
  }
  char tmpl[] = "/tmp/ina-bench-XXXXXX";
  const std::string store_dir = mkdtemp(tmpl) ? tmpl : "/tmp";
  auto reaped = RunWorkers(o, *fabric, *region, store_dir);
  std::error_code ec;
  std::filesystem::remove_all(store_dir, ec);
  if (!reaped.ok()) {
    std::fprintf(stderr, "ina-bench: %s\n", reaped.status().ToString().c_str());
    return 1;
  }
  if (reaped->stopped) {
    std::fprintf(stderr, "ina-bench: stopped by a signal; workers killed\n");
    return 1;  // ~Process stops the switch if we started one
  }
  const std::string counters = StopFabric(o, *fabric);
  if (o.kill_rank >= 0) return ReportKillDrill(o, region->view, *reaped, counters);
  return ReportRun(o, region->view, *reaped, counters);
}

}  // namespace
}  // namespace ina::bench

int main(int argc, char** argv) { return ina::bench::Main(argc, argv); }
