// The control plane: join handshake, fair-share slot grants with leases, teardown (control.h).
#include "ina/dp/control.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "ina/proto/crc32c.h"

namespace ina::dp {

namespace p = ::ina::proto;

Peer Peer::From(const sockaddr* sa, socklen_t len) {
  Peer peer;
  peer.len = std::min<socklen_t>(len, sizeof(peer.addr));
  std::memcpy(&peer.addr, sa, peer.len);
  return peer;
}

std::string PeerToString(const Peer& p) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (p.addr.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(p.addr);
    inet_ntop(AF_INET, &a.sin_addr, buf, sizeof(buf));
    return std::string(buf) + ":" + std::to_string(ntohs(a.sin_port));
  }
  if (p.addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(p.addr);
    inet_ntop(AF_INET6, &a.sin6_addr, buf, sizeof(buf));
    return "[" + std::string(buf) + "]:" + std::to_string(ntohs(a.sin6_port));
  }
  return "family " + std::to_string(p.addr.ss_family);
}

Result<std::unique_ptr<ControlPlane>> ControlPlane::Create(Engine& engine,
                                                           const ControlConfig& config) {
  if (config.max_jobs == 0) return InvalidArgument("control: max_jobs must be >= 1");
  if (config.job_timeout.count() <= 0) return InvalidArgument("control: job_timeout must be > 0");
  if (engine.pool_slots() == 0) return InvalidArgument("control: the engine has no pool slots");
  if (config.alloc_stride < 1 || config.alloc_stride > 256 ||
      config.alloc_residue >= config.alloc_stride) {
    return InvalidArgument("control: alloc_stride must be in [1, 256] and alloc_residue below it");
  }
  if (config.min_window < 1) return InvalidArgument("control: min_window must be >= 1");
  if (config.core_ports < 1) return InvalidArgument("control: core_ports must be >= 1");
  if (config.join_nonce_period.count() <= 0) {
    return InvalidArgument("control: join_nonce_period must be > 0");
  }
  std::unique_ptr<proto::MessageOpener> admin;
  if (!config.admin_secret.empty()) {
    INA_ASSIGN_OR_RETURN(const proto::TrafficKey key,
                         proto::DeriveTrafficKey(config.admin_secret, proto::KeyDirection::kUp, 0,
                                                 0, proto::Session{}));
    INA_ASSIGN_OR_RETURN(admin, proto::MessageOpener::Create(key));
  }
  auto plane = std::unique_ptr<ControlPlane>(new ControlPlane(engine, config));
  plane->admin_ = std::move(admin);
  plane->admin_seq_ = config.admin_seq_floor;
  INA_RETURN_IF_ERROR(proto::RandomBytes(plane->join_secret_));
  return plane;
}

ControlPlane::ControlPlane(Engine& engine, const ControlConfig& config)
    : engine_(engine),
      config_(config),
      pool_slots_(engine.pool_slots()),
      jobs_(config.max_jobs),
      index_(size_t{1} << 16, -1) {
  config_.max_k = std::min(config_.max_k, engine.max_k());  // hardware built for less says so
  free_.reserve(config.max_jobs + 1);
  reservations_.reserve(config.max_jobs);
  first_alloc_ = p::kAllocJobMin;
  while (first_alloc_ % config.alloc_stride != config.alloc_residue) ++first_alloc_;
  alloc_ids_ = (65535 - first_alloc_) / config.alloc_stride + 1;
  next_alloc_ = first_alloc_;
  free_.push_back({0, pool_slots_});
}

void ControlPlane::HandleControl(std::span<const uint8_t> packet, const Peer& from, TimePoint now,
                                 ReplySink& out) {
  Bump(ControlCounter::kControlRx);
  now_ = now;
  if (packet.size() < p::MessageBytes(0)) {
    Bump(ControlCounter::kControlMalformed);
    return;
  }
  if (p::IsType(packet.data(), p::MsgType::kSetKey)) {
    HandleSetKey(packet, from, out);  // sealed with a tag, not a CRC32C trailer
    return;
  }
  // A proven JOIN: a tag, not a CRC32C trailer (a CRC-sized JOIN with sec != 0 is damaged: the
  // CRC check below counts it).
  if (p::IsType(packet.data(), p::MsgType::kJoin) && p::GetSec(packet.data()) != 0 &&
      packet.size() == p::MessageBytes(0, static_cast<uint8_t>(p::SecMode::kMac))) {
    if (AdmitJoinAsSent(packet, from, now, out)) {
      HandleJoin(p::JoinMsg::From(p::DecodeHeader(packet.data())), from, now, out);
    }
    return;
  }
  if (!p::MessageCrcOk(packet)) {
    Bump(ControlCounter::kControlBadCrc);
    return;
  }
  const p::Header h = p::DecodeHeader(packet.data());
  if (packet.size() != p::MessageBytes(0)) {
    Bump(ControlCounter::kControlMalformed);
    return;
  }
  if (h.type == p::MsgType::kJoin) {
    // A keyed job: prove the secret first (a join_challenge).
    if (AdmitJoinAsSent(packet, from, now, out)) HandleJoin(p::JoinMsg::From(h), from, now, out);
  } else if (h.type == p::MsgType::kLeave) {
    HandleLeave(p::LeaveMsg::From(h), from, out);
  } else if (h.type == p::MsgType::kAllocJob) {
    HandleAlloc(p::AllocJobMsg::From(h), from, now, out);
  } else if (h.type == p::MsgType::kHello) {
    // Stateless: what a worker needs to place its lanes before it joins (its job, echoed).
    Bump(ControlCounter::kHellos);
    const ControlMessage m = MakeControl(
        p::HelloAckMsg{.job = h.job, .max_k = config_.max_k, .core_ports = config_.core_ports});
    out.Send(from, m);
  } else {
    Bump(ControlCounter::kControlMalformed);
  }
}

Status ControlPlane::InstallJobKey(uint16_t job_id, p::SecMode mode,
                                   std::span<const uint8_t> secret) {
  if (!p::IsKeyed(mode) || !p::IsValidSecMode(static_cast<uint8_t>(mode))) {
    return InvalidArgument("job key: sec mode " + std::to_string(static_cast<int>(mode)) +
                           " is not mac (1) or mac_encrypt (2)");
  }
  if (secret.size() < p::kSecretMinBytes || secret.size() > p::kSecretMaxBytes) {
    return InvalidArgument("job key: a secret of " + std::to_string(secret.size()) +
                           " bytes; it has " + std::to_string(p::kSecretMinBytes) + " .. " +
                           std::to_string(p::kSecretMaxBytes));
  }
  if (auto it = keys_.find(job_id); it != keys_.end() && it->second.mode == mode &&
                                    std::ranges::equal(it->second.secret, secret)) {
    Bump(ControlCounter::kKeysInstalled);  // the same key again: its salt and grants stay
    return Status::Ok();
  }
  // A fresh session salt for every key taken: the traffic keys of this incarnation differ from
  // those of any earlier one under the same secret, so nothing recorded then opens now.
  p::Session salt;
  INA_RETURN_IF_ERROR(p::RandomBytes(salt));
  ForgetKey(job_id);
  keys_[job_id] = JobKey{mode, std::vector<uint8_t>(secret.begin(), secret.end()), salt};
  refusal_logged_.erase(job_id);
  unproven_logged_.erase(job_id);
  Bump(ControlCounter::kKeysInstalled);
  return Status::Ok();
}

