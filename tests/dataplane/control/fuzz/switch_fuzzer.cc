// libFuzzer target: the switch's parsers and the control plane as a state machine. A ControlPlane
// (dataplane/include/ina/dp/control.h) drives a fast engine, and packets are classified as
// ina-switchd's loop does (switch.h): control types to HandleControl, data through the source
// check (CheckDataSource) to the engine, everything else to the engine, which counts it.
//
// Input: records, each an op byte and its operands, from one of 6 peers (IPv4 and IPv6):
//   op%4 0: a control message: type (join, leave, alloc_job, hello; 1 in 8 any, set_key among them:
//           the plane has an admin secret, docs/security.md; a SET_KEY sealed under it, job 1's
//           key again or a mode no fabric takes, fresh or replayed; or a proven JOIN answering the
//           last join_challenge its peer got, under job 1's secret or another), job (0..3 or an
//           alloc-range id), the grant epoch a JOIN re-joins after (0..3), a leaf's tree_world
//           (0, 2, 4 or 6: none, below, at and above the world), rank, world, K,
//           window (0..15 of a pool of 16: jobs share it and wait), lane, lanes, aux (a LEAVE's
//           reason: done, an abort, or a leaf's refusal, peer_refused, mostly; a JOIN's release
//           flag: a re-join for an idle job's release, which Tick asks while jobs wait), sometimes
//           a body; sealed unless a flag says raw (so most get past the CRC check).
//   op%4 1: a data packet: job, rank, slot, gen, count (<= K mostly), offset, flags, a payload;
//           sealed unless a flag says raw.
//   op%4 2: time passes (0..2.5 s) and Tick runs (job_timeout 1 s, idle_release 0.5 s).
//   op%4 3: raw bytes (sealed or not).
// Checked after every record: every reply and result is a whole message with a good CRC32C
// trailer; replies are join_ack, join_wait, join_pending (of a job still pending, naming a rank
// below its world), error (key_refused naming the refused mode only),
// alloc_ack, hello_ack (one core, a K of the spec), set_key_ack (job 1's only) or join_challenge
// (for job 1 only, naming its key's mode, with its nonce as the body); a result is for a job the
// control plane has active and goes to at least one peer; the control plane's job table is
// consistent (Jobs() has num_jobs() entries, each active job's slots lie in the pool, no two
// overlap, the largest free extent fits in what is left), and between inputs every job's teardown
// gives the whole pool back. Job 1 has a key (mode mac) in every input: its data take the keyed
// rules.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "ina/dp/control.h"
#include "ina/dp/fast_engine.h"
#include "ina/dp/ref_engine.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/sec.h"
#include "ina/proto/wire.h"
#include "support/control_check.h"
#include "support/fuzz_check.h"
#include "support/fuzz_reader.h"

