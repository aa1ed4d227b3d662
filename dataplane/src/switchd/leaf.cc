// A leaf of two-level aggregation (see ina/dp/switchd/leaf.h, docs/hierarchy.md).
#include "ina/dp/switchd/leaf.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "ina/proto/crc32c.h"

namespace ina::dp::switchd {

namespace p = ::ina::proto;

namespace {

constexpr size_t kBufBytes = p::kMaxPacketBytes;
constexpr size_t kCtlBytes = p::MessageBytes(0);

}  // namespace

LeafRanks RanksOfLeaf(uint16_t index, uint16_t leaves, uint16_t world) {
  // lo(i) = ceil(i N / L): the smallest r with floor(r L / N) >= i.
  auto lo = [&](uint32_t i) {
    return static_cast<uint16_t>((i * uint32_t{world} + leaves - 1) / leaves);
  };
  LeafRanks r;
  r.lo = lo(index);
  r.n = static_cast<uint16_t>(lo(uint32_t{index} + 1) - r.lo);
  return r;
}

Leaf::Leaf(const LeafConfig& config, ControlPlane& control, LeafSink& out)
    : config_(config), control_(control), out_(out) {
  config_.lanes = std::max<uint16_t>(config_.lanes, 1);  // 0 counts as 1, as in a JOIN
}

Leaf::~Leaf() { std::fill(config_.upstream_admin.begin(), config_.upstream_admin.end(), 0); }

Leaf::Job* Leaf::Find(uint16_t job_id) {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

void Leaf::SendUp(std::span<const uint8_t> packet, bool payload_checked) {
  out_.SendTo(config_.upstream, packet, payload_checked);
}

void Leaf::SendUpJoin(Job& j) {
  Bump(LeafCounter::kUpJoins);
  // No more than this leaf's own socket holds for its workers: the spine's grant must be one the
  // local control plane can give them whole.
  // The spine's numbering: lanes times this core's (LeafConfig::lanes).
  const uint32_t window =
      std::min({j.window_asked, control_.FittingWindow(j.ranks.n, j.k), 0xFFFFu / config_.lanes}) *
      config_.lanes;
  j.up_window_max = std::max(j.up_window_max, window);
  // Asking less: a re-join of the spine's grant (its epoch); else a first JOIN, or a keep-alive.
  // tree_world: the whole tree's world size, which the spine checks across its leaves as a flat
  // switch checks its workers' (each leaf checks only its own workers').
  j.up_join = p::JoinMsg{.rejoin_epoch = j.asking_less ? j.spine_epoch : uint8_t{0},
                         .tree_world = static_cast<uint8_t>(j.world),
                         .job = j.id,
                         .rank = config_.index,
                         .lane = config_.lane,
                         .lanes = config_.lanes,
                         .k = j.k,
                         .window = window,
                         .world_size = config_.leaves}
                  .ToHeader();
  SendUp(MakeControl(j.up_join), false);
}

void Leaf::SendUpLeave(const Job& j, p::ErrorCode reason, uint32_t calls) {
  SendUpLeave(p::LeaveMsg{
      .job = j.id, .rank = config_.index, .calls = calls, .reason = static_cast<uint16_t>(reason)});
}

void Leaf::SendUpLeave(const p::LeaveMsg& leave) {
  Bump(LeafCounter::kUpLeaves);
  const ControlMessage m = MakeControl(leave);
  // A LEAVE is sent once and never answered: three copies, as a worker sends its aborting LEAVE
  // (a copy changes nothing at the spine).
  for (int i = 0; i < 3; ++i) SendUp(m, false);
}

bool Leaf::PartPending(const Job& j) const {
  if (j.state == State::kJoining) return true;
  if (j.state != State::kRunning) return false;
  return control_.HasJob(j.id) ? control_.IsPending(j.id) : !j.local_seen;
}

p::LeaveMsg Leaf::RefuseBelow(Job& j, uint16_t rank, p::JoinParam param, uint32_t value,
                              TimePoint now) {
  Bump(LeafCounter::kUpRefusals);
  const p::LeaveMsg leave{.job = j.id,
                          .rank = config_.index,
                          .join_param = param,
                          .refused_rank = rank,
                          .calls = value,
                          .reason = static_cast<uint16_t>(p::ErrorCode::kPeerRefused)};
  SendUpLeave(leave);
  const ControlMessage e = MakeControl(p::ErrorMsg{.job = j.id, .code = p::ErrorCode::kPeerRefused}
                                           .set_join_param(param)
                                           .set_refused_rank(rank)
                                           .set_refused_value(value)
                                           .set_tree_rank(1));
  Fail(j, e, now);
  return leave;
}

void Leaf::SendToAllLocal(const Job& j, std::span<const uint8_t> packet) {
  // Lane l's peers are the destinations of slot l (lanes <= kMaxLanes); each lane once.
  const Peer* seen[p::kMaxLanes] = {};
  size_t n_seen = 0;
  for (uint16_t s = 0; s < std::min<uint16_t>(j.window, p::kMaxLanes); ++s) {
    const auto peers = control_.Destinations(j.id, p::kRankAll, s);
    if (peers.empty()) continue;
    if (std::find(seen, seen + n_seen, peers.data()) != seen + n_seen) continue;
    seen[n_seen++] = peers.data();
    for (const Peer& peer : peers) {
      if (peer.len != 0) out_.SendTo(peer, packet, false);
    }
  }
}

// The local control plane's replies: the rank (and a rank named in count) back to global.
void Leaf::Send(const Peer& to, std::span<const uint8_t> packet) {
  if (packet.size() != kCtlBytes) {
    out_.SendTo(to, packet, false);
    return;
  }
  Job* j = Find(p::GetJob(packet.data()));
  if (j == nullptr) {
    out_.SendTo(to, packet, false);
    return;
  }
  std::memcpy(buf_.data(), packet.data(), packet.size());
  uint8_t* b = buf_.data();
  if (p::GetRank(b) < j->ranks.n) p::SetRank(b, static_cast<uint16_t>(p::GetRank(b) + j->ranks.lo));
  if (p::IsType(b, p::MsgType::kError) && !passthrough_) {
    auto e = p::ErrorMsg::Decode(b);
    // The rank these codes name (count: left_rank, refused_rank, proving_rank), made global.
    if ((e.code == p::ErrorCode::kRankLeft || e.code == p::ErrorCode::kPeerRefused ||
         e.code == p::ErrorCode::kRankMismatch) &&
        e.count < j->ranks.n) {
      e.count = static_cast<uint16_t>(e.count + j->ranks.lo);
      e.Encode(b);
    }
  }
  if (p::IsType(b, p::MsgType::kJoinPending)) {
    // The local control plane waits for this leaf's workers: the missing one's rank in the tree.
    auto pending = p::JoinPendingMsg::Decode(b);
    pending.missing_rank += j->ranks.lo;
    pending.scope = 2;
    pending.Encode(b);
  }
  if (p::IsType(b, p::MsgType::kJoinAck)) {
    j->local_seen = true;
    auto ack = p::JoinAckMsg::Decode(b);
    if (ack.window != j->window) {
      // The leaf's pool could not give the spine's window: the job cannot run here (every
      // worker must use one window). Ended after the control plane returns (Tick).
      j->ending = p::ErrorCode::kNoSlots;
      Lower(TimePoint::min());
      return;
    }
    if (ack.epoch != j->local_epoch) LocalGrant(*j, ack.epoch);
    if (j->ending != p::ErrorCode::kNone) return;
    // The spine's lease: the workers re-join after as many calls, and once every one of them
    // did, so does the leaf at the spine (ReJoinUp).
    ack.lease = j->spine_lease;
    ack.Encode(b);
  }
  p::SealMessage(b, p::kHeaderBytes);
  out_.SendTo(to, {b, kCtlBytes}, false);
}

void Leaf::HandleWorkerControl(std::span<const uint8_t> packet, const Peer& from, TimePoint now) {
  if (!config_.upstream_admin.empty() && p::IsType(packet.data(), p::MsgType::kSetKey) &&
      packet.size() >= p::MessageBytes(0)) {
    TakeKey(packet, from, now);
    return;
  }
  // A proven JOIN (a keyed job's answer to a join_challenge): a tag, not a CRC32C trailer.
  if (packet.size() == p::MessageBytes(0, static_cast<uint8_t>(p::SecMode::kMac)) &&
      p::IsType(packet.data(), p::MsgType::kJoin) && p::GetSec(packet.data()) != 0) {
    HandleJoin(p::JoinMsg::From(p::DecodeHeader(packet.data())), packet, from, now);
    return;
  }
  if (packet.size() != kCtlBytes || !p::MessageCrcOk(packet)) {
    control_.HandleControl(packet, from, now, *this);  // counted there
    return;
  }
  const p::Header h = p::DecodeHeader(packet.data());
  if (h.type == p::MsgType::kJoin) {
    HandleJoin(p::JoinMsg::From(h), packet, from, now);
    return;
  }
  Job* j = Find(h.job);
  if (h.type == p::MsgType::kLeave && j != nullptr) {
    const auto leave = p::LeaveMsg::From(h);
    if (j->state == State::kRunning && h.rank >= j->ranks.lo && h.rank < j->ranks.lo + j->ranks.n) {
      std::memcpy(buf_.data(), packet.data(), kCtlBytes);
      p::SetRank(buf_.data(), static_cast<uint16_t>(h.rank - j->ranks.lo));
      // An abort whatever its reason: a worker's word is not a leaf's refusal (peer_refused).
      if (leave.reason != 0)
        p::SetAux(buf_.data(), static_cast<uint16_t>(p::ErrorCode::kJobAborted));
      p::SealMessage(buf_.data(), p::kHeaderBytes);
      j->graceful_leave = leave.reason == 0;
      if (leave.reason == 0) j->calls = leave.calls;
      std::array<uint8_t, kCtlBytes> copy;
      std::memcpy(copy.data(), buf_.data(), kCtlBytes);
      control_.HandleControl(copy, from, now, *this);
      Tick(now);  // the job may be gone: tell the spine now
      return;
    }
    if (j->state == State::kJoining && leave.reason != 0) {
      // A worker gave up joining: the job cannot start; the spine hears at once (an abort: a
      // worker's reason is not passed on, peer_refused up is the leaf's own word).
      SendUpLeave(*j, p::ErrorCode::kJobAborted, 0);
      Erase(j->id);
      return;
    }
  }
  if (h.type == p::MsgType::kAllocJob) {
    HandleAlloc(packet, from, now);
    return;
  }
  control_.HandleControl(packet, from, now, *this);  // LEAVE of an unknown job: counted there
}

void Leaf::HandleAlloc(std::span<const uint8_t> packet, const Peer& from, TimePoint now) {
  const uint16_t worker_nonce = p::AllocJobMsg::Decode(packet.data()).nonce;
  Alloc* a = nullptr;
  for (Alloc& x : allocs_) {
    if (x.worker == from && x.worker_nonce == worker_nonce) a = &x;  // a resend: the same id
  }
  if (a == nullptr) {
    constexpr size_t kMaxAllocs = 1024;  // the oldest request is forgotten first
    if (allocs_.size() == kMaxAllocs) allocs_.erase(allocs_.begin());
    allocs_.push_back({++next_nonce_, worker_nonce, from, now});
    a = &allocs_.back();
  }
  // The leaf's own nonce upward (two workers may pick the same one); the answer maps back.
  auto up = p::AllocJobMsg::Decode(packet.data());
  up.nonce = a->nonce;
  std::array<uint8_t, kCtlBytes> b;
  up.Encode(b.data());
  p::SealMessage(b.data(), p::kHeaderBytes);
  Bump(LeafCounter::kUpAllocs);
  SendUp(b, false);
}

void Leaf::TakeKey(std::span<const uint8_t> packet, const Peer& from, TimePoint now) {
  // The sender's resend of a SET_KEY whose ack awaits the spine's: not a replay (the leaf's own
  // resends go up; the ack goes to it when the spine's comes).
  const auto h = p::SetKeyMsg::Decode(packet.data());
  const uint64_t sent = p::SetKeySeq(h);
  for (const KeyForward& f : key_forwards_) {
    if (f.job == h.job && f.sender == from && f.sender_seq == sent) return;
  }
  const auto taken = control_.TakeSetKey(packet, from);
  if (!taken) return;  // dropped and counted there
  if (taken->refused) {
    SendReply(from, p::SetKeyRefused(taken->job, taken->seq, taken->mode));
    return;
  }
  KeyForward* f = nullptr;
  for (KeyForward& x : key_forwards_) {
    if (x.job == taken->job && x.sender == from) f = &x;  // the sender's next attempt
  }
  if (f == nullptr) {
    constexpr size_t kMaxForwards = 256;  // the oldest is given up first
    if (key_forwards_.size() == kMaxForwards) key_forwards_.erase(key_forwards_.begin());
    key_forwards_.push_back({.job = taken->job, .sender = from});
    f = &key_forwards_.back();
  }
  f->sender_seq = taken->seq;
  f->give_up = now + config_.key_forward_timeout;
  SendKeyUp(*f, now);
}

void Leaf::SendKeyUp(KeyForward& f, TimePoint now) {
  f.next = now + config_.join_resend;
  Lower(f.next);
  const auto [mode, secret] = control_.KeyOf(f.job);
  if (mode == p::SecMode::kCrc) return;  // gone meanwhile (its reservation ended): Tick gives up
  // The spine takes only sequences above the last it took from anyone (another leaf, a launcher):
  // each resend is a new one, from this clock.
  const uint64_t seq = std::max(
      p::SetKeySequence(std::chrono::system_clock::now(), f.attempt++ % p::kSetKeyAttemptsPerMs),
      f.up_seq + 1);
  auto msg = p::SealSetKey(config_.upstream_admin, f.job, mode, secret, seq);
  if (!msg.ok()) return;  // cannot happen: the control plane took this secret and mode
  if (f.first_seq == 0) f.first_seq = seq;
  f.up_seq = seq;
  Bump(LeafCounter::kUpKeys);
  SendUp(*msg, false);
  std::fill(msg->begin(), msg->end(), uint8_t{0});
}

bool Leaf::KeyAnswer(std::span<const uint8_t> packet) {
  if (packet.size() != kCtlBytes) return false;
  const uint8_t* h = packet.data();
  const auto refusal = p::ErrorMsg::Decode(h);
  const bool refused =
      p::IsType(h, p::MsgType::kError) && refusal.code == p::ErrorCode::kKeyRefused;
  if (!refused && !p::IsType(h, p::MsgType::kSetKeyAck)) return false;
  const uint16_t job = p::GetJob(h);
  const uint64_t seq = refused ? p::SetKeySeq(refusal) : p::SetKeySeq(p::SetKeyAckMsg::Decode(h));
  for (auto it = key_forwards_.begin(); it != key_forwards_.end(); ++it) {
    // Any of its sequences: each resend installs the same key, so any answer says the spine's.
    if (it->job != job || seq < it->first_seq || seq > it->up_seq) continue;
    if (refused) {
      // The spine's engine cannot run the key's mode, so no job of it can run in this tree: the
      // sender fails now. The leaf's own copy of the key goes with the job id's incarnation.
      Bump(LeafCounter::kUpKeyRefusals);
      SendReply(it->sender, p::SetKeyRefused(it->job, it->sender_seq, refusal.key_mode()));
    } else {
      Bump(LeafCounter::kUpKeyAcks);
      SendReply(it->sender, p::SetKeyAck(it->job, it->sender_seq));
    }
    key_forwards_.erase(it);
    return true;
  }
  // A refusal of no key of ours (one given up on): never a job's failure.
  if (refused) Bump(LeafCounter::kUpStale);
  return refused;
}

bool Leaf::AllocReply(std::span<const uint8_t> packet) {
  const uint8_t* h = packet.data();
  const bool ack = p::IsType(h, p::MsgType::kAllocAck);
  const bool refused = p::IsType(h, p::MsgType::kError) && p::GetJob(h) == 0 &&
                       p::ErrorMsg::Decode(h).code == p::ErrorCode::kTooManyJobs;
  if ((!ack && !refused) || packet.size() != kCtlBytes) return false;
  // Both answers carry the request's nonce in gen (alloc_ack's nonce field).
  const uint16_t nonce = p::AllocAckMsg::Decode(h).nonce;
  for (const Alloc& a : allocs_) {
    if (a.nonce != nonce) continue;
    std::array<uint8_t, kCtlBytes> b;
    std::memcpy(b.data(), h, kCtlBytes);
    p::SetGen(b.data(), a.worker_nonce);
    p::SealMessage(b.data(), p::kHeaderBytes);
    out_.SendTo(a.worker, b, false);
    return true;
  }
  return false;
}

void Leaf::HandleJoin(const p::JoinMsg& h, std::span<const uint8_t> packet, const Peer& from,
                      TimePoint now) {
  auto bad_params = [&](p::JoinParam param, uint32_t job_value) {
    SendReply(from, p::ErrorMsg{.job = h.job, .rank = h.rank, .code = p::ErrorCode::kBadParams}
                        .set_join_param(param)
                        .set_job_value(job_value));
  };
  // A keyed job's JOIN proves the secret first, over the header its worker sent (the control
  // plane's challenge names the worker's own rank: Send passes it through unmapped).
  if (!control_.AdmitJoinAsSent(packet, from, now, *this)) return;
  Job* j = Find(h.job);
  if (j == nullptr) {
    // Out-of-range parameters: the control plane refuses them as for any switch.
    if (!p::IsValidK(h.k) || h.world_size < 1 || h.world_size > p::kMaxWorkers || h.window == 0 ||
        h.rank >= h.world_size) {
      control_.HandleAdmittedJoin(h, from, now, *this);
      return;
    }
    const LeafRanks ranks = RanksOfLeaf(config_.index, config_.leaves, h.world_size);
    const bool foreign = h.rank < ranks.lo || h.rank >= ranks.lo + ranks.n;
    if (foreign) {
      Bump(LeafCounter::kForeignRank);
      bad_params(p::JoinParam::kRank, p::kJoinValueNone);
    }
    auto nj = std::make_unique<Job>();
    nj->id = h.job;
    nj->world = h.world_size;
    nj->k = h.k;
    nj->window_asked = h.window;
    nj->ranks = ranks;
    nj->sec = control_.KeyOf(h.job).first;
    nj->created = now;
    nj->next_join = now + config_.join_resend;
    j = nj.get();
    jobs_[h.job] = std::move(nj);
    SendUpJoin(*j);
    Lower(j->next_join);
    if (foreign) {
      // The first JOIN is a rank another leaf serves: the job cannot start. The JOIN just sent
      // makes this leaf a member at the spine, so its LEAVE peer_refused, right after it, dooms
      // the job there for every leaf, as a refusal of a job the leaf held does.
      const p::LeaveMsg sent = RefuseBelow(*j, h.rank, p::JoinParam::kRank, h.rank, now);
      if (j->keyed()) j->refusal_up = sent;  // again once the JOIN is proven
      return;
    }
  }
  j->last_worker = now;
  if (j->state == State::kFailed) {
    std::memcpy(buf_.data(), j->fail.data(), kCtlBytes);
    p::SetRank(buf_.data(), h.rank);
    p::SealMessage(buf_.data(), p::kHeaderBytes);
    out_.SendTo(from, {buf_.data(), kCtlBytes}, false);
    return;
  }
  // A re-join of the local grant, at its lease's end or asking less, that the spine has not
  // answered yet: the leaf re-joins the spine once every local rank did.
  if (j->state == State::kRunning && (h.window < j->window || j->spine_lease != 0) &&
      h.rejoin_epoch != 0 && h.rejoin_epoch == j->local_epoch &&
      j->regranted_for != j->local_epoch && h.world_size == j->world && h.rank >= j->ranks.lo &&
      h.rank < j->ranks.lo + j->ranks.n && JoinedFrom(*j, h.rank - j->ranks.lo, from)) {
    ReJoinUp(*j, h, from, now);
    return;
  }
  // The parameters the leaf maps must be the job's; the rest the control plane checks.
  p::JoinParam bad = p::JoinParam::kNone;
  uint32_t value = 0;
  if (h.world_size != j->world) {
    bad = p::JoinParam::kWorldSize;
    value = j->world;
  } else if (j->state == State::kRunning && h.window < j->window) {
    // The spine granted more than this worker asks, and this is no re-join asking less (ReJoinUp):
    // it cannot take the job's window.
    bad = p::JoinParam::kWindow;
    value = j->window;
  } else if (h.rank < j->ranks.lo || h.rank >= j->ranks.lo + j->ranks.n) {
    bad = p::JoinParam::kRank;
    value = p::kJoinValueNone;
    Bump(LeafCounter::kForeignRank);
  }
  if (bad != p::JoinParam::kNone) {
    bad_params(bad, value);
    if (PartPending(*j)) {
      const uint32_t its = bad == p::JoinParam::kWorldSize ? h.world_size
                           : bad == p::JoinParam::kWindow  ? h.window
                                                           : h.rank;
      RefuseBelow(*j, h.rank, bad, its, now);
    }
    return;
  }
  if (j->state == State::kJoining && h.window < j->window_asked) {
    // Workers may ask different windows (each what its socket holds): the job asks the spine for
    // the least, which the spine takes while it waits for the other leaves.
    j->window_asked = h.window;
    SendUpJoin(*j);
  }
  if (j->state == State::kJoining) {
    if (j->spine_waiting) {
      SendReply(from, p::JoinWaitMsg{.job = h.job, .rank = h.rank, .queue_ahead = j->ahead});
    } else if (j->spine_pending) {
      p::JoinPendingMsg pending = *j->spine_pending;  // the spine waits for another leaf
      pending.rank = h.rank;
      SendReply(from, pending);
    }
    return;
  }
  // To the local control plane as a job of the leaf's ranks, with the window the spine granted.
  p::JoinMsg local = h;
  local.rank = static_cast<uint16_t>(h.rank - j->ranks.lo);
  local.world_size = j->ranks.n;
  local.window = j->window;
  local.sec = 0;
  control_.HandleAdmittedJoin(local, from, now, *this);
  if (const auto r = control_.RefusalOf(h.job); r.has_value()) {
    // The local control plane refused a JOIN and doomed its pending job (K, lanes, a rank taken).
    RefuseBelow(*j, static_cast<uint16_t>(r->rank + j->ranks.lo), r->param, r->value, now);
    return;
  }
  if (j->ending != p::ErrorCode::kNone) Tick(now);
}

bool Leaf::JoinedFrom(const Job& j, uint16_t local_rank, const Peer& from) const {
  // Lane l's peer is the destination of slot l (lanes <= kMaxLanes).
  for (uint16_t s = 0; s < std::min<uint16_t>(j.window, p::kMaxLanes); ++s) {
    for (const Peer& peer : control_.Destinations(j.id, local_rank, s)) {
      if (peer == from) return true;
    }
  }
  return false;
}

void Leaf::ReJoinUp(Job& j, const p::JoinMsg& h, const Peer& from, TimePoint now) {
  j.less_ranks |= uint64_t{1} << (h.rank - j.ranks.lo);
  const bool less = h.window < j.window_asked;
  if (less) j.window_asked = h.window;
  const uint64_t all = j.ranks.n >= 64 ? ~uint64_t{0} : (uint64_t{1} << j.ranks.n) - 1;
  if (j.less_ranks != all) return;  // the grant stands until every local rank re-joined
  if (!j.asking_less || less) {
    // Every local rank is done with the grant: the spine's, re-joined (asking the least), which
    // counts there as this leaf's re-join at the lease's end. The workers resend their re-joins
    // until the new grant reaches them (Granted).
    j.asking_less = true;
    j.spine_waiting = false;
    SendUpJoin(j);
    j.next_join = now + config_.join_resend;
    Lower(j.next_join);
    return;
  }
  if (j.spine_waiting) {
    SendReply(from, p::JoinWaitMsg{.job = h.job, .rank = h.rank, .queue_ahead = j.ahead});
  }
}

Leaf::MappedData Leaf::MapData(std::span<const uint8_t> packet, const Peer& from,
                               uint8_t* scratch) {
  if (packet.size() < p::kHeaderBytes + p::kCrcBytes || packet.size() > kBufBytes ||
      p::GetVersion(packet.data()) != p::kVersion || !p::IsType(packet.data(), p::MsgType::kData)) {
    return {packet};
  }
  Job* j = Find(p::GetJob(packet.data()));
  if (j == nullptr || j->state != State::kRunning) return {packet};
  if (j->keyed()) return OpenData(*j, packet, from, scratch);
  if (!p::MessageCrcOk(packet)) return {packet};
  const uint16_t r = p::GetRank(packet.data());
  if (r < j->ranks.lo || r >= j->ranks.lo + j->ranks.n) {
    Bump(LeafCounter::kForeignRank);
    return {.packet = {}, .foreign = true};
  }
  std::memcpy(scratch, packet.data(), packet.size());
  p::SetRank(scratch, static_cast<uint16_t>(r - j->ranks.lo));
  p::SealMessage(scratch, packet.size() - p::kCrcBytes);
  return {{scratch, packet.size()}};
}

Leaf::MappedData Leaf::OpenData(Job& j, std::span<const uint8_t> packet, const Peer& from,
                                uint8_t* scratch) {
  const auto sec = static_cast<uint8_t>(j.sec);
  if (p::GetSec(packet.data()) != sec) {
    Bump(LeafCounter::kDataCrossJob);  // a CRC-only packet naming a keyed job, say
    return {};
  }
  const p::Header h = p::DecodeHeader(packet.data());
  if (h.rank < j.ranks.lo || h.rank >= j.ranks.lo + j.ranks.n) {
    Bump(LeafCounter::kForeignRank);
    return {.packet = {}, .foreign = true};
  }
  if (h.count > j.k || packet.size() != p::MessageBytes(h.count, sec) || h.slot >= j.window ||
      j.local_up == nullptr) {
    Bump(LeafCounter::kDataForged);  // no message of the job's slots: nothing to open it as
    return {};
  }
  const auto local = static_cast<uint16_t>(h.rank - j.ranks.lo);
  // Unopened from another address than the rank's, as the switch drops a keyed job's packets.
  const auto peer = control_.Destinations(j.id, local, h.slot);
  if (peer.empty() || !(peer[0] == from)) return {.packet = {}, .foreign = true};
  // The use whose low 16 bits are gen, next to the uses the engine completed: the current one,
  // the one before (a retransmission of a complete use), or further (the engine places it).
  const uint64_t done = j.uses[h.slot];
  const int64_t use =
      static_cast<int64_t>(done) + static_cast<int16_t>(h.gen - static_cast<uint16_t>(done));
  const size_t payload = size_t{h.count} * p::kElemBytes;
  uint8_t* plain = scratch + p::kHeaderBytes;
  if (use < 0 ||
      !j.local_up->Open(j.sec, packet, p::MakeNonce(h.rank, h.slot, uint64_t(use)), plain)) {
    const bool replay =
        use >= 65536 &&
        j.local_up->Open(j.sec, packet, p::MakeNonce(h.rank, h.slot, uint64_t(use) - 65536), plain);
    Bump(replay ? LeafCounter::kDataReplayed : LeafCounter::kDataForged);
    return {};
  }
  if (j.sec == p::SecMode::kMac) std::memcpy(plain, packet.data() + p::kHeaderBytes, payload);
  // The engine's job is CRC-only: the plaintext, the local rank, a CRC32C trailer.
  std::memcpy(scratch, packet.data(), p::kHeaderBytes);
  p::SetRank(scratch, local);
  p::SetSec(scratch, 0);
  p::SealMessage(scratch, p::kHeaderBytes + payload);
  return {{scratch, p::MessageBytes(h.count)}};
}

void Leaf::OnEngineResult(uint16_t job_id, uint16_t dest_rank, std::span<const uint8_t> packet,
                          TimePoint now) {
  Job* j = Find(job_id);
  const uint16_t s = p::GetSlot(packet.data());
  if (j == nullptr || j->state != State::kRunning || s >= j->window || packet.size() > kBufBytes) {
    return;
  }
  UpSlot& u = j->slots[s];
  const uint16_t gen = p::GetGen(packet.data());
  if (dest_rank == p::kRankAll) {
    // The slot's partial sum: upstream as rank `index`'s data for (slot, gen).
    uint8_t* b = j->Up(s);
    std::memcpy(b, packet.data(), packet.size());
    p::SetType(b, p::MsgType::kData);
    p::SetRank(b, config_.index);
    p::SetFlags(b, static_cast<uint8_t>(p::GetFlags(b) & ~p::flags::kRetx));
    p::SetAux(b, 0);
    p::SetSlot(b, SpineSlot(s));
    p::SetOffset(b, SpineOffset(p::GetOffset(b), j->k));
    size_t len = packet.size();
    // The slot's use in the grant: the local one and the spine's start together (see leaf.h).
    u.use = j->uses[s]++;
    if (j->keyed()) {
      const auto sec = static_cast<uint8_t>(j->sec);
      p::SetSec(b, sec);
      len = p::MessageBytes(p::GetCount(b), sec);
      if (j->spine_up == nullptr ||
          !j->spine_up->Seal(j->sec, b, len - p::kTagBytes,
                             p::MakeNonce(config_.index, SpineSlot(s), u.use))) {
        Bump(LeafCounter::kUpForged);  // libcrypto failed (never seen): lost, as on the wire
        return;
      }
    } else {
      p::SealMessage(b, len - p::kCrcBytes);
    }
    u.busy = true;
    u.gen = gen;
    u.len = static_cast<uint32_t>(len);
    u.retries = 0;
    u.rto_us = j->rto->rto_us();
    u.sent_at = now;
    u.deadline = now + std::chrono::microseconds(u.rto_us);
    Lower(u.deadline);
    Bump(LeafCounter::kUpData);
    SendUp({b, u.len}, true);
    j->last_up = now;
    return;
  }
  // A worker retransmitted for a slot complete here: it lost the final result, or it is early.
  if (u.have_final && u.final_gen == gen) {
    for (const Peer& peer : control_.Destinations(job_id, dest_rank, s)) {
      out_.SendTo(peer, {j->Fin(s), u.final_len}, true);
      Bump(LeafCounter::kDownResults);
      Bump(LeafCounter::kDownResends);
    }
  } else if (u.busy && u.gen == gen) {
    Bump(LeafCounter::kResendPending);  // the final goes to every worker when it comes
  }
}

void Leaf::HandleUpstream(std::span<const uint8_t> packet, TimePoint now) {
  if (packet.size() < p::kHeaderBytes + p::kCrcBytes || packet.size() > kBufBytes ||
      p::GetVersion(packet.data()) != p::kVersion) {
    Bump(LeafCounter::kUpStale);
    return;
  }
  // A keyed job's result carries a tag, not a CRC32C trailer: UpResult opens it.
  const bool tagged = p::GetSec(packet.data()) != 0;
  if (!tagged && !p::MessageCrcOk(packet)) {
    Bump(LeafCounter::kUpBadCrc);
    return;
  }
  if (!tagged && (AllocReply(packet) || KeyAnswer(packet))) return;
  Job* j = Find(p::GetJob(packet.data()));
  if (j == nullptr) {
    Bump(LeafCounter::kUpStale);
    return;
  }
  const uint8_t* h = packet.data();
  if (p::IsType(h, p::MsgType::kResult)) {
    if (tagged != j->keyed() || (tagged && p::GetSec(h) != static_cast<uint8_t>(j->sec))) {
      Bump(tagged ? LeafCounter::kUpForged : LeafCounter::kUpStale);  // not the job's mode
      return;
    }
    UpResult(*j, packet, now);
  } else if (tagged) {
    Bump(LeafCounter::kUpStale);  // only results carry a tag
  } else if (p::IsType(h, p::MsgType::kJoinChallenge)) {
    ProveUp(*j, packet, now);
  } else if (p::IsType(h, p::MsgType::kJoinAck)) {
    const auto ack = p::JoinAckMsg::Decode(h);
    if (j->state == State::kRunning && j->asking_less && ack.epoch != j->spine_epoch &&
        ack.k == j->k && ack.window >= 1 && ack.window <= j->up_window_max) {
      // The new grant (at a lease's end, or asking less): the workers' re-join resends take it
      // from the local control plane, asked exactly that window.
      if (Granted(*j, ack, now)) {
        j->regranted_for = j->local_epoch;
        control_.AskWindow(j->id, j->window);
      }
      return;
    }
    if (j->state == State::kRunning && ack.k == j->k &&
        ack.window == uint32_t{j->window} * config_.lanes) {
      // The answer to a keep-alive JOIN (Tick), with the spine's timeout as it is now.
      if (ack.job_timeout_ms != 0) j->spine_timeout = std::chrono::milliseconds(ack.job_timeout_ms);
      return;
    }
    if (j->state != State::kJoining || ack.k != j->k || ack.window < 1 ||
        ack.window > j->up_window_max) {
      Bump(LeafCounter::kUpStale);  // a duplicate, or nonsense
      return;
    }
    (void)Granted(*j, ack, now);
  } else if (p::IsType(h, p::MsgType::kJoinPending)) {
    // The spine waits for leaves: what this leaf's workers hear while they wait for it.
    const auto pending = p::JoinPendingMsg::Decode(h);
    if (j->state != State::kJoining || pending.missing_rank >= config_.leaves) {
      Bump(LeafCounter::kUpStale);
      return;
    }
    const LeafRanks missing = RanksOfLeaf(pending.missing_rank, config_.leaves, j->world);
    j->spine_pending = p::JoinPendingMsg{.scope = 1,
                                         .job = j->id,
                                         .missing_ranks = missing.n,
                                         .joined = pending.joined,
                                         .missing_rank = missing.lo,
                                         .world_size = pending.world_size};
  } else if (p::IsType(h, p::MsgType::kJoinWait)) {
    if (j->state == State::kJoining || (j->state == State::kRunning && j->asking_less)) {
      j->spine_waiting = true;
      j->ahead = p::JoinWaitMsg::Decode(h).queue_ahead;
    }
  } else if (p::IsType(h, p::MsgType::kError)) {
    UpError(*j, packet, now);
  } else {
    Bump(LeafCounter::kUpStale);
  }
}

void Leaf::ProveUp(Job& j, std::span<const uint8_t> challenge, TimePoint now) {
  constexpr size_t kChallengeBytes = p::MessageBytes(p::kJoinChallengeBytes / p::kElemBytes);
  const p::Header c = p::DecodeHeader(challenge.data());
  if ((j.state == State::kFailed && !j.refusal_up) || challenge.size() != kChallengeBytes ||
      c.rank != config_.index || c.slot != config_.lane) {
    Bump(LeafCounter::kUpStale);
    return;
  }
  const auto [mode, secret] = control_.KeyOf(j.id);
  const uint16_t spine_mode = p::JoinChallengeMsg::From(c).mode;
  if (!j.keyed() || mode != j.sec ||
      (spine_mode != 0 && spine_mode != static_cast<uint16_t>(j.sec))) {
    // The spine holds a key for the job and this leaf none (or another mode: the spine would drop
    // every partial as cross-job): it cannot prove the JOIN, or its partials would be lost.
    j.refusal_up.reset();
    if (j.state != State::kFailed) End(j, p::ErrorCode::kUnauthorized, now);
    return;
  }
  const auto ch = p::JoinChallenge::From(challenge.data() + p::kHeaderBytes);
  std::array<uint8_t, p::MessageBytes(0, static_cast<uint8_t>(p::SecMode::kMac))> proof{};
  p::Header h = j.up_join;
  h.sec = static_cast<uint8_t>(p::SecMode::kMac);
  p::EncodeHeader(h, proof.data());
  if (!p::SealJoinProof(secret, ch, proof.data()).ok()) {
    End(j, p::ErrorCode::kUnauthorized, now);  // a secret InstallJobKey took: cannot happen
    return;
  }
  j.spine_keyed = true;
  j.spine_salt = ch.salt;
  Bump(LeafCounter::kUpProofs);
  SendUp(proof, false);
  if (j.refusal_up) {
    SendUpLeave(*j.refusal_up);  // a member now: the spine takes it
    j.refusal_up.reset();
  }
}

void Leaf::End(Job& j, p::ErrorCode code, TimePoint now) {
  Bump(code == p::ErrorCode::kNoSlots ? LeafCounter::kNoSlots : LeafCounter::kKeyMismatch);
  const ControlMessage e = MakeControl(p::ErrorMsg{.job = j.id, .code = code});
  SendUpLeave(j, p::ErrorCode::kJobAborted, 0);
  Fail(j, e, now);
}

void Leaf::LocalGrant(Job& j, uint8_t epoch) {
  j.local_epoch = epoch;
  std::fill(j.uses.begin(), j.uses.end(), uint64_t{0});
  j.local_up.reset();
  j.local_down.reset();
  auto keys = control_.GrantKeys(j.id);
  if (!keys.ok() || keys->mode != j.sec) {
    // A key installed (or gone) here since the job's first JOIN: not what it was taken for.
    j.ending = p::ErrorCode::kUnauthorized;
    Lower(TimePoint::min());
    return;
  }
  if (!j.keyed()) return;
  auto up = p::MessageOpener::Create(keys->up);
  auto down = p::MessageSealer::Create(keys->down);
  if (!up.ok() || !down.ok()) {
    j.ending = p::ErrorCode::kUnauthorized;  // libcrypto cannot set up AES-GCM: never seen
    Lower(TimePoint::min());
    return;
  }
  j.local_up = std::move(*up);
  j.local_down = std::move(*down);
}

bool Leaf::Granted(Job& j, const p::JoinAckMsg& ack, TimePoint now) {
  j.state = State::kRunning;
  j.spine_epoch = ack.epoch;
  j.spine_lease = ack.lease;
  j.asking_less = false;
  j.less_ranks = 0;
  j.spine_waiting = false;
  j.last_up = now;
  if (ack.job_timeout_ms != 0) j.spine_timeout = std::chrono::milliseconds(ack.job_timeout_ms);
  j.window = static_cast<uint16_t>(ack.window / config_.lanes);
  if (ack.window % config_.lanes != 0 || j.window == 0) {
    // Lanes of this rank at the spine: a window that is not lanes times this core's cannot be
    // numbered as the workers number it. Ended in Tick: no_slots to the workers.
    j.window = 1;
    j.ending = p::ErrorCode::kNoSlots;
    Lower(TimePoint::min());
  }
  j.slots.assign(j.window, UpSlot{});
  j.uses.assign(j.window, 0);
  j.up.assign(size_t{j.window} * kBufBytes, 0);
  j.fin.assign(size_t{j.window} * kBufBytes, 0);
  // Up to `window` partials in flight: that many samples per round trip (rto.h).
  RtoConfig rc = config_.rto;
  rc.samples_per_rtt = j.window;
  j.rto = std::make_unique<RtoEstimator>(rc);
  j.last_progress = now;
  ++j.spine_grants;
  j.spine_up.reset();
  j.spine_down.reset();
  if (j.keyed()) {
    const auto [mode, secret] = control_.KeyOf(j.id);
    if (!j.spine_keyed || mode != j.sec) {
      // The spine granted the job without a challenge: it holds no key for it, and the partials
      // would go up where anyone could read or forge them.
      End(j, p::ErrorCode::kUnauthorized, now);
      return false;
    }
    auto up = p::DeriveTrafficKey(secret, p::KeyDirection::kUp, j.id, j.spine_grants, j.spine_salt);
    auto down =
        p::DeriveTrafficKey(secret, p::KeyDirection::kDown, j.id, j.spine_grants, j.spine_salt);
    auto sealer = up.ok() ? p::MessageSealer::Create(*up) : up.status();
    auto opener = down.ok() ? p::MessageOpener::Create(*down) : down.status();
    if (!sealer.ok() || !opener.ok()) {
      End(j, p::ErrorCode::kUnauthorized, now);  // never seen: the secret was checked
      return false;
    }
    j.spine_up = std::move(*sealer);
    j.spine_down = std::move(*opener);
  }
  // The workers' next JOIN (or re-join) resend goes to the local control plane.
  return true;
}

void Leaf::UpResult(Job& j, std::span<const uint8_t> packet, TimePoint now) {
  const p::Header h = p::DecodeHeader(packet.data());
  uint16_t s = 0;
  if (j.state != State::kRunning || !LocalSlot(h.slot, &s) || s >= j.window ||
      (h.rank != config_.index && h.rank != p::kRankAll)) {
    Bump(LeafCounter::kUpStale);
    return;
  }
  UpSlot& u = j.slots[s];
  const uint8_t* up = j.Up(s);
  if (!u.busy || h.gen != u.gen || h.count != p::GetCount(up) || h.offset != p::GetOffset(up) ||
      packet.size() != p::MessageBytes(h.count, h.sec)) {
    Bump(u.have_final && u.final_gen == h.gen ? LeafCounter::kUpDupResults : LeafCounter::kUpStale);
    return;
  }
  uint8_t* f = j.Fin(s);
  const size_t payload = size_t{h.count} * p::kElemBytes;
  if (j.keyed()) {
    // The spine's seal under its grant's down key (nonce: the destination it names, its slot, the
    // use in flight), then this leaf's for its workers: every rank, the local slot, the same use.
    // Opened into buf_ first: the slot's final stays whole until the result proves genuine.
    uint8_t* plain = buf_.data() + p::kHeaderBytes;
    if (j.spine_down == nullptr || j.local_down == nullptr ||
        !j.spine_down->Open(j.sec, packet, p::MakeNonce(h.rank, h.slot, u.use), plain)) {
      Bump(LeafCounter::kUpForged);
      return;
    }
    std::memcpy(f, packet.data(), p::kHeaderBytes);
    std::memcpy(f + p::kHeaderBytes,
                j.sec == p::SecMode::kMac ? packet.data() + p::kHeaderBytes : plain, payload);
    p::SetRank(f, p::kRankAll);
    p::SetSlot(f, s);
    p::SetOffset(f, LocalOffset(h.offset, j.k));
    p::SetFlags(f, static_cast<uint8_t>(p::GetFlags(f) & ~p::flags::kRetx));
    if (!j.local_down->Seal(j.sec, f, p::kHeaderBytes + payload,
                            p::MakeNonce(p::kRankAll, s, u.use))) {
      Bump(LeafCounter::kUpForged);  // libcrypto failed (never seen): as if lost
      return;
    }
  }
  (void)j.rto->OnSample(std::chrono::duration_cast<std::chrono::microseconds>(now - u.sent_at),
                        u.retries > 0);
  if (u.retries == 0) j.rack_sent = std::max(j.rack_sent, u.sent_at);
  j.last_progress = now;
  u.busy = false;
  u.deadline = TimePoint::max();
  if (!j.keyed()) std::memcpy(f, packet.data(), packet.size());
  if (!j.keyed() && (h.rank != p::kRankAll || config_.lanes > 1)) {
    p::SetRank(f, p::kRankAll);
    p::SetSlot(f, s);
    p::SetOffset(f, LocalOffset(h.offset, j.k));
    p::SealMessage(f, packet.size() - p::kCrcBytes);
  }
  u.have_final = true;
  u.final_gen = h.gen;
  u.final_len = static_cast<uint32_t>(packet.size());
  Bump(LeafCounter::kUpResults);
  const auto peers = control_.Destinations(j.id, p::kRankAll, s);
  for (const Peer& peer : peers) out_.SendTo(peer, {f, u.final_len}, true);
  Bump(LeafCounter::kDownResults, peers.size());
}

void Leaf::UpError(Job& j, std::span<const uint8_t> packet, TimePoint now) {
  std::array<uint8_t, kCtlBytes> e;
  if (packet.size() != kCtlBytes) {
    Bump(LeafCounter::kUpStale);
    return;
  }
  std::memcpy(e.data(), packet.data(), kCtlBytes);
  auto err = p::ErrorMsg::Decode(e.data());
  const p::ErrorCode code = err.code;
  // The rank these codes name (count: left_rank, refused_rank, proving_rank) is a leaf on the
  // spine: name its first worker rank.
  // A leaf's refusal (peer_refused, tree_rank 1) names a worker already.
  if ((code == p::ErrorCode::kRankLeft ||
       (code == p::ErrorCode::kPeerRefused && err.tree_rank() == 0) ||
       code == p::ErrorCode::kRankMismatch) &&
      err.count < config_.leaves) {
    err.count = RanksOfLeaf(err.count, config_.leaves, j.world).lo;
    err.Encode(e.data());
  }
  // rank_mismatch names a slot: in this core's numbers (LeafConfig::lanes), as its workers know it.
  if (code == p::ErrorCode::kRankMismatch && config_.lanes > 1 && LocalSlot(err.slot, &err.slot)) {
    err.Encode(e.data());
  }
  p::SealMessage(e.data(), p::kHeaderBytes);
  if (code == p::ErrorCode::kRankLeft) {
    // Another leaf's workers all finished: calls past theirs cannot complete here either.
    if (j.state == State::kRunning) SendToAllLocal(j, e);
    return;
  }
  if (j.state == State::kFailed) return;
  Bump(LeafCounter::kUpErrors);
  Fail(j, e, now);
}

void Leaf::Fail(Job& j, std::span<const uint8_t> error, TimePoint now) {
  std::memcpy(j.fail.data(), error.data(), kCtlBytes);
  const bool local = j.state == State::kRunning && control_.HasJob(j.id);
  j.state = State::kFailed;
  j.failed_at = now;
  j.slots.clear();
  j.up.clear();
  j.fin.clear();
  Lower(now + config_.job_timeout);
  if (local) {
    passthrough_ = true;
    (void)control_.AbortJob(j.id, p::ErrorMsg::Decode(error.data()), *this);
    passthrough_ = false;
  }
}

void Leaf::LocalGone(Job& j) {
  SendUpLeave(j, j.graceful_leave ? p::ErrorCode::kNone : p::ErrorCode::kJobAborted, j.calls);
}

void Leaf::Erase(uint16_t job_id) { jobs_.erase(job_id); }

void Leaf::Tick(TimePoint now) {
  next_deadline_ = TimePoint::max();
  std::erase_if(allocs_, [&](const Alloc& a) { return now - a.at > config_.job_timeout; });
  std::erase_if(key_forwards_, [&](const KeyForward& f) {
    if (now < f.give_up) return false;
    Bump(LeafCounter::kUpKeyTimeouts);
    if (config_.log) {
      config_.log("leaf: the spine at " + PeerToString(config_.upstream) +
                  " did not acknowledge job " + std::to_string(f.job) + "'s key within " +
                  std::to_string(config_.key_forward_timeout.count()) +
                  " ms, so its sender got no ack: is --upstream-admin-key-file the spine's "
                  "--admin-key-file? (docs/hierarchy.md, \"Keyed jobs\")");
    }
    return true;
  });
  for (KeyForward& f : key_forwards_) {
    if (now >= f.next) SendKeyUp(f, now);
    Lower(std::min(f.next, f.give_up));
  }
  std::vector<uint16_t> gone;  // not per packet: Tick runs every few ms
  for (auto& [id, jp] : jobs_) {
    Job& j = *jp;
    switch (j.state) {
      case State::kJoining:
        if (now - j.last_worker > config_.job_timeout) {
          SendUpLeave(j, p::ErrorCode::kJobAborted, 0);
          gone.push_back(id);
          continue;
        }
        if (now >= j.next_join) {
          SendUpJoin(j);
          j.next_join = now + config_.join_resend;
        }
        Lower(j.next_join);
        break;
      case State::kRunning: {
        if (j.ending != p::ErrorCode::kNone) {
          const p::ErrorCode code = std::exchange(j.ending, p::ErrorCode::kNone);
          End(j, code, now);
          continue;
        }
        const bool local = control_.HasJob(id);
        if (local) {
          j.local_seen = true;
        } else if (j.local_seen || now - j.last_worker > config_.job_timeout) {
          LocalGone(j);
          gone.push_back(id);
          continue;
        }
        if (j.asking_less) {  // the re-join, until the spine's new grant
          if (now >= j.next_join) {
            SendUpJoin(j);
            j.next_join = now + config_.join_resend;
          }
          Lower(j.next_join);
          break;
        }
        // Its workers idle between calls (they keep the job here alive with their JOINs): so does
        // the leaf at the spine, a JOIN of its joined rank every third of the spine's timeout.
        if (now - j.last_up >= j.spine_timeout / 3) {
          SendUpJoin(j);
          j.last_up = now;
        }
        Lower(j.last_up + j.spine_timeout / 3);
        for (uint16_t s = 0; s < j.window; ++s) {
          UpSlot& u = j.slots[s];
          if (!u.busy) continue;
          // As the worker's engine (slot_window.h): resend when a partial sent an RTO later
          // already came back (loss, not a slow leaf elsewhere), or no result at all came for
          // the slot's RTO; the spine waiting for another leaf's partial is not loss.
          const bool overtaken =
              j.rack_sent - u.sent_at >= std::chrono::microseconds(j.rto->rto_us());
          const TimePoint due =
              overtaken
                  ? u.deadline
                  : std::max(u.deadline, j.last_progress + std::chrono::microseconds(u.rto_us));
          if (now >= due) {
            uint8_t* b = j.Up(s);
            if (!(p::GetFlags(b) & p::flags::kRetx)) {
              p::SetFlags(b, static_cast<uint8_t>(p::GetFlags(b) | p::flags::kRetx));
              if (!j.keyed()) p::SealMessage(b, u.len - p::kCrcBytes);  // a tag leaves retx out
            }
            ++u.retries;
            u.rto_us = j.rto->Backoff(u.rto_us);
            u.deadline = now + std::chrono::microseconds(u.rto_us);
            Bump(LeafCounter::kUpRetx);
            SendUp({b, u.len}, true);
            Lower(u.deadline);
          } else {
            Lower(due);
          }
        }
        break;
      }
      case State::kFailed:
        if (now - j.failed_at > config_.job_timeout) {
          gone.push_back(id);
          continue;
        }
        Lower(j.failed_at + config_.job_timeout);
        break;
    }
  }
  for (uint16_t id : gone) Erase(id);
}

}  // namespace ina::dp::switchd
