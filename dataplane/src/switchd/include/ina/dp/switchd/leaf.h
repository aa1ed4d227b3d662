// A leaf of two-level aggregation (docs/hierarchy.md): ina-switchd with --upstream aggregates its
// own workers in its engine, then sends one partial sum per slot to the spine switch as rank
// `index` of a job of `leaves` ranks, and sends the spine's result down to its workers.
//
// The workers are unchanged: they join the leaf exactly as they would join one flat switch, with
// their global rank r and the whole world size N (so the precision budget, P = 30 - ceil(log2 N),
// is the whole world's). Leaf i of L serves the ranks r with floor(r L / N) == i, a contiguous
// run [lo, lo + n); it maps them to local ranks r - lo for its control plane and engine (the job
// there has world size n) and back in every reply. The spine is an ordinary ina-switchd: it sees
// L ranks, the leaves.
//
// Join: the first worker JOIN of a job makes the leaf JOIN the spine (job, rank = index,
// world = L, the workers' K and window W, one lane), resent every join_resend until join_ack.
// Worker JOINs meanwhile get the spine's join_pending once it sent one (join_wait when the spine
// queues the job). Once the spine granted W' <= W with a lease of C calls (its --lease-calls),
// worker JOINs go to the local control plane with window W', which grants the job W' slots of the
// leaf's pool and acks every worker with window W' and lease C. A leaf pool that cannot give W'
// ends the job (every worker gets error(no_slots)).
//
// Leases: after C calls every worker re-joins the local grant (its epoch); when every local rank
// did, the leaf re-joins the spine (the spine's epoch), resent every join_resend, as at "Asking
// less" below: the spine takes the grant back once every leaf re-joined and grants the job its
// fair share again, W'' (more than W' included, at most what the leaf asked). The workers' re-join
// resends then go to the local control plane, asked exactly W'' (ControlPlane::AskWindow), which
// re-grants the job W'' once every rank re-joined. So a tree's job shares its spine's pool as a
// flat job shares a switch's (docs/hierarchy.md, "Leases").
//
// Asking less: a worker's lanes on switch cores whose cores granted different windows re-join the
// cores above the least asking it (docs/protocol.md, "Lanes on switch cores"); at a leaf on every
// core, core c's window is the spine's core c's grant. When every local rank re-joined the local
// grant (its epoch) asking less than W', the leaf re-joins the spine (the spine's epoch) asking
// the least, resent every join_resend; the old grant stands until the spine's new one, W''. The
// workers' re-join resends then go to the local control plane with window W'', which re-grants
// the job W'' once every rank re-joined (every spine core's leaves alike, so the workers' lanes
// agree). A JOIN asking less that is no such re-join is refused (bad_params, the window). A
// re-join asking less and the re-joins at a lease's end are one barrier: the leaf re-joins the
// spine once, when every local rank re-joined either way.
//
// Data: worker packets get their rank mapped (after their CRC32C trailer was checked; the leaf
// reseals) and go to the engine, which keeps its shadow copies and drops duplicates as for any
// job. A slot complete in the engine (result to every rank) is not sent down: it becomes the
// upstream data packet of that slot and generation (rank = index, flags, exp and next_exp as the
// engine max/OR-reduced them, the partial sum), kept until the spine's result for it arrives and
// resent with `retx` on the RTO (ina::RtoEstimator, Karn, per-slot backoff, and the worker's
// RACK-like rule: a partial is resent only when one sent an RTO later already came back, or
// nothing came back for its RTO, so a spine waiting for another leaf is not taken for loss). One
// packet per slot is ever in flight upstream: generation g + 1 cannot complete at the leaf before
// every local worker had g's final result. The spine's result (to rank index or every rank) is
// accepted only for the slot's generation, count and offset in flight; it is kept as the slot's
// final result and sent to every local worker (rank = every rank). A worker that retransmits for a
// slot the engine has complete gets the final result if the leaf has it, nothing while the partial
// is still upstream (the final goes to every worker when it comes).
//
// Job ids: ALLOC_JOB goes to the spine (which owns the tree's job ids) with a nonce of the
// leaf's own (workers' random nonces could collide, and the spine tells requests apart by address
// and nonce); its alloc_ack or error(too_many_jobs) goes back to the worker with the worker's.
//
// Keyed jobs (docs/hierarchy.md, "Keyed jobs"): the job's key is installed at the leaf and at
// the spine (each switch's admin channel, ina-jobkey). The local control plane (configured with
// ControlConfig::engine_keys false) challenges the workers' JOINs over the headers they sent
// (AdmitJoinAsSent) and gives the engine the job CRC-only: the leaf opens each worker's data
// itself under the local grant's up key, nonce (global rank, slot, use), and hands the engine the
// plaintext with the local rank and a CRC32C trailer. A slot's use is counted here: the uses the
// engine completed in the grant, so a packet's use is the one whose low 16 bits are its gen next
// to that count (a tag that verifies only 65536 uses back is a replay). The partial goes up sealed
// under the spine grant's up key (nonce: this leaf's rank, the spine's slot, the same use: the
// spine's grant and the local one start together); the spine's result is opened under its down
// key and the final sealed for the workers under the local down key, nonce (every rank, slot,
// use). The leaf answers the spine's join_challenge with a JOIN proven under the job's secret
// and takes the spine's session salt from it. A job keyed at one of leaf and spine only ends with
// error(unauthorized) to its workers (leaf_key_mismatch). Both must hold the same mode.
// Passing keys on (LeafConfig::upstream_admin): a SET_KEY the local control plane takes (the
// launcher's, sealed under the leaf's admin secret) is sealed again under the spine's admin
// secret and sent up, resent every join_resend under a fresh sequence until the spine's
// set_key_ack, which the leaf then acknowledges to its sender (echoing the sender's sequence). So
// a launcher's acknowledged key is on the spine too before any worker joins; a spine that never
// acknowledges (another admin secret) leaves the launcher without an ack, and the leaf gives up
// after key_forward_timeout (leaf_up_key_timeouts, logged).
//
// Failure: an error from the spine (job_aborted, rank_mismatch, peer_refused, ...) ends the local
// job: every local worker gets the spine's error (ranks mapped to global ones, but for a
// peer_refused with tree_rank 1, whose rank is a worker's already) and later JOINs of the job get
// it too, until the job timeout. A worker's JOIN the leaf refuses (a rank another leaf serves, a
// world size or window not the job's, or what its control plane refuses: K, lanes, a rank taken)
// while the job's part here is pending (PartPending) dooms the whole job, as a flat switch's
// refusal dooms a pending job: the leaf fails its job with error(peer_refused) (the refused
// worker's rank, tree_rank 1) and sends LEAVE peer_refused up, naming the worker, the parameter
// and its value, so the spine sends every other leaf the same error. Once every local worker is
// in, a refusal answers the refused worker only (the job runs on). A local job that ends (aborting
// LEAVE, timeout, the engine ending it) makes the leaf send an aborting LEAVE upstream; one whose
// ranks all left gracefully, a graceful LEAVE (offset = the last rank's calls). rank_left from the
// spine is passed down (count = the first rank of that leaf).
//
// Socket-free like the control plane: packets out go to a LeafSink, time is passed in.
// Threading: single-threaded (the switch's one core); nothing blocks. The per-packet paths
// (MapData, OnEngineResult, HandleUpstream results) do not allocate; job creation does.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ina/base/rto.h"
#include "ina/dp/control.h"
#include "ina/proto/sec.h"
#include "ina/proto/wire.h"

