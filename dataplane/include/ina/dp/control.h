// The control plane of a software or hardware fabric: the join handshake, slot allocation, job
// teardown and the per-packet source check (docs/protocol.md, "Jobs and the join handshake").
//
// It is socket-free: peers are opaque addresses, replies go to a ReplySink, time is passed in. It
// programs an Engine (AddJob/RemoveJob) and never touches data packets itself.
//
// Control messages (ALLOC_JOB, JOIN, LEAVE), handled by HandleControl:
//   ALLOC_JOB (gen = nonce) from peer P: alloc_ack (job = id, gen = nonce) with an id in
//     [proto::kAllocJobMin, 65535] that no job uses and nobody has reserved, taken round-robin so
//     a freed id is not handed out again soon. The id stays reserved for P until a JOIN for it
//     arrives or job_timeout passes (Tick). A repeat of the same request (same P and nonce) while
//     reserved gets the same id. No id free, or max_jobs reservations outstanding:
//     error(too_many_jobs) (job 0, gen = nonce).
//   JOIN (job, rank, aux = world N, count = K, offset = window W, slot = lane l, gen = lanes L)
//   from peer P. L = 0 means 1 (a one-lane worker leaves slot and gen 0). A rank with L lanes
//   joins from L peers (one socket per progress thread), lane l carrying the job's slots s with
//   s mod L == l:
//     - K not in proto::kKValues or above ControlConfig::max_k (or the engine's Engine::max_k(),
//       if less: hardware built for smaller frames), N not in 1..kMaxWorkers,
//       W == 0, rank >= N, L > kMaxLanes or l >= L: error(bad_params), slot = the
//       proto::JoinParam at fault (checked in that order), offset = proto::kJoinValueNone.
//     - job pending or active with other (K, N, L): error(bad_params), slot = the first
//       JoinParam that differs, offset = the job's value of it (what the ranks already joined
//       sent); the job's entry is not changed. Another W is not refused: the job asks the least W
//       its ranks asked (a worker asks what its socket holds; results are the same bits for any
//       window), which the next grant takes.
//     - (rank, lane) already joined by another peer: error(rank_taken), slot = JoinParam
//       kRankTaken, offset = kJoinValueNone.
//     A JOIN refused by either rule for a job that is pending (not every rank in yet) dooms the
//       job: no rank can take the refused one's place in time. The refusal is remembered (the first
//       one: rank, JoinParam, the value it sent; rank_taken: its lane) and every joined lane of
//       every rank gets error(peer_refused) at once (count = the refused rank, slot = the
//       JoinParam, offset = its value); so does every later JOIN to the job whose own parameters
//       are right, from a new peer or a joined one (a resend), which is not recorded: the job never
//       becomes active and is freed by the job timeout like any idle job. A refusal for a job every
//       rank joined (queued or active) answers the refused peer only (the job runs on). An
//       out-of-range JOIN for a job id no job has creates the job, doomed by it and knowing no
//       parameters: every later JOIN in range gets error(peer_refused) (ControlConfig::
//       doom_unknown; a leaf's control plane creates nothing).
//     - (rank, lane) already joined by P, JOIN exp = 0 (a first JOIN resent) or the previous
//       grant's epoch (a re-JOIN whose join_ack was lost): join_ack again if the job is active,
//       join_wait if it is queued; while pending, join_pending (count = ranks with every lane
//       joined, aux = N, offset = the lowest rank without; next_exp scope 1 for a spine's job of
//       leaves): the worker waits on, and its join timeout names who is missing.
//     - (rank, lane) already joined by P, exp = the epoch of the job's current grant: a re-JOIN
//       at the end of the grant's lease (below). While the job is queued: join_wait again.
//     - job unknown and the job table full (max_jobs jobs pending or active): error(too_many_jobs).
//     - otherwise P is recorded as (rank, lane). When every lane of all N ranks has joined, the
//       job is queued for slots (Sharing, below).
//   Sharing the slot pool (docs/protocol.md, "Sharing the slot pool"). A job holds a grant: a
//   contiguous run of pool slots, an epoch (1 .. 255, then 1 again) and a lease of lease_calls
//   all-reduce calls (0: unlimited). Queued jobs (every lane joined, or every lane re-joined, no
//   grant yet) are admitted oldest first whenever slots are freed or a job is queued: each job's
//   fair share is the max-min fair division (FairShares) of the pool among the active and queued
//   jobs by their asked windows (min(W, 65535)); a queued job gets min(max(share, least),
//   largest free extent) slots, first-fit, where least = min(W, min_window, pool), and is admitted
//   if that is at least `least`; otherwise it stays queued (and answers its JOINs with join_wait,
//   aux = queued jobs ahead of it) until slots are freed. An admitted job is installed in the
//   engine and every lane of every rank gets join_ack (count = K, offset = granted window,
//   gen = epoch, aux = lease, rank = its rank). The engine refusing: error(no_slots) to every
//   lane of every rank and the job is forgotten.
//   Idle release (idle_release > 0): a job with a grant that had no accepted data packet for
//   idle_release, neither since its grant, while another job is queued, and is no spine's job
//   of leaves (JOIN tree_world 0), is asked to release its grant: every lane of every rank not
//   done (and not re-joined) gets join_ack of the grant with release 1, and so does every later
//   JOIN of a joined lane with exp 0 (an idle worker's keep-alive). No rank can be in a call:
//   a rank in a call sends at least every RTO, and the ranks all finished the same calls, since
//   no slot is incomplete (its ranks would retransmit). A rank between calls re-joins (exp =
//   the epoch, as at a lease's end), and when every lane re-joined the grant is taken back and
//   the job queued again, exactly as at a lease's end (releases). A rank that did start a call
//   at that moment ignores the release and sends data: that data (seen by Tick) calls the
//   release off (releases_cancelled), and every lane that re-joined for it gets join_ack of
//   the grant with release 2 (stands): its re-join is forgotten and it carries on with the
//   grant. A re-join for a release (JOIN release 1) while none is under way (called off, the
//   first answer lost, or a worker that heard the release late) gets the same answer and is not
//   recorded; a re-join without it is one at a lease's end. A job queued again by a release
//   whose ranks' JOINs still carry release 1 (idle, no call waiting) is not a job that waits for
//   slots here: no other job is asked to release for it, until a JOIN of it without the flag.
//   A grant's slots are taken back only at a safe point: after lease_calls calls every rank
//   sends a re-JOIN (exp = the epoch) before its next call, from every lane; once every lane of
//   every rank re-joined (ranks that left gracefully count as re-joined), no rank needs anything
//   of the grant (each finished the same calls), so the job is removed from the engine, its slots
//   freed and the job queued again, behind the jobs already waiting: it gets a new grant with
//   the next epoch (its slot generations start again from 0) and its new fair share.
//     Lanes are the control plane's business only: the engine sees N ranks, and a granted window
//     smaller than L leaves some lanes without slots (they carry nothing).
//   LEAVE (job, rank, aux, offset = calls completed) from a peer that joined as any lane of that
//   rank (it is the rank's LEAVE: a worker sends it once, from lane 0; any lane would do):
//     - aux 0 (graceful: the rank finished) on a job that had a grant: the rank is marked done and
//     gets no
//       more errors on any lane; the job stays installed so the others can still fetch lost
//       results; every other rank still in gets error(rank_left) on every lane (count = the leaver,
//       offset = its calls). A copy of a graceful LEAVE changes nothing. When every rank is done
//       the job is freed.
//     - aux peer_refused: a leaf of a tree (docs/hierarchy.md) refused one of its workers' JOINs
//       while its part of the job was pending (LEAVE count = the worker's rank in the tree, slot =
//       the JoinParam, offset = the value it sent). The job is doomed as by a refusal of its own,
//       whatever its state: removed from the engine if active, its slots freed, taken out of the
//       queue, the refusal remembered, and every joined lane of every rank gets error(peer_refused)
//       with tree_rank 1 (the rank is the tree's, which the leaves pass on unmapped); so does every
//       later JOIN, until the job timeout frees it. A copy changes nothing (refused_below).
//     - any other aux (abort), or aux 0 on a job that never had a grant: the job is removed from
//     the engine, its
//       slots freed, and every joined lane of every other rank gets error(job_aborted).
//     A LEAVE from any other peer, or for an unknown job, is ignored (counted).
//   Job keys (docs/security.md). InstallJobKey (or a SET_KEY message on the admin channel, below)
//   gives job id J a secret and a keyed sec mode. Every grant of J then installs J in the engine
//   with that mode and the grant's traffic keys (proto::DeriveTrafficKey: up and down, the
//   grants of this incarnation of J counted from 1, session the key's salt, below). The key
//   belongs to one incarnation of the job: it is forgotten when the job is freed (done, aborted,
//   timed out, failed), or, for an id nobody joined, when its ALLOC_JOB reservation expires; a
//   secret installed again gets a fresh salt, so its traffic keys are new. Installing a key for
//   a job that holds a grant takes effect at its next grant (rotation at a lease's end).
//   A JOIN of a job id with a key must prove the secret (docs/security.md, "JOIN proves
//   knowledge of the key"). A JOIN with sec 0 (CRC trailer) creates nothing: it is answered with
//   join_challenge (job, rank, lane; payload the join nonce, proto::MakeJoinNonce of a random
//   per-plane secret over the JOIN's header with sec and flags cleared, its sender's address and
//   the time bucket now / ControlConfig::join_nonce_period, then the key's session salt: random,
//   drawn when the key was installed, the session of the job's traffic keys, so every install
//   starts under keys of its own). The answer is the same JOIN with
//   sec mac and a tag (proto::SealJoinProof): it is verified against the nonce of this bucket and
//   of the one before, so a proof lives one to two periods, from the address it was sent to
//   only; then it is handled as any JOIN (joins_proven). A proof that does not verify, or a
//   proven JOIN for a job id without a key, is dropped (joins_unproven; logged once per job id);
//   where the job has a key it is answered with a fresh join_challenge. A replayed proven JOIN
//   from the worker's own address within those periods is the worker's own JOIN again
//   (idempotent); from elsewhere or later it fails. A launcher installs the key before its
//   workers join: lanes that joined before (without require_keys) stay joined unproven.
//   With ControlConfig::require_keys, a JOIN for a job id without a key gets error(unauthorized),
//   creates nothing, is counted (joins_unauthorized) and logged through ControlConfig::log, once
//   per job id until that id gets a key.
//   SET_KEY (job, aux = mode, payload = the secret) from anyone: sealed in mode mac_encrypt under
//   the admin key (DeriveTrafficKey(admin_secret, up, job 0, grant 0, session zero)), nonce (rank,
//   slot, use = gen << 32 | offset). Dropped and counted: no admin secret configured
//   (admin_refused), the tag does not open (admin_forged), a sequence (use) not above the last
//   accepted one nor below ControlConfig::admin_seq_floor (admin_replayed; the first one logged),
//   a secret length InstallJobKey refuses (admin_refused). A mode that is not mac or mac_encrypt,
//   or (with ControlConfig::engine_keys) one the engine does not run (Engine::RunsSecMode), is
//   refused too (admin_refused), and since the message opened, its sender holds the admin secret
//   and hears why: error(key_refused) naming the mode and echoing the sequence, so a launcher
//   fails at once (logged once per mode).
//   Else the key is installed and the sender gets set_key_ack (job, gen, offset echoed). The
//   same secret in the same mode installed again for a job that holds it keeps its salt (a
//   launcher's or a leaf's resend, or a second launcher of one tree, docs/hierarchy.md): nothing
//   changes, and it is acknowledged.
//   HandleEngineFailures: a job the engine ended (Engine::PollFailures: two ranks sent blocks that
//   disagree, rule 13 of engine.h) is freed: its slots are released and every joined lane of every
//   rank not done gets error(rank_mismatch) with slot and gen of the disagreement and count = the
//   rank whose block proved it.
//   Tick(now): every job (pending or active) that received nothing from any of its ranks for
//     job_timeout (activity on any lane counts) is freed the same way; every joined lane of every
//     rank gets error(job_aborted).
// Every control message is a header and the CRC32C trailer, no payload (ina/proto/crc32c.h). One
// whose trailer does not match is dropped before any field but the version is read
// (control_bad_crc); one of another length is control_malformed.
// Error and join_ack packets are header-only: version, type, job, rank = the receiver's rank (for
// errors answering a request: the request's rank), count/slot/offset as above (0 where not
// given), aux = error code; the control plane seals each with its trailer.
//
// Data path helpers, O(1), no allocation: CheckDataSource (is this peer the one that joined as
// (job, rank, the lane of the packet's slot)? also records activity for the timeout) and
// Destinations (a result's destination, one rank or proto::kRankAll, as the peers of the lane
// that owns the result's slot).
//
// Threading: single-threaded, like the Engine it drives; nothing blocks.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ina/base/status.h"
#include "ina/dp/engine.h"
#include "ina/proto/sec.h"
#include "ina/proto/wire.h"

