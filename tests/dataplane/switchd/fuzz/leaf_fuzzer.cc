// libFuzzer target: a leaf of two-level aggregation (ina/dp/switchd/leaf.h) as ina-switchd runs it
// with --upstream: leaf 1 of 2 over a fast engine and a control plane configured as the switch
// configures a leaf's (no leases, engine_keys false), packets classified as the data path does
// (hierarchy.h: from the spine's address to HandleUpstream, worker control to
// HandleWorkerControl, the rest through MapData and the source check to the engine).
//
// Input: records, each an op byte and its operands, from one of 5 worker peers (IPv4 and IPv6)
// or the spine:
//   op%5 0: a worker's control message: JOIN (world 8 mostly, so ranks 4..7 are this leaf's; a
//           re-join's epoch, K, window, lanes), a proven JOIN answering the last join_challenge
//           its peer got (job 1's secret, another, or damaged), LEAVE, ALLOC_JOB, HELLO, a
//           launcher's SET_KEY (the leaf's admin secret or the spine's, a fresh sequence or the
//           last again, job 1's key again or another job's, in mode mac, mac_encrypt or 3,
//           which no fabric takes, sometimes damaged), or any type;
//           sealed unless a flag says raw.
//   op%5 1: a worker's data packet: job, rank, slot, gen, count, offset, flags, a payload; CRC
//           sealed, raw, or for job 1 sealed under its local grant's up key (nonce: rank, slot,
//           gen as the use), sometimes damaged.
//   op%5 2: from the spine: join_ack (epoch, window, K, job timeout, lease 0 or 2),
//           join_wait, join_challenge (the salt the harness keeps), error (any code), result (CRC,
//           or for job 1 sealed under the spine's down key of grant 1 or 2 with the salt it sent),
//           alloc_ack, set_key_ack or error(key_refused) (of the last key the leaf passed on, its
//           sequence or the next), any.
//   op%5 3: time passes (0..2.5 s) and both Ticks run (job timeout 1 s).
//   op%5 4: raw bytes from a worker or the spine.
// Checked after every record: every packet the leaf sends is at most kMaxPacketBytes and a whole
// message: to the spine only JOINs (plain, or proven: sec mac and a tag), LEAVEs (a refusal of a
// worker naming a rank below max_workers and a known join_param), ALLOC_JOBs,
// data as leaf 1 (rank 1) and SET_KEYs that open under the spine's admin secret to the key the
// control plane holds for their job, in its mode (the leaf passes keys on); to the workers only
// replies (join_ack, join_wait, error, alloc_ack, hello_ack, set_key_ack, join_challenge of
// job 1) and results; a CRC-only message with a good trailer, a
// keyed one of the job that has a key. Job 1 has a key (mac) in every input: nothing of its data
// or results ever crosses in the clear, either way. The control plane's job table stays
// consistent, and between inputs every job of the leaf and of its control plane goes.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "ina/dp/control.h"
#include "ina/dp/fast_engine.h"
#include "ina/dp/switchd/leaf.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/sec.h"
#include "ina/proto/wire.h"
#include "support/control_check.h"
#include "support/fuzz_check.h"
#include "support/fuzz_reader.h"

namespace {

using namespace ina::dp;
using ina::dp::switchd::Leaf;
using ina::dp::switchd::LeafConfig;
using ina::dp::switchd::LeafSink;
namespace proto = ina::proto;

constexpr uint32_t kPoolSlots = 16;
constexpr size_t kWorkers = 5;
constexpr uint16_t kKeyedJob = 1;
const std::vector<uint8_t> kSecret(32, 0x3C);
const std::vector<uint8_t> kOther(32, 0x3D);
const std::vector<uint8_t> kAdmin(32, 0xA1);       // the leaf's admin secret
const std::vector<uint8_t> kSpineAdmin(32, 0xA2);  // the spine's: keys passed on go under it

Peer V4(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(0x7f000001);
  return Peer::From(reinterpret_cast<const sockaddr*>(&a), sizeof a);
}

// What the leaf sends, checked as it goes; the last join_challenge each worker peer got.
class Sink final : public LeafSink, public Emitter {
 public:
  Sink(const std::vector<Peer>& workers, const Peer& spine) : workers_(workers), spine_(spine) {}

