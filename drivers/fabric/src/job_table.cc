#include "ina/drv/job_table.h"

#include <string>

#include "ina/proto/sec.h"
#include "ina/proto/wire.h"

namespace ina::drv {

namespace r = proto::reg;

Status ProgramJob(RegisterAccess& regs, uint32_t entry, const dp::JobConfig& job, uint16_t group) {
  if (job.k == 0 || job.k % 64 != 0 || !r::job_world::FitsK64(job.k / 64u)) {
    return InvalidArgument("program job: K must be a multiple of 64 that fits job_world.k64");
  }
  if (!r::job_slots::FitsBase(job.slot_base) || !r::job_slots::FitsWindow(job.window) ||
      !r::job_world::FitsWorld(job.world_size) || !r::job_world::FitsGroup(group) ||
      !r::job_id::FitsId(job.job_id)) {
    return InvalidArgument("program job: slot base, window, world size or group out of range");
  }
  if (!proto::IsValidSecMode(static_cast<uint8_t>(job.security.mode))) {
    return InvalidArgument("program job: sec mode " +
                           std::to_string(static_cast<unsigned>(job.security.mode)) +
                           " is not crc, mac or mac_encrypt");
  }
  const bool keyed = proto::IsKeyed(job.security.mode);
  const uint32_t id = r::job_id::SetValid(r::job_id::SetId(0, job.job_id), 1);
  const uint32_t slots =
      r::job_slots::SetWindow(r::job_slots::SetBase(0, job.slot_base), job.window);
  const uint32_t world = r::job_world::SetGroup(
      r::job_world::SetK64(r::job_world::SetWorld(0, job.world_size), job.k / 64u), group);
  INA_RETURN_IF_ERROR(regs.Write32(r::kJobSel, entry));
  INA_RETURN_IF_ERROR(regs.Write32(r::kJobId, id));
  INA_RETURN_IF_ERROR(regs.Write32(r::kJobSlots, slots));
  INA_RETURN_IF_ERROR(regs.Write32(r::kJobWorld, world));
  // job_sec is staged like the others: written for every job, so a CRC job never inherits the mode
  // of the entry programmed before it.
  INA_RETURN_IF_ERROR(
      regs.Write32(r::kJobSec, r::job_sec::SetMode(0, static_cast<uint32_t>(job.security.mode))));
  if (keyed) {
    // The traffic keys, byte 0 of each in bits [31:24] of its first register (write-only).
    const uint32_t up[4] = {r::kJobKeyUp0, r::kJobKeyUp1, r::kJobKeyUp2, r::kJobKeyUp3};
    const uint32_t down[4] = {r::kJobKeyDown0, r::kJobKeyDown1, r::kJobKeyDown2, r::kJobKeyDown3};
    for (int i = 0; i < 4; ++i) {
      INA_RETURN_IF_ERROR(regs.Write32(up[i], proto::Load32(job.security.up.data() + 4 * i)));
      INA_RETURN_IF_ERROR(regs.Write32(down[i], proto::Load32(job.security.down.data() + 4 * i)));
    }
  }
  INA_RETURN_IF_ERROR(regs.Write32(r::kJobCommit, r::job_commit::SetGo(0, 1)));
  // The slot reset walks one slot per cycle, and a keyed entry's key constants take 15 cycles
  // (ina_gcm_keys); reads give them the cycles.
  for (uint32_t i = 0; i < job.window / 2u + 2 + (keyed ? 16u : 0u); ++i) {
    INA_ASSIGN_OR_RETURN(uint32_t got, regs.Read32(r::kJobId));
    if (got != id) return Internal("program job: job_id read back differs");
  }
  return Status::Ok();
}

Status ClearJob(RegisterAccess& regs, uint32_t entry) {
  INA_RETURN_IF_ERROR(regs.Write32(r::kJobSel, entry));
  INA_RETURN_IF_ERROR(regs.Write32(r::kJobId, r::job_id::SetValid(0, 0)));
  INA_RETURN_IF_ERROR(regs.Write32(r::kJobSec, 0));
  return regs.Write32(r::kJobCommit, r::job_commit::SetGo(0, 1));
}

Result<bool> EntryFailed(RegisterAccess& regs, uint32_t entry) {
  INA_RETURN_IF_ERROR(regs.Write32(r::kJobSel, entry));
  INA_ASSIGN_OR_RETURN(uint32_t id, regs.Read32(r::kJobId));
  return r::job_id::GetFailed(id) != 0;
}

Result<LastFailure> ReadLastFailure(RegisterAccess& regs) {
  INA_ASSIGN_OR_RETURN(uint32_t where, regs.Read32(r::kFailWhere));
  INA_ASSIGN_OR_RETURN(uint32_t who, regs.Read32(r::kFailWho));
  LastFailure f;
  f.any = r::fail_who::GetValid(who) != 0;
  f.entry = r::fail_who::GetEntry(who);
  f.slot = static_cast<uint16_t>(r::fail_where::GetSlot(where));
  f.gen = static_cast<uint16_t>(r::fail_where::GetGen(where));
  f.rank = static_cast<uint16_t>(r::fail_who::GetRank(who));
  return f;
}

Result<dp::CounterSnapshot> ReadCounters(RegisterAccess& regs) {
  dp::CounterSnapshot c{};
  for (size_t i = 0; i < proto::kNumCounters; ++i) {
    INA_ASSIGN_OR_RETURN(uint32_t v, regs.Read32(r::kCounterBase + 4 * static_cast<uint32_t>(i)));
    c[i] = v;
  }
  return c;
}

}  // namespace ina::drv