void ControlPlane::ForgetKey(uint16_t job_id) {
  auto it = keys_.find(job_id);
  if (it == keys_.end()) return;
  std::fill(it->second.secret.begin(), it->second.secret.end(), uint8_t{0});
  keys_.erase(it);
}

void ControlPlane::HandleSetKey(std::span<const uint8_t> packet, const Peer& from, ReplySink& out) {
  if (const auto t = TakeSetKey(packet, from)) {
    if (t->refused) {
      SendError(from, p::SetKeyRefused(t->job, t->seq, t->mode), out);
    } else {
      SendReply(from, p::SetKeyAck(t->job, t->seq), out);
    }
  }
}

bool ControlPlane::TakesKeyMode(uint16_t mode) const {
  if (mode != 1 && mode != 2) return false;
  return !config_.engine_keys || engine_.RunsSecMode(static_cast<p::SecMode>(mode));
}

std::optional<ControlPlane::SetKeyTaken> ControlPlane::TakeSetKey(std::span<const uint8_t> packet,
                                                                  const Peer& from) {
  if (!admin_) {
    Bump(ControlCounter::kAdminRefused);
    return std::nullopt;
  }
  const auto h = p::SetKeyMsg::Decode(packet.data());
  constexpr auto kSealed = static_cast<uint8_t>(p::SecMode::kMacEncrypt);
  if (h.sec != kSealed || packet.size() != p::MessageBytes(h.count, kSealed)) {
    Bump(ControlCounter::kControlMalformed);
    return std::nullopt;
  }
  const uint64_t seq = p::SetKeySeq(h);
  std::array<uint8_t, p::kSecretMaxBytes + p::kElemBytes> secret{};
  const size_t len = size_t{h.count} * p::kElemBytes;
  if (len > p::kSecretMaxBytes || !admin_->Open(p::SecMode::kMacEncrypt, packet,
                                                p::MakeNonce(h.rank, h.slot, seq), secret.data())) {
    Bump(len > p::kSecretMaxBytes ? ControlCounter::kAdminRefused : ControlCounter::kAdminForged);
    return std::nullopt;
  }
  std::optional<SetKeyTaken> taken;
  if (seq < admin_seq_) {
    Bump(ControlCounter::kAdminReplayed);
    if (config_.log && !admin_replay_logged_) {
      admin_replay_logged_ = true;
      config_.log("control: SET_KEY for job " + std::to_string(h.job) + " from " +
                  PeerToString(from) + " refused: its sequence " + std::to_string(seq) +
                  " is below " + std::to_string(admin_seq_) +
                  " (the last accepted + 1, or this switch's start): a replay, or the sender's "
                  "clock is behind the switch's (further refusals are counted, not logged)");
    }
  } else if (!TakesKeyMode(h.mode)) {
    // Opened under the admin key: the sender is trusted, and told why at once.
    admin_seq_ = seq + 1;
    Bump(ControlCounter::kAdminRefused);
    const uint32_t bit = 1u << std::min<uint16_t>(h.mode, 31);
    if (config_.log && !(mode_refusals_logged_ & bit)) {
      mode_refusals_logged_ |= bit;
      const bool keyed = h.mode == 1 || h.mode == 2;
      config_.log(
          "control: SET_KEY for job " + std::to_string(h.job) + " from " + PeerToString(from) +
          " refused: " +
          (keyed ? "this fabric's engine cannot run sec mode " +
                       std::string(p::SecModeName(static_cast<p::SecMode>(h.mode)))
                 : "sec mode " + std::to_string(h.mode) + " is not mac (1) or mac_encrypt (2)") +
          "; it hears error(key_refused) (further refusals of this mode are counted, not logged)");
    }
    taken = SetKeyTaken{.job = h.job, .seq = seq, .refused = true, .mode = h.mode};
  } else if (!InstallJobKey(h.job, static_cast<p::SecMode>(h.mode),
                            std::span<const uint8_t>(secret.data(), len))
                  .ok()) {
    admin_seq_ = seq + 1;
    Bump(ControlCounter::kAdminRefused);
  } else {
    admin_seq_ = seq + 1;
    taken = SetKeyTaken{.job = h.job, .seq = seq};
  }
  std::fill(secret.begin(), secret.end(), uint8_t{0});
  return taken;
}

int64_t ControlPlane::JoinBucket(TimePoint now) const {
  return now.time_since_epoch() / config_.join_nonce_period;
}

p::JoinNonce ControlPlane::JoinNonceFor(const p::Header& h, const Peer& from,
                                        int64_t bucket) const {
  p::Header bare = h;
  bare.sec = 0;
  bare.flags = 0;
  std::vector<uint8_t> context(p::kHeaderBytes + 8);
  p::EncodeHeader(bare, context.data());
  for (int i = 0; i < 8; ++i) {
    context[p::kHeaderBytes + i] =
        static_cast<uint8_t>(static_cast<uint64_t>(bucket) >> (56 - 8 * i));
  }
  const std::string peer = PeerToString(from);
  context.insert(context.end(), peer.begin(), peer.end());
  return p::MakeJoinNonce(join_secret_, context);
}

void ControlPlane::SendJoinChallenge(const p::Header& h, const Peer& from, const JobKey& key,
                                     TimePoint now, ReplySink& out) {
  constexpr uint16_t kWords = p::kJoinChallengeBytes / p::kElemBytes;
  std::array<uint8_t, p::MessageBytes(kWords)> b{};
  p::JoinChallengeMsg{.job = h.job,
                      .rank = h.rank,
                      .lane = h.slot,
                      .payload_words = kWords,
                      .mode = static_cast<uint16_t>(key.mode)}
      .Encode(b.data());
  const p::JoinChallenge challenge{JoinNonceFor(h, from, JoinBucket(now)), key.salt};
  challenge.EncodeTo(b.data() + p::kHeaderBytes);
  p::SealMessage(b.data(), p::kHeaderBytes + p::kJoinChallengeBytes);
  Bump(ControlCounter::kJoinChallenges);
  out.Send(from, b);
}

