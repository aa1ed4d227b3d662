// Job ids handed out by the fabric, so that process groups, subgroups and separate trainings
// sharing one switch never collide (docs/protocol.md, "Job ids").
//
// A framework plugin calls AllocateJobId on one rank (rank 0 of the group), publishes the id
// through its own rendezvous (a torch Store, NCCL's bootstrap), and every rank then creates its
// Communicator with that job_id. Ids chosen by hand should stay below proto::kAllocJobMin.
#pragma once

#include <cstdint>

#include "ina/base/status.h"
#include "ina/host/config.h"

namespace ina::host {

// Asks the fabric at config.switch_host:switch_port (over config.transport) for a job id that no
// job on it uses or has reserved: sends ALLOC_JOB every 100 ms until ALLOC_ACK, an error or
// config.join_timeout_ms. The id is in [proto::kAllocJobMin, 65535] and stays reserved for this
// caller until its ranks join it or the fabric's job timeout passes. Blocks up to
// join_timeout_ms. config.job_id, rank and world_size are not used.
// Errors: InvalidArgument (config), DeadlineExceeded naming the last transport error (no fabric
// answered), ResourceExhausted (the fabric has no id free), the transport's error.
Result<uint16_t> AllocateJobId(const CommConfig& config);

}  // namespace ina::host