  void SendTo(const Peer& to, std::span<const uint8_t> p, bool) override {
    FUZZ_CHECK(
        p.size() >= proto::kHeaderBytes + proto::kCrcBytes && p.size() <= proto::kMaxPacketBytes,
        "a packet of %zu bytes", p.size());
    FUZZ_CHECK(proto::GetVersion(p.data()) == proto::kVersion, "version %u",
               proto::GetVersion(p.data()));
    const proto::MsgType t = proto::GetType(p.data());
    const uint8_t sec = proto::GetSec(p.data());
    const uint16_t job = proto::GetJob(p.data());
    if (sec == 0) {
      FUZZ_CHECK(proto::MessageCrcOk(p), "type %u with a bad trailer", unsigned(t));
    }
    const bool data_or_result = t == proto::MsgType::kData || t == proto::MsgType::kResult;
    if (data_or_result) {
      FUZZ_CHECK(p.size() == proto::MessageBytes(proto::GetCount(p.data()), sec),
                 "%zu bytes for count %u sec %u", p.size(), proto::GetCount(p.data()), sec);
      // Job 1 is keyed at the leaf: its sums never cross in the clear, up or down.
      FUZZ_CHECK((job == kKeyedJob) == (sec == static_cast<uint8_t>(proto::SecMode::kMac)),
                 "job %u's data or result with sec %u", job, sec);
    }
    if (to == spine_) {
      if (t == proto::MsgType::kSetKey) {
        CheckKeyUp(p);
        return;
      }
      if (t == proto::MsgType::kJoin && sec != 0) {
        FUZZ_CHECK(sec == static_cast<uint8_t>(proto::SecMode::kMac) &&
                       p.size() == proto::MessageBytes(0, sec) && job == kKeyedJob,
                   "a proven JOIN of job %u, sec %u, %zu bytes", job, sec, p.size());
      } else {
        FUZZ_CHECK(t == proto::MsgType::kJoin || t == proto::MsgType::kLeave ||
                       t == proto::MsgType::kAllocJob || t == proto::MsgType::kData,
                   "type %u to the spine", unsigned(t));
        FUZZ_CHECK(t == proto::MsgType::kData || sec == 0, "control type %u with sec %u",
                   unsigned(t), sec);
      }
      FUZZ_CHECK(t == proto::MsgType::kAllocJob || proto::GetRank(p.data()) == 1,
                 "type %u to the spine as rank %u", unsigned(t), proto::GetRank(p.data()));
      if (t == proto::MsgType::kLeave) {
        // A refusal of one of its workers names a rank of the tree and a parameter the spec has.
        const auto leave = proto::LeaveMsg::Decode(p.data());
        FUZZ_CHECK(leave.reason != static_cast<uint16_t>(proto::ErrorCode::kPeerRefused) ||
                       (leave.refused_rank < proto::kMaxWorkers &&
                        proto::JoinParamName(leave.join_param) != "unknown"),
                   "LEAVE peer_refused naming rank %u, join_param %u", leave.refused_rank,
                   unsigned(leave.join_param));
      }
      return;
    }
    size_t w = 0;
    while (w < workers_.size() && !(workers_[w] == to)) ++w;
    FUZZ_CHECK(w < workers_.size(), "a packet to neither a worker nor the spine");
    if (t == proto::MsgType::kJoinChallenge) {
      FUZZ_CHECK(job == kKeyedJob && p.size() == proto::MessageBytes(proto::kJoinChallengeBytes /
                                                                     proto::kElemBytes),
                 "join_challenge of job %u, %zu bytes", job, p.size());
      challenge[w] = proto::JoinChallenge::From(p.data() + proto::kHeaderBytes);
      return;
    }
    FUZZ_CHECK(t == proto::MsgType::kResult || t == proto::MsgType::kJoinAck ||
                   t == proto::MsgType::kJoinWait || t == proto::MsgType::kError ||
                   t == proto::MsgType::kAllocAck || t == proto::MsgType::kHelloAck ||
                   t == proto::MsgType::kSetKeyAck || t == proto::MsgType::kJoinPending,
               "type %u to a worker", unsigned(t));
    if (t == proto::MsgType::kJoinPending) {
      // The spine's (scope 1: a leaf's ranks of the world of 8) or the local control plane's
      // (scope 2: a rank of this leaf, made global), for a job still joining.
      const auto pending = proto::JoinPendingMsg::Decode(p.data());
      FUZZ_CHECK((pending.scope == 1 || pending.scope == 2) && pending.missing_rank < 8 &&
                     pending.missing_rank + pending.missing_ranks <= 8,
                 "join_pending scope %u naming ranks %u + %u", unsigned{pending.scope},
                 unsigned{pending.missing_rank}, unsigned{pending.missing_ranks});
    }
    FUZZ_CHECK(data_or_result || p.size() == proto::MessageBytes(0), "reply of %zu bytes",
               p.size());
  }
  void OnResult(uint16_t job, uint16_t dest, std::span<const uint8_t> p) override {
    FUZZ_CHECK(proto::MessageCrcOk(p), "the engine's result with a bad trailer");
    leaf->OnEngineResult(job, dest, p, *now);
  }