namespace ina::dp {

// An opaque peer address (what recvmmsg reports). Two peers are equal when their family, address
// and port (and for IPv6 the scope) are equal; other families compare byte-wise over len.
struct Peer {
  sockaddr_storage addr{};
  socklen_t len = 0;

  // Copies len bytes of `sa` (at most sizeof(sockaddr_storage)); the rest stays zero.
  static Peer From(const sockaddr* sa, socklen_t len);
  friend bool operator==(const Peer& a, const Peer& b);
};

// The equality of Peer, on any address held as (sockaddr_storage, length): ina-switchd uses it on
// its ports' endpoints too.
inline bool SameAddress(const sockaddr_storage& a, socklen_t a_len, const sockaddr_storage& b,
                        socklen_t b_len) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in&>(b);
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  if (a.ss_family == AF_INET6) {
    const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in6&>(b);
    return x.sin6_port == y.sin6_port && x.sin6_scope_id == y.sin6_scope_id &&
           std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof(x.sin6_addr)) == 0;
  }
  return a_len == b_len && std::memcmp(&a, &b, a_len) == 0;
}

inline bool operator==(const Peer& a, const Peer& b) {
  return SameAddress(a.addr, a.len, b.addr, b.len);
}

// "127.0.0.1:5000", "[::1]:5000" or "family N".
std::string PeerToString(const Peer& p);