bool ControlPlane::AdmitJoinAsSent(std::span<const uint8_t> join, const Peer& from, TimePoint now,
                                   ReplySink& out) {
  constexpr auto kMac = static_cast<uint8_t>(p::SecMode::kMac);
  const p::Header h = p::DecodeHeader(join.data());
  const auto key = keys_.find(h.job);
  if (join.size() == p::MessageBytes(0)) {  // plain (its CRC checked)
    if (key == keys_.end()) return true;
    SendJoinChallenge(h, from, key->second, now, out);  // prove the secret first
    return false;
  }
  if (h.sec != kMac || join.size() != p::MessageBytes(0, kMac)) {
    Bump(ControlCounter::kControlMalformed);
    return false;
  }
  bool proven = false;
  if (key != keys_.end()) {
    const int64_t bucket = JoinBucket(now);
    for (int64_t b : {bucket, bucket - 1}) {
      if (p::JoinProofOk(key->second.secret, {JoinNonceFor(h, from, b), key->second.salt}, join)) {
        proven = true;
        break;
      }
    }
  }
  if (!proven) {
    Bump(ControlCounter::kJoinsUnproven);
    if (config_.log && unproven_logged_.insert(h.job).second) {
      config_.log("control: JOIN for job " + std::to_string(h.job) + " rank " +
                  std::to_string(h.rank) + " from " + PeerToString(from) + " dropped: " +
                  (key == keys_.end()
                       ? std::string("it carries a proof, but the job has no key")
                       : std::string("its proof of the job secret does not verify (another "
                                     "secret, a replay, or an answer to a challenge older than "
                                     "two join nonce periods); answered with a fresh "
                                     "join_challenge")) +
                  " (further failures of this job are counted, not logged)");
    }
    if (key != keys_.end()) SendJoinChallenge(h, from, key->second, now, out);
    return false;
  }
  Bump(ControlCounter::kJoinsProven);
  return true;
}

void ControlPlane::HandleAdmittedJoin(const p::JoinMsg& mapped, const Peer& from, TimePoint now,
                                      ReplySink& out) {
  Bump(ControlCounter::kControlRx);
  now_ = now;
  HandleJoin(mapped, from, now, out);
}

std::pair<p::SecMode, std::span<const uint8_t>> ControlPlane::KeyOf(uint16_t job_id) const {
  const auto key = keys_.find(job_id);
  if (key == keys_.end()) return {p::SecMode::kCrc, {}};
  return {key->second.mode, key->second.secret};
}

Result<JobSecurity> ControlPlane::GrantKeys(uint16_t job_id) const {
  const int32_t idx = index_[job_id];
  if (idx < 0 || !jobs_[static_cast<size_t>(idx)].active) {
    return NotFound("job " + std::to_string(job_id) + " holds no grant");
  }
  const JobEntry& j = jobs_[static_cast<size_t>(idx)];
  return KeysOfGrant(j, j.grants);
}

Result<JobSecurity> ControlPlane::KeysOfGrant(const JobEntry& j, uint64_t grant) const {
  JobSecurity sec;
  const auto key = keys_.find(j.job_id);
  if (key == keys_.end()) return sec;
  sec.mode = key->second.mode;
  INA_ASSIGN_OR_RETURN(sec.up, p::DeriveTrafficKey(key->second.secret, p::KeyDirection::kUp,
                                                   j.job_id, grant, key->second.salt));
  INA_ASSIGN_OR_RETURN(sec.down, p::DeriveTrafficKey(key->second.secret, p::KeyDirection::kDown,
                                                     j.job_id, grant, key->second.salt));
  return sec;
}

