// libFuzzer target: a worker's acceptance of what the fabric sends (results, errors, join_ack),
// through the progress state machine SlotWindow (host/src/comm/slot_window.h) with a fake clock.
//
// Input: byte 0 = config (world 1 + b%4; K 256 if bit 2 else 64; window 1 + (b>>3)%4; int32 op
// if bit 5; two lanes if bit 6, this window lane b>>7), byte 1 = tensor size and, in its top two
// bits, the job's sec mode ((b >> 6) % 3: crc, mac, mac_encrypt; docs/security.md; a fixed test
// secret, grant 1, session zero), then records, each an op byte and its operands:
//   op%4 0: echo: (slot, dest, edits, sealed) a result built from the packet last sent on slot
//           `slot` (in a keyed job first opened with the up key, as the fabric does): type result,
//           rank = own or all (dest bit 0), then `edits` (pos, xor) byte edits, then sealed unless
//           `sealed` bit 0 is set (so most pass the CRC check, or in a keyed job the tag under
//           the down key, nonce (rank, slot, use = gen), and reach the field checks; some
//           exercise bad_crc and forged results).
//   op%4 1: raw: (len, sealed, bytes...) a packet of the input's bytes, sealed (CRC, or a tag
//           under the down key when it names this keyed job) or not.
//   op%4 2: control: (type, aux, count, offset, sealed) a header-only message for this job.
//   op%4 3: time: advance the clock by b ms (b = next byte), then timers and the progress check.
// After each record the queued packets are "sent" (remembered per slot for echo): each must be
// whole (CRC32C, or in a keyed job a tag that opens under the up key with nonce (rank, slot, use
// = gen)). OnPacket must return OK, Aborted or Internal (slot_window.h); a failed or finished op
// ends and the next op begins (its Begin may be Aborted once a peer left; then the input ends).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ina/host/quant.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/sec.h"
#include "ina/proto/wire.h"
#include "slot_window.h"
#include "support/fuzz_check.h"
#include "support/fuzz_reader.h"

namespace {

using ina::Status;
using ina::StatusCode;
using ina::host::internal::OpDesc;
using ina::host::internal::SlotWindow;
using ina::host::internal::TimePoint;
using ina::host::internal::WindowConfig;
namespace proto = ina::proto;

// The keyed job's secret, and its grant-1 traffic keys (session zero: the window's own before a
// grant names a salt).
const std::vector<uint8_t>& TestSecret() {
  static const std::vector<uint8_t> s(32, 0xC3);
  return s;
}
proto::TrafficKey TestKey(proto::KeyDirection d) {
  return proto::DeriveTrafficKey(TestSecret(), d, 7, 1, proto::Session{}).value();
}

proto::Nonce NonceOf(const uint8_t* h) {
  return proto::MakeNonce(proto::GetRank(h), proto::GetSlot(h), proto::GetGen(h));
}

struct Harness {
  explicit Harness(const WindowConfig& cfg)
      : window(cfg, ina::host::quant::ActiveKernels()),
        last(cfg.window),
        core_lanes(cfg.core_lanes),
        lanes(cfg.lanes),
        k(cfg.k),
        mode(cfg.sec),
        up(TestKey(proto::KeyDirection::kUp)),
        down(TestKey(proto::KeyDirection::kDown)) {}
  bool keyed() const { return proto::IsKeyed(mode); }