namespace {

using namespace ina::dp;
namespace proto = ina::proto;

constexpr uint32_t kPoolSlots = 16;
const std::vector<uint8_t> kAdminSecret(32, 0xA5);  // the plane's admin channel
constexpr size_t kPeers = 6;

void CheckMessage(std::span<const uint8_t> p, const char* what) {
  FUZZ_CHECK(p.size() >= proto::MessageBytes(0) && p.size() <= proto::kMaxPacketBytes,
             "%s of %zu bytes", what, p.size());
  FUZZ_CHECK(proto::MessageCrcOk(p), "%s with a bad trailer", what);
  FUZZ_CHECK(proto::GetVersion(p.data()) == proto::kVersion, "%s of version %u", what,
             proto::GetVersion(p.data()));
  FUZZ_CHECK(p.size() == proto::MessageBytes(proto::GetCount(p.data())) ||
                 proto::GetType(p.data()) != proto::MsgType::kResult,
             "result length %zu for count %u", p.size(), proto::GetCount(p.data()));
}

class Replies final : public ReplySink {
 public:
  Replies(const std::vector<Peer>& peers, ControlPlane*& cp) : peers_(peers), cp_(cp) {}
  void Send(const Peer& to, std::span<const uint8_t> p) override {
    CheckMessage(p, "reply");
    const proto::MsgType t = proto::GetType(p.data());
    if (t == proto::MsgType::kJoinChallenge) {
      FUZZ_CHECK(proto::GetJob(p.data()) == 1, "join_challenge for job %u, which has no key",
                 proto::GetJob(p.data()));
      FUZZ_CHECK(p.size() == proto::MessageBytes(proto::kJoinChallengeBytes / proto::kElemBytes),
                 "join_challenge of %zu bytes", p.size());
      FUZZ_CHECK(proto::JoinChallengeMsg::Decode(p.data()).mode ==
                     static_cast<uint16_t>(proto::SecMode::kMac),
                 "join_challenge naming mode %u, job 1's key is mac",
                 unsigned{proto::JoinChallengeMsg::Decode(p.data()).mode});
      for (size_t i = 0; i < peers_.size(); ++i) {
        if (peers_[i] == to) nonce[i] = proto::JoinChallenge::From(p.data() + proto::kHeaderBytes);
      }
    } else {
      FUZZ_CHECK(p.size() == proto::MessageBytes(0), "reply with a body");
      FUZZ_CHECK(t == proto::MsgType::kJoinAck || t == proto::MsgType::kJoinWait ||
                     t == proto::MsgType::kError || t == proto::MsgType::kAllocAck ||
                     t == proto::MsgType::kHelloAck || t == proto::MsgType::kSetKeyAck ||
                     t == proto::MsgType::kJoinPending,
                 "reply of type %u", unsigned{p.data()[proto::kTypeOffset]});
      if (t == proto::MsgType::kJoinPending) {
        // Only for a job still waiting for ranks: who joined, and the lowest that has not.
        const auto pending = proto::JoinPendingMsg::Decode(p.data());
        FUZZ_CHECK(cp_->IsPending(pending.job) && pending.joined < pending.world_size &&
                       pending.missing_rank < pending.world_size && pending.scope <= 1,
                   "join_pending for job %u (pending %d): %u of %u joined, rank %u missing",
                   pending.job, cp_->IsPending(pending.job), unsigned{pending.joined},
                   unsigned{pending.world_size}, unsigned{pending.missing_rank});
      }
      if (t == proto::MsgType::kSetKeyAck) {
        FUZZ_CHECK(proto::GetJob(p.data()) == 1, "set_key_ack for job %u: only job 1's is taken",
                   proto::GetJob(p.data()));
      }
      if (t == proto::MsgType::kError &&
          proto::ErrorMsg::Decode(p.data()).code == proto::ErrorCode::kKeyRefused) {
        const auto e = proto::ErrorMsg::Decode(p.data());
        FUZZ_CHECK(e.join_param() == proto::JoinParam::kSecMode &&
                       (e.key_mode() == 0 || e.key_mode() == 3),
                   "key_refused naming param %u mode %u", unsigned{e.slot}, unsigned{e.key_mode()});
      }
      if (t == proto::MsgType::kHelloAck) {
        const auto ack = proto::HelloAckMsg::Decode(p.data());
        FUZZ_CHECK(ack.core_ports == 1 && proto::IsValidK(ack.max_k),
                   "hello_ack says %u cores, K %u", unsigned{ack.core_ports}, unsigned{ack.max_k});
      }
    }
    ++sent;
  }
  size_t sent = 0;
  std::array<proto::JoinChallenge, kPeers> nonce{};  // the last join_challenge's, per peer

 private:
  const std::vector<Peer>& peers_;
  ControlPlane*& cp_;
};

class Results final : public Emitter {
 public:
  explicit Results(ControlPlane*& cp) : cp_(cp) {}
  void OnResult(uint16_t job, uint16_t dest, std::span<const uint8_t> p) override {
    CheckMessage(p, "result");
    FUZZ_CHECK(proto::GetJob(p.data()) == job && proto::GetRank(p.data()) == dest,
               "result header names job %u rank %u, emitted for %u / %u", proto::GetJob(p.data()),
               proto::GetRank(p.data()), job, dest);
    FUZZ_CHECK(!cp_->Destinations(job, dest, proto::GetSlot(p.data())).empty(),
               "result for job %u rank %u slot %u that the control plane has no peer for", job,
               dest, proto::GetSlot(p.data()));
  }

 private:
  ControlPlane*& cp_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<Peer> peers = [] {
    std::vector<Peer> v;
    for (size_t i = 0; i < kPeers; ++i) {
      if (i < kPeers - 1) {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(40000 + i));
        a.sin_addr.s_addr = htonl(0x7f000001);
        v.push_back(Peer::From(reinterpret_cast<const sockaddr*>(&a), sizeof a));
      } else {
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(40000);
        a.sin6_addr = in6addr_loopback;
        v.push_back(Peer::From(reinterpret_cast<const sockaddr*>(&a), sizeof a));
      }
    }
    return v;
  }();

