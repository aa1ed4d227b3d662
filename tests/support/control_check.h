// Shared by the libFuzzer targets that drive a ControlPlane (tests/dataplane/**/fuzz): the job
// table's invariants, checked with FUZZ_CHECK after every record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ina/dp/control.h"
#include "support/fuzz_check.h"

// Jobs() has num_jobs() entries, no job is both active and queued, a queued or active job has
// every rank, each active job's slots lie in the pool and no two overlap, and the largest free
// extent fits in what is left.
inline void CheckControlJobs(const ina::dp::ControlPlane& cp) {
  const std::vector<ina::dp::JobInfo> jobs = cp.Jobs();
  FUZZ_CHECK(jobs.size() == cp.num_jobs(), "Jobs() %zu, num_jobs %zu", jobs.size(), cp.num_jobs());
  uint32_t used = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const ina::dp::JobInfo& a = jobs[i];
    FUZZ_CHECK(!(a.active && a.queued), "job %u both active and queued", a.job_id);
    FUZZ_CHECK(!a.queued || a.joined == a.world_size, "queued job %u with %u of %u ranks", a.job_id,
               a.joined, a.world_size);
    if (!a.active) continue;
    FUZZ_CHECK(a.window >= 1 && a.slot_base + a.window <= cp.pool_slots(), "job %u slots [%u,+%u)",
               a.job_id, a.slot_base, a.window);
    FUZZ_CHECK(a.joined == a.world_size, "active job %u with %u of %u ranks", a.job_id, a.joined,
               a.world_size);
    used += a.window;
    for (size_t k = i + 1; k < jobs.size(); ++k) {
      const ina::dp::JobInfo& b = jobs[k];
      FUZZ_CHECK(a.job_id != b.job_id, "job %u twice", a.job_id);
      if (!b.active) continue;
      FUZZ_CHECK(a.slot_base + a.window <= b.slot_base || b.slot_base + b.window <= a.slot_base,
                 "jobs %u and %u overlap", a.job_id, b.job_id);
    }
  }
  FUZZ_CHECK(cp.LargestFreeExtent() <= cp.pool_slots() - used, "free extent %u, %u of %u used",
             cp.LargestFreeExtent(), used, cp.pool_slots());
}