  void Drain(TimePoint now) {
    std::array<ina::host::TxMessage, 64> tx;
    while (window.tx_queued() > 0) {
      const size_t n = window.PeekTx(tx);
      FUZZ_CHECK(n > 0 && n <= window.tx_queued(), "PeekTx %zu of %zu", n, window.tx_queued());
      for (size_t i = 0; i < n; ++i) {
        FUZZ_CHECK(
            tx[i].len >= proto::kHeaderBytes + (keyed() ? proto::kTagBytes : proto::kCrcBytes) &&
                tx[i].len <= proto::kMaxPacketBytes,
            "sent %zu bytes", tx[i].len);
        const uint16_t slot = proto::GetSlot(tx[i].data);
        FUZZ_CHECK(slot < last.size(), "sent slot %u", slot);
        // Lanes on switch cores: core `lane`'s own numbers, slots below its share of the window
        // and offsets of its own blocks (K times the block's number there).
        FUZZ_CHECK(!core_lanes || slot < last.size() / lanes, "sent core slot %u of %zu", slot,
                   last.size() / lanes);
        FUZZ_CHECK(!core_lanes || proto::GetOffset(tx[i].data) % k == 0, "sent offset %u",
                   proto::GetOffset(tx[i].data));
        std::vector<uint8_t>& sent = last[slot];
        sent.assign(tx[i].data, tx[i].data + tx[i].len);
        if (!keyed()) {
          FUZZ_CHECK(proto::MessageCrcOk(sent), "sent an unsealed packet");
          continue;
        }
        FUZZ_CHECK(proto::GetSec(sent.data()) == static_cast<uint8_t>(mode), "sent sec %u",
                   unsigned{proto::GetSec(sent.data())});
        // Opened as the fabric opens it; kept with its plaintext payload and room for a trailer.
        plain.resize(sent.size());
        FUZZ_CHECK(proto::OpenOnce(up, mode, sent, NonceOf(sent.data()),
                                   plain.data() + proto::kHeaderBytes),
                   "sent a packet whose tag does not open under the up key");
        if (mode == proto::SecMode::kMacEncrypt) {
          std::copy(plain.begin() + proto::kHeaderBytes,
                    plain.end() - static_cast<std::ptrdiff_t>(proto::kTagBytes),
                    sent.begin() + proto::kHeaderBytes);
        }
      }
      window.OnSent(n, now);
    }
  }

  // A result (header and payload in msg[0, len), room after it) sealed as the fabric seals it:
  // the CRC32C trailer, or the tag under the down key. Returns the message's length.
  size_t Seal(std::vector<uint8_t>& msg, size_t len) const {
    if (!keyed() || len < proto::kHeaderBytes || proto::GetJob(msg.data()) != 7) {
      msg.resize(len + proto::kCrcBytes);
      return proto::SealMessage(msg.data(), len);
    }
    msg.resize(len + proto::kTagBytes);
    proto::SetSec(msg.data(), static_cast<uint8_t>(mode));
    FUZZ_CHECK(proto::SealOnce(down, mode, msg.data(), len, NonceOf(msg.data())), "SealOnce");
    return msg.size();
  }