  // One engine and control plane for the whole run (a fresh pair per input would spend nearly all
  // the time mapping and zeroing their job tables). Each input starts after a Tick past the job
  // timeout, which must have freed every job and reservation and given the whole pool back: the
  // teardown is checked as well.
  static std::unique_ptr<Engine> engine = MakeFastEngine(EngineLimits{kPoolSlots, 4});
  static std::unique_ptr<ControlPlane> owner = [] {
    ControlConfig cc;
    cc.max_jobs = 3;
    cc.job_timeout = std::chrono::seconds(1);
    cc.idle_release = std::chrono::milliseconds(500);  // within a job timeout: reachable
    cc.min_window = 2;
    cc.lease_calls = 2;
    cc.admin_secret = kAdminSecret;
    auto created = ControlPlane::Create(*engine, cc);
    FUZZ_CHECK(created.ok(), "Create: %s", created.status().ToString().c_str());
    return std::move(*created);
  }();
  static ControlPlane::TimePoint now{};
  ControlPlane* cp = owner.get();
  Replies replies(peers, cp);
  Results results(cp);
  now += std::chrono::seconds(3);
  cp->Tick(now, replies);
  FUZZ_CHECK(cp->num_jobs() == 0 && cp->num_reserved() == 0, "%zu jobs, %zu reservations left",
             cp->num_jobs(), cp->num_reserved());
  FUZZ_CHECK(cp->LargestFreeExtent() == cp->pool_slots(), "free extent %u of %u after teardown",
             cp->LargestFreeExtent(), cp->pool_slots());
  now += std::chrono::seconds(3);  // nothing of the last input is within a timeout any more
  static const std::vector<uint8_t> kJob1Secret(32, 0x3C), kOtherSecret(32, 0x3E);
  FUZZ_CHECK(cp->InstallJobKey(1, proto::SecMode::kMac, kJob1Secret).ok(), "InstallJobKey");
  FuzzReader in(data, size);
  std::vector<uint8_t> pkt;