void ControlPlane::HandleJoin(const p::JoinMsg& h, const Peer& from, TimePoint now,
                              ReplySink& out) {
  Bump(ControlCounter::kJoins);
  if (config_.require_keys && keys_.count(h.job) == 0) {
    Bump(ControlCounter::kJoinsUnauthorized);
    SendError(from, {.job = h.job, .rank = h.rank, .code = p::ErrorCode::kUnauthorized}, out);
    if (config_.log && refusal_logged_.insert(h.job).second) {
      config_.log("control: JOIN for job " + std::to_string(h.job) + " rank " +
                  std::to_string(h.rank) + " from " + PeerToString(from) +
                  " refused: the job has no key (error unauthorized; further refusals of this job "
                  "are counted, not logged)");
    }
    return;
  }
  const uint16_t world = h.world_size;
  const uint16_t k = h.k;
  const uint32_t window = h.window;
  const uint16_t lanes = h.lanes == 0 ? 1 : h.lanes;
  const uint16_t lane = h.lane;
  int32_t idx = index_[h.job];
  // Out of range: the first JoinParam at fault, in the order of the table in proto/ina.toml, and
  // the value the JOIN sent for it.
  struct Bad {
    p::JoinParam param;
    uint32_t value;
  };
  // A leaf's tree_world (the whole tree's world size, which its workers sent) is checked as the
  // world size is: the tree's ranks must agree on it as a flat switch's do (docs/hierarchy.md).
  static_assert(p::kMaxWorkers <= 0xFF, "JOIN tree_world is one byte");
  const uint8_t tree_world = h.tree_world;
  const bool bad_tree_world =
      tree_world > p::kMaxWorkers || (tree_world != 0 && tree_world < world);
  const Bad bad = !p::IsValidK(k) || k > config_.max_k  ? Bad{p::JoinParam::kK, k}
                  : world < 1 || world > p::kMaxWorkers ? Bad{p::JoinParam::kWorldSize, world}
                  : bad_tree_world                      ? Bad{p::JoinParam::kWorldSize, tree_world}
                  : window < 1                          ? Bad{p::JoinParam::kWindow, window}
                  : h.rank >= world                     ? Bad{p::JoinParam::kRank, h.rank}
                  : lanes > p::kMaxLanes                ? Bad{p::JoinParam::kLanes, lanes}
                  : lane >= lanes                       ? Bad{p::JoinParam::kLane, lane}
                                                        : Bad{p::JoinParam::kNone, 0};
  if (bad.param != p::JoinParam::kNone) {
    // The first JOIN of a job, out of range: the job is born doomed, so that the ranks that come
    // next hear why it cannot start (ControlConfig::doom_unknown). It knows no parameters.
    if (idx < 0 && config_.doom_unknown && num_jobs_ < jobs_.size()) idx = NewJob(h.job, now);
    Refuse(idx < 0 ? nullptr : &jobs_[static_cast<size_t>(idx)], h, from, p::ErrorCode::kBadParams,
           bad.param, p::kJoinValueNone, bad.value, out);
    return;
  }
  if (idx < 0) {
    if (num_jobs_ == jobs_.size()) {
      SendError(from, {.job = h.job, .rank = h.rank, .code = p::ErrorCode::kTooManyJobs}, out);
      return;
    }
    idx = NewJob(h.job, now);
    JobEntry& j = jobs_[static_cast<size_t>(idx)];
    j.world_size = world;
    j.tree_world = tree_world;
    j.k = k;
    j.window_asked = window;
    j.lanes = lanes;
    j.peers.assign(size_t{lanes} * world, Peer{});
  }
  JobEntry& j = jobs_[static_cast<size_t>(idx)];
  if (j.refused && j.world_size == 0) {
    // Born doomed (its first JOIN was out of range): nothing to compare this JOIN with.
    j.last_activity = now;
    SendPeerRefused(j, from, h.rank, out);
    return;
  }
  if (j.k != k) {
    Refuse(&j, h, from, p::ErrorCode::kBadParams, p::JoinParam::kK, j.k, k, out);
    return;
  }
  if (j.world_size != world) {
    Refuse(&j, h, from, p::ErrorCode::kBadParams, p::JoinParam::kWorldSize, j.world_size, world,
           out);
    return;
  }
  if (j.tree_world != tree_world) {
    Refuse(&j, h, from, p::ErrorCode::kBadParams, p::JoinParam::kWorldSize, j.tree_world,
           tree_world, out);
    return;
  }
  // Ranks may ask different windows (a worker asks what its socket holds, docs/host.md "Socket
  // buffers"): the job asks the least of them. The window is a resource, not a meaning: results
  // are the same bits for any window. Once granted, a grant stands until the next one.
  if (window < j.window_asked) j.window_asked = window;
  if (j.lanes != lanes) {
    Refuse(&j, h, from, p::ErrorCode::kBadParams, p::JoinParam::kLanes, j.lanes, lanes, out);
    return;
  }
  Peer& slot_peer = j.peers[PeerIndex(j, h.rank, lane)];
  const auto lane_bit = static_cast<uint16_t>(1u << lane);
  if (j.lane_mask[h.rank] & lane_bit) {
    if (!(slot_peer == from)) {
      Refuse(&j, h, from, p::ErrorCode::kRankTaken, p::JoinParam::kRankTaken, p::kJoinValueNone,
             lane, out);
      return;
    }
    j.last_activity = now;
    if (j.refused) {
      SendPeerRefused(j, from, h.rank, out);  // a resend: the first copy may have been lost
      return;
    }
    if (j.active && j.epoch != 0 && h.rejoin_epoch == j.epoch) {  // a re-JOIN at the lease's end
      if (h.release != 0 && !j.releasing) {
        // A re-join for a release no longer under way (called off: its answer was lost, or the
        // worker heard the release late): the grant stands.
        p::JoinAckMsg stands = JoinAck(j, h.rank);
        stands.release = 2;
        SendReply(from, stands, out);
        Bump(ControlCounter::kJoinAcks);
        Bump(ControlCounter::kReleaseStands);
        return;
      }
      if (j.rejoin_mask[h.rank] & lane_bit) return;  // a resend: the others are not in yet
      j.rejoin_mask[h.rank] |= lane_bit;
      if (j.releasing) j.release_mask[h.rank] |= lane_bit;
      Bump(ControlCounter::kRejoins);
      if (!RejoinComplete(j)) return;
      // Every rank finished the grant's calls: nothing of it is needed any more.
      TakeBackGrant(j, out);
      if (j.queued) SendJoinWait(j, from, h.rank, out);
      return;
    }
    if (j.active) {  // a resent first JOIN or re-JOIN whose join_ack was lost, or a keep-alive
      p::JoinAckMsg ack = JoinAck(j, h.rank);
      if (j.releasing) ack.release = 1;  // the idle job is asked again (the first may be lost)
      SendReply(from, ack, out);
      Bump(ControlCounter::kJoinAcks);
    } else if (j.queued) {
      if (h.release == 0) j.idle_queued = false;  // a call waits for the job's next grant
      SendJoinWait(j, from, h.rank, out);
    } else if (Pending(j)) {
      SendJoinPending(j, from, h.rank, out);
    }
    return;
  }
  if (j.refused) {  // the job cannot start: tell the newcomer, do not record it
    j.last_activity = now;
    SendPeerRefused(j, from, h.rank, out);
    return;
  }
  j.lane_mask[h.rank] |= lane_bit;
  j.joined_mask |= uint64_t{1} << h.rank;
  slot_peer = from;
  const auto all_lanes = static_cast<uint16_t>((1u << j.lanes) - 1);
  if (j.lane_mask[h.rank] == all_lanes) ++j.joined;
  j.last_activity = now;
  if (j.joined == j.world_size) {
    Enqueue(j, out);
    if (j.queued) SendJoinWait(j, from, h.rank, out);
  }
}

int32_t ControlPlane::NewJob(uint16_t job_id, TimePoint now) {
  const auto it =
      std::find_if(jobs_.begin(), jobs_.end(), [](const JobEntry& j) { return !j.used; });
  JobEntry& j = *it;
  j = JobEntry{};
  j.used = true;
  j.job_id = job_id;
  j.last_activity = now;
  const auto idx = static_cast<int32_t>(it - jobs_.begin());
  index_[job_id] = idx;
  ++num_jobs_;
  DropReservation(job_id);  // the id is in use now
  return idx;
}

void ControlPlane::Refuse(JobEntry* j, const p::JoinMsg& h, const Peer& from, p::ErrorCode code,
                          p::JoinParam param, uint32_t job_value, uint32_t its_value,
                          ReplySink& out) {
  SendError(
      from,
      p::ErrorMsg{.job = h.job, .rank = h.rank, .code = code}.set_join_param(param).set_job_value(
          job_value),
      out);
  // Only a job that never had every rank in can be doomed: once queued or granted it runs on.
  if (j == nullptr || !Pending(*j)) return;
  Doom(*j, h.rank, param, its_value, false, out);
}

void ControlPlane::Doom(JobEntry& j, uint16_t rank, p::JoinParam param, uint32_t value, bool below,
                        ReplySink& out) {
  // The first refusal: every joined lane hears it now; later JOINs (resends and newcomers) hear it
  // in answer, so a lost copy is made good by the next resend.
  j.refused = true;
  j.refused_below = below;
  j.refused_rank = rank;
  j.refused_param = param;
  j.refused_value = value;
  if (config_.log) {  // once per job: a job is doomed once
    const std::string what = param == p::JoinParam::kRankTaken
                                 ? "another address had joined as it, lane " + std::to_string(value)
                                 : "its " +
                                       std::string(p::JoinParamName(static_cast<uint16_t>(param))) +
                                       " " + std::to_string(value);
    const std::string r = std::to_string(rank);
    config_.log("control: job " + std::to_string(j.job_id) + " cannot start: " +
                (below ? "a leaf refused the JOIN of the tree's rank " + r
                       : "the JOIN of rank " + r + " was refused") +
                " (" + what +
                "); its ranks hear error(peer_refused) until the job timeout frees it");
  }
  for (uint16_t r = 0; r < j.world_size; ++r) {
    for (uint16_t l = 0; l < j.lanes; ++l) {
      if (j.lane_mask[r] & (1u << l)) SendPeerRefused(j, j.peers[PeerIndex(j, r, l)], r, out);
    }
  }
}