  SlotWindow window;
  std::vector<std::vector<uint8_t>> last;  // per slot: the last packet sent (payload in the clear)
  const bool core_lanes;
  const uint16_t lanes, k;
  const proto::SecMode mode;
  const proto::TrafficKey up, down;
  std::vector<uint8_t> plain;
};

void CheckStatus(const Status& s) {
  FUZZ_CHECK(s.ok() || s.code() == StatusCode::kAborted || s.code() == StatusCode::kInternal,
             "OnPacket returned %s", s.ToString().c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  FuzzReader in(data, size);
  const uint8_t c = in.Byte();
  WindowConfig cfg;
  cfg.job_id = 7;
  cfg.world_size = static_cast<uint16_t>(1 + c % 4);
  cfg.rank = static_cast<uint16_t>(cfg.world_size - 1);
  cfg.k = (c & 4) ? 256 : 64;
  cfg.window = static_cast<uint16_t>(1 + (c >> 3) % 4);
  cfg.lanes = (c & 0x40) ? 2 : 1;
  cfg.lane = static_cast<uint16_t>(cfg.lanes == 2 ? c >> 7 : 0);
  const bool is_int = c & 0x20;
  const uint8_t b1 = in.Byte();
  const size_t n = 1 + (size_t{b1} * 37) % (size_t{cfg.k} * 6);
  cfg.sec = static_cast<proto::SecMode>((b1 >> 6) % 3);
  if (proto::IsKeyed(cfg.sec)) cfg.secret = ina::host::JobSecret(TestSecret());
  // The fourth value of those two bits (CRC-only too): lanes on switch cores, whose packets number
  // this lane's slots and blocks densely (core_lanes.h); their window is a multiple of the lanes.
  if ((b1 >> 6) == 3 && cfg.lanes == 2) {
    cfg.core_lanes = true;
    cfg.window = static_cast<uint16_t>(cfg.window + (cfg.window & 1));
  }

  Harness h(cfg);
  std::vector<float> f(n);
  std::vector<int32_t> iv(n);
  uint64_t seq = 0;
  TimePoint now{};
  auto begin = [&]() -> bool {
    for (size_t i = 0; i < n; ++i) {
      f[i] = static_cast<float>(static_cast<int>((i * 2654435761u + seq) % 2001) - 1000) / 8.0f;
      iv[i] = static_cast<int32_t>((i * 40503u + seq) % 100001) - 50000;
    }
    OpDesc op;
    op.is_float = !is_int;
    op.f = f.data();
    op.i = iv.data();
    op.n = n;
    op.seq = seq++;
    const Status s = h.window.Begin(op, now);
    if (!s.ok()) {
      FUZZ_CHECK(s.code() == StatusCode::kAborted, "Begin returned %s", s.ToString().c_str());
      return false;
    }
    h.Drain(now);
    return true;
  };
  if (!begin()) return 0;

  std::vector<uint8_t> pkt;
  while (!in.empty()) {
    const uint8_t op = in.Byte();
    Status s;
    bool packet = true;
    switch (op % 4) {
      case 0: {  // echo of a sent packet as a result
        const uint16_t slot = in.Byte() % cfg.window;
        const uint8_t dest = in.Byte();
        const uint8_t edits = in.Byte() % 8;
        if (h.last[slot].empty()) {
          packet = false;
          break;
        }
        pkt = h.last[slot];
        const size_t body = pkt.size() - (h.keyed() ? proto::kTagBytes : proto::kCrcBytes);
        proto::SetType(pkt.data(), proto::MsgType::kResult);
        proto::SetRank(pkt.data(), (dest & 1) ? proto::kRankAll : cfg.rank);
        proto::SetFlags(pkt.data(), proto::GetFlags(pkt.data()) & ~proto::flags::kRetx);
        for (uint8_t e = 0; e < edits; ++e) {
          const uint8_t pos = in.Byte();
          pkt[pos % body] ^= in.Byte();
        }
        if (!(in.Byte() & 1)) h.Seal(pkt, body);
        break;
      }
      case 1: {  // raw bytes
        const size_t len = std::min<size_t>(in.Byte() * 5, 1100);
        const bool sealed = in.Byte() & 1;
        pkt.assign(len, 0);
        for (size_t i = 0; i < len; ++i) pkt[i] = in.Byte();
        if (sealed) h.Seal(pkt, len);
        break;
      }
      case 2: {  // a control message for this job
        pkt.assign(proto::MessageBytes(0), 0);
        proto::Header hd;
        hd.version = proto::kVersion;
        hd.type = static_cast<proto::MsgType>(in.Byte() % 10);
        hd.job = cfg.job_id;
        hd.rank = cfg.rank;
        hd.aux = in.Byte() % 10;
        hd.count = in.Byte();
        hd.offset = in.Byte();
        proto::EncodeHeader(hd, pkt.data());
        if (!(in.Byte() & 1)) proto::SealMessage(pkt.data(), proto::kHeaderBytes);
        break;
      }
      default: {  // time passes
        packet = false;
        now += std::chrono::milliseconds(in.Byte());
        h.window.OnTimers(now);
        const TimePoint next = h.window.NextDeadline();
        FUZZ_CHECK(!h.window.active() || next != TimePoint::max() || h.window.done(),
                   "active op without a deadline");
        s = h.window.CheckProgress(now);
        FUZZ_CHECK(s.ok() || s.code() == StatusCode::kDeadlineExceeded, "CheckProgress: %s",
                   s.ToString().c_str());
        break;
      }
    }
    if (packet) {
      s = h.window.OnPacket(pkt, now);
      CheckStatus(s);
    }
    h.Drain(now);
    FUZZ_CHECK(h.window.blocks_remaining() >= 0, "remaining %lld",
               static_cast<long long>(h.window.blocks_remaining()));
    if (!s.ok() || h.window.done()) {
      h.window.End();
      if (!begin()) return 0;
    }
  }
  h.window.End();
  return 0;
}
