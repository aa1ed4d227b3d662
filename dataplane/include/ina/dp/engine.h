// The aggregation engine interface: what every fabric (reference model, fast software switch,
// RTL through the simulator) does with data packets. The control plane (join handshake, slot
// allocation) lives outside and programs an Engine through AddJob/RemoveJob.
//
// Packets are the UDP payload: the ina header (proto::kHeaderBytes), count int32 elements,
// big-endian, then the CRC32C trailer (proto::kCrcBytes, ina/proto/crc32c.h) over everything before
// it; or, for a keyed job (JobConfig::security, docs/security.md), the AES-GCM tag
// (proto::kTagBytes, ina/proto/sec.h) in place of the trailer. Processing rules, identical in
// every implementation, in this order:
//   1. rx_packets++.
//   2. Shorter than header + trailer (the CRC's 4 bytes): drop_malformed.
//   3. version != kVersion: drop_bad_version.
//   4. The job the header names is installed and keyed (mode mac or mac_encrypt): rules K1-K3
//      below instead of 4-6. Otherwise (a CRC-only job, or no such job): the trailer is not the
//      CRC32C of the bytes before it: drop_bad_crc. (Nothing but the version and the job id is
//      read before this check, so a damaged packet never touches a job's state.)
//   5. type != data, or length != proto::MessageBytes(count): drop_malformed.
//   6. job not installed: drop_unknown_job. sec (the header's mode) != 0: drop_cross_job.
//  K1. sec != the job's mode: drop_cross_job (a CRC-only packet naming a keyed job, say).
//  K2. type != data, or length != proto::MessageBytes(count, sec): drop_malformed.
//  K3. Rules 7-9; rule 10 waits until the tag verified (K4).
//   7. count > job K: drop_malformed.
//   8. rank >= world size: drop_bad_rank.          9. slot >= window: drop_bad_slot.
//  10. retx flag set: retransmissions++ (the packet goes on).
//  11. The generation window. Slot copy X = gen % 2 holds generation xg, the other copy Y holds
//      yg; the two always hold consecutive generations (cur - 1 and cur, the slot's current one).
//      A job's slot copies start at 0xFFFE (copy 0) and 0xFFFF (copy 1), empty: "no history".
//      - gen == xg and X has the rank's contribution: duplicate. If X is complete (all ranks in),
//        re-send its result to that rank alone (result_resends++); else duplicates++.
//      - gen == xg, X not empty (so X is the slot's current generation, in progress): go on to 12.
//      - gen == xg + 2 (mod 2^16), Y holds gen - 1 and Y is complete or empty (the first use):
//        the next use of this copy; go on to 12 (the copy is reset only at the add).
//        (A rank only sends gen after receiving gen-1's result, which needed every rank's gen-1,
//        which each sent only after receiving gen-2's result; so the copy being reset is no
//        longer needed by anyone.)
//      - otherwise, with d = gen - cur (mod 2^16), cur = the newer of xg, yg: d in 1..0x7FFF is
//        drop_early (the next use while cur still waits for ranks, or further ahead); else
//        drop_stale (behind the window, or an empty copy's initial generation).
//  K4. Keyed jobs, once rule 11 has placed the packet (a duplicate, the current generation, or
//      the next use; drop_early and drop_stale packets are dropped unverified, as they touch
//      nothing): the slot's `use` is the copy's (gen == xg) or Y's + 1 (the next use); every
//      slot's uses start at 0 when the job is added. The tag must verify under the up key with
//      nonce (rank, slot, use) (proto::MakeNonce); else, if it verifies with use - 65536 (an old
//      packet sent again after the 16-bit gen wrapped): drop_replayed; else drop_forged. Then
//      rule 10, then the rest of rule 11 (duplicates and re-sends) and 12. In mac_encrypt the
//      payload read from here on is the decrypted one.
//  12. The slot's history (docs/protocol.md, "Slot history"): slot s of a job with window W and
//      K elements per packet carries, in each call, the exponent round (float: count 0) and then
//      blocks s, s+W, s+2W, ...; so a packet of generation gen is consistent with the history
//      iff (a) offset == s*K (the first use of the slot in a call: the exponent round or block
//      s), or (b) Y (generation gen-1) holds a full block (count K) at offset O, offset ==
//      O + W*K (the slot's next block in the same call), count >= 1 and the int32 flag equals
//      Y's; and in both, count 0 only with offset s*K and the int32 flag clear, and no flag bit
//      other than retx, nonfinite and int32. Otherwise drop_history.
//  13. gen == xg (X in progress) and X's offset, count or int32 flag differ from the packet's, or
//      the int32 flag is clear (a float block or an exponent round) and X's exp differs from the
//      packet's (every rank sends the exponent they agreed; an int32 block's exp is not
//      compared): both are consistent with the history, so the ranks disagree: drop_mismatch,
//      and the engine ends the job: it is removed as by RemoveJob (its later packets are
//      drop_unknown_job) and reported by PollFailures (JobFailure: job, slot, gen, this packet's
//      rank); the control plane sends error(rank_mismatch) to every rank.
//      Otherwise add (for gen == xg + 2: reset X to generation gen, no contributions, first).
//  Add: the first contribution sets the copy's offset, count, flags (less retx), exp, next_exp and
//      elements; later ones add elements with wrapping int32 arithmetic, OR flags, max exp and
//      next_exp (as unsigned biased values; a float block's exp is equal on every rank by rule 13,
//      next_exp is each rank's local exponent). rx_data++. When the copy has world-size
//      contributions, emit its result to all ranks (results++).
//  Result packet: version, type=result, flags, exp, next_exp, reserved 0, job, rank = destination
//      (proto::kRankAll for the all-ranks result), slot, gen, count, offset, aux 0, then count
//      elements of the sum, big-endian, then the CRC32C trailer of all that (the engine computes
//      it over every result it emits, re-sends included). A keyed job's result has sec = the
//      job's mode and the tag under the down key, nonce (destination rank, slot, use) in place of
//      the trailer; in mac_encrypt the elements are encrypted.
// Jobs are isolated: a packet can only touch the slots of the job it names, and only through the
// checks above.
//
// Threading: an Engine is single-threaded (one per core in a multi-core switch); no call blocks.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "ina/base/status.h"
#include "ina/proto/sec.h"
#include "ina/proto/wire.h"