// A control message without payload, sealed (CRC32C trailer): what the control plane replies and a
// leaf (ina-switchd --upstream) sends up and down.
using ControlMessage = std::array<uint8_t, proto::MessageBytes(0)>;
ControlMessage MakeControl(const proto::Header& h);
// From a typed message (proto::JoinAckMsg{...}, proto::ErrorMsg{...}: the generated builders).
template <class Msg>
ControlMessage MakeControl(const Msg& m) {
  return MakeControl(m.ToHeader());
}

// Receives the control plane's replies (join_ack, error). The packet is valid only during the call.
class ReplySink {
 public:
  virtual ~ReplySink() = default;
  virtual void Send(const Peer& to, std::span<const uint8_t> packet) = 0;
};

struct ControlConfig {
  uint16_t max_jobs = 256;  // jobs pending or active at once, >= 1
  std::chrono::nanoseconds job_timeout = std::chrono::seconds(30);  // > 0
  // ALLOC_JOB hands out only ids with id % alloc_stride == alloc_residue: a switch of N cores,
  // which steers packets to core (job % N), gives core c stride N and residue c, so an id it
  // hands out is one its own job table owns. 1 <= alloc_stride <= 256, alloc_residue < stride.
  uint16_t alloc_stride = 1;
  uint16_t alloc_residue = 0;
  // Sharing (see above): the least a job is admitted with (a job asking fewer slots gets what it
  // asks), >= 1; and the calls a grant lasts before the ranks re-join (0: unlimited, the job
  // keeps its slots until it ends, and queued jobs wait for jobs to end).
  uint16_t min_window = 8;
  uint32_t lease_calls = 0;
  // Taking an idle job's slots back (see above): a job with a grant whose ranks sent no data for
  // this long while another job waits for slots is asked to release them (0: never). Well above
  // the workers' largest RTO (200 ms by default: a rank in a call sends at least that often).
  std::chrono::nanoseconds idle_release = std::chrono::seconds(2);
  // The largest K the fabric's I/O carries in one frame (ina-switchd: from its ports'
  // max_datagram_bytes, e.g. 256 for a DPDK port of 1500-byte frames); a JOIN asking more is
  // refused with bad_params (K, out of the fabric's range). The control plane takes the lesser
  // of this and its engine's max_k(), and hello_ack says that.
  uint16_t max_k = proto::kMaxK;
  // What a hello_ack says of the fabric's cores (proto: hello): how many take a job's lanes, core c
  // at the port asked + c (ina-switchd --cores N --core-ports 1: N); 1: one port.
  uint16_t core_ports = 1;
  // Job keys (see above): require one for every JOIN; the admin channel's secret (empty: SET_KEY
  // messages are refused; else proto::kSecretMinBytes .. kSecretMaxBytes bytes); where a refused
  // JOIN is logged (one line; null: nowhere). Never logs a secret.
  bool require_keys = false;
  std::vector<uint8_t> admin_secret;
  // Whether a keyed job goes to the engine keyed (its mode and each grant's traffic keys). false:
  // every job goes to the engine CRC-only, and the caller opens and seals the keyed jobs' data and
  // results itself with GrantKeys (a leaf, ina-switchd --upstream: its workers' tags name their
  // global ranks, which its engine does not see; docs/hierarchy.md). JOINs are challenged either
  // way.
  bool engine_keys = true;
  // A JOIN out of range (K, world size, window, rank, lanes, lane) for a job id no job has creates
  // the job, doomed by that refusal: every later JOIN of it in range gets error(peer_refused)
  // until the job timeout, so the other ranks fail at once whichever rank joined first. false:
  // it creates nothing (a leaf's control plane: the leaf handles its workers' refusals itself).
  bool doom_unknown = true;
  // SET_KEY sequences below this are replays (admin_replayed). ina-switchd: proto::SetKeySequence
  // of its start, so a SET_KEY recorded before a restart stays refused.
  uint64_t admin_seq_floor = 0;
  // A join nonce's time bucket (see above): a proof is accepted one to two periods after its
  // challenge. > 0.
  std::chrono::nanoseconds join_nonce_period = std::chrono::seconds(10);
  std::function<void(const std::string&)> log;
  // The kernel receive queue that this control plane's data arrives through: about how many
  // messages of `message_bytes` it holds before the kernel drops what comes (ina-switchd: its UDP
  // port's net::Port::rx_queue_datagrams; null, or 0 for a size: no limit). The jobs that hold or
  // wait for slots share it: each gets a max-min fair fraction of it by what its ranks' asked
  // windows need, all sending at once (world_size x window messages), and a grant never lets its
  // ranks have more than that fraction in flight: window <= max(1, fraction x holds /
  // world_size); the first grant it caps is logged (docs/switchd.md, "Socket buffers").
  std::function<size_t(size_t message_bytes)> rx_queue;
};