namespace ina::dp::switchd {

struct LeafConfig {
  Peer upstream;        // the spine's address
  uint16_t index = 0;   // this leaf's rank on the spine, < leaves
  uint16_t leaves = 1;  // leaves of the tree (the spine job's world size), 1 .. kMaxWorkers
  // This leaf joins the spine as lane `lane` of `lanes` of its rank (a leaf on several cores under
  // a spine at one port: core c is lane c and carries the slots s with s mod lanes == c, as its
  // workers' lane c does); 0 of 1: the rank's only lane. The workers number core c's slots and
  // blocks densely, as a job of its own (docs/protocol.md, "Lanes on switch cores"); the spine's
  // job numbers every core's together, so this job's slot s and block b are the spine's
  // s * lanes + lane and b * lanes + lane, and its window is the spine's / lanes.
  uint16_t lane = 0;
  uint16_t lanes = 1;
  RtoConfig rto{1000, 5000, 200000, 1};  // samples_per_rtt: set to each job's window
  std::chrono::milliseconds join_resend{100};
  std::chrono::milliseconds job_timeout{30000};  // a job stuck joining is forgotten after this
  // The spine's admin secret: keys taken here are passed on to it (above); empty, they stay here
  // (each switch gets its own: ina-jobkey). Wiped when the leaf goes.
  std::vector<uint8_t> upstream_admin;
  std::chrono::milliseconds key_forward_timeout{3000};  // after the sender's last SET_KEY
  std::function<void(const std::string&)> log;          // one line, no newline; may be empty
};

// Where a leaf's packets go (the switch's send queue). `payload_checked`: data and results, whose
// trailer covers them (net::kTxPayloadChecked).
class LeafSink {
 public:
  virtual ~LeafSink() = default;
  virtual void SendTo(const Peer& to, std::span<const uint8_t> packet, bool payload_checked) = 0;
};

enum class LeafCounter : uint16_t {
  kUpJoins = 0,    // JOINs sent to the spine (resends included)
  kUpData,         // partial sums sent upstream, first sends
  kUpRetx,         // ... retransmissions
  kUpResults,      // spine results accepted
  kUpDupResults,   // spine results for a generation already final (a resend crossed)
  kUpStale,        // other packets from the spine ignored (no such job, slot, generation)
  kUpBadCrc,       // packets from the spine whose trailer did not match
  kUpErrors,       // errors from the spine that ended a job
  kUpLeaves,       // LEAVEs sent to the spine
  kDownResults,    // final results sent to workers (one per worker peer)
  kDownResends,    // ... of those, re-sent to one worker that retransmitted
  kResendPending,  // worker retransmissions for a slot whose partial is still upstream
  kForeignRank,    // data or JOIN from a rank another leaf serves
  kNoSlots,        // jobs ended: the leaf's pool could not give the spine's window
  kUpAllocs,       // ALLOC_JOBs passed to the spine (resends included)
  kDataCrossJob,   // worker data whose sec is not its keyed job's mode (CRC-only, say)
  kDataForged,     // keyed worker data whose tag did not verify (or that cannot be a slot's use)
  kDataReplayed,   // ... whose tag verified 65536 uses back (sent again after gen wrapped)
  kUpForged,       // keyed results from the spine whose tag did not verify
  kUpProofs,       // proven JOINs sent to the spine (answers to its join_challenge)
  kKeyMismatch,    // jobs ended: keyed at one of the leaf and the spine only
  kUpKeys,         // SET_KEYs passed on to the spine (resends included)
  kUpKeyAcks,      // ... acknowledged by the spine (each then acknowledged to its sender)
  kUpKeyTimeouts,  // keys the spine did not acknowledge within key_forward_timeout
  kUpRefusals,     // jobs doomed: a worker's JOIN refused while joining (LEAVE peer_refused up)
  kUpKeyRefusals,  // keys the spine refused for their mode (error(key_refused), passed down)
  kCount,
};
inline constexpr size_t kNumLeafCounters = static_cast<size_t>(LeafCounter::kCount);
inline constexpr std::array<std::string_view, kNumLeafCounters> kLeafCounterNames = {
    "leaf_up_joins",       "leaf_up_data",        "leaf_up_retx",      "leaf_up_results",
    "leaf_up_dup_results", "leaf_up_stale",       "leaf_up_bad_crc",   "leaf_up_errors",
    "leaf_up_leaves",      "leaf_down_results",   "leaf_down_resends", "leaf_resend_pending",
    "leaf_foreign_rank",   "leaf_no_slots",       "leaf_up_allocs",    "leaf_data_cross_job",
    "leaf_data_forged",    "leaf_data_replayed",  "leaf_up_forged",    "leaf_up_proofs",
    "leaf_key_mismatch",   "leaf_up_keys",        "leaf_up_key_acks",  "leaf_up_key_timeouts",
    "leaf_up_refusals",    "leaf_up_key_refusals"};
using LeafCounters = std::array<uint64_t, kNumLeafCounters>;

// The ranks leaf `index` of `leaves` serves in a world of `world`: [lo, lo + n), the r with
// floor(r * leaves / world) == index. n == 0 when world < leaves leaves this leaf none.
struct LeafRanks {
  uint16_t lo = 0;
  uint16_t n = 0;
};
LeafRanks RanksOfLeaf(uint16_t index, uint16_t leaves, uint16_t world);

class Leaf final : private ReplySink {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // `control` (the switch core's, configured with lease_calls 0) and `out` must outlive the leaf;
  // every job of `control` is the leaf's.
  Leaf(const LeafConfig& config, ControlPlane& control, LeafSink& out);
  ~Leaf() override;
  Leaf(const Leaf&) = delete;
  Leaf& operator=(const Leaf&) = delete;

