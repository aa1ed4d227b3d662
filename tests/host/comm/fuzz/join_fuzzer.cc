// libFuzzer target: a worker's join, the state machine Membership (host/src/comm/membership.h)
// with a fake clock, and what it accepts from the fabric: join_ack, join_wait, error and the
// join_challenge of a keyed job (docs/security.md, "JOIN proves knowledge of the key"), whose
// answer, the proven JOIN, is built from the challenge's bytes.
//
// Input: byte 0 = config (keyed if bit 0: a fixed test secret; two lanes if bit 1, this lane bit
// 2; a re-join after grant 1 + byte 1 % 255 if bit 3; world 1 + (b >> 4) % 4, rank (b >> 6) %
// world; window 1 + byte 1 % 8), then records, each an op byte and its operands:
//   op%6 0: join_ack (window, its release 0/1/2 from the same byte, epoch, lease, k-ok, flags):
//           flags bit 0 another job, bit 1 unsealed, bit 2 another version.
//   op%6 1: join_wait (ahead, flags).
//   op%6 2: join_challenge (32 payload bytes: nonce and salt; flags: bit 0 another job, bit 1
//           unsealed, bit 2 another rank, bit 3 another lane, bit 4 a payload 4 bytes short,
//           bit 5 the nonce of the previous challenge again, bit 6 naming the key's mode: bit 7
//           clear mac, set mac_encrypt; a keyed lane runs mac or mac_encrypt).
//   op%6 3: error (code, slot, count, offset, flags).
//   op%6 4: raw (len, sealed, bytes...): the input's bytes as a message, sealed (CRC) or not.
//   op%6 5: driver (b): advance the clock by (b >> 3) * 137 ms, then OnTimers; b%8 == 1 a
//           transport error Unavailable, 2 another error, 3 Cancel, 4 Leave, 5 Join again (when
//           not joining; a re-join for a release if bit 3 of b), 6 CallWaits, 7 RestartSlotWait.
// After each record the queued messages are "sent": each must be a JOIN or a LEAVE of this job,
// sealed: CRC32C, or a proven JOIN (sec mac, header and tag) that verifies (JoinProofOk) under the
// test secret and one of the challenges sent to this lane. Always: a member's grant is within what
// was asked (window 1 .. asked, epoch 1 .. 255); a failed join has an error Status; a joining lane
// has a deadline; a CRC-only lane that gets a valid challenge while joining, or any lane one that
// names another mode than its own, fails with FailedPrecondition.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ina/proto/crc32c.h"
#include "ina/proto/sec.h"
#include "ina/proto/wire.h"
#include "membership.h"
#include "support/fuzz_check.h"
#include "support/fuzz_reader.h"

namespace {

using ina::StatusCode;
using ina::host::internal::JoinConfig;
using ina::host::internal::Membership;
using ina::host::internal::TimePoint;
namespace proto = ina::proto;

constexpr uint16_t kJob = 7;

const std::vector<uint8_t>& TestSecret() {
  static const std::vector<uint8_t> s(32, 0x5A);
  return s;
}

struct Harness {
  explicit Harness(const JoinConfig& c) : cfg(c), m(c) {}

  // A message for this lane (or another job, rank, lane, version), with `payload`, sealed or not.
  std::vector<uint8_t> Message(proto::MsgType type, proto::Header h,
                               std::span<const uint8_t> payload, uint8_t flags) {
    h.version = (flags & 4) ? static_cast<uint8_t>(proto::kVersion + 1) : proto::kVersion;
    h.type = type;
    h.job = (flags & 1) ? static_cast<uint16_t>(kJob + 1) : kJob;
    std::vector<uint8_t> b(proto::kHeaderBytes + payload.size() + proto::kCrcBytes);
    proto::EncodeHeader(h, b.data());
    std::copy(payload.begin(), payload.end(), b.begin() + proto::kHeaderBytes);
    if (!(flags & 2)) proto::SealMessage(b.data(), b.size() - proto::kCrcBytes);
    return b;
  }

  void Drain() {
    std::array<ina::host::TxMessage, 16> tx;
    while (m.tx_queued() > 0) {
      const size_t n = m.PeekTx(tx);
      FUZZ_CHECK(n > 0 && n <= m.tx_queued(), "PeekTx %zu of %zu", n, m.tx_queued());
      for (size_t i = 0; i < n; ++i) Check(tx[i]);
      m.OnSent(n, now);
    }
  }

