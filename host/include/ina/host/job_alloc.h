// Job ids handed out by the fabric, so that process groups, subgroups and separate trainings
// sharing one switch never collide (docs/protocol.md, "Job ids").
//
// A framework plugin calls AllocateJobId on one rank (rank 0 of the group), publishes the id
// through its own rendezvous (a torch Store, NCCL's bootstrap), and every rank then creates its
// Communicator with that job_id. Ids chosen by hand should stay below proto::kAllocJobMin.
#pragma once

#include <cstdint>
#include <span>

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

// Keyed jobs from the job's own rendezvous (docs/security.md, "Keys: where they come from"): one
// rank (rank 0, the launcher) makes a fresh secret, installs it at the fabric for the job id it
// allocated and publishes it to the other ranks through the rendezvous (a torch Store, NCCL's
// bootstrap), never on a command line or in a log.
//
// A fresh job secret: 32 random bytes (libcrypto's RAND_bytes). Internal if the generator fails.
Result<JobSecret> MakeJobSecret();
// Installs `secret` for job `job` in sec mode config.sec (mac or mac_encrypt) at the fabric at
// config.switch_host:switch_port, as ina-jobkey does: a set_key sealed under `admin_secret` (the
// switch's --admin-key-file secret), resent every 100 ms, and sealed again with a fresh sequence
// (proto::SetKeySequence of the moment) every 300 ms, until set_key_ack or config.join_timeout_ms:
// concurrent launchers may each move the switch's sequence floor. With lanes on switch cores
// (config.switch_cores N > 1) at each core in turn, switch_port + c, as the lanes join there.
// Blocks up to join_timeout_ms in all.
// Errors: InvalidArgument (config, sec crc, a secret the fabric cannot take), Unimplemented (the
// switch answered error(key_refused): its engine cannot run config.sec, e.g. the RTL core and
// mac_encrypt; the message names the mode), DeadlineExceeded (no set_key_ack: the switch is down,
// has no --admin-key-file, or another admin key), the transport's error.
Status InstallJobKey(const CommConfig& config, uint16_t job, std::span<const uint8_t> admin_secret,
                     const JobSecret& secret);
// The launcher's whole step: MakeJobSecret, then InstallJobKey; the secret, or the first error.
Result<JobSecret> MakeAndInstallJobKey(const CommConfig& config, uint16_t job,
                                       std::span<const uint8_t> admin_secret);
// The switch's admin secret from INA_ADMIN_KEY (a file of mode 0600, or fd:N), for a launcher
// that installs the job's secret (config.sec keyed, no job secret). FailedPrecondition naming
// INA_ADMIN_KEY when it is unset (`who` says who installs it: "rank 0"), LoadJobSecret's
// errors otherwise.
Result<JobSecret> AdminSecretFromEnv(const CommConfig& config, const std::string& who);
// A rank of a tree whose switch is not the launcher's (docs/hierarchy.md, "Keyed jobs"):
// installs `secret` for `job` at config's own switch with INA_ADMIN_KEY (AdminSecretFromEnv, then
// InstallJobKey; the admin secret wiped). The same key already there is no change. Their errors,
// with `who` and the switch in the context.
Status InstallJobKeyAtOwnSwitch(const CommConfig& config, uint16_t job, const JobSecret& secret,
                                const std::string& who);

}  // namespace ina::host
