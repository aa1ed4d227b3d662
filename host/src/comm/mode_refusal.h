// The words for a fabric whose engine cannot run a job's sec mode, shared by the join's
// error(no_slots) naming join_param sec_mode (membership.cc) and a launcher's error(key_refused)
// (job_alloc.cc): which mode, what runs it, and what to do.
#pragma once

#include <cstdint>
#include <string>

#include "ina/proto/wire.h"

namespace ina::host::internal {

inline std::string CannotRunSecMode(uint16_t mode) {
  if (mode != 1 && mode != 2) {
    return "sec mode " + std::to_string(mode) + " is not mac (1) or mac_encrypt (2)";
  }
  return "the fabric's engine cannot run this job's sec mode " +
         std::string(proto::SecModeName(static_cast<uint8_t>(mode))) +
         " (docs/security.md); set INA_JOB_SEC to a mode it runs";
}

}  // namespace ina::host::internal