  void Check(const ina::host::TxMessage& t) {
    FUZZ_CHECK(t.len >= proto::kHeaderBytes + proto::kCrcBytes && t.len <= proto::kMaxPacketBytes,
               "sent %zu bytes", t.len);
    const proto::Header h = proto::DecodeHeader(t.data);
    FUZZ_CHECK(h.job == kJob && h.rank == cfg.rank, "sent job %u rank %u", h.job, h.rank);
    FUZZ_CHECK(h.type == proto::MsgType::kJoin || h.type == proto::MsgType::kLeave, "sent type %u",
               static_cast<unsigned>(h.type));
    const std::span<const uint8_t> msg(t.data, t.len);
    if (h.type == proto::MsgType::kJoin && h.sec == static_cast<uint8_t>(proto::SecMode::kMac)) {
      FUZZ_CHECK(!cfg.secret.empty(), "a proven JOIN from a CRC-only lane");
      FUZZ_CHECK(t.len == proto::kHeaderBytes + proto::kTagBytes, "proof of %zu bytes", t.len);
      const bool ok = std::any_of(challenges.begin(), challenges.end(), [&](const auto& c) {
        return proto::JoinProofOk(TestSecret(), c, msg);
      });
      FUZZ_CHECK(ok, "a proven JOIN that no challenge sent to this lane verifies");
      ++proofs;
    } else {
      FUZZ_CHECK(h.sec == 0 && proto::MessageCrcOk(msg), "an unsealed message (sec %u)", h.sec);
    }
  }

  void CheckState() {
    switch (m.state()) {
      case Membership::State::kMember:
        FUZZ_CHECK(m.grant().window >= 1 && m.grant().window <= cfg.window,
                   "granted window %u of %u", m.grant().window, cfg.window);
        FUZZ_CHECK(m.grant().epoch >= 1, "grant epoch 0");
        FUZZ_CHECK(m.result().ok(), "a member without a grant");
        break;
      case Membership::State::kFailed:
        FUZZ_CHECK(!m.status().ok(), "failed with an OK status");
        FUZZ_CHECK(!m.result().ok(), "failed with a grant");
        break;
      case Membership::State::kJoining:
      case Membership::State::kQueued:
        FUZZ_CHECK(m.NextDeadline() != TimePoint::max(), "joining without a deadline");
        break;
      case Membership::State::kOut:
        break;
    }
    FUZZ_CHECK(m.tx_queued() <= 4, "%zu messages queued", m.tx_queued());
  }

  JoinConfig cfg;
  Membership m;
  TimePoint now = TimePoint{} + std::chrono::hours(1);
  std::vector<proto::JoinChallenge> challenges;  // sent to this lane
  uint64_t proofs = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzReader in(data, size);
  const uint8_t c0 = in.Byte(), c1 = in.Byte();
  JoinConfig cfg;
  cfg.job_id = kJob;
  cfg.world_size = static_cast<uint16_t>(1 + (c0 >> 4) % 4);
  cfg.rank = static_cast<uint16_t>((c0 >> 6) % cfg.world_size);
  cfg.k = 256;
  cfg.window = static_cast<uint16_t>(1 + c1 % 8);
  if (c0 & 2) {
    cfg.lanes = 2;
    cfg.lane = (c0 >> 2) & 1;
  }
  if (c0 & 1) {
    cfg.secret = ina::host::JobSecret(TestSecret());
    cfg.mode = (c1 & 0x80) ? proto::SecMode::kMacEncrypt : proto::SecMode::kMac;
  }
  cfg.where = "fuzz";
  Harness x(cfg);
  x.m.Join((c0 & 8) ? static_cast<uint8_t>(1 + c1 % 255) : 0, x.now);
  x.Drain();
  x.CheckState();