// Max-min fair division of `pool` slots among jobs asking `demands` slots (water-filling): a
// job asking no more than an equal share of what is left gets what it asks, the rest split the
// remainder equally (rounded down). The result has demands.size() entries, each <= its demand,
// summing to at most pool. O(n log n).
std::vector<uint32_t> FairShares(std::span<const uint32_t> demands, uint32_t pool);

// Control-plane counters, in kControlCounterNames order.
enum class ControlCounter : uint16_t {
  kControlRx = 0,      // control messages handled (join + leave)
  kJoins,              // JOIN messages
  kLeaves,             // LEAVE messages
  kJoinAcks,           // join_ack packets sent
  kErrorsSent,         // error packets sent (all codes)
  kErrBadParams,       // error(bad_params) sent
  kErrRankTaken,       // error(rank_taken) sent
  kErrTooManyJobs,     // error(too_many_jobs) sent
  kErrNoSlots,         // error(no_slots) sent
  kErrJobAborted,      // error(job_aborted) sent
  kLeaveIgnored,       // LEAVE for an unknown job or from a peer that is not that rank
  kControlMalformed,   // control message with a body (length != header + trailer) or a type not
                       // join/leave/alloc_job
  kJobsAdmitted,       // jobs installed in the engine
  kJobsLeft,           // jobs freed by a LEAVE
  kJobsTimedOut,       // jobs (pending or active) freed by the timeout
  kLeavesDone,         // graceful LEAVEs (aux 0) from ranks that finished
  kJobsDone,           // jobs freed because every rank left gracefully
  kErrRankLeft,        // error(rank_left) sent to the ranks still in a job
  kAllocs,             // ALLOC_JOB requests
  kAllocAcks,          // alloc_ack packets sent
  kAllocsExpired,      // reservations dropped by Tick (no JOIN within job_timeout)
  kControlBadCrc,      // control message whose CRC32C trailer does not match (dropped)
  kErrPeerRefused,     // error(peer_refused) sent (to joined lanes, and to later JOINs)
  kErrRankMismatch,    // error(rank_mismatch) sent (the engine ended the job: ranks disagree)
  kJobsFailed,         // jobs freed because the engine ended them (HandleEngineFailures)
  kJobsQueued,         // jobs that had to wait for slots (queued and not admitted at once)
  kJoinWaits,          // join_wait packets sent
  kRejoins,            // re-JOINs recorded (one per lane at a lease's end)
  kRegrants,           // grants after the first (leases renewed, possibly with another window)
  kJoinsUnauthorized,  // JOINs refused with error(unauthorized): keys required, the job has none
  kKeysInstalled,      // job keys installed (InstallJobKey, SET_KEY)
  kAdminForged,        // SET_KEY whose tag does not open under the admin key
  kAdminReplayed,      // SET_KEY whose sequence is not above the last accepted one
  kAdminRefused,       // SET_KEY without an admin secret configured, or with a bad mode or secret
  kJoinChallenges,     // join_challenge packets sent (a JOIN of a keyed job without a valid proof)
  kJoinsProven,        // proven JOINs whose proof verified (then handled as any JOIN)
  kJoinsUnproven,      // proven JOINs whose proof did not verify: forged, replayed, too old, or
                       // for a job without a key (dropped, answered with a fresh challenge)
  kHellos,             // hello messages answered with hello_ack (CommConfig::switch_cores auto)
  kRefusedBelow,       // jobs doomed by a leaf's LEAVE peer_refused (it refused one of its workers)
  kReleasesAsked,      // idle jobs asked to release their grant (another job waits for slots)
  kReleases,           // ... grants taken back: every lane re-joined
  kReleasesCancelled,  // ... called off: a rank called again first (the grant stands)
  kReleaseStands,      // join_ack release 2 sent: a re-join for a release answered "stands"
  kJoinPendings,       // join_pending sent: a resent JOIN of a job still waiting for ranks
  kCount,
};
inline constexpr size_t kNumControlCounters = static_cast<size_t>(ControlCounter::kCount);
inline constexpr std::array<std::string_view, kNumControlCounters> kControlCounterNames = {
    "control_rx",       "joins",
    "leaves",           "join_acks",
    "errors_sent",      "err_bad_params",
    "err_rank_taken",   "err_too_many_jobs",
    "err_no_slots",     "err_job_aborted",
    "leave_ignored",    "control_malformed",
    "jobs_admitted",    "jobs_left",
    "jobs_timed_out",   "leaves_done",
    "jobs_done",        "err_rank_left",
    "allocs",           "alloc_acks",
    "allocs_expired",   "control_bad_crc",
    "err_peer_refused", "err_rank_mismatch",
    "jobs_failed",      "jobs_queued",
    "join_waits",       "rejoins",
    "regrants",         "joins_unauthorized",
    "keys_installed",   "admin_forged",
    "admin_replayed",   "admin_refused",
    "join_challenges",  "joins_proven",
    "joins_unproven",   "hellos",
    "refused_below",    "releases_asked",
    "releases",         "releases_cancelled",
    "release_stands",   "join_pendings"};