void ControlPlane::SendPeerRefused(const JobEntry& j, const Peer& to, uint16_t rank,
                                   ReplySink& out) {
  SendError(to,
            p::ErrorMsg{.job = j.job_id, .rank = rank, .code = p::ErrorCode::kPeerRefused}
                .set_join_param(j.refused_param)
                .set_refused_rank(j.refused_rank)
                .set_refused_value(j.refused_value)
                .set_tree_rank(j.refused_below ? 1 : 0),
            out);
}

void ControlPlane::SendErrorToRank(const JobEntry& j, uint16_t rank, p::ErrorMsg e,
                                   ReplySink& out) {
  e.job = j.job_id;
  e.rank = rank;
  for (uint16_t l = 0; l < j.lanes; ++l) {
    if (!(j.lane_mask[rank] & (1u << l))) continue;
    SendError(j.peers[PeerIndex(j, rank, l)], e, out);
  }
}

std::vector<uint32_t> FairShares(std::span<const uint32_t> demands, uint32_t pool) {
  std::vector<uint32_t> share(demands.size(), 0);
  std::vector<size_t> order(demands.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return demands[a] < demands[b]; });
  uint64_t left = pool;
  for (size_t n = 0; n < order.size(); ++n) {
    const uint64_t equal = left / (order.size() - n);  // what each of the rest may take
    const uint32_t give = static_cast<uint32_t>(std::min<uint64_t>(demands[order[n]], equal));
    share[order[n]] = give;
    left -= give;
  }
  return share;
}

void ControlPlane::Enqueue(JobEntry& j, ReplySink& out) {
  j.queued = true;
  j.queued_seq = next_queue_seq_++;
  j.rejoin_mask = {};
  AdmitQueued(out);
  if (j.used && j.queued) Bump(ControlCounter::kJobsQueued);
}

void ControlPlane::AskWindow(uint16_t job_id, uint16_t window) {
  const int32_t idx = index_[job_id];
  if (idx >= 0 && window >= 1) jobs_[static_cast<size_t>(idx)].window_asked = window;
}

uint32_t ControlPlane::FittingWindow(uint16_t world_size, uint16_t k) const {
  if (!config_.rx_queue || world_size == 0 || !p::IsValidK(k)) return 0xFFFF;
  const size_t holds = config_.rx_queue(p::MessageBytes(k));
  if (holds == 0) return 0xFFFF;
  return static_cast<uint32_t>(std::clamp<size_t>(holds / world_size, 1, 0xFFFF));
}

std::vector<uint32_t> ControlPlane::BufferCaps(std::span<const size_t> claim) {
  // The receive queue as a whole is kWhole parts; a job needs world x asked of the messages of
  // its K that it holds, as parts. Jobs whose K has no known limit take no part.
  constexpr uint32_t kWhole = 1'000'000;
  std::vector<uint32_t> caps(claim.size(), 0xFFFF);
  if (!config_.rx_queue) return caps;
  std::vector<size_t> holds(claim.size(), 0);
  std::vector<size_t> limited;  // indices into claim
  std::vector<uint32_t> need;
  for (size_t c = 0; c < claim.size(); ++c) {
    const JobEntry& j = jobs_[claim[c]];
    if (j.world_size == 0 || !p::IsValidK(j.k)) continue;
    holds[c] = config_.rx_queue(p::MessageBytes(j.k));
    if (holds[c] == 0) continue;
    const uint64_t messages = uint64_t{std::min<uint32_t>(j.window_asked, 0xFFFF)} * j.world_size;
    limited.push_back(c);
    need.push_back(static_cast<uint32_t>(
        std::min<uint64_t>((messages * kWhole + holds[c] - 1) / holds[c], kWhole)));
  }
  const std::vector<uint32_t> part = FairShares(need, kWhole);
  for (size_t i = 0; i < limited.size(); ++i) {
    const size_t c = limited[i];
    JobEntry& j = jobs_[claim[c]];
    caps[c] = static_cast<uint32_t>(std::clamp<uint64_t>(
        uint64_t{part[i]} * holds[c] / (uint64_t{kWhole} * j.world_size), 1, 0xFFFF));
    if (j.queued && caps[c] < j.window_asked && !j.buffer_cap_logged) {  // about to be granted
      j.buffer_cap_logged = true;
      if (config_.log) {
        const size_t others = limited.size() - 1;
        config_.log("job " + std::to_string(j.job_id) + ": window " +
                    std::to_string(j.window_asked) + " asked, at most " + std::to_string(caps[c]) +
                    " granted: the socket holds about " + std::to_string(holds[c]) +
                    " messages of " + std::to_string(p::MessageBytes(j.k)) +
                    " bytes (K=" + std::to_string(j.k) + "), for " + std::to_string(j.world_size) +
                    " ranks sending at once" +
                    (others > 0 ? ", shared with " + std::to_string(others) + " other job(s)"
                                : std::string()) +
                    " (raise --socket-buffer-bytes, or net.core.rmem_max; docs/switchd.md, "
                    "\"Socket buffers\")");
      }
    }
  }
  return caps;
}

void ControlPlane::AdmitQueued(ReplySink& out) {
  // Everyone with a claim on the pool: active and queued jobs.
  std::vector<size_t> claim;
  std::vector<uint32_t> demand;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const JobEntry& j = jobs_[i];
    if (!j.used || (!j.active && !j.queued)) continue;
    claim.push_back(i);
  }
  const std::vector<uint32_t> cap = BufferCaps(claim);
  for (size_t c = 0; c < claim.size(); ++c) {
    demand.push_back(std::min<uint32_t>({jobs_[claim[c]].window_asked, 0xFFFF, cap[c]}));
  }
  const std::vector<uint32_t> share = FairShares(demand, pool_slots_);
  std::vector<size_t> queue;  // indices into claim, oldest first
  for (size_t c = 0; c < claim.size(); ++c) {
    if (jobs_[claim[c]].queued) queue.push_back(c);
  }
  std::sort(queue.begin(), queue.end(), [&](size_t a, size_t b) {
    return jobs_[claim[a]].queued_seq < jobs_[claim[b]].queued_seq;
  });
  for (size_t c : queue) {
    JobEntry& j = jobs_[claim[c]];
    // A pool smaller than min_window still admits a job: the whole pool is its least.
    const uint32_t least = std::min({demand[c], uint32_t{config_.min_window}, pool_slots_});
    const uint32_t want = std::max(share[c], least);
    if (LargestFreeExtent() < least) continue;
    uint32_t base = 0, got = 0;
    if (!Allocate(want, base, got)) continue;  // cannot happen: an extent of >= least is free
    Grant(j, base, got, out);
  }
}