  for (int steps = 0; !in.empty() && steps < 256; ++steps) {
    const uint8_t op = in.Byte();
    const bool was_joining = x.m.joining();
    proto::Header h;
    h.rank = cfg.rank;
    h.slot = cfg.lanes > 1 ? cfg.lane : 0;
    switch (op % 6) {
      case 0: {  // join_ack
        const uint8_t window = in.Byte(), epoch = in.Byte(), lease = in.Byte(), kok = in.Byte();
        h.offset = window % 12;
        h.exp = static_cast<uint8_t>((window >> 4) % 3);  // release: a grant, asked, or stands
        h.gen = epoch;
        h.aux = lease;
        h.count = (kok & 1) ? cfg.k : static_cast<uint16_t>(64 * (kok >> 1));
        x.m.OnPacket(x.Message(proto::MsgType::kJoinAck, h, {}, in.Byte()), x.now);
        break;
      }
      case 1: {  // join_wait, or join_pending (the job waits for ranks: joined, world, missing)
        const uint8_t a = in.Byte();
        h.aux = a;
        if (a & 0x80) {
          h.count = in.Byte();
          h.offset = in.Byte();
          h.slot = in.Byte() % 8;
          h.next_exp = a % 4;  // scope 0 .. 2, and one no fabric sends
        }
        x.m.OnPacket(
            x.Message((a & 0x80) ? proto::MsgType::kJoinPending : proto::MsgType::kJoinWait, h, {},
                      in.Byte()),
            x.now);
        break;
      }
      case 2: {  // join_challenge
        std::array<uint8_t, proto::kJoinChallengeBytes> payload;
        for (auto& b : payload) b = in.Byte();
        const uint8_t flags = in.Byte();
        if ((flags & 32) && !x.challenges.empty()) x.challenges.back().EncodeTo(payload.data());
        if (flags & 4) h.rank = static_cast<uint16_t>(h.rank + 1);
        if (flags & 8) h.slot = static_cast<uint16_t>(h.slot + 1);
        h.count = proto::kJoinChallengeBytes / proto::kElemBytes;
        if (flags & 64) h.aux = static_cast<uint16_t>(1 + (flags >> 7));  // the key's mode
        const size_t len = (flags & 16) ? payload.size() - 4 : payload.size();
        const bool valid = !(flags & (1 | 2 | 4 | 8 | 16));  // this lane's, whole, sealed
        if (valid) x.challenges.push_back(proto::JoinChallenge::From(payload.data()));
        x.m.OnPacket(x.Message(proto::MsgType::kJoinChallenge, h,
                               std::span<const uint8_t>(payload.data(), len), flags & 0x0B),
                     x.now);
        if (valid && was_joining && cfg.secret.empty()) {
          FUZZ_CHECK(x.m.state() == Membership::State::kFailed &&
                         x.m.status().code() == StatusCode::kFailedPrecondition,
                     "a CRC-only lane answered a challenge (state %d)",
                     static_cast<int>(x.m.state()));
        }
        if (valid && was_joining && h.aux != 0 && h.aux != static_cast<uint16_t>(cfg.mode)) {
          FUZZ_CHECK(x.m.state() == Membership::State::kFailed &&
                         x.m.status().code() == StatusCode::kFailedPrecondition,
                     "a lane of mode %u answered a challenge naming mode %u (state %d)",
                     static_cast<unsigned>(cfg.mode), static_cast<unsigned>(h.aux),
                     static_cast<int>(x.m.state()));
        }
        break;
      }
      case 3: {  // error
        h.aux = in.Byte();
        h.slot = in.Byte();
        h.count = in.Byte();
        h.offset = in.Byte();
        x.m.OnPacket(x.Message(proto::MsgType::kError, h, {}, in.Byte()), x.now);
        break;
      }
      case 4: {  // raw
        std::vector<uint8_t> b(in.Byte() % 80);
        const bool sealed = in.Byte() & 1;
        for (auto& v : b) v = in.Byte();
        if (b.size() >= proto::kHeaderBytes + proto::kCrcBytes) {
          proto::Store16(&b[proto::kJobOffset], kJob);
          if (sealed) proto::SealMessage(b.data(), b.size() - proto::kCrcBytes);
        }
        x.m.OnPacket(b, x.now);
        break;
      }
      default: {  // driver
        const uint8_t b = in.Byte();
        x.now += std::chrono::milliseconds(137 * (b >> 3));
        switch (b % 8) {
          case 1:
            x.m.OnTransportError(ina::Unavailable("fuzz: connection refused"));
            break;
          case 2:
            x.m.OnTransportError(ina::Internal("fuzz: the transport broke"));
            break;
          case 3:
            x.m.Cancel();
            break;
          case 4:
            x.m.Leave(proto::ErrorCode::kNone, b);
            break;
          case 5:
            if (!x.m.joining()) x.m.Join(x.m.grant().epoch, x.now, (b >> 3) & 1);  // for a release?
            break;
          case 6:
            x.m.CallWaits();  // a call waits while a released job is queued
            break;
          case 7:
            x.m.RestartSlotWait(x.now);  // idle: the slot wait starts again
            break;
          default:
            break;
        }
        x.m.OnTimers(x.now);
        break;
      }
    }
    x.Drain();
    x.CheckState();
  }
  return 0;
}
