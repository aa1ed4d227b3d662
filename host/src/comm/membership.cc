// Membership: see membership.h.
#include "membership.h"

#include <algorithm>

#include "core_lanes.h"
#include "ina/proto/crc32c.h"
#include "mode_refusal.h"

namespace ina::host::internal {

namespace {

// A join_pending's news, for the join timeout's message.
std::string MissingWords(const proto::JoinPendingMsg& p) {
  const std::string of = std::to_string(p.joined) + " of " + std::to_string(p.world_size);
  const std::string rank = std::to_string(p.missing_rank);
  switch (p.scope) {
    case 1: {
      std::string ranks = "the leaf of rank " + rank;
      if (p.missing_ranks > 1) {
        ranks = "the leaf of ranks " + rank + ".." +
                std::to_string(p.missing_rank + p.missing_ranks - 1);
      }
      return of + " leaves of the tree joined the spine; " + ranks +
             " has not (did those ranks start, and does their leaf reach the spine? "
             "docs/hierarchy.md)";
    }
    case 2:
      return of + " ranks of this leaf joined it; rank " + rank +
             " has not (did it start, with this leaf as its INA_SWITCH?)";
    default:
      return of + " ranks joined the job at the switch; rank " + rank +
             " has not (did it start, with this switch as its INA_SWITCH?)";
  }
}

// The words for a JoinParam in messages ("K", "world size", ...).
std::string ParamWords(proto::JoinParam param) {
  switch (param) {
    case proto::JoinParam::kK:
      return "K";
    case proto::JoinParam::kWorldSize:
      return "world size";
    case proto::JoinParam::kWindow:
      return "window";
    case proto::JoinParam::kRank:
      return "rank";
    case proto::JoinParam::kLanes:
      return "lane count (progress_threads)";
    case proto::JoinParam::kLane:
      return "lane";
    case proto::JoinParam::kSecMode:
      return "sec mode";
    case proto::JoinParam::kRankTaken:
    case proto::JoinParam::kNone:
      break;
  }
  return "parameter " + std::string(proto::JoinParamName(static_cast<uint16_t>(param)));
}

// What this rank's JOIN said for `param`.
uint32_t OwnValue(const JoinConfig& cfg, proto::JoinParam param) {
  switch (param) {
    case proto::JoinParam::kK:
      return cfg.k;
    case proto::JoinParam::kWorldSize:
      return cfg.world_size;
    case proto::JoinParam::kWindow:
      return cfg.window;
    case proto::JoinParam::kRank:
      return cfg.rank;
    case proto::JoinParam::kLanes:
      return cfg.lanes;
    case proto::JoinParam::kLane:
      return cfg.lane;
    case proto::JoinParam::kSecMode:
      return static_cast<uint32_t>(cfg.mode);
    case proto::JoinParam::kRankTaken:
    case proto::JoinParam::kNone:
      break;
  }
  return 0;
}

}  // namespace

JoinConfig JoinConfig::From(const CommConfig& c, uint16_t lane) {
  JoinConfig j;
  j.job_id = c.job_id;
  j.rank = c.rank;
  j.world_size = c.world_size;
  j.k = c.k;
  j.lane = lane;
  j.lanes = static_cast<uint16_t>(c.progress_threads);
  j.core_lanes = c.switch_cores > 1;
  // Lanes on switch cores: each core is asked its share of the window (core_lanes.h).
  j.window = j.core_lanes ? CoreWindow(c.window, j.lanes) : c.window;
  if (c.sec != "crc") j.secret = c.job_secret;
  j.mode = c.sec == "mac"           ? proto::SecMode::kMac
           : c.sec == "mac_encrypt" ? proto::SecMode::kMacEncrypt
                                    : proto::SecMode::kCrc;
  j.join_timeout = std::chrono::milliseconds(c.join_timeout_ms);
  j.slot_wait_timeout = std::chrono::milliseconds(c.slot_wait_timeout_ms);
  j.where = c.switch_host + ":" +
            std::to_string(j.core_lanes ? c.switch_port + lane : c.switch_port) +
            (j.core_lanes ? " (switch core " + std::to_string(lane) + ")" : std::string());
  return j;
}

Membership::Membership(const JoinConfig& config) : cfg_(config) {}

std::string Membership::Who() const {
  return std::string(finished_epoch_ == 0 ? "join" : "re-join") + " job " +
         std::to_string(cfg_.job_id) + " as rank " + std::to_string(cfg_.rank) + " of " +
         std::to_string(cfg_.world_size) +
         (cfg_.lanes > 1
              ? " lane " + std::to_string(cfg_.lane) + " of " + std::to_string(cfg_.lanes)
              : std::string()) +
         " at " + cfg_.where;
}

void Membership::SetRequest(const proto::Header& h, std::span<const uint8_t> payload) {
  const size_t n = std::min(payload.size(), kMaxRequestPayload);
  proto::EncodeHeader(h, request_.data());
  std::copy_n(payload.data(), n, request_.data() + proto::kHeaderBytes);
  request_len_ = proto::SealMessage(request_.data(), proto::kHeaderBytes + n);
  if (!request_queued_) ++tx_count_;
  request_queued_ = true;
}

void Membership::Join(uint8_t finished_epoch, TimePoint now, bool release) {
  finished_epoch_ = finished_epoch;
  state_ = State::kJoining;
  status_ = Status::Ok();
  last_transport_error_ = Status::Ok();
  started_ = now;
  next_send_ = now;
  ahead_ = 0;
  proving_ = false;
  proofs_refused_ = 0;
  pending_.reset();
  proto::JoinMsg join{.release = static_cast<uint8_t>(release ? 1 : 0),
                      .rejoin_epoch = finished_epoch,
                      .job = cfg_.job_id,
                      .rank = cfg_.rank,
                      .k = cfg_.k,
                      .window = cfg_.window,
                      .world_size = cfg_.world_size};
  // One lane: lane and lanes stay 0, as for workers before lanes. Lanes on switch cores: each
  // core holds its share of the job as a job of its own, where this rank has one lane (the core's).
  if (cfg_.lanes > 1 && !cfg_.core_lanes) {
    join.lane = cfg_.lane;
    join.lanes = cfg_.lanes;
  }
  join_ = join.ToHeader();
  SetRequest(join_);
}

void Membership::OnChallenge(std::span<const uint8_t> packet, TimePoint now) {
  const proto::Header c = proto::DecodeHeader(packet.data());
  if (c.rank != join_.rank || c.slot != join_.slot ||
      packet.size() != proto::MessageBytes(proto::kJoinChallengeBytes / proto::kElemBytes)) {
    return;  // not this lane's
  }
  if (cfg_.secret.empty()) {
    Fail(FailedPrecondition(
        Who() + ": the fabric holds a key for job " + std::to_string(cfg_.job_id) +
        " and challenged the JOIN, but this worker runs it CRC-only: give every rank the job "
        "secret (INA_JOB_SEC=mac or mac_encrypt, INA_JOB_KEY; docs/security.md)"));
    return;
  }
  const auto mode = proto::JoinChallengeMsg::From(c).mode;
  if (mode != 0 && mode != static_cast<uint16_t>(cfg_.mode)) {
    // The fabric would drop every data packet of this worker's as another mode's (drop_cross_job).
    Fail(FailedPrecondition(
        Who() + ": the fabric holds job " + std::to_string(cfg_.job_id) + "'s key in mode " +
        std::string(proto::SecModeName(static_cast<uint8_t>(mode))) + ", but this worker runs it " +
        std::string(proto::SecModeName(static_cast<uint8_t>(cfg_.mode))) +
        ": give every rank, and the key's install, the same mode (INA_JOB_SEC; docs/security.md)"));
    return;
  }
  const auto challenge = proto::JoinChallenge::From(packet.data() + proto::kHeaderBytes);
  if (proving_ && challenge == challenge_) {
    if (proof_sent_) ++proofs_refused_;  // the answer to our proof: the fabric did not accept it
    return;
  }
  proto::Header h = join_;
  h.sec = static_cast<uint8_t>(proto::SecMode::kMac);
  proto::EncodeHeader(h, request_.data());
  const Status sealed = proto::SealJoinProof(cfg_.secret.bytes(), challenge, request_.data());
  if (!sealed.ok()) {
    Fail(sealed.WithContext(Who()));
    return;
  }
  request_len_ = proto::kHeaderBytes + proto::kTagBytes;
  challenge_ = challenge;
  challenged_ = now;
  proving_ = true;
  proof_sent_ = false;
  if (!request_queued_) ++tx_count_;
  request_queued_ = true;
}

void Membership::OnPacket(std::span<const uint8_t> packet, TimePoint now) {
  if (!joining()) return;
  if (packet.size() < proto::kHeaderBytes) return;
  if (!proto::MessageCrcOk(packet)) return;  // damaged: the resend gets another answer
  const proto::Header a = proto::DecodeHeader(packet.data());
  if (a.version != proto::kVersion || a.job != cfg_.job_id) return;
  switch (a.type) {
    case proto::MsgType::kJoinAck: {
      // On a re-join, the old grant's join_ack (a duplicate, or a release asked) is not the
      // answer, unless it says the grant stands (a release called off).
      const auto ack = proto::JoinAckMsg::From(a);
      if (AwaitsAck() &&
          (finished_epoch_ == 0 || ack.epoch != finished_epoch_ || ack.release == 2)) {
        OnJoinAck(ack);
      }
      return;
    }
    case proto::MsgType::kJoinWait:
      if (state_ == State::kJoining) {
        state_ = State::kQueued;
        wait_start_ = now;
      }
      ahead_ = proto::JoinWaitMsg::From(a).queue_ahead;
      // The fabric answers every JOIN while the job is queued: resend at the usual pace after
      // its answer, not at once.
      next_send_ = now + cfg_.resend;
      return;
    case proto::MsgType::kJoinPending:
      // The job waits for ranks: the join timeout runs on, and names who was missing.
      if (state_ == State::kJoining) pending_ = proto::JoinPendingMsg::From(a);
      return;
    case proto::MsgType::kJoinChallenge:
      OnChallenge(packet, now);
      return;
    case proto::MsgType::kError: {
      state_ = State::kFailed;
      const auto e = proto::ErrorMsg::From(a);
      status_ = JoinError(e, cfg_, Who());
      if (e.code == proto::ErrorCode::kJobAborted && pending_) {
        // A rank that waited too gave up first (its join timeout ended a moment before this
        // one's): what this rank was told is still who is missing.
        status_ = Aborted(std::string(status_.message()) +
                          " while the job waited for a missing rank: " + MissingWords(*pending_));
      }
      if (request_queued_) --tx_count_;
      request_queued_ = false;
      return;
    }
    default:
      return;
  }
}

void Membership::OnJoinAck(const proto::JoinAckMsg& a) {
  if (request_queued_) --tx_count_;
  request_queued_ = false;
  if (a.k != cfg_.k || a.window < 1 || a.window > cfg_.window || a.epoch == 0 || a.epoch > 255) {
    state_ = State::kFailed;
    status_ =
        Internal(Who() + ": join_ack with k " + std::to_string(a.k) + " window " +
                 std::to_string(a.window) + " epoch " + std::to_string(a.epoch) + " (asked k " +
                 std::to_string(cfg_.k) + " window " + std::to_string(cfg_.window) + ")");
    return;
  }
  state_ = State::kMember;
  grant_ = Grant{static_cast<uint16_t>(a.window),
                 static_cast<uint8_t>(a.epoch),
                 a.lease,
                 challenge_.salt,
                 std::chrono::milliseconds(a.job_timeout_ms),
                 a.release};
}

void Membership::OnTimers(TimePoint now) {
  if (!joining()) return;
  const bool queued = state_ == State::kQueued;
  const TimePoint deadline =
      queued ? wait_start_ + cfg_.slot_wait_timeout : started_ + cfg_.join_timeout;
  if (now >= deadline) {
    std::string m =
        queued ? "waited " + std::to_string(cfg_.slot_wait_timeout.count()) +
                     " ms for slots (slot_wait_timeout_ms, INA_SLOT_WAIT_MS): every rank joined "
                     "but the switch's slot pool is busy; it queued the job behind " +
                     std::to_string(ahead_) + " other job(s)"
               : "no join_ack within " + std::to_string(cfg_.join_timeout.count()) + " ms" +
                     (pending_ ? ": " + MissingWords(*pending_)
                               : std::string(" (did every rank ") +
                                     (finished_epoch_ == 0 ? "start?)" : "re-join?)"));
    if (proofs_refused_ > 0) {
      m += "; the fabric answered this rank's proof of the job secret with another challenge " +
           std::to_string(proofs_refused_) +
           " time(s): it likely holds another secret for the job (docs/security.md)";
    }
    if (!last_transport_error_.ok()) {
      m += "; last transport error: " + last_transport_error_.ToString();
    }
    Fail(DeadlineExceeded(Who() + ": " + m));
    return;
  }
  if (!request_queued_ && now >= next_send_) {
    if (proving_ && now - challenged_ >= cfg_.challenge_max_age) {
      proving_ = false;  // the proof is getting old: ask for a fresh nonce
      SetRequest(join_);
      return;
    }
    request_queued_ = true;
    ++tx_count_;
  }
}

void Membership::CallWaits() {
  proto::JoinMsg join = proto::JoinMsg::From(join_);
  if (state_ != State::kQueued || join.release == 0) return;
  join.release = 0;
  join_ = join.ToHeader();
  proving_ = false;  // a keyed job's fabric challenges the new header afresh
  SetRequest(join_);
}

void Membership::Cancel() {
  if (joining()) Fail(Aborted(Who() + ": another lane failed"));
}

void Membership::OnTransportError(const Status& s) {
  if (!joining() || s.ok()) return;
  if (s.code() == StatusCode::kUnavailable && finished_epoch_ == 0) {
    last_transport_error_ = s;  // the fabric is not up yet: the first join keeps trying
    return;
  }
  if (s.code() == StatusCode::kUnavailable) {
    // A re-join: the fabric granted this job a moment ago and is gone now (its port refuses: it
    // died, or restarted without the job). Waiting out the join timeout would change nothing.
    Fail(Unavailable(Who() + ": the fabric went away since its last grant (" + s.ToString() + ")"));
    return;
  }
  Fail(s.WithContext(Who()));
}

void Membership::Fail(Status s) {
  const bool queued = state_ == State::kQueued;
  state_ = State::kFailed;
  status_ = std::move(s);
  if (request_queued_) --tx_count_;
  request_queued_ = false;
  // Giving up a queued job: tell the fabric, so it neither keeps the job in the queue nor grants
  // it slots nobody will use.
  if (queued) QueueLeave(proto::ErrorCode::kJobAborted, 0);
}

void Membership::Leave(proto::ErrorCode reason, uint64_t calls) {
  state_ = State::kOut;
  if (request_queued_) --tx_count_;
  request_queued_ = false;
  QueueLeave(reason, calls);
}

void Membership::QueueLeave(proto::ErrorCode reason, uint64_t calls) {
  proto::LeaveMsg{.job = cfg_.job_id,
                  .rank = cfg_.rank,
                  .calls = static_cast<uint32_t>(calls),
                  .reason = static_cast<uint16_t>(reason)}
      .Encode(leave_.data());
  proto::SealMessage(leave_.data(), proto::kHeaderBytes);
  tx_count_ += kLeaveCopies - leaves_queued_;
  leaves_queued_ = kLeaveCopies;
}

size_t Membership::PeekTx(std::span<TxMessage> out) const {
  size_t n = 0;
  if (request_queued_ && n < out.size()) out[n++] = TxMessage{request_.data(), request_len_};
  for (size_t i = 0; i < leaves_queued_ && n < out.size(); ++i) {
    out[n++] = TxMessage{leave_.data(), leave_.size()};
  }
  return n;
}

void Membership::OnSent(size_t n, TimePoint now) {
  if (request_queued_ && n > 0) {
    request_queued_ = false;
    --tx_count_;
    next_send_ = now + cfg_.resend;
    proof_sent_ = proving_;
  }
  // LEAVE: sent once, best effort; copies the transport did not take are dropped.
  tx_count_ -= leaves_queued_;
  leaves_queued_ = 0;
}

TimePoint Membership::NextDeadline() const {
  if (!joining()) return TimePoint::max();
  const TimePoint deadline = state_ == State::kQueued ? wait_start_ + cfg_.slot_wait_timeout
                                                      : started_ + cfg_.join_timeout;
  return request_queued_ ? deadline : std::min(deadline, next_send_);
}

Result<Grant> Membership::result() const {
  if (state_ == State::kMember) return grant_;
  if (state_ == State::kFailed) return status_;
  return FailedPrecondition("membership: the join has not ended");
}

Status JoinError(const proto::ErrorMsg& e, const JoinConfig& cfg, const std::string& who) {
  std::string m =
      who + ": fabric answered error(" + std::string(proto::ErrorCodeName(e.code)) + ")";
  const proto::JoinParam param = e.join_param();
  const std::string words = ParamWords(param);
  const std::string own = std::to_string(OwnValue(cfg, param));
  switch (e.code) {
    case proto::ErrorCode::kBadParams:
      if (param == proto::JoinParam::kNone) {  // a fabric that does not name it
        return InvalidArgument(m +
                               ": K, world size or window differ from the other ranks' or are "
                               "out of range");
      }
      if (e.job_value() == proto::kJoinValueNone && param == proto::JoinParam::kRank) {
        // A worker never sends a rank >= its world: only a leaf of a tree refuses its rank.
        return InvalidArgument(m + ": this switch does not serve rank " + own +
                               ": a leaf of a tree serves only its share of the ranks, and "
                               "another leaf serves this one (docs/hierarchy.md); set this "
                               "rank's INA_SWITCH to that leaf");
      }
      if (e.job_value() == proto::kJoinValueNone) {
        return InvalidArgument(m + ": this rank's " + words + " " + own +
                               " is out of the fabric's range");
      }
      return InvalidArgument(
          m + ": this rank's " + words + " " + own + " differs from " +
          std::to_string(e.job_value()) + ", what the ranks that joined first sent" +
          (param == proto::JoinParam::kK ? " (k 0, the default, takes the largest K the path MTU "
                                           "carries: set the same k / INA_K on every rank)"
                                         : ""));
    case proto::ErrorCode::kNoSlots:
      if (param == proto::JoinParam::kSecMode) {
        return Unimplemented(
            m + ": " +
            CannotRunSecMode(static_cast<uint16_t>(std::min<uint32_t>(e.job_value(), 0xFFFF))));
      }
      return ResourceExhausted(
          m +
          ": the fabric could not install the job: its engine refused it "
          "(its job table or memory is full; the switch's log says why), or "
          "a leaf of a tree cannot hold the spine's window (docs/hierarchy.md)");
    case proto::ErrorCode::kTooManyJobs:
      return ResourceExhausted(m);
    case proto::ErrorCode::kRankTaken:
      return AlreadyExists(m + ": another process already joined as rank " +
                           std::to_string(cfg.rank) + " lane " + std::to_string(cfg.lane));
    case proto::ErrorCode::kPeerRefused: {
      const std::string peer = "rank " + std::to_string(e.refused_rank());
      m += ": " + peer + "'s JOIN was refused, so the job cannot start";
      if (param == proto::JoinParam::kNone) return Aborted(m);
      m += ": ";
      if (param == proto::JoinParam::kRankTaken) {
        return Aborted(m + "another process had already joined as " + peer + " lane " +
                       std::to_string(e.refused_value()) + " (two processes with the same rank?)");
      }
      if (param == proto::JoinParam::kRank && e.tree_rank() == 1) {
        // A leaf of a tree refuses a rank only when another leaf serves it.
        return Aborted(m +
                       "it joined a leaf that does not serve it (its switch address names "
                       "another leaf's; docs/hierarchy.md)");
      }
      if (param == proto::JoinParam::kRank || param == proto::JoinParam::kLane) {
        return Aborted(m + "its " + words + " " + std::to_string(e.refused_value()) +
                       " is out of range");
      }
      return Aborted(m + "its " + words + " " + std::to_string(e.refused_value()) +
                     " differs from " + own + ", this rank's");
    }
    case proto::ErrorCode::kUnauthorized:
      return FailedPrecondition(
          m + ": the fabric holds no key for job " + std::to_string(cfg.job_id) +
          " where it needs one (a switch started with --require-job-keys, or a tree whose spine "
          "and leaves do not all hold the job's key): install the job's key on every switch the "
          "job crosses, every core of each (ina-jobkey; docs/security.md)");
    case proto::ErrorCode::kJobAborted:
      return Aborted(m);
    case proto::ErrorCode::kRankLeft:  // at a lease's re-join: a rank finished before this call
      return Aborted(m + ": rank " + std::to_string(e.left_rank()) + " left after " +
                     std::to_string(e.calls()) + " calls");
    default:
      return Internal(m);
  }
}

}  // namespace ina::host::internal