  Leaf* leaf = nullptr;
  const ControlPlane* cp = nullptr;
  const Leaf::TimePoint* now = nullptr;
  std::array<proto::JoinChallenge, kWorkers> challenge{};
  uint16_t key_job = 0;  // the last SET_KEY passed on to the spine: its job and sequence
  uint64_t key_seq = 0;

 private:
  // A SET_KEY to the spine: sealed under the spine's admin secret, the key the control plane
  // holds for its job, in its mode.
  void CheckKeyUp(std::span<const uint8_t> p) {
    constexpr auto kSealed = static_cast<uint8_t>(proto::SecMode::kMacEncrypt);
    const auto h = proto::SetKeyMsg::Decode(p.data());
    FUZZ_CHECK(h.sec == kSealed && p.size() == proto::MessageBytes(h.count, kSealed),
               "SET_KEY up of sec %u, %zu bytes", h.sec, p.size());
    const uint64_t seq = proto::SetKeySeq(h);
    static const proto::TrafficKey key =
        proto::DeriveTrafficKey(kSpineAdmin, proto::KeyDirection::kUp, 0, 0, proto::Session{})
            .value();
    std::vector<uint8_t> plain(size_t{h.count} * proto::kElemBytes);
    FUZZ_CHECK(proto::OpenOnce(key, proto::SecMode::kMacEncrypt, p,
                               proto::MakeNonce(h.rank, h.slot, seq), plain.data()),
               "a SET_KEY up for job %u that does not open under the spine's admin secret", h.job);
    const auto [mode, secret] = cp->KeyOf(h.job);
    FUZZ_CHECK(h.mode == static_cast<uint16_t>(mode) && std::ranges::equal(plain, secret),
               "job %u's key passed on is not the one held (mode %u, held %u)", h.job, h.mode,
               unsigned(mode));
    key_job = h.job;
    key_seq = seq;
  }