using ControlCounters = std::array<uint64_t, kNumControlCounters>;

inline uint64_t Get(const ControlCounters& c, ControlCounter which) {
  return c[static_cast<size_t>(which)];
}

// Result of the per-packet source check.
enum class SourceCheck : uint8_t {
  kOk,       // the job is active and `from` joined as this rank and the slot's lane: to the engine
  kForeign,  // the job is active, rank < world, but `from` is not that (rank, lane)'s peer: drop
  kPass,     // job not active or rank out of range: the engine decides (bad rank, not installed)
  kUnknownJob,  // no job with this id here: the engine drops it (drop_unknown_job), and the
                // switch may tell the sender (error unknown_job)
};

// A job as the control plane sees it (for inspection and tests).
struct JobInfo {
  uint16_t job_id = 0;
  bool active = false;  // installed in the engine (all ranks joined)
  uint16_t world_size = 0;
  uint16_t k = 0;
  uint32_t window_asked = 0;
  uint16_t window = 0;        // granted (active jobs)
  uint32_t slot_base = 0;     // first pool slot (active jobs)
  uint16_t joined = 0;        // ranks with every lane joined so far
  uint16_t lanes = 1;         // peers per rank (JOIN gen; 0 counts as 1)
  bool queued = false;        // every lane (re-)joined, waiting for slots
  uint8_t epoch = 0;          // the current (active) or last grant's epoch; 0: never granted
  uint64_t data_packets = 0;  // data packets that passed CheckDataSource (kOk) for this job
};

class ControlPlane {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // The engine must outlive the control plane and have no jobs installed by anyone else.
  // InvalidArgument for max_jobs == 0 or a non-positive timeout.
  static Result<std::unique_ptr<ControlPlane>> Create(Engine& engine, const ControlConfig& config);

  // Handles one control message (the whole UDP payload, header and trailer included) received from
  // `from`. REQUIRES: packet.size() >= proto::kHeaderBytes, version == proto::kVersion (the caller
  // classifies; other packets go to the engine, which counts them).
  void HandleControl(std::span<const uint8_t> packet, const Peer& from, TimePoint now,
                     ReplySink& out);

  // For a leaf, which hands the control plane its workers' JOINs mapped to its own ranks
  // (docs/hierarchy.md): whether the JOIN `join` as its worker sent it (plain: a CRC trailer, or
  // proven: sec mac and a tag over its own header) may be handled. True for a job without a key (a
  // proven JOIN of one is dropped, joins_unproven). For a keyed job, a plain JOIN is answered with
  // a join_challenge made for its own header, and a proven one is verified against it: true if it
  // verifies (joins_proven), else it is counted and answered as above. Replies go to `out` as
  // made (its own rank). REQUIRES: a JOIN, its trailer checked (plain) or of proven length.
  bool AdmitJoinAsSent(std::span<const uint8_t> join, const Peer& from, TimePoint now,
                       ReplySink& out);
  // A JOIN AdmitJoinAsSent admitted, as the leaf maps it: handled as any JOIN (control_rx counted).
  void HandleAdmittedJoin(const proto::JoinMsg& mapped, const Peer& from, TimePoint now,
                          ReplySink& out);
  // The mode and secret of job `job_id`'s key (InstallJobKey), valid until the key changes; mode
  // crc and no secret when it has none (a leaf proves its JOIN to the spine with it).
  std::pair<proto::SecMode, std::span<const uint8_t>> KeyOf(uint16_t job_id) const;
  // The traffic keys of job `job_id`'s current grant: its key's mode, and the up and down keys of
  // that grant (what the engine gets with ControlConfig::engine_keys); mode crc when the job has
  // no key. NotFound if the job holds no grant. Control path (derives the keys).
  Result<JobSecurity> GrantKeys(uint16_t job_id) const;

  // True for the message types HandleControl takes (the caller's classifier uses it).
  static bool IsControlType(proto::MsgType type) {
    return type == proto::MsgType::kJoin || type == proto::MsgType::kSetKey ||
           type == proto::MsgType::kLeave || type == proto::MsgType::kAllocJob ||
           type == proto::MsgType::kHello;
  }

  // Frees every job idle (no control or accepted data packet) for longer than job_timeout, and
  // every job-id reservation older than job_timeout. Returns how many jobs were freed.
  size_t Tick(TimePoint now, ReplySink& out);

  // Frees the jobs the engine ended since the last call (see above); returns how many. Call it
  // after every burst the engine processed (it costs one PollFailures call when nothing failed).
  size_t HandleEngineFailures(ReplySink& out);

