// Membership: one lane's membership of its job, the join handshake, the re-join at a lease's end
// and LEAVE (docs/protocol.md, "Joining", "Sharing the slot pool"), as a state machine with the
// shape of SlotWindow (slot_window.h).
//
// It is driven by (now, packets received) and gives (packets to send, next deadline, a grant or a
// Status). It reads no clock, owns no socket and starts no thread: Progress (progress.h) passes
// the time and moves packets between it and the lane's Transport, so unit tests drive it with a
// fake clock, packet by packet (tests/host/comm/membership_test.cc).
//
// States and transitions (each Status below names `who`: "join job 7 as rank 0 of 2 at ..."):
//
//   kOut --Join(epoch, now)--> kJoining          JOIN queued (exp = epoch: 0 for the first
//                                                JOIN, the grant's epoch for a re-join)
//   kMember --Join(epoch, now)--> kJoining       the re-join at the end of a lease
//   kJoining|kQueued --join_challenge-->         a keyed job: the JOIN becomes the proven JOIN
//                                                (sec mac, tagged under the challenge's nonce),
//                                                queued at once; a CRC-only job fails
//                                                (FailedPrecondition: the fabric holds a key)
//   kJoining --join_pending--> kJoining          the job waits for ranks: remembered, and the
//                                                timeout then names who had not joined
//   kJoining --join_wait--> kQueued              every rank joined; the job waits for slots
//   kJoining|kQueued --join_ack--> kMember       a grant (grant()), checked against the ask
//   kJoining|kQueued --error--> kFailed          the refusal's Status (JoinError)
//   kJoining --join_timeout--> kFailed           DeadlineExceeded ("no join_ack within ...")
//   kQueued --slot_wait_timeout--> kFailed       DeadlineExceeded ("waited ... for slots"),
//                                                with three abort LEAVEs queued
//   kJoining|kQueued --Cancel / transport error--> kFailed (abort LEAVEs queued from kQueued)
//   any --Leave(reason, calls)--> kOut           three LEAVEs queued
//
// A proof older than challenge_max_age is not resent: the plain JOIN is, to get a fresh nonce (the
// fabric accepts a proof one to two of its join nonce periods, 10 s by default, after the
// challenge; docs/security.md). A challenge with the nonce already proven answers a refused
// proof (another secret) once the proof was sent: remembered, and named by the timeout's message.
//
// While kJoining the JOIN is resent every `resend` after it was last handed to the transport;
// while kQueued every `resend` after the last join_wait (the fabric answers every JOIN of a
// queued job). The deadline is join_timeout from Join, or slot_wait_timeout from the first
// join_wait. Replies: only messages of this version whose CRC32C trailer matches, for this job:
// join_ack (on a re-join, not the old grant's: its epoch differs, but for release 2, "the grant
// stands", the answer to a re-join for a release the fabric called off), join_wait, join_pending,
// error, join_challenge (this rank and lane, a payload of proto::kJoinChallengeBytes). Everything
// else is ignored. A transport error Unavailable (the fabric is not up yet) is remembered and
// named in the timeout's message at the first join; at a re-join (the fabric granted the job a
// moment ago, so its port refusing means it went away) it fails the re-join at once, as any
// other transport error fails the join.
//
// LEAVE is best effort: nothing acknowledges it, so its copies are sent once (what the transport
// does not take is dropped, OnSent) and never resent.
//
// Adding a step (a challenge before the grant, say): a state after kJoining, a case in OnPacket
// that moves to it on the new message and replaces the request being resent (SetRequest: a
// header and up to kMaxRequestPayload bytes after it, e.g. a proof), and the states in which
// join_ack is accepted (AwaitsAck). The timers, the deadlines and the driver stay as they are.
//
// Threading: one thread at a time (the lane's).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "clock.h"
#include "ina/base/status.h"
#include "ina/host/config.h"
#include "ina/host/transport.h"
#include "ina/proto/sec.h"
#include "ina/proto/wire.h"