  bool FromUpstream(const Peer& from) const { return from == config_.upstream; }

  // A JOIN, LEAVE, ALLOC_JOB or SET_KEY from a worker or launcher (REQUIRES: header length,
  // version kVersion).
  void HandleWorkerControl(std::span<const uint8_t> packet, const Peer& from, TimePoint now);
  // A data packet from a worker at `from`: what the engine should see. The packet itself when it
  // is not a valid data packet of a leaf job (the engine counts it), a copy in `scratch` (at least
  // proto::kMaxPacketBytes) with the rank mapped and the trailer resealed (a keyed job's: opened,
  // the plaintext with a CRC32C trailer), or nothing: a rank another leaf serves, or a keyed
  // job's packet from another address than its rank's (`foreign`: the caller counts it as
  // drop_foreign_src), or a keyed job's packet that did not open (counted here).
  struct MappedData {
    std::span<const uint8_t> packet;
    bool foreign = false;
  };
  MappedData MapData(std::span<const uint8_t> packet, const Peer& from, uint8_t* scratch);
  // A result of the engine (Emitter::OnResult): a completed partial goes upstream, a re-send to
  // one worker becomes the final result if the leaf has it.
  void OnEngineResult(uint16_t job_id, uint16_t dest_rank, std::span<const uint8_t> packet,
                      TimePoint now);
  // A packet from the spine.
  void HandleUpstream(std::span<const uint8_t> packet, TimePoint now);
  // Retransmissions, JOIN resends, jobs the local control plane freed (call after the control
  // plane's own Tick, and whenever now >= NextDeadline()).
  void Tick(TimePoint now);
  TimePoint NextDeadline() const { return next_deadline_; }