  // Data packet check by header fields (job, rank, slot): `from` must be the peer of the lane that
  // owns the slot (slot mod lanes). Records activity on kOk. O(1), no allocation.
  SourceCheck CheckDataSource(uint16_t job_id, uint16_t rank, uint16_t slot, const Peer& from,
                              TimePoint now) {
    const int32_t idx = index_[job_id];
    if (idx < 0) return SourceCheck::kUnknownJob;
    JobEntry& j = jobs_[static_cast<size_t>(idx)];
    if (!j.active || rank >= j.world_size) return SourceCheck::kPass;
    if (!(j.peers[PeerIndex(j, rank, LaneOf(j, slot))] == from)) return SourceCheck::kForeign;
    j.last_activity = now;
    j.last_data = now;
    ++j.data_packets;
    return SourceCheck::kOk;
  }

  // The peers a result for `slot` goes to: those of the lane owning the slot, for one rank or
  // every rank (proto::kRankAll). Empty if the job is not active or the rank is out of range.
  // Valid until the next HandleControl/Tick.
  std::span<const Peer> Destinations(uint16_t job_id, uint16_t dest_rank, uint16_t slot) const {
    const int32_t idx = index_[job_id];
    if (idx < 0) return {};
    const JobEntry& j = jobs_[static_cast<size_t>(idx)];
    if (!j.active) return {};
    const uint16_t lane = LaneOf(j, slot);
    if (dest_rank == proto::kRankAll) return {&j.peers[PeerIndex(j, 0, lane)], j.world_size};
    if (dest_rank >= j.world_size) return {};
    return {&j.peers[PeerIndex(j, dest_rank, lane)], 1};
  }

  // Ends a job on behalf of the fabric above it (a leaf switch whose spine ended the job,
  // docs/hierarchy.md): frees it as an aborting LEAVE does (counted in jobs_left) and sends every
  // joined lane of every rank not done error e (its job and rank become each recipient's).
  // NotFound if no such job.
  Status AbortJob(uint16_t job_id, const proto::ErrorMsg& e, ReplySink& out);
  // Gives job `job_id` a secret and keyed sec mode, with a fresh session salt (see above);
  // replaces the one it had (the same secret and mode again: kept as it is, salt included).
  // InvalidArgument for mode crc or a secret outside kSecretMinBytes .. kSecretMaxBytes; Internal
  // if no random salt can be drawn. The secret is copied; the caller may wipe its own.
  Status InstallJobKey(uint16_t job_id, proto::SecMode mode, std::span<const uint8_t> secret);
  bool HasJobKey(uint16_t job_id) const { return keys_.count(job_id) != 0; }
  // A SET_KEY opened and checked (see above), installed or refused for its mode,
  // but not answered: what a leaf that passes keys on to its spine acknowledges once the spine
  // has (docs/hierarchy.md, "Keyed jobs"), or answers with proto::SetKeyRefused at once. Nothing
  // when it was dropped (counted, as HandleControl does, control_rx aside).
  // REQUIRES: a SET_KEY of at least proto::MessageBytes(0) bytes.
  struct SetKeyTaken {
    uint16_t job = 0;
    uint64_t seq = 0;      // the sender's sequence, which its answer echoes
    bool refused = false;  // for its mode: nothing installed
    uint16_t mode = 0;     // the SET_KEY's mode (aux)
  };
  std::optional<SetKeyTaken> TakeSetKey(std::span<const uint8_t> packet, const Peer& from);

  // A job with this id is pending, queued or active.
  bool HasJob(uint16_t job_id) const { return index_[job_id] >= 0; }
  // A job with this id whose JOINs are still coming: not every lane of every rank joined, never
  // granted, not doomed (a refusal would doom it).
  bool IsPending(uint16_t job_id) const {
    const int32_t idx = index_[job_id];
    if (idx < 0) return false;
    return Pending(jobs_[static_cast<size_t>(idx)]);
  }
  // The refusal that doomed job `job_id` while it was pending (rank, JoinParam, the value that
  // rank sent), if one did.
  struct Refusal {
    uint16_t rank = 0;
    proto::JoinParam param = proto::JoinParam::kNone;
    uint32_t value = 0;
  };
  std::optional<Refusal> RefusalOf(uint16_t job_id) const {
    const int32_t idx = index_[job_id];
    if (idx < 0 || !jobs_[static_cast<size_t>(idx)].refused) return std::nullopt;
    const JobEntry& j = jobs_[static_cast<size_t>(idx)];
    return Refusal{j.refused_rank, j.refused_param, j.refused_value};
  }

  const ControlCounters& counters() const { return counters_; }
  // Jobs pending or active, in table order.
  std::vector<JobInfo> Jobs() const;
  size_t num_jobs() const { return num_jobs_; }
  // Jobs waiting for slots.
  size_t queued_jobs() const {
    return static_cast<size_t>(
        std::count_if(jobs_.begin(), jobs_.end(), [](const JobEntry& j) { return j.queued; }));
  }
  // Job ids reserved by ALLOC_JOB and not yet joined.
  size_t num_reserved() const { return reservations_.size(); }
  // Largest run of consecutive free pool slots.
  uint32_t LargestFreeExtent() const;
  uint32_t pool_slots() const { return pool_slots_; }

  // The most slots a job of `world_size` ranks and K = `k` is granted here so that every rank's
  // whole window fits the receive queue at once (ControlConfig::rx_queue: max(1, holds /
  // world_size)); 0xFFFF when there is no limit. A leaf asks its spine for no more than this.
  uint32_t FittingWindow(uint16_t world_size, uint16_t k) const;
  // A leaf whose spine granted job `job_id` a new window (a re-grant at a lease's end): the job's
  // next grant here asks exactly `window`, more than it asked before included (its ranks' JOINs
  // then ask that window; docs/hierarchy.md, "Leases"). No-op for a job id with no job.
  void AskWindow(uint16_t job_id, uint16_t window);