bool ControlPlane::Grant(JobEntry& j, uint32_t base, uint32_t got, ReplySink& out) {
  JobConfig cfg;
  cfg.job_id = j.job_id;
  cfg.world_size = j.world_size;
  cfg.k = j.k;
  cfg.slot_base = base;
  cfg.window = static_cast<uint16_t>(got);
  bool keys_ok = true;
  if (config_.engine_keys) {
    auto sec = KeysOfGrant(j, j.grants + 1);
    keys_ok = sec.ok();  // InstallJobKey checked the secret: always
    if (keys_ok) cfg.security = *sec;
  }
  const Status added = keys_ok ? engine_.AddJob(cfg) : Internal("no keys for the grant");
  if (!added.ok()) {
    // The engine refused: its own table is smaller, say, or (Unimplemented) it cannot run the
    // job's sec mode (the RTL core: mac_encrypt), which the error names.
    const bool mode =
        added.code() == StatusCode::kUnimplemented && cfg.security.mode != p::SecMode::kCrc;
    if (config_.log) {
      config_.log("control: job " + std::to_string(j.job_id) +
                  ": the engine refused to install it (" + added.ToString() +
                  "): every rank gets error(no_slots)");
    }
    Release(base, got);
    for (uint16_t r = 0; r < j.world_size; ++r) {
      for (uint16_t l = 0; l < j.lanes; ++l) {
        if (j.left_mask & (uint64_t{1} << r)) continue;
        SendError(
            j.peers[PeerIndex(j, r, l)],
            {.job = j.job_id,
             .rank = r,
             .slot = static_cast<uint16_t>(mode ? p::JoinParam::kSecMode : p::JoinParam::kNone),
             .offset = mode ? static_cast<uint32_t>(cfg.security.mode) : 0,
             .code = p::ErrorCode::kNoSlots},
            out);
      }
    }
    index_[j.job_id] = -1;
    ForgetKey(j.job_id);
    j = JobEntry{};
    --num_jobs_;
    return false;
  }
  ++j.grants;
  Bump(j.epoch == 0 ? ControlCounter::kJobsAdmitted : ControlCounter::kRegrants);
  j.active = true;
  j.queued = false;
  j.slot_base = base;
  j.window = static_cast<uint16_t>(got);
  j.epoch = static_cast<uint8_t>(j.epoch % 255 + 1);
  j.rejoin_mask = {};
  j.granted_at = now_;
  j.idle_queued = false;
  j.releasing = false;
  j.release_mask = {};
  for (uint16_t r = 0; r < j.world_size; ++r) {
    if (j.left_mask & (uint64_t{1} << r)) continue;
    for (uint16_t l = 0; l < j.lanes; ++l) {
      if (!(j.lane_mask[r] & (1u << l))) continue;
      SendReply(j.peers[PeerIndex(j, r, l)], JoinAck(j, r), out);
      Bump(ControlCounter::kJoinAcks);
    }
  }
  return true;
}

void ControlPlane::TakeBackGrant(JobEntry& j, ReplySink& out) {
  if (j.releasing) Bump(ControlCounter::kReleases);
  j.idle_queued = j.releasing;  // until a JOIN says a call waits (or it is granted)
  j.releasing = false;
  j.release_mask = {};
  DropGrant(j);
  Enqueue(j, out);
}

bool ControlPlane::DropGrant(JobEntry& j) {
  if (!j.active) return false;
  engine_.RemoveJob(j.job_id).IgnoreError();  // cannot fail: installed by Grant
  Release(j.slot_base, j.window);
  j.active = false;
  j.window = 0;
  return true;
}

void ControlPlane::SendRelease(const JobEntry& j, const std::array<uint16_t, p::kMaxWorkers>& lanes,
                               uint8_t release, ReplySink& out) {
  for (uint16_t r = 0; r < j.world_size; ++r) {
    for (uint16_t l = 0; l < j.lanes; ++l) {
      if (!(lanes[r] & (1u << l))) continue;
      p::JoinAckMsg ack = JoinAck(j, r);
      ack.release = release;
      SendReply(j.peers[PeerIndex(j, r, l)], ack, out);
      Bump(ControlCounter::kJoinAcks);
      if (release == 2) Bump(ControlCounter::kReleaseStands);
    }
  }
}

void ControlPlane::AskRelease(JobEntry& j, TimePoint now, ReplySink& out) {
  Bump(ControlCounter::kReleasesAsked);
  j.releasing = true;
  j.release_asked = now;
  j.release_mask = {};
  // Every lane not done and not re-joined already (at its lease's end: the same boundary).
  std::array<uint16_t, p::kMaxWorkers> ask{};
  for (uint16_t r = 0; r < j.world_size; ++r) {
    if (j.left_mask & (uint64_t{1} << r)) continue;
    ask[r] = static_cast<uint16_t>(j.lane_mask[r] & ~j.rejoin_mask[r]);
  }
  SendRelease(j, ask, 1, out);
}

void ControlPlane::CallOffRelease(JobEntry& j, ReplySink& out) {
  Bump(ControlCounter::kReleasesCancelled);
  j.releasing = false;
  for (uint16_t r = 0; r < j.world_size; ++r) {
    j.rejoin_mask[r] = static_cast<uint16_t>(j.rejoin_mask[r] & ~j.release_mask[r]);
  }
  SendRelease(j, j.release_mask, 2, out);
  j.release_mask = {};
}

bool ControlPlane::RejoinComplete(const JobEntry& j) {
  const auto all_lanes = static_cast<uint16_t>((1u << j.lanes) - 1);
  for (uint16_t r = 0; r < j.world_size; ++r) {
    if (j.left_mask & (uint64_t{1} << r)) continue;
    if (j.rejoin_mask[r] != all_lanes) return false;
  }
  return true;
}

void ControlPlane::SendJoinWait(const JobEntry& j, const Peer& to, uint16_t rank, ReplySink& out) {
  uint16_t ahead = 0;
  for (const JobEntry& o : jobs_) {
    if (o.used && o.queued && o.queued_seq < j.queued_seq) ++ahead;
  }
  SendReply(to, p::JoinWaitMsg{.job = j.job_id, .rank = rank, .k = j.k, .queue_ahead = ahead}, out);
  Bump(ControlCounter::kJoinWaits);
}

void ControlPlane::SendJoinPending(const JobEntry& j, const Peer& to, uint16_t rank,
                                   ReplySink& out) {
  const auto all_lanes = static_cast<uint16_t>((1u << j.lanes) - 1);
  uint16_t missing = 0;
  while (missing < j.world_size && j.lane_mask[missing] == all_lanes) ++missing;
  SendReply(to,
            p::JoinPendingMsg{.scope = static_cast<uint8_t>(j.tree_world != 0 ? 1 : 0),
                              .job = j.job_id,
                              .rank = rank,
                              .joined = j.joined,
                              .missing_rank = missing,
                              .world_size = j.world_size},
            out);
  Bump(ControlCounter::kJoinPendings);
}

