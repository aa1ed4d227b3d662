// Where each lane's transport goes: the one rule shared by the communicator (a transport per lane)
// and the one-off exchanges of job_alloc.cc (ALLOC_JOB to lane 0's, SET_KEY to every switch
// core's).
#pragma once

#include "ina/host/config.h"
#include "ina/host/transport.h"

namespace ina::host::internal {

// Lane `lane` of a validated config (0 <= lane < config.progress_threads): over dpdk with several
// lanes, its port (DpdkLanePorts) or, for lanes on switch cores, queue `lane` of the one port, and
// UDP port dpdk.local_port + lane; with switch_cores > 1, the switch core's own port
// switch_port + lane (docs/switchd.md, "One job on every core").
TransportConfig LaneTransportConfig(const CommConfig& config, int lane);

}  // namespace ina::host::internal