 private:
  struct JobEntry {
    bool used = false;
    bool active = false;
    uint16_t job_id = 0;
    uint16_t world_size = 0;
    uint8_t tree_world = 0;  // JOIN tree_world: a spine's job of leaves, the tree's world size
    uint16_t k = 0;
    uint32_t window_asked = 0;
    uint16_t window = 0;
    uint32_t slot_base = 0;
    uint16_t lanes = 1;
    bool queued = false;      // waiting for slots (every lane joined or re-joined)
    uint64_t queued_seq = 0;  // queue order
    uint8_t epoch = 0;        // current or last grant; 0: none yet
    std::array<uint16_t, proto::kMaxWorkers> rejoin_mask{};  // rank r: bit l, lane l re-joined
    uint16_t joined = 0;                                     // ranks with every lane joined
    uint64_t joined_mask = 0;                                // bit r: some lane of rank r joined
    uint64_t left_mask = 0;  // bit r: rank r left gracefully (done); it gets no errors
    TimePoint last_activity{};
    uint64_t data_packets = 0;  // JobInfo::data_packets
    // The first JOIN refused while the job was pending (see the header comment).
    bool refused = false;
    uint16_t refused_rank = 0;
    proto::JoinParam refused_param = proto::JoinParam::kNone;
    uint32_t refused_value = 0;  // the value the refused rank sent (rank_taken: its lane)
    bool refused_below = false;  // by a leaf (LEAVE peer_refused): refused_rank is the tree's
    // Idle release (see the header comment).
    TimePoint last_data{};   // the last accepted data packet
    TimePoint granted_at{};  // the current grant's
    bool releasing = false;  // asked to release its grant, not yet all re-joined nor called off
    TimePoint release_asked{};
    std::array<uint16_t, proto::kMaxWorkers> release_mask{};  // rank r: bit l re-joined for it
    // Queued again by a release, and its JOINs still say its ranks are idle (JOIN release 1):
    // it does not count as a job waiting for slots (no other idle job is asked for it).
    bool idle_queued = false;
    std::array<uint16_t, proto::kMaxWorkers> lane_mask{};  // rank r: bit l, lane l joined
    std::vector<Peer> peers;  // lanes x world_size, lane-major: a lane's ranks are contiguous
    uint64_t grants = 0;      // grants so far (a keyed job's traffic keys are per grant)
    bool buffer_cap_logged = false;  // ControlConfig::rx_queue capped a grant (logged once)
  };
  struct JobKey {
    proto::SecMode mode;
    std::vector<uint8_t> secret;
    proto::Session salt;  // drawn when the key was taken; every join_challenge carries it
  };
  // A free extent of the pool [base, base + len).
  struct Extent {
    uint32_t base;
    uint32_t len;
  };

  ControlPlane(Engine& engine, const ControlConfig& config);

  // The most slots each job jobs_[i], i in `claim`, may hold in flight so that all of them fit the
  // receive queue at once (ControlConfig::rx_queue, shared max-min fairly); logs the first cap
  // below a job's asked window. 0xFFFF where there is no limit.
  std::vector<uint32_t> BufferCaps(std::span<const size_t> claim);

  static uint16_t LaneOf(const JobEntry& j, uint16_t slot) {
    return j.lanes == 1 ? 0 : static_cast<uint16_t>(slot % j.lanes);
  }
  static size_t PeerIndex(const JobEntry& j, uint16_t rank, uint16_t lane) {
    return size_t{lane} * j.world_size + rank;
  }
  // Sends error e to every joined lane of `rank` (e's job and rank become j's and `rank`).
  void SendErrorToRank(const JobEntry& j, uint16_t rank, proto::ErrorMsg e, ReplySink& out);