  // The sink to give the control plane (Tick, HandleEngineFailures): maps ranks back to global.
  ReplySink& replies() { return *this; }

  const LeafCounters& counters() const { return counters_; }
  size_t num_jobs() const { return jobs_.size(); }

 private:
  // This job's slot numbers and element offsets as the spine's job numbers them, and back
  // (LeafConfig::lanes); the same numbers with one lane.
  uint16_t SpineSlot(uint16_t s) const {
    return static_cast<uint16_t>(s * config_.lanes + config_.lane);
  }
  uint32_t SpineOffset(uint32_t offset, uint16_t k) const {
    return (offset / k * config_.lanes + config_.lane) * k;
  }
  // This job's slot for the spine's slot `spine_slot` into *s; false for a slot of another lane.
  bool LocalSlot(uint16_t spine_slot, uint16_t* s) const {
    if (spine_slot % config_.lanes != config_.lane) return false;
    *s = static_cast<uint16_t>((spine_slot - config_.lane) / config_.lanes);
    return true;
  }
  uint32_t LocalOffset(uint32_t spine_offset, uint16_t k) const {
    return (spine_offset / k - config_.lane) / config_.lanes * k;
  }
  struct UpSlot {
    bool busy = false;  // a partial in flight upstream
    uint16_t gen = 0;
    uint64_t use = 0;  // its use in the grant (a keyed job's nonce)
    uint32_t len = 0;
    uint32_t retries = 0;
    int64_t rto_us = 0;
    TimePoint sent_at{};
    TimePoint deadline = TimePoint::max();
    bool have_final = false;
    uint16_t final_gen = 0;
    uint32_t final_len = 0;
  };
  enum class State : uint8_t { kJoining, kRunning, kFailed };
  struct Job {
    uint16_t id = 0;
    State state = State::kJoining;
    uint16_t world = 0;  // global N
    uint16_t k = 0;
    uint32_t window_asked = 0;   // the least its workers asked
    uint32_t up_window_max = 0;  // the most it asked the spine (a grant above is nonsense)
    LeafRanks ranks;
    uint16_t window = 0;  // the spine's grant
    bool spine_waiting = false;
    uint16_t ahead = 0;
    // The spine's last join_pending (kJoining), as the workers hear it (scope 1: the missing
    // leaf's first worker rank and how many it serves).
    std::optional<proto::JoinPendingMsg> spine_pending;
    bool local_seen = false;      // the local control plane has had the job
    bool graceful_leave = false;  // the last LEAVE handled for it was graceful
    // Ends the job in Tick (found while the local control plane was calling out): no_slots, the
    // local grant is not the spine's window; unauthorized, the local grant's keys are not what
    // the leaf took the job for. kNone: nothing.
    proto::ErrorCode ending = proto::ErrorCode::kNone;
    uint32_t calls = 0;        // its offset (calls completed)
    uint8_t spine_epoch = 0;   // the spine's grant's (its join_ack's epoch)
    uint8_t local_epoch = 0;   // the local grant's (the workers' join_ack)
    uint16_t spine_lease = 0;  // the spine's grant's lease in calls (0: none), the workers' too
    // The local epoch whose workers' re-joins the spine has answered with a new grant: their
    // resends go to the local control plane, which re-grants them that window (0: none yet).
    uint8_t regranted_for = 0;
    // Local ranks that re-joined the local grant, at its lease's end or asking less than the
    // window (bit r - lo), and whether the leaf, all of them in, re-joins the spine asking
    // window_asked (kRunning).
    uint64_t less_ranks = 0;
    bool asking_less = false;
    TimePoint created{}, next_join{}, last_worker{}, failed_at{};
    std::array<uint8_t, proto::MessageBytes(0)> fail{};  // the spine's error, for later JOINs
    std::unique_ptr<RtoEstimator> rto;                   // of the spine's round trip (kRunning)
    TimePoint rack_sent{};                               // latest first send whose result came back
    TimePoint last_progress{};                           // last result accepted (or the grant)
    TimePoint last_up{};  // last JOIN or partial sent up (kRunning: the keep-alive, Tick)
    // The spine's job timeout (its join_ack; 30 s where it does not say): an idle job's JOIN is
    // resent up every third of it, so the spine keeps the job while its workers keep it here.
    std::chrono::milliseconds spine_timeout{30000};
    std::vector<UpSlot> slots;
    std::vector<uint8_t> up, fin;  // window x kMaxPacketBytes each
    // Keyed jobs (the leaf's own key for the job, at its first JOIN here; see above).
    proto::SecMode sec = proto::SecMode::kCrc;
    std::vector<uint64_t> uses;                        // per slot: uses the engine completed
    std::unique_ptr<proto::MessageOpener> local_up;    // workers' data, the local grant's up key
    std::unique_ptr<proto::MessageSealer> local_down;  // finals to the workers
    std::unique_ptr<proto::MessageSealer> spine_up;    // partials, the spine grant's up key
    std::unique_ptr<proto::MessageOpener> spine_down;  // the spine's results
    bool spine_keyed = false;                          // the spine challenged a JOIN of it
    proto::Session spine_salt{};                       // from its join_challenge
    uint64_t spine_grants = 0;  // the spine's grants of it, from 1 (its traffic keys')
    proto::Header up_join{};    // the last JOIN sent up (a challenge's proof seals it)
    // A keyed job refused before the spine knew this leaf (its first JOIN a rank another leaf
    // serves): the LEAVE peer_refused, sent again once the spine's challenge is answered, since
    // the spine takes a LEAVE only from a member and makes a keyed job's leaf one at its proof.
    std::optional<proto::LeaveMsg> refusal_up;
    bool keyed() const { return sec != proto::SecMode::kCrc; }
    uint8_t* Up(uint16_t s) { return up.data() + size_t{s} * proto::kMaxPacketBytes; }
    uint8_t* Fin(uint16_t s) { return fin.data() + size_t{s} * proto::kMaxPacketBytes; }
  };