namespace ina::host::internal {

// What a join_ack grants (docs/protocol.md, "Sharing the slot pool").
struct Grant {
  uint16_t window = 0;
  uint8_t epoch = 0;   // 1 .. 255
  uint16_t lease = 0;  // calls; 0: unlimited
  // A keyed job: the session salt of the job's key at the fabric (the last join_challenge's), the
  // session of this grant's traffic keys; zero for a job that was not challenged.
  proto::Session salt{};
  // The fabric's job timeout (join_ack job_timeout_ms; 0: not said): an idle job is kept alive
  // well within it.
  std::chrono::milliseconds job_timeout{0};
  // join_ack release (docs/protocol.md, "Idle jobs"): 1, the fabric asks the idle job to release
  // this grant; 2, the answer to a re-join for a release called off: the grant stands.
  uint8_t release = 0;
};

struct JoinConfig {
  uint16_t job_id = 1;
  uint16_t rank = 0;
  uint16_t world_size = 1;
  uint16_t k = 256;
  uint16_t window = 1;  // slots asked; a grant is 1 .. window
  uint16_t lane = 0;
  uint16_t lanes = 1;  // progress threads
  // Lanes on switch cores (CommConfig::switch_cores > 1): each core holds its share of the job
  // as a job of its own, where this rank has one lane, so the JOIN names no lane.
  bool core_lanes = false;
  std::chrono::milliseconds join_timeout{10000};
  std::chrono::milliseconds slot_wait_timeout{60000};
  std::chrono::milliseconds resend{100};
  // A keyed job (CommConfig::sec not crc): the secret its JOIN proves when challenged; empty for
  // a CRC-only job. A proof is sent for challenge_max_age, then the plain JOIN again.
  JobSecret secret;
  // Its mode (CommConfig::sec): a join_challenge naming another fails the join at once.
  proto::SecMode mode = proto::SecMode::kCrc;
  std::chrono::milliseconds challenge_max_age{5000};
  // The fabric's address for messages: "host:port (switch core 1)".
  std::string where;

  // The communicator's settings for lane `lane`.
  static JoinConfig From(const CommConfig& config, uint16_t lane);
};

class Membership {
 public:
  enum class State : uint8_t {
    kOut,      // not a member: before Join, after Leave
    kJoining,  // JOIN sent, resent every `resend`
    kQueued,   // the fabric answered join_wait: the job waits for slots
    kMember,   // granted: grant()
    kFailed,   // the join failed: status()
  };

  explicit Membership(const JoinConfig& config);

  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  // Starts a join at `now`: the first (finished_epoch 0) or a re-join at the end of the lease of
  // grant `finished_epoch`. Queues the JOIN. REQUIRES: !joining().
  // `release`: a re-join releasing an idle job's grant (JOIN release 1, docs/protocol.md "Idle
  // jobs"), whose answer may be the same grant, standing (join_ack release 2).
  void Join(uint8_t finished_epoch, TimePoint now, bool release = false);
  // Asks `window` slots in the JOINs from the next Join on (a grant above it is refused as
  // before). Lanes on switch cores whose cores granted different windows re-join asking the
  // least (docs/protocol.md, "Lanes on switch cores"). REQUIRES: 1 <= window, !joining().
  void AskWindow(uint16_t window) { cfg_.window = window; }
  // One received packet (whole ina message). Moves the join on (see the table above); ignored
  // when not joining.
  void OnPacket(std::span<const uint8_t> packet, TimePoint now);
  // Queues the JOIN's resend when it is due; fails the join past its deadline. No-op when not
  // joining.
  void OnTimers(TimePoint now);
  // Stops a join in progress (another lane's join failed): kFailed with Aborted.
  void Cancel();
  // While queued: the slot wait starts again at `now` (an idle job that released its grant waits
  // for its next one with no call waiting: docs/protocol.md, "Idle jobs"). No-op otherwise.
  void RestartSlotWait(TimePoint now) {
    if (state_ == State::kQueued) wait_start_ = now;
  }
  // While queued after releasing an idle job's grant: a call waits now, so the JOIN's resends
  // drop their release flag (the fabric may then ask an idle job to release for this one). No-op
  // otherwise, and after the first time.
  void CallWaits();
  // A transport error while joining: Unavailable is remembered (the timeout names it); any other
  // fails the join with it. No-op when not joining.
  void OnTransportError(const Status& s);
  // Queues three LEAVEs with aux = `reason` (kNone: this rank is done; anything else aborts the
  // job) and offset = `calls` (the calls this rank completed). Ends any join in progress; kOut.
  void Leave(proto::ErrorCode reason, uint64_t calls);