  void HandleJoin(const proto::JoinMsg& h, const Peer& from, TimePoint now, ReplySink& out);
  // A new entry for job `job_id` (REQUIRES: none has it, num_jobs_ < jobs_.size()): used, no
  // parameters yet, active at `now`; its index.
  int32_t NewJob(uint16_t job_id, TimePoint now);
  // Answers a refused JOIN (h, from) with error(code, param, job_value); for a pending job also
  // remembers the refusal (the first) and sends error(peer_refused) to every joined lane.
  void Refuse(JobEntry* j, const proto::JoinMsg& h, const Peer& from, proto::ErrorCode code,
              proto::JoinParam param, uint32_t job_value, uint32_t its_value, ReplySink& out);
  // Dooms j with the refusal of `rank` (`param`, the value it sent; `below`: a leaf's, the rank
  // the tree's) and tells every joined lane (error peer_refused).
  void Doom(JobEntry& j, uint16_t rank, proto::JoinParam param, uint32_t value, bool below,
            ReplySink& out);
  // error(peer_refused) for j's remembered refusal, to one peer (`rank` is its rank).
  void SendPeerRefused(const JobEntry& j, const Peer& to, uint16_t rank, ReplySink& out);
  void HandleLeave(const proto::LeaveMsg& h, const Peer& from, ReplySink& out);
  // A leaf's LEAVE peer_refused for j (see the header comment): dooms j.
  void RefuseFromBelow(JobEntry& j, const proto::LeaveMsg& h, ReplySink& out);
  void HandleSetKey(std::span<const uint8_t> packet, const Peer& from, ReplySink& out);
  // Whether a SET_KEY's mode (its aux) can be installed: mac or mac_encrypt, and with
  // engine_keys one the engine runs.
  bool TakesKeyMode(uint16_t mode) const;
  // Job j's mode and traffic keys of its grant number `grant` (mode crc: no key).
  Result<JobSecurity> KeysOfGrant(const JobEntry& j, uint64_t grant) const;
  // The join nonce of JOIN `h` (any sec and flags) from `from` in time bucket `bucket`.
  proto::JoinNonce JoinNonceFor(const proto::Header& h, const Peer& from, int64_t bucket) const;
  int64_t JoinBucket(TimePoint now) const;
  // join_challenge for JOIN `h` from `from` at `now` (naming h's rank); counted.
  void SendJoinChallenge(const proto::Header& h, const Peer& from, const JobKey& key, TimePoint now,
                         ReplySink& out);
  // Forgets job_id's key (its incarnation ended).
  void ForgetKey(uint16_t job_id);
  void HandleAlloc(const proto::AllocJobMsg& h, const Peer& from, TimePoint now, ReplySink& out);
  bool Reserved(uint16_t job_id) const;
  void DropReservation(uint16_t job_id);
  // Queues j for slots, then admits what can be (AdmitQueued).
  void Enqueue(JobEntry& j, ReplySink& out);
  // Admits queued jobs, oldest first, while slots allow (see the header comment).
  void AdmitQueued(ReplySink& out);
  // Installs j with pool slots [base, base + got) and acks every lane; false if the engine
  // refused (then the slots are released and the job is forgotten with error(no_slots)).
  bool Grant(JobEntry& j, uint32_t base, uint32_t got, ReplySink& out);
  // Every lane of every rank not done re-joined for the current grant.
  static bool RejoinComplete(const JobEntry& j);
  // Not every rank in yet, never granted nor doomed: a refusal dooms it (IsPending).
  static bool Pending(const JobEntry& j) {
    return !j.active && !j.queued && j.epoch == 0 && !j.refused;
  }
  // Every lane re-joined: the grant's slots go back and the job is queued again.
  void TakeBackGrant(JobEntry& j, ReplySink& out);
  // Removes j from the engine and frees its slots, if it holds a grant; whether it did.
  bool DropGrant(JobEntry& j);
  // Idle release (see the header comment): asks j's lanes to release its grant; calls it off,
  // telling the lanes that re-joined for it that the grant stands.
  void AskRelease(JobEntry& j, TimePoint now, ReplySink& out);
  void CallOffRelease(JobEntry& j, ReplySink& out);
  // join_ack of j's grant with `release` (1: release, 2: stands) to every lane in `lanes` (rank
  // r: bit l), counted.
  void SendRelease(const JobEntry& j, const std::array<uint16_t, proto::kMaxWorkers>& lanes,
                   uint8_t release, ReplySink& out);
  // The join_ack of j's current grant, to `rank`.
  proto::JoinAckMsg JoinAck(const JobEntry& j, uint16_t rank) const;
  // join_wait to one peer of a queued job.
  void SendJoinWait(const JobEntry& j, const Peer& to, uint16_t rank, ReplySink& out);
  // join_pending to a lane of pending job j (see above): how many ranks joined, the lowest that
  // has not.
  void SendJoinPending(const JobEntry& j, const Peer& to, uint16_t rank, ReplySink& out);
  // Removes the job from the engine (if active), frees its slots and its entry; sends
  // error(job_aborted) to every joined lane of every rank except `except_rank` (kRankAll: none
  // excepted) and the ranks that left gracefully.
  void FreeJob(JobEntry& j, uint16_t except_rank, ReplySink& out);
  // One typed message (proto::JoinAckMsg{...}), sealed, to `to`.
  template <class Msg>
  void SendReply(const Peer& to, const Msg& m, ReplySink& out) {
    const ControlMessage c = MakeControl(m);
    out.Send(to, c);
  }
  // error(e.code), its other fields as the code defines them (proto/ina.toml); counted.
  void SendError(const Peer& to, const proto::ErrorMsg& e, ReplySink& out);
  // First-fit allocation of min(want, largest extent) slots; false if the pool is full.
  bool Allocate(uint32_t want, uint32_t& base, uint32_t& got);
  void Release(uint32_t base, uint32_t len);
  void Bump(ControlCounter c) { ++counters_[static_cast<size_t>(c)]; }

  Engine& engine_;
  ControlConfig config_;
  uint32_t pool_slots_;
  std::vector<JobEntry> jobs_;  // max_jobs entries, pre-allocated
  std::vector<int32_t> index_;  // job id -> jobs_ index, -1: none (65536 entries)
  std::vector<Extent> free_;    // sorted by base, coalesced
  // A job id handed out by ALLOC_JOB, not joined yet.
  struct Reservation {
    uint16_t job_id;
    uint16_t nonce;
    Peer peer;
    TimePoint at;
  };
  std::vector<Reservation> reservations_;  // at most max_jobs
  uint32_t first_alloc_ = 0;               // the smallest such id
  uint32_t alloc_ids_ = 0;                 // how many there are
  uint32_t next_alloc_ = 0;                // round-robin cursor over the ids this plane hands out
  size_t num_jobs_ = 0;
  uint64_t next_queue_seq_ = 0;
  TimePoint now_{};  // the latest time handed in (HandleControl, Tick): when a grant is made
  ControlCounters counters_{};
  std::unordered_map<uint16_t, JobKey> keys_;    // job id -> its key (see InstallJobKey)
  std::unordered_set<uint16_t> refusal_logged_;  // job ids whose keyless JOIN was logged
  std::unique_ptr<proto::MessageOpener> admin_;  // opens SET_KEY; null: no admin channel
  uint64_t admin_seq_ = 0;  // the last accepted SET_KEY's sequence + 1, or admin_seq_floor
  uint32_t mode_refusals_logged_ = 0;  // bit min(m, 31): a SET_KEY refused for mode m was logged
  bool admin_replay_logged_ = false;
  std::array<uint8_t, 32> join_secret_{};         // random at Create: keys the join nonces
  std::unordered_set<uint16_t> unproven_logged_;  // job ids whose failed proof was logged
};

}  // namespace ina::dp