  // ReplySink: the local control plane's replies, ranks mapped back to global.
  void Send(const Peer& to, std::span<const uint8_t> packet) override;

  Job* Find(uint16_t job_id);
  void SendUp(std::span<const uint8_t> packet, bool payload_checked);
  // The leaf's JOIN for j (as rank `index` of `leaves`), up to the spine.
  void SendUpJoin(Job& j);
  // The leaf's LEAVE for j (reason 0: done after `calls` calls; else abort), thrice.
  void SendUpLeave(const Job& j, proto::ErrorCode reason, uint32_t calls);
  void SendUpLeave(const proto::LeaveMsg& m);
  // Whether j's part here is still joining: not every local worker in, never granted locally, so
  // the spine can have no result of the job yet.
  bool PartPending(const Job& j) const;
  // A JOIN of global rank `rank` to j refused here (JoinParam `param`, the value it sent) while
  // j's part was pending: the job cannot start. j fails with error(peer_refused), tree_rank 1,
  // for every local worker, and the spine hears it (LEAVE peer_refused), which dooms the job for
  // every leaf. Returns the LEAVE sent.
  proto::LeaveMsg RefuseBelow(Job& j, uint16_t rank, proto::JoinParam param, uint32_t value,
                              TimePoint now);
  // One typed message (proto::ErrorMsg{...}), sealed, to a worker.
  template <class Msg>
  void SendReply(const Peer& to, const Msg& m) {
    const ControlMessage c = MakeControl(m);
    out_.SendTo(to, c, false);
  }
  // Sends `packet` to every joined worker peer of the local job (each lane once).
  void SendToAllLocal(const Job& j, std::span<const uint8_t> packet);
  void HandleJoin(const proto::JoinMsg& h, std::span<const uint8_t> packet, const Peer& from,
                  TimePoint now);
  // MapData for a keyed job's packet (see above).
  MappedData OpenData(Job& j, std::span<const uint8_t> packet, const Peer& from, uint8_t* scratch);
  // Whether `from` joined the local job as a lane of local rank `local_rank`.
  bool JoinedFrom(const Job& j, uint16_t local_rank, const Peer& from) const;
  // A local rank's re-join of the local grant, at its lease's end or asking less than the window
  // (Leaf's "Leases" and "Asking less"): once every local rank re-joined, the leaf re-joins the
  // spine.
  void ReJoinUp(Job& j, const proto::JoinMsg& h, const Peer& from, TimePoint now);
  // The spine's join_ack (first or new grant): j runs on its window, its slots fresh, under the
  // grant's keys. False if j was ended (a keyed job the spine did not challenge).
  bool Granted(Job& j, const proto::JoinAckMsg& ack, TimePoint now);
  // The spine's join_challenge for j: the leaf's last JOIN, proven under the job's secret.
  void ProveUp(Job& j, std::span<const uint8_t> challenge, TimePoint now);
  // A new local grant (its join_ack's epoch): fresh slot uses, and a keyed job's local keys.
  void LocalGrant(Job& j, uint8_t epoch);
  // Ends j with error(code) to its workers and an aborting LEAVE to the spine.
  void End(Job& j, proto::ErrorCode code, TimePoint now);
  void UpResult(Job& j, std::span<const uint8_t> packet, TimePoint now);
  void UpError(Job& j, std::span<const uint8_t> packet, TimePoint now);
  void Fail(Job& j, std::span<const uint8_t> error, TimePoint now);
  // The local job of j was freed: tell the spine (the caller forgets j).
  void LocalGone(Job& j);
  void Erase(uint16_t job_id);
  void HandleAlloc(std::span<const uint8_t> packet, const Peer& from, TimePoint now);
  // alloc_ack or error(too_many_jobs) (job 0) from the spine: to the worker that asked; false if
  // it answers no request of ours.
  bool AllocReply(std::span<const uint8_t> packet);
  // A SET_KEY from `from` while keys are passed on: taken by the local control plane, then sent
  // up; refused by it (a mode that is not mac or mac_encrypt): answered with error(key_refused).
  void TakeKey(std::span<const uint8_t> packet, const Peer& from, TimePoint now);
  struct KeyForward;
  // Seals f's job's key under the spine's admin secret with a fresh sequence and sends it up.
  void SendKeyUp(KeyForward& f, TimePoint now);
  // set_key_ack from the spine, or its error(key_refused): answered to the sender whose key it
  // was, the same way. false for an ack of no key of ours; a refusal of none is stale.
  bool KeyAnswer(std::span<const uint8_t> packet);
  void Lower(TimePoint t) { next_deadline_ = std::min(next_deadline_, t); }
  void Bump(LeafCounter c, uint64_t n = 1) { counters_[static_cast<size_t>(c)] += n; }

