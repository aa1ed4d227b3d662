// Programming an ina hardware fabric through its register map: the job table and the counters.
// Needs only a RegisterAccess, so the same code drives a card (MakePcieBarAccess) and the
// Verilator simulation (ina/sim/core_sim.h). Register fields come from proto/ina.toml
// ([[register]] fields, accessors ina::proto::reg::<register>::Get/Set<Field>).
//
// Threading: one caller at a time per RegisterAccess (as RegisterAccess itself). Each call blocks
// for a bounded number of bus accesses (ProgramJob: 6 writes, 8 more for a keyed job, and
// window/2 + 2 reads, 16 more for a keyed job).
#pragma once

#include <cstdint>

#include "ina/base/status.h"
#include "ina/dp/engine.h"
#include "ina/drv/regs.h"

namespace ina::drv {

// Programs job table entry `entry`: job_sel, job_id (id, valid), job_slots (base, window),
// job_world (world, K/64, multicast `group`), job_sec (job.security.mode), for a keyed job (mode
// mac or mac_encrypt) its traffic keys (job_key_up0..3, job_key_down0..3, write-only), then
// job_commit, and reads job_id back while the fabric resets the entry's slots (one slot per cycle)
// and computes the keys' constants. REQUIRES: entry < the fabric's job count (an entry beyond it
// is ignored by the fabric, and the read back fails).
// Errors: InvalidArgument (K not a multiple of 64, a value that does not fit its field, or no
// sec mode; nothing is written), Internal (read back differs), and whatever the RegisterAccess
// returns.
[[nodiscard]] Status ProgramJob(RegisterAccess& regs, uint32_t entry, const dp::JobConfig& job,
                                uint16_t group);

// Marks entry `entry` invalid (its packets become unknown_job); its slots are not reset.
[[nodiscard]] Status ClearJob(RegisterAccess& regs, uint32_t entry);

// Whether the fabric ended entry `entry`'s job (ranks disagree, rule 13 of ina/dp/engine.h):
// job_id's failed bit. The entry stays failed (its packets unknown_job) until ProgramJob or
// ClearJob commits it again.
[[nodiscard]] Result<bool> EntryFailed(RegisterAccess& regs, uint32_t entry);

// The latest job the fabric ended (fail_where, fail_who). any: some job was ended since reset.
struct LastFailure {
  bool any = false;
  uint32_t entry = 0;
  uint16_t slot = 0;
  uint16_t gen = 0;
  uint16_t rank = 0;
};
[[nodiscard]] Result<LastFailure> ReadLastFailure(RegisterAccess& regs);

// Reads every per-cause counter (32-bit registers from counter_base, wrapping at 2^32, widened).
[[nodiscard]] Result<dp::CounterSnapshot> ReadCounters(RegisterAccess& regs);

}  // namespace ina::drv
