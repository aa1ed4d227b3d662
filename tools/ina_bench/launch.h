// ina-bench's parent side: start the fabric (ina-switchd or ina-rtlsim, unless a running one is
// named), make the region the workers' reports land in, start the workers and wait for them within
// the deadline, and stop the fabric with its counters. Three ways to run the workers:
//   - fork (the default): forked children sharing the region's memory;
//   - --worker-netns: `ip netns exec NSr <this binary> --role worker ...` per rank; they meet the
//     parent's coordinator (coordinator.h) over TCP on 127.0.0.1 inside their namespace;
//   - --listen: none started here; workers started on their hosts connect to the coordinator.
//
// Waiting: the parent blocks in sigtimedwait() on SIGCHLD, SIGINT, SIGTERM and SIGUSR1 (the
// coordinator's "something changed"; no polling). A failed worker (a child that exits non-zero,
// a rank the coordinator lost or that reported an error) moves the deadline to the communicator's
// progress timeout (+2 s) so that the others report their own error; at the deadline children
// still running are killed (SIGKILL) and the coordinator closes every connection (a worker
// elsewhere exits when it sees that). SIGINT/SIGTERM do both at once.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "ina/base/status.h"
#include "options.h"
#include "process.h"
#include "worker.h"

namespace ina::bench {

// The switch the workers use: ours (`process` set) or the one --switch / --worker-switch names.
struct Fabric {
  std::optional<Process> process;
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string key_dir;  // --sec keyed: the admin key and job secret files (removed by StopFabric)
};
// --transport memif: the switch's address on the memif links, rank r's address ("10.77.1.<r+1>:
// 40000"), and the EAL arguments of the switch (rank -1: one net_memif server port per rank) or of
// rank r (the client end of its port). Sockets live in o.memif_dir; every process gets its own
// file prefix (removed by RemoveMemifState). With a CPU for each process (workers + 1 <= CPUs)
// the switch runs on CPU 0 and rank r on CPU r+1, else every process on any CPU.
inline constexpr const char* kMemifSwitchIp = "10.77.0.1";
inline constexpr uint16_t kMemifSwitchPort = 47000;
std::string MemifWorkerAddress(int rank);
std::string MemifEal(const Options& o, int rank);
// Removes o.memif_dir and the EAL runtime folders of this run's file prefixes.
void RemoveMemifState(const Options& o);

// Starts ina-switchd (--dataplane sw) or ina-rtlsim (rtl) from this binary's directory on a free
// loopback port and waits for its "listening on" line (60 s). Errors: the start failed, or the
// fabric did not come up.
Result<Fabric> StartFabric(const Options& o);

// Stops a fabric we started (SIGTERM, 10 s) and returns its "switch_counters" JSON object ("{}"
// when none, or when it was not ours); its other lines are echoed unless --quiet.
std::string StopFabric(const Options& o, Fabric& fabric);

// The region the workers' reports land in: an anonymous shared mapping (forked workers write it
// directly; for workers over TCP the coordinator writes it).
struct SharedRegion {
  SharedView view{};
};
// Maps MapBytes(o) bytes and initialises the process-shared barrier for o.workers.
Result<SharedRegion> MakeSharedRegion(const Options& o);

// How the workers ended.
struct Reaped {
  // Per rank: the waitpid status (fork, netns), or W_EXITCODE of the code a worker elsewhere
  // reported; -1: killed by us and not reaped, or no report.
  std::vector<int> exit_status;
  std::vector<std::string> lost;  // per rank: why the coordinator gave it up ("" if it did not)
  bool timed_out = false;         // some were killed at the deadline
  bool after_failure = false;     // ... which a failed worker had brought forward
  bool stopped = false;           // SIGINT/SIGTERM: every worker killed
};
// Starts every rank (or, with --listen, waits for them to connect) and waits for all of them (see
// the head of this file). Forked workers' Gloo meets in `store_dir`. Errors: fork failed (the
// ranks already started are killed and reaped), the coordinator could not listen.
Result<Reaped> RunWorkers(const Options& o, const Fabric& fabric, const SharedRegion& region,
                          const std::string& store_dir);

}  // namespace ina::bench
