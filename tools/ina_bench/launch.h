// ina-bench's parent side: start the fabric (ina-switchd or ina-rtlsim, unless a running one is
// named), make the region shared with the workers, start the workers (fork, or `ip netns exec`
// of this binary per rank in multi-host mode), wait for them within the deadline, and stop the
// fabric with its counters.
//
// Waiting: the parent blocks in sigtimedwait() on SIGCHLD, SIGINT and SIGTERM (no polling); a
// failed worker moves the deadline to the communicator's progress timeout (+2 s) so that the
// others report their own error, and workers still running at the deadline are killed (SIGKILL).
// SIGINT/SIGTERM kill the workers at once.
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

// The region shared with the workers: an anonymous mapping, or in multi-host mode a /dev/shm file
// the exec'd workers map (its name unlinked by Unlink once they are done; the mapping stays).
struct SharedRegion {
  SharedView view{};
  std::string path;  // the file, multi-host mode only
  void Unlink();
};
// Maps MapBytes(o) bytes and initialises the process-shared barrier for o.workers.
Result<SharedRegion> MakeSharedRegion(const Options& o);

// How the workers ended.
struct Reaped {
  std::vector<int> exit_status;  // waitpid status per rank; -1: killed by us and not reaped
  bool timed_out = false;        // some were killed at the deadline
  bool after_failure = false;    // ... which a failed worker had brought forward
  bool stopped = false;          // SIGINT/SIGTERM: every worker killed
};
// Starts every rank and waits for all of them (see the head of this file). Gloo meets in
// `store_dir`. Errors: fork failed (the ranks already started are killed and reaped).
Result<Reaped> RunWorkers(const Options& o, const Fabric& fabric, const SharedRegion& region,
                          const std::string& store_dir);

}  // namespace ina::bench