void ControlPlane::HandleLeave(const p::LeaveMsg& h, const Peer& from, ReplySink& out) {
  Bump(ControlCounter::kLeaves);
  const int32_t idx = index_[h.job];
  if (idx < 0) {
    Bump(ControlCounter::kLeaveIgnored);
    return;
  }
  JobEntry& j = jobs_[static_cast<size_t>(idx)];
  // Any lane's peer speaks for the rank.
  bool from_rank = false;
  if (h.rank < j.world_size) {
    for (uint16_t l = 0; l < j.lanes && !from_rank; ++l) {
      from_rank = (j.lane_mask[h.rank] & (1u << l)) && j.peers[PeerIndex(j, h.rank, l)] == from;
    }
  }
  if (!from_rank) {
    Bump(ControlCounter::kLeaveIgnored);
    return;
  }
  if (h.reason == static_cast<uint16_t>(p::ErrorCode::kPeerRefused) && j.tree_world != 0) {
    RefuseFromBelow(j, h, out);  // a leaf's (a job of leaves); from a worker it is an abort
    return;
  }
  // A graceful leave (aux 0) from an active job only marks the rank done: ranks still waiting for
  // a lost result keep retransmitting and get it re-sent from the engine. The job is freed when
  // every rank is done. Any other leave aborts the job for everyone.
  if (h.reason == 0 && j.epoch != 0) {
    if (j.left_mask & (uint64_t{1} << h.rank)) return;  // a copy (workers send LEAVE thrice)
    Bump(ControlCounter::kLeavesDone);
    j.left_mask |= uint64_t{1} << h.rank;
    if (j.left_mask == j.joined_mask) {
      Bump(ControlCounter::kJobsDone);
      FreeJob(j, h.rank, out);
      return;
    }
    if (j.active && j.rejoin_mask != decltype(j.rejoin_mask){} && RejoinComplete(j)) {
      // The others re-joined already: the leaver was the last one the grant waited for.
      TakeBackGrant(j, out);
    }
    // Tell the others how many calls the leaver completed: a rank inside a later call fails at
    // once (rank_left) instead of waiting out its progress timeout.
    for (uint16_t r = 0; r < j.world_size; ++r) {
      if (j.left_mask & (uint64_t{1} << r)) continue;
      SendErrorToRank(
          j, r,
          p::ErrorMsg{.code = p::ErrorCode::kRankLeft}.set_left_rank(h.rank).set_calls(h.calls),
          out);
    }
    return;
  }
  Bump(ControlCounter::kJobsLeft);
  FreeJob(j, h.rank, out);
}

void ControlPlane::RefuseFromBelow(JobEntry& j, const p::LeaveMsg& h, ReplySink& out) {
  if (j.refused) return;  // a copy (a leaf sends three), or a refusal of the job's own before it
  Bump(ControlCounter::kRefusedBelow);
  // The grant goes: this job never had every worker in, so nothing of it can be needed.
  const bool had_slots = DropGrant(j);
  const bool was_queued = std::exchange(j.queued, false);
  Doom(j, h.refused_rank,
       p::JoinParamName(h.join_param) == "unknown" ? p::JoinParam::kNone : h.join_param, h.calls,
       true, out);
  if (had_slots || was_queued) AdmitQueued(out);
}

void ControlPlane::HandleAlloc(const p::AllocJobMsg& h, const Peer& from, TimePoint now,
                               ReplySink& out) {
  Bump(ControlCounter::kAllocs);
  auto ack = [&](uint16_t id) {
    SendReply(from, p::AllocAckMsg{.job = id, .nonce = h.nonce}, out);
    Bump(ControlCounter::kAllocAcks);
  };
  for (const Reservation& r : reservations_) {
    if (r.nonce == h.nonce && r.peer == from) return ack(r.job_id);  // a resent request
  }
  if (reservations_.size() < config_.max_jobs) {
    for (uint32_t tried = 0; tried < alloc_ids_; ++tried) {
      const auto id = static_cast<uint16_t>(next_alloc_);
      next_alloc_ += config_.alloc_stride;
      if (next_alloc_ > 65535) next_alloc_ = first_alloc_;
      if (index_[id] >= 0 || Reserved(id)) continue;
      reservations_.push_back(Reservation{id, h.nonce, from, now});
      return ack(id);
    }
  }
  // The refusal echoes the nonce in gen, as alloc_ack does, so the asker knows it is its answer.
  SendError(from, {.gen = h.nonce, .code = p::ErrorCode::kTooManyJobs}, out);
}

bool ControlPlane::Reserved(uint16_t job_id) const {
  return std::any_of(reservations_.begin(), reservations_.end(),
                     [&](const Reservation& r) { return r.job_id == job_id; });
}

void ControlPlane::DropReservation(uint16_t job_id) {
  std::erase_if(reservations_, [&](const Reservation& r) { return r.job_id == job_id; });
}

size_t ControlPlane::Tick(TimePoint now, ReplySink& out) {
  now_ = now;
  // Idle release: a release some rank's data overtook is called off; an idle job is asked to
  // release its grant while another job waits (see the header comment).
  for (JobEntry& j : jobs_) {
    if (j.used && j.releasing && j.last_data > j.release_asked) CallOffRelease(j, out);
  }
  // Only a job that wants slots asks: one queued again by a release, idle, does not.
  const bool waiting = std::any_of(jobs_.begin(), jobs_.end(), [](const JobEntry& j) {
    return j.used && j.queued && !j.idle_queued;
  });
  if (config_.idle_release.count() > 0 && waiting) {
    for (JobEntry& j : jobs_) {
      if (!j.used || !j.active || j.releasing || j.tree_world != 0) continue;
      if (now - std::max(j.last_data, j.granted_at) < config_.idle_release) continue;
      AskRelease(j, now, out);
    }
  }
  const size_t before = reservations_.size();
  std::erase_if(reservations_, [&](const Reservation& r) {
    if (now - r.at <= config_.job_timeout) return false;
    // A key installed for an id nobody joined (a launcher that allocated it and gave up, an NCCL
    // node's listen whose id node 0's replaced) goes with the reservation.
    if (index_[r.job_id] < 0) ForgetKey(r.job_id);
    return true;
  });
  counters_[static_cast<size_t>(ControlCounter::kAllocsExpired)] += before - reservations_.size();
  size_t freed = 0;
  for (JobEntry& j : jobs_) {
    if (!j.used || now - j.last_activity <= config_.job_timeout) continue;
    Bump(ControlCounter::kJobsTimedOut);
    FreeJob(j, p::kRankAll, out);
    ++freed;
  }
  return freed;
}