  LeafConfig config_;
  ControlPlane& control_;
  LeafSink& out_;
  std::unordered_map<uint16_t, std::unique_ptr<Job>> jobs_;
  // ALLOC_JOBs forwarded to the spine, by the leaf's nonce (kept for job_timeout, as the spine
  // keeps the reservation).
  struct Alloc {
    uint16_t nonce = 0;         // the leaf's, on the spine
    uint16_t worker_nonce = 0;  // the worker's
    Peer worker;
    TimePoint at{};
  };
  std::vector<Alloc> allocs_;
  // Keys passed on to the spine and not acknowledged yet: one per job and sender.
  struct KeyForward {
    uint16_t job = 0;
    Peer sender;
    uint64_t sender_seq = 0;             // the sender's last SET_KEY's, echoed in its ack
    uint64_t first_seq = 0, up_seq = 0;  // the sequences sent up: the first and the last
    uint32_t attempt = 0;
    TimePoint next{}, give_up{};
  };
  std::vector<KeyForward> key_forwards_;
  uint16_t next_nonce_ = 0;
  // While the leaf hands a spine error down through the control plane: counts are global already.
  bool passthrough_ = false;
  TimePoint next_deadline_ = TimePoint::max();
  LeafCounters counters_{};
  std::array<uint8_t, proto::kMaxPacketBytes> buf_{};
};

}  // namespace ina::dp::switchd