  while (!in.empty()) {
    const uint8_t op = in.Byte();
    const size_t from_index = (op >> 2) % kPeers;
    const Peer& from = peers[from_index];
    bool sealed = true;
    switch (op % 4) {
      case 0: {  // control message
        proto::Header h;
        h.version = proto::kVersion;
        const uint8_t t = in.Byte();
        static constexpr proto::MsgType kTypes[] = {
            proto::MsgType::kJoin, proto::MsgType::kJoin, proto::MsgType::kLeave,
            proto::MsgType::kAllocJob, proto::MsgType::kHello};
        h.type = (t & 0x80) ? static_cast<proto::MsgType>(t % 16) : kTypes[t % 5];
        const uint8_t j = in.Byte();
        h.job = (j & 0x80) ? static_cast<uint16_t>(proto::kAllocJobMin + (j & 3)) : j % 4;
        h.exp = (j >> 2) % 4;                              // JOIN: the epoch a re-join finished
        h.next_exp = (j & 0x40) ? ((j >> 4) & 3) * 2 : 0;  // JOIN: a leaf's tree_world, or none
        const uint8_t r = in.Byte();
        h.rank = r % 4;
        h.aux = static_cast<uint16_t>((r & 0x80) ? in.Byte() : 1 + (r >> 2) % 3);  // world
        if (h.type == proto::MsgType::kLeave && !(r & 0x80)) {
          // A LEAVE's reason: done, an abort, or a leaf's refusal of one of its workers (the
          // refused rank, join_param and value in count, slot and offset).
          static constexpr uint16_t kReasons[] = {
              0, static_cast<uint16_t>(proto::ErrorCode::kJobAborted),
              static_cast<uint16_t>(proto::ErrorCode::kPeerRefused)};
          h.aux = kReasons[(r >> 2) % 3];
        }
        const uint8_t kw = in.Byte();
        h.count = (kw & 0x80) ? in.Byte() : ((kw & 1) ? 256 : 64);  // K
        h.offset = (kw >> 1) % 6 * 3;                               // window
        const uint8_t lanes = in.Byte();
        h.slot = lanes % 3;        // lane
        h.gen = (lanes >> 2) % 3;  // lanes (JOIN), nonce (ALLOC_JOB)
        sealed = !(lanes & 0x80);
        // JOIN: a re-join for a release (flags 1: idle jobs are asked while another waits), or not.
        if (h.type == proto::MsgType::kJoin && (lanes & 0x20)) h.flags = 1;
        if (!(t & 0x80) && (t & 0x40)) {
          // The proven JOIN answering this peer's last challenge: job 1's secret, or another.
          static const std::vector<uint8_t> kOther(32, 0x3D);
          h.type = proto::MsgType::kJoin;
          h.sec = static_cast<uint8_t>(proto::SecMode::kMac);
          pkt.assign(proto::kHeaderBytes + proto::kTagBytes, 0);
          proto::EncodeHeader(h, pkt.data());
          FUZZ_CHECK(proto::SealJoinProof((t & 0x20) ? kOther : kJob1Secret,
                                          replies.nonce[from_index], pkt.data())
                         .ok(),
                     "SealJoinProof");
          if (lanes & 0x80) pkt[proto::kHeaderBytes + lanes % 16] ^= 1;  // damaged
          sealed = false;
          pkt.resize(pkt.size() + proto::kCrcBytes);  // kept whole below
          break;
        }
        if (!(t & 0x80) && (t & 0x20) && (lanes & 0x10)) {
          // A SET_KEY under the plane's admin secret (a growing sequence, or the last again: a
          // replay): job 1's key again (mac, kept), or a mode no fabric takes (0, 3: refused with
          // error(key_refused), nothing installed), sometimes damaged.
          static uint64_t seq = 0;
          if (!(r & 0x40)) ++seq;
          const bool again = kw & 0x40;
          const auto mode =
              again ? proto::SecMode::kMac : static_cast<proto::SecMode>((kw & 0x20) ? 3 : 0);
          auto m = proto::SealSetKey(kAdminSecret, again ? 1 : h.job, mode,
                                     again ? kJob1Secret : kOtherSecret, seq);
          FUZZ_CHECK(m.ok(), "SealSetKey");
          pkt = std::move(*m);
          if (lanes & 0x80) pkt[lanes % pkt.size()] ^= 1;  // damaged
          sealed = false;
          pkt.resize(pkt.size() + proto::kCrcBytes);  // kept whole below
          break;
        }
        const size_t body = (lanes & 0x40) ? in.Byte() % 9 : 0;
        pkt.assign(proto::kHeaderBytes + body + proto::kCrcBytes, 0);
        proto::EncodeHeader(h, pkt.data());
        break;
      }
      case 1: {  // data packet
        proto::Header h;
        h.version = proto::kVersion;
        h.type = proto::MsgType::kData;
        const uint8_t a = in.Byte();
        h.job = a % 4;
        h.rank = (a >> 2) % 4;
        h.slot = (a >> 4) % 4;
        sealed = !(a & 0x40);
        const uint8_t g = in.Byte();
        h.gen = static_cast<uint16_t>(g % 6 - 2);
        h.flags = (g >> 3) % 8;
        h.exp = in.Byte();
        h.next_exp = in.Byte();
        const uint8_t cnt = in.Byte();
        h.count = (cnt & 0x80) ? static_cast<uint16_t>(cnt * 3) : cnt % 65;
        h.offset = in.Byte();
        const size_t payload = (cnt & 0x40) ? in.Byte() : size_t{h.count} * proto::kElemBytes;
        pkt.assign(proto::kHeaderBytes + payload + proto::kCrcBytes, 0);
        proto::EncodeHeader(h, pkt.data());
        for (size_t i = 0; i < payload; i += 4) pkt[proto::kHeaderBytes + i + 3] = in.Byte();
        break;
      }
      case 2: {  // time
        now += std::chrono::milliseconds(size_t{in.Byte()} * 10);
        cp->Tick(now, replies);
        CheckControlJobs(*cp);
        continue;
      }
      default: {  // raw bytes
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
    // ina-switchd's classification (switch.h).
    const std::span<const uint8_t> p(pkt);
    if (p.size() >= proto::kHeaderBytes && proto::GetVersion(p.data()) == proto::kVersion &&
        ControlPlane::IsControlType(proto::GetType(p.data()))) {
      cp->HandleControl(p, from, now, replies);
    } else if (p.size() >= proto::kHeaderBytes && proto::GetVersion(p.data()) == proto::kVersion &&
               proto::GetType(p.data()) == proto::MsgType::kData &&
               cp->CheckDataSource(proto::GetJob(p.data()), proto::GetRank(p.data()),
                                   proto::GetSlot(p.data()), from, now) == SourceCheck::kForeign) {
      // drop_foreign_src: the engine never sees it
    } else {
      engine->Process(p, results);
    }
    CheckControlJobs(*cp);
  }
  return 0;
}