  // The packets queued for sending, in order: fills up to out.size() and returns how many. The
  // pointers stay valid until the next call that changes the membership.
  size_t PeekTx(std::span<TxMessage> out) const;
  // The first n packets PeekTx gave were handed to the transport at `now` (the JOIN's resend
  // timer starts). A LEAVE not taken is dropped: nothing acknowledges it. REQUIRES: n <= queued.
  void OnSent(size_t n, TimePoint now);
  size_t tx_queued() const { return tx_count_; }

  // The earliest time OnTimers may have something to do; TimePoint::max() when not joining.
  TimePoint NextDeadline() const;

  State state() const { return state_; }
  bool joining() const { return state_ == State::kJoining || state_ == State::kQueued; }
  // kMember: the grant. Kept after a Leave (the last grant).
  const Grant& grant() const { return grant_; }
  // kFailed: why. Ok otherwise.
  const Status& status() const { return status_; }
  // After the join ended (kMember or kFailed): the grant or the failure.
  Result<Grant> result() const;
  const JoinConfig& config() const { return cfg_; }
  // Jobs ahead of this one in the fabric's queue (the last join_wait's aux).
  uint16_t ahead() const { return ahead_; }

 private:
  // The message resent while joining (JOIN): `h`, then `payload` (REQUIRES: at most
  // kMaxRequestPayload bytes), sealed; queued to be sent at once.
  void SetRequest(const proto::Header& h, std::span<const uint8_t> payload = {});
  // The states in which a join_ack ends the join.
  bool AwaitsAck() const { return joining(); }
  // Ends the join with `s`; from kQueued also queues the abort LEAVEs (a job given up in the
  // queue must neither stay there nor be granted slots nobody uses).
  void Fail(Status s);
  void QueueLeave(proto::ErrorCode reason, uint64_t calls);
  void OnJoinAck(const proto::JoinAckMsg& a);
  void OnChallenge(std::span<const uint8_t> packet, TimePoint now);
  std::string Who() const;

  static constexpr size_t kLeaveCopies = 3;
  static constexpr size_t kMsgBytes = proto::MessageBytes(0);
  static constexpr size_t kMaxRequestPayload = 64;

  JoinConfig cfg_;
  State state_ = State::kOut;
  uint8_t finished_epoch_ = 0;  // of the join in progress
  TimePoint started_{};         // Join's now
  TimePoint wait_start_{};      // the first join_wait's arrival (kQueued)
  TimePoint next_send_{};       // when the request is due again (joining, not queued to send)
  uint16_t ahead_ = 0;
  proto::Header join_{};              // the JOIN of the join in progress (sec 0)
  bool proving_ = false;              // the request is the proven JOIN for challenge_
  bool proof_sent_ = false;           // ... and it was handed to the transport
  proto::JoinChallenge challenge_{};  // the last challenge's nonce and salt
  TimePoint challenged_{};            // when challenge_ arrived
  uint32_t proofs_refused_ = 0;       // challenges repeating the one already proven
  // The last join_pending (kJoining): who the fabric still waits for, named by the timeout.
  std::optional<proto::JoinPendingMsg> pending_;
  Grant grant_;
  Status status_;
  Status last_transport_error_;  // Unavailable while joining, named by the timeout

  std::array<uint8_t, kMsgBytes + kMaxRequestPayload> request_{};  // JOIN
  size_t request_len_ = 0;
  std::array<uint8_t, kMsgBytes> leave_{};
  bool request_queued_ = false;
  size_t leaves_queued_ = 0;
  size_t tx_count_ = 0;  // request_queued_ + leaves_queued_
};

// The Status for error `e` answering the JOIN of `cfg`: bad_params and peer_refused name the
// parameter and both values (the fabric's error fields, proto/ina.toml), peer_refused the refused
// rank. `who` leads the message.
Status JoinError(const proto::ErrorMsg& e, const JoinConfig& cfg, const std::string& who);

}  // namespace ina::host::internal