namespace ina::dp {

using CounterSnapshot = std::array<uint64_t, proto::kNumCounters>;

// A job the engine ended on its own (rule 13): it is no longer installed.
struct JobFailure {
  uint16_t job_id = 0;
  proto::ErrorCode code = proto::ErrorCode::kRankMismatch;
  uint16_t slot = 0;  // where the ranks disagreed (slot in the job's window, generation)
  uint16_t gen = 0;
  uint16_t rank = 0;  // the rank whose packet proved it
  friend bool operator==(const JobFailure&, const JobFailure&) = default;
};

inline uint64_t Get(const CounterSnapshot& c, proto::Counter which) {
  return c[static_cast<size_t>(which)];
}

// A job's security (docs/security.md): its mode and, when keyed, the traffic keys of its grant
// (proto::DeriveTrafficKey; the control plane derives them, the engine only uses them).
struct JobSecurity {
  proto::SecMode mode = proto::SecMode::kCrc;
  proto::TrafficKey up{};    // opens data (worker -> fabric)
  proto::TrafficKey down{};  // seals results (fabric -> worker)
};

struct JobConfig {
  uint16_t job_id = 0;
  uint16_t world_size = 0;  // 1 .. proto::kMaxWorkers
  uint16_t k = 256;         // elements per packet, one of proto::kKValues
  uint32_t slot_base = 0;   // first pool slot
  uint16_t window = 0;      // slots, >= 1; [slot_base, slot_base + window) within the pool
  JobSecurity security{};   // default: CRC only, the protocol without security
};

// What every engine's AddJob checks first, the same way: K one of proto::kKValues and at most
// max_k, world size in 1 .. kMaxWorkers, window >= 1 and [slot_base, slot_base + window) within a
// pool of pool_slots. InvalidArgument naming the field otherwise.
inline Status CheckJobConfig(const JobConfig& job, uint32_t pool_slots,
                             uint16_t max_k = proto::kMaxK) {
  if (!proto::IsValidK(job.k)) {
    return InvalidArgument("AddJob: K " + std::to_string(job.k) + " is not " +
                           std::string(proto::kKValuesText));
  }
  if (job.k > max_k) {
    return InvalidArgument("AddJob: K " + std::to_string(job.k) + " is above this engine's " +
                           std::to_string(max_k));
  }
  if (job.world_size < 1 || job.world_size > proto::kMaxWorkers) {
    return InvalidArgument("AddJob: world size " + std::to_string(job.world_size) + " not in 1.." +
                           std::to_string(proto::kMaxWorkers));
  }
  if (job.window < 1) return InvalidArgument("AddJob: window 0");
  if (!proto::IsValidSecMode(static_cast<uint8_t>(job.security.mode))) {
    return InvalidArgument("AddJob: security mode " +
                           std::to_string(static_cast<int>(job.security.mode)) + " is not 0 .. 2");
  }
  const uint64_t end = uint64_t{job.slot_base} + job.window;
  if (end > pool_slots) {
    return InvalidArgument("AddJob: slots [" + std::to_string(job.slot_base) + ", " +
                           std::to_string(end) + ") outside the pool of " +
                           std::to_string(pool_slots));
  }
  return Status::Ok();
}

// Receives results. The packet bytes are valid only during the call.
class Emitter {
 public:
  virtual ~Emitter() = default;
  // dest_rank: a rank, or proto::kRankAll for a completed slot's result.
  virtual void OnResult(uint16_t job_id, uint16_t dest_rank, std::span<const uint8_t> packet) = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;