size_t ControlPlane::HandleEngineFailures(ReplySink& out) {
  size_t freed = 0;
  JobFailure f[8];
  for (size_t n; (n = engine_.PollFailures(f)) != 0;) {
    for (size_t i = 0; i < n; ++i) {
      const int32_t idx = index_[f[i].job_id];
      if (idx < 0) continue;  // freed meanwhile (cannot happen: one thread)
      JobEntry& j = jobs_[static_cast<size_t>(idx)];
      for (uint16_t r = 0; r < j.world_size; ++r) {
        if (!(j.joined_mask & (uint64_t{1} << r)) || (j.left_mask & (uint64_t{1} << r))) continue;
        SendErrorToRank(j, r,
                        p::ErrorMsg{.code = f[i].code}
                            .set_mismatch_slot(f[i].slot)
                            .set_mismatch_gen(f[i].gen)
                            .set_proving_rank(f[i].rank),
                        out);
      }
      Bump(ControlCounter::kJobsFailed);
      // The engine removed the job already (RemoveJob in FreeJob is NotFound): free the rest,
      // telling nobody else.
      j.joined_mask = 0;
      FreeJob(j, p::kRankAll, out);
      ++freed;
    }
  }
  return freed;
}

Status ControlPlane::AbortJob(uint16_t job_id, const p::ErrorMsg& e, ReplySink& out) {
  const int32_t idx = index_[job_id];
  if (idx < 0) return NotFound("job " + std::to_string(job_id) + " unknown");
  JobEntry& j = jobs_[static_cast<size_t>(idx)];
  for (uint16_t r = 0; r < j.world_size; ++r) {
    if (!(j.joined_mask & (uint64_t{1} << r)) || (j.left_mask & (uint64_t{1} << r))) continue;
    SendErrorToRank(j, r, e, out);
  }
  Bump(ControlCounter::kJobsLeft);
  j.joined_mask = 0;  // told already: FreeJob tells nobody else
  FreeJob(j, p::kRankAll, out);
  return Status::Ok();
}

void ControlPlane::FreeJob(JobEntry& j, uint16_t except_rank, ReplySink& out) {
  const bool had_slots = DropGrant(j);
  for (uint16_t r = 0; r < j.world_size; ++r) {
    if (r == except_rank || !(j.joined_mask & (uint64_t{1} << r)) ||
        (j.left_mask & (uint64_t{1} << r))) {
      continue;
    }
    SendErrorToRank(j, r, {.code = p::ErrorCode::kJobAborted}, out);
  }
  index_[j.job_id] = -1;
  ForgetKey(j.job_id);
  j = JobEntry{};
  --num_jobs_;
  // Freed slots, or one claimant fewer (fair shares grow): admit who can be now.
  if (had_slots || queued_jobs() > 0) AdmitQueued(out);
}

ControlMessage MakeControl(const p::Header& h) {
  ControlMessage m{};
  p::EncodeHeader(h, m.data());
  p::SealMessage(m.data(), p::kHeaderBytes);
  return m;
}

p::JoinAckMsg ControlPlane::JoinAck(const JobEntry& j, uint16_t rank) const {
  return p::JoinAckMsg{
      .job = j.job_id,
      .rank = rank,
      .job_timeout_ms = static_cast<uint16_t>(std::clamp<int64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(config_.job_timeout).count(), 1,
          0xFFFF)),
      .epoch = j.epoch,
      .k = j.k,
      .window = j.window,
      .lease = static_cast<uint16_t>(config_.lease_calls)};
}

void ControlPlane::SendError(const Peer& to, const p::ErrorMsg& e, ReplySink& out) {
  SendReply(to, e, out);
  Bump(ControlCounter::kErrorsSent);
  switch (e.code) {
    case p::ErrorCode::kBadParams:
      Bump(ControlCounter::kErrBadParams);
      break;
    case p::ErrorCode::kRankTaken:
      Bump(ControlCounter::kErrRankTaken);
      break;
    case p::ErrorCode::kTooManyJobs:
      Bump(ControlCounter::kErrTooManyJobs);
      break;
    case p::ErrorCode::kNoSlots:
      Bump(ControlCounter::kErrNoSlots);
      break;
    case p::ErrorCode::kJobAborted:
      Bump(ControlCounter::kErrJobAborted);
      break;
    case p::ErrorCode::kRankLeft:
      Bump(ControlCounter::kErrRankLeft);
      break;
    case p::ErrorCode::kRankMismatch:
      Bump(ControlCounter::kErrRankMismatch);
      break;
    case p::ErrorCode::kPeerRefused:
      Bump(ControlCounter::kErrPeerRefused);
      break;
    case p::ErrorCode::kUnauthorized:  // counted as joins_unauthorized
    case p::ErrorCode::kKeyRefused:    // counted as admin_refused
    case p::ErrorCode::kUnknownJob:    // sent by the switch's data path (err_unknown_job)
    case p::ErrorCode::kNone:
      break;
  }
}

bool ControlPlane::Allocate(uint32_t want, uint32_t& base, uint32_t& got) {
  if (free_.empty() || want == 0) return false;
  size_t best = 0;
  for (size_t i = 0; i < free_.size(); ++i) {
    if (free_[i].len >= want) {
      best = i;
      break;
    }
    if (free_[i].len > free_[best].len) best = i;
  }
  Extent& e = free_[best];
  got = std::min(want, e.len);
  base = e.base;
  e.base += got;
  e.len -= got;
  if (e.len == 0) free_.erase(free_.begin() + static_cast<ptrdiff_t>(best));
  return true;
}

void ControlPlane::Release(uint32_t base, uint32_t len) {
  auto it = std::lower_bound(free_.begin(), free_.end(), base,
                             [](const Extent& e, uint32_t b) { return e.base < b; });
  it = free_.insert(it, Extent{base, len});
  // Coalesce with the next, then with the previous extent.
  if (auto next = it + 1; next != free_.end() && it->base + it->len == next->base) {
    it->len += next->len;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = it - 1;
    if (prev->base + prev->len == it->base) {
      prev->len += it->len;
      free_.erase(it);
    }
  }
}

uint32_t ControlPlane::LargestFreeExtent() const {
  uint32_t best = 0;
  for (const Extent& e : free_) best = std::max(best, e.len);
  return best;
}

std::vector<JobInfo> ControlPlane::Jobs() const {
  std::vector<JobInfo> v;
  for (const JobEntry& j : jobs_) {
    if (!j.used) continue;
    v.push_back(JobInfo{j.job_id, j.active, j.world_size, j.k, j.window_asked, j.window,
                        j.slot_base, j.joined, j.lanes, j.queued, j.epoch, j.data_packets});
  }
  return v;
}

}  // namespace ina::dp