  const std::vector<Peer>& workers_;
  const Peer& spine_;
};

// Writes `count` elements of operands (one byte each, as the low byte) after the header.
void Payload(FuzzReader& in, std::vector<uint8_t>& pkt, size_t bytes) {
  for (size_t i = 0; i + 3 < bytes; i += 4) pkt[proto::kHeaderBytes + i + 3] = in.Byte();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<Peer> workers = [] {
    std::vector<Peer> v;
    for (size_t i = 0; i + 1 < kWorkers; ++i) v.push_back(V4(static_cast<uint16_t>(40000 + i)));
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(40000);
    a.sin6_addr = in6addr_loopback;
    v.push_back(Peer::From(reinterpret_cast<const sockaddr*>(&a), sizeof a));
    return v;
  }();
  static const Peer spine = V4(47000);
  static Leaf::TimePoint now{};
  static Sink sink(workers, spine);
  // One engine, control plane and leaf for the whole run; each input starts after every job timed
  // out, which is checked (see switch_fuzzer.cc).
  static std::unique_ptr<Engine> engine = MakeFastEngine(EngineLimits{kPoolSlots, 4});
  static std::unique_ptr<ControlPlane> cp = [] {
    ControlConfig cc;
    cc.max_jobs = 3;
    cc.job_timeout = std::chrono::seconds(1);
    cc.min_window = 2;
    cc.lease_calls = 0;
    cc.engine_keys = false;
    cc.doom_unknown = false;  // as ina-switchd configures a leaf's control plane
    cc.admin_secret = kAdmin;
    auto created = ControlPlane::Create(*engine, cc);
    FUZZ_CHECK(created.ok(), "Create: %s", created.status().ToString().c_str());
    return std::move(*created);
  }();
  static std::unique_ptr<Leaf> leaf = [] {
    LeafConfig lc;
    lc.upstream = spine;
    lc.index = 1;
    lc.leaves = 2;
    lc.job_timeout = std::chrono::milliseconds(1000);
    lc.upstream_admin = kSpineAdmin;
    auto l = std::make_unique<Leaf>(lc, *cp, sink);
    sink.leaf = l.get();
    sink.cp = cp.get();
    sink.now = &now;
    return l;
  }();
  auto tick = [&] {
    (void)cp->Tick(now, leaf->replies());
    leaf->Tick(now);
    (void)cp->HandleEngineFailures(leaf->replies());
  };
  for (int i = 0; i < 3; ++i) {
    now += std::chrono::seconds(3);
    tick();
  }
  FUZZ_CHECK(leaf->num_jobs() == 0, "%zu leaf jobs left", leaf->num_jobs());
  FUZZ_CHECK(cp->num_jobs() == 0 && cp->num_reserved() == 0, "%zu jobs, %zu reservations left",
             cp->num_jobs(), cp->num_reserved());
  FUZZ_CHECK(cp->LargestFreeExtent() == cp->pool_slots(), "free extent %u of %u after teardown",
             cp->LargestFreeExtent(), cp->pool_slots());
  FUZZ_CHECK(cp->InstallJobKey(kKeyedJob, proto::SecMode::kMac, kSecret).ok(), "InstallJobKey");
  sink.challenge = {};
  proto::Session spine_salt{};
  spine_salt[0] = 0x5A;
  FuzzReader in(data, size);
  std::vector<uint8_t> pkt;
  std::vector<uint8_t> scratch(proto::kMaxPacketBytes);
  constexpr auto kMac = static_cast<uint8_t>(proto::SecMode::kMac);

  while (!in.empty()) {
    // Job 1 keeps a key (a key goes with its job's end): its leaf job is always a keyed one.
    if (!cp->HasJobKey(kKeyedJob)) {
      FUZZ_CHECK(cp->InstallJobKey(kKeyedJob, proto::SecMode::kMac, kSecret).ok(), "InstallJobKey");
    }
    const uint8_t op = in.Byte();
    const size_t w = (op >> 3) % kWorkers;
    bool from_spine = false;
    bool sealed = true;
    switch (op % 5) {
      case 0: {  // a worker's control message
        proto::Header h;
        h.version = proto::kVersion;
        const uint8_t t = in.Byte();
        static constexpr proto::MsgType kTypes[] = {
            proto::MsgType::kJoin, proto::MsgType::kJoin, proto::MsgType::kLeave,
            proto::MsgType::kAllocJob, proto::MsgType::kHello};
        h.type = (t & 0x80) ? static_cast<proto::MsgType>(t % 16) : kTypes[t % 5];
        const uint8_t j = in.Byte();
        h.job = (j & 0x80) ? static_cast<uint16_t>(proto::kAllocJobMin + (j & 3)) : j % 4;
        h.exp = (j >> 2) % 4;  // JOIN: the epoch a re-join finished
        const uint8_t r = in.Byte();
        h.rank = static_cast<uint16_t>((r & 0x80) ? r % 8 : 4 + r % 4);
        h.aux = static_cast<uint16_t>((r & 0x40) ? in.Byte() : 8);  // world
        const uint8_t kw = in.Byte();
        h.count = (kw & 0x80) ? in.Byte() : ((kw & 1) ? 256 : 64);  // K
        h.offset = 1 + (kw >> 1) % 8;                               // window
        const uint8_t lanes = in.Byte();
        h.slot = lanes % 2;        // lane
        h.gen = (lanes >> 2) % 3;  // lanes (JOIN), nonce (ALLOC_JOB)
        sealed = !(lanes & 0x80);
        if ((t & 0xE0) == 0xE0) {
          // A launcher's SET_KEY: job 1's key again (it must stay mac under kSecret's tags, or
          // kOther's: then job 1's data does not open), or a job of its own (100 ..).
          static uint64_t seq = 0;
          if (!(r & 2)) ++seq;  // else the last sequence again: a replay
          const uint16_t job = (j & 1) ? kKeyedJob : static_cast<uint16_t>(100 + j % 4);
          // Mode 3 sometimes, for a job of its own: refused at the leaf (error(key_refused)).
          const auto mode = (job == kKeyedJob || (j & 2)) ? proto::SecMode::kMac
                            : (j & 8)                     ? static_cast<proto::SecMode>(3)
                                                          : proto::SecMode::kMacEncrypt;
          auto m = proto::SealSetKey((r & 1) ? kSpineAdmin : kAdmin, job, mode,
                                     (j & 4) ? kOther : kSecret, seq);
          FUZZ_CHECK(m.ok(), "SealSetKey");
          pkt = std::move(*m);
          if (lanes & 0x80) pkt[lanes % pkt.size()] ^= 1;  // damaged
          sealed = false;
          pkt.resize(pkt.size() + proto::kCrcBytes);  // kept whole below
          break;
        }
        if (!(t & 0x80) && (t & 0x40)) {
          // The proven JOIN answering this peer's last challenge: job 1's secret, or another.
          h.type = proto::MsgType::kJoin;
          h.sec = kMac;
          pkt.assign(proto::kHeaderBytes + proto::kTagBytes, 0);
          proto::EncodeHeader(h, pkt.data());
          FUZZ_CHECK(
              proto::SealJoinProof((t & 0x20) ? kOther : kSecret, sink.challenge[w], pkt.data())
                  .ok(),
              "SealJoinProof");
          if (lanes & 0x80) pkt[proto::kHeaderBytes + lanes % 16] ^= 1;  // damaged
          sealed = false;
          pkt.resize(pkt.size() + proto::kCrcBytes);  // kept whole below
          break;
        }
        pkt.assign(proto::MessageBytes(0), 0);
        proto::EncodeHeader(h, pkt.data());
        break;
      }
      case 1: {  // a worker's data packet
        proto::Header h;
        h.version = proto::kVersion;
        h.type = proto::MsgType::kData;
        const uint8_t a = in.Byte();
        h.job = a % 4;
        h.rank = static_cast<uint16_t>((a & 0x80) ? (a >> 2) % 8 : 4 + (a >> 2) % 4);
        h.slot = (a >> 4) % 4;
        const uint8_t g = in.Byte();
        h.gen = static_cast<uint16_t>(g % 6 - 1);
        h.flags = (g >> 3) % 8;
        h.exp = in.Byte();
        h.next_exp = in.Byte();
        const uint8_t cnt = in.Byte();
        h.count = (cnt & 0x80) ? static_cast<uint16_t>(cnt * 3) : cnt % 65;
        h.offset = static_cast<uint32_t>(in.Byte()) * ((cnt & 0x40) ? 1 : 64);
        const uint8_t how = in.Byte();
        const size_t payload = size_t{h.count} * proto::kElemBytes;
        if (h.job == kKeyedJob && !(how & 0x80)) {
          // Sealed under the local grant's up key, the gen as the use (as in a grant's first
          // 65536 uses); sometimes damaged.
          h.sec = kMac;
          pkt.assign(proto::MessageBytes(h.count, kMac), 0);
          proto::EncodeHeader(h, pkt.data());
          Payload(in, pkt, payload);
          auto keys = cp->GrantKeys(kKeyedJob);
          if (keys.ok() && keys->mode == proto::SecMode::kMac) {
            FUZZ_CHECK(proto::SealOnce(keys->up, proto::SecMode::kMac, pkt.data(),
                                       proto::kHeaderBytes + payload,
                                       proto::MakeNonce(h.rank, h.slot, h.gen)),
                       "SealOnce");
          }
          if (how & 0x40) pkt[proto::kHeaderBytes + how % 8] ^= 1;
          pkt.resize(pkt.size() + proto::kCrcBytes);  // kept whole below
          sealed = false;
          break;
        }
        sealed = !(how & 0x40);
        h.sec = (how & 0x20) ? kMac : 0;
        pkt.assign(proto::kHeaderBytes + payload + proto::kCrcBytes, 0);
        proto::EncodeHeader(h, pkt.data());
        Payload(in, pkt, payload);
        break;
      }
      case 2: {  // from the spine
        from_spine = true;
        proto::Header h;
        h.version = proto::kVersion;
        const uint8_t t = in.Byte();
        const uint8_t j = in.Byte();
        h.job = (j & 0x80) ? static_cast<uint16_t>(j % 4) : j % 4;
        h.rank = (j & 0x40) ? proto::kRankAll : 1;
        switch (t % 8) {
          case 0:
          case 1: {
            const uint8_t e = in.Byte();
            const uint8_t win = in.Byte();
            pkt.assign(proto::MessageBytes(0), 0);
            proto::JoinAckMsg{.job = h.job,
                              .rank = 1,
                              .job_timeout_ms = static_cast<uint16_t>((e & 0x80) ? 1000 : 0),
                              .epoch = static_cast<uint8_t>(1 + e % 4),
                              .k = static_cast<uint16_t>((win & 0x80) ? 256 : 64),
                              .window = 1u + win % 16,
                              // a lease (passed to the workers: their re-joins re-join the spine)
                              .lease = static_cast<uint16_t>((e & 0x40) ? 2 : 0)}
                .Encode(pkt.data());
            break;
          }
          case 2:
            pkt.assign(proto::MessageBytes(0), 0);
            proto::JoinWaitMsg{.job = h.job, .rank = 1, .queue_ahead = in.Byte()}.Encode(
                pkt.data());
            break;
          case 3: {
            pkt.assign(proto::MessageBytes(proto::kJoinChallengeBytes / proto::kElemBytes), 0);
            proto::JoinChallengeMsg{.job = h.job,
                                    .rank = static_cast<uint16_t>((j & 0x20) ? 0 : 1),
                                    .lane = 0,
                                    .payload_words = proto::kJoinChallengeBytes / proto::kElemBytes}
                .Encode(pkt.data());
            spine_salt[1] = in.Byte();
            proto::JoinChallenge{.nonce = {in.Byte()}, .salt = spine_salt}.EncodeTo(
                pkt.data() + proto::kHeaderBytes);
            break;
          }
          case 4: {
            pkt.assign(proto::MessageBytes(0), 0);
            proto::ErrorMsg e{.job = h.job, .rank = 1};
            e.code = static_cast<proto::ErrorCode>(in.Byte() % 12);
            e.count = in.Byte() % 3;
            e.Encode(pkt.data());
            break;
          }
          case 5:
          case 6: {  // a result
            h.type = proto::MsgType::kResult;
            h.slot = in.Byte() % 20;
            h.gen = static_cast<uint16_t>(in.Byte() % 4);
            const uint8_t cnt = in.Byte();
            h.count = (cnt & 0x80) ? 256 : cnt % 65;
            h.offset = static_cast<uint32_t>(h.slot) * ((cnt & 0x40) ? 256 : 64);
            h.flags = in.Byte() % 8;
            const size_t payload = size_t{h.count} * proto::kElemBytes;
            if (h.job == kKeyedJob && (t & 0x10)) {
              h.sec = kMac;
              pkt.assign(proto::MessageBytes(h.count, kMac) + proto::kCrcBytes, 0);
              proto::EncodeHeader(h, pkt.data());
              Payload(in, pkt, payload);
              auto down = proto::DeriveTrafficKey(kSecret, proto::KeyDirection::kDown, kKeyedJob,
                                                  (t & 0x20) ? 2 : 1, spine_salt);
              FUZZ_CHECK(down.ok(), "DeriveTrafficKey");
              FUZZ_CHECK(proto::SealOnce(*down, proto::SecMode::kMac, pkt.data(),
                                         proto::kHeaderBytes + payload,
                                         proto::MakeNonce(h.rank, h.slot, h.gen)),
                         "SealOnce");
              sealed = false;
            } else {
              pkt.assign(proto::MessageBytes(h.count), 0);
              proto::EncodeHeader(h, pkt.data());
              Payload(in, pkt, payload);
            }
            break;
          }
          default:  // an alloc_ack, a set_key_ack, or any type
            pkt.assign(proto::MessageBytes(0), 0);
            if ((t & 0xC0) == 0x40) {
              // The spine's answer to the last key passed on: an ack, or a refusal of its mode
              // (a spine whose engine cannot run it), which the leaf passes to the launcher.
              const uint64_t seq = sink.key_seq + ((j & 0x20) ? 1 : 0);
              if (j & 0x10) {
                proto::SetKeyRefused(sink.key_job, seq, 2).Encode(pkt.data());
              } else {
                proto::SetKeyAck(sink.key_job, seq).Encode(pkt.data());
              }
              break;
            }
            h.type = (t & 0x80) ? static_cast<proto::MsgType>(in.Byte() % 16)
                                : proto::MsgType::kAllocAck;
            h.gen = in.Byte() % 4;  // alloc_ack's nonce
            proto::EncodeHeader(h, pkt.data());
            break;
        }
        if (in.Byte() & 0x80) sealed = false;  // raw: the trailer left as it is
        break;
      }
      case 3:  // time
        now += std::chrono::milliseconds(size_t{in.Byte()} * 10);
        tick();
        CheckControlJobs(*cp);
        continue;
      default: {  // raw bytes
        from_spine = op & 0x80;
        const size_t len = in.Byte() % 64;
        sealed = in.Byte() & 1;
        pkt.assign(len + proto::kCrcBytes, 0);
        for (size_t i = 0; i < len; ++i) pkt[i] = in.Byte();
        break;
      }
    }
    if (sealed) {
      proto::SealMessage(pkt.data(), pkt.size() - proto::kCrcBytes);
    } else {
      pkt.resize(pkt.size() - proto::kCrcBytes);
    }
    // The data path's classification (hierarchy.h, datapath.cc).
    const std::span<const uint8_t> p(pkt);
    const Peer& from = from_spine ? spine : workers[w];
    if (from_spine) {
      leaf->HandleUpstream(p, now);
    } else if (p.size() >= proto::kHeaderBytes && proto::GetVersion(p.data()) == proto::kVersion &&
               ControlPlane::IsControlType(proto::GetType(p.data()))) {
      leaf->HandleWorkerControl(p, from, now);
    } else {
      const Leaf::MappedData m = leaf->MapData(p, from, scratch.data());
      if (!m.packet.empty()) {
        const auto q = m.packet;
        if (q.data() == scratch.data()) {
          // Mapped: resealed with a CRC32C; job 1's opened, the plaintext (a CRC-only job's packet
          // that says another mode goes on as it is: the engine drops it as drop_cross_job).
          FUZZ_CHECK(proto::MessageCrcOk(q), "a mapped packet with a bad trailer");
          FUZZ_CHECK(proto::GetJob(q.data()) != kKeyedJob || proto::GetSec(q.data()) == 0,
                     "job 1's packet for the engine not opened");
        }
        if (!(q.size() >= proto::kHeaderBytes && proto::GetVersion(q.data()) == proto::kVersion &&
              proto::GetType(q.data()) == proto::MsgType::kData &&
              cp->CheckDataSource(proto::GetJob(q.data()), proto::GetRank(q.data()),
                                  proto::GetSlot(q.data()), from, now) == SourceCheck::kForeign)) {
          engine->Process(q, sink);
          (void)cp->HandleEngineFailures(leaf->replies());
        }
      }
    }
    CheckControlJobs(*cp);
  }
  return 0;
}
