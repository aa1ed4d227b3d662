// Where a CollNet communicator gets its job id from.
#pragma once

#include <cstdint>

#include "ina/base/status.h"
#include "ina/host/config.h"

namespace ina::nccl {

// A job id for a new collective on the fabric at config.switch_host:switch_port, in
// [32768, 65535] (ids below that are left to jobs that pick their own, as ina-bench does).
// TODO(#7): ask the fabric (ina::host::AllocateJobId) once it lands on main; until then a random
// id from that range, so two NCCL communicators on one switch collide with probability 1/32768.
Result<uint16_t> NewJobId(const host::CommConfig& config);

}  // namespace ina::nccl