  // Installs a job. Errors: InvalidArgument (K, world size, window out of range, or slot range
  // outside the pool), AlreadyExists (job id installed, or slot range overlaps another job's),
  // ResourceExhausted (job table full). The job's slots start empty (see rule 11).
  virtual Status AddJob(const JobConfig& job) = 0;
  // Removes a job; its slots become free. NotFound if not installed.
  virtual Status RemoveJob(uint16_t job_id) = 0;

  // Processes one packet by the rules above; emits zero or one result.
  virtual void Process(std::span<const uint8_t> packet, Emitter& out) = 0;
  // Processes packets in order; the same as Process on each.
  virtual void ProcessBurst(std::span<const std::span<const uint8_t>> packets, Emitter& out) {
    for (auto p : packets) Process(p, out);
  }

  // Moves the jobs this engine ended since the last call (rule 13), oldest first, into `out`;
  // returns how many (at most out.size(); the rest stay queued). Each job is reported once; it
  // was already removed (RemoveJob on it is NotFound). No allocation when nothing failed.
  virtual size_t PollFailures(std::span<JobFailure> out) = 0;

  virtual CounterSnapshot counters() const = 0;
  // Slots in the pool.
  virtual uint32_t pool_slots() const = 0;

  // What the engine can run, which the control plane checks before a job reaches AddJob, so a
  // JOIN or a key it cannot take is refused saying why: the largest K it aggregates (hardware
  // built for less than proto::kMaxK says so; AddJob refuses more with InvalidArgument), and
  // whether it runs jobs of a keyed sec mode (AddJob refuses one it does not with
  // Unimplemented).
  virtual uint16_t max_k() const { return proto::kMaxK; }
  virtual bool RunsSecMode(proto::SecMode /*mode*/) const { return true; }
};

}  // namespace ina::dp
