#include "slot_window.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core_lanes.h"
#include "ina/proto/crc32c.h"
#include "membership.h"

namespace ina::host::internal {

using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace {

// Lane `lane`'s slots of a window of `window` (lanes `lanes`): that many results come back per
// round trip.
int64_t LaneSlots(uint16_t window, uint16_t lane, uint16_t lanes) {
  return std::max<int64_t>(1, (window + lanes - 1 - lane) / lanes);
}

}  // namespace

WindowConfig WindowConfig::From(const CommConfig& c, uint16_t granted_window, uint16_t lane) {
  WindowConfig w;
  w.lane = lane;
  w.lanes = static_cast<uint16_t>(c.progress_threads);
  w.job_id = c.job_id;
  w.rank = c.rank;
  w.world_size = c.world_size;
  w.k = c.k;
  w.window = granted_window;
  w.core_lanes = c.switch_cores > 1;
  // A later grant is never above what was asked (of each core, on switch cores).
  w.capacity =
      w.core_lanes ? static_cast<uint16_t>(CoreWindow(c.window, w.lanes) * w.lanes) : c.window;
  w.progress_timeout = milliseconds(c.progress_timeout_ms);
  w.rto = RtoConfig{c.rto_min_us, c.rto_initial_us, c.rto_max_us,
                    LaneSlots(granted_window, lane, w.lanes)};
  w.sec = c.sec == "mac"           ? proto::SecMode::kMac
          : c.sec == "mac_encrypt" ? proto::SecMode::kMacEncrypt
                                   : proto::SecMode::kCrc;
  if (w.sec != proto::SecMode::kCrc) w.secret = c.job_secret;
  return w;
}

SlotWindow::SlotWindow(const WindowConfig& config, const quant::Kernels& kernels)
    : cfg_(config),
      window_(config.window),
      kern_(kernels),
      precision_(quant::Precision(config.world_size)),
      rto_(config.rto),
      slots_(std::max(config.window, config.capacity)),
      tx_bufs_(slots_.size() * kBufBytes),
      send_ring_(slots_.size()) {
  if (keyed()) {
    plain_.resize(proto::kMaxK * proto::kElemBytes);
    SetKeys(1);
  }
}

void SlotWindow::SetKeys(uint64_t grant) {
  grant_ = grant;
  sealer_.reset();
  opener_.reset();
  auto up = proto::DeriveTrafficKey(cfg_.secret.bytes(), proto::KeyDirection::kUp, cfg_.job_id,
                                    grant, salt_);
  auto down = proto::DeriveTrafficKey(cfg_.secret.bytes(), proto::KeyDirection::kDown, cfg_.job_id,
                                      grant, salt_);
  if (!up.ok() || !down.ok()) {
    key_status_ = (up.ok() ? down.status() : up.status()).WithContext("job key");
    return;
  }
  auto sealer = proto::MessageSealer::Create(*up);
  auto opener = proto::MessageOpener::Create(*down);
  explicit_bzero(up->data(), up->size());
  explicit_bzero(down->data(), down->size());
  if (!sealer.ok() || !opener.ok()) {
    key_status_ = sealer.ok() ? opener.status() : sealer.status();
    return;
  }
  sealer_ = std::move(*sealer);
  opener_ = std::move(*opener);
}

void SlotWindow::Regrant(uint16_t window, const proto::Session& salt) {
  salt_ = salt;
  if (keyed()) SetKeys(grant_ + 1);
  window_ = window;
  cfg_.window = window;
  std::fill(slots_.begin(), slots_.end(), Slot{});
  ring_head_ = 0;
  ring_size_ = 0;
  deadline_floor_ = TimePoint::max();
  due_floor_ = TimePoint::max();
}

void SlotWindow::FirstGrant(uint16_t window, const proto::Session& salt) {
  grant_ = 0;  // Regrant takes grant 1's keys
  Regrant(window, salt);
  cfg_.rto.samples_per_rtt = LaneSlots(window, cfg_.lane, cfg_.lanes);
  rto_ = RtoEstimator(cfg_.rto);
}

SlotWindow::SlotView SlotWindow::slot(uint16_t s) const {
  const Slot& sl = slots_[s];
  return SlotView{sl.gen,    sl.next_gen, sl.use,     sl.busy,   sl.queued,
                  sl.parked, sl.block,    sl.retries, sl.rto_us, sl.deadline};
}

void SlotWindow::Enqueue(uint16_t s) {
  Slot& sl = slots_[s];
  sl.queued = true;
  sl.deadline = TimePoint::max();
  send_ring_[(ring_head_ + ring_size_) % window_] = s;
  ++ring_size_;
}

// Writes the header of slot s's next use and takes a generation.
void SlotWindow::PutHeader(uint16_t s, uint8_t flags, uint8_t exp, uint8_t next_exp, uint16_t count,
                           uint32_t offset) {
  Slot& sl = slots_[s];
  proto::DataMsg{.flags = flags,
                 .exp = exp,
                 .next_exp = next_exp,
                 .sec = static_cast<uint8_t>(cfg_.sec),
                 .job = cfg_.job_id,
                 .rank = cfg_.rank,
                 .slot = WireSlot(s),
                 .gen = sl.next_gen,
                 .count = count,
                 .offset = WireOffset(offset)}
      .Encode(Buf(s));
  sl.gen = sl.next_gen++;
  sl.use = sl.next_use++;
  sl.busy = true;
  sl.sent = false;
  sl.retries = 0;
  sl.rto_us = rto_.rto_us();
  // Sealed last: after the payload was quantized into the buffer and the header written.
  Seal(s);
  Enqueue(s);
}

void SlotWindow::Seal(uint16_t s) {
  Slot& sl = slots_[s];
  uint8_t* b = Buf(s);
  if (keyed()) {  // never with a body (SendBlock)
    const size_t len = proto::kHeaderBytes + size_t{proto::GetCount(b)} * proto::kElemBytes;
    if ((sealer_ == nullptr ||
         !sealer_->Seal(cfg_.sec, b, len, proto::MakeNonce(cfg_.rank, WireSlot(s), sl.use))) &&
        key_status_.ok()) {
      key_status_ = Internal("libcrypto: sealing a data packet failed");
    }
    sl.len = len + proto::kTagBytes;
    return;
  }
  if (sl.body == nullptr) {
    sl.len =
        proto::SealMessage(b, proto::kHeaderBytes + size_t{proto::GetCount(b)} * proto::kElemBytes);
    return;
  }
  const uint32_t crc =
      proto::Crc32cCombine(proto::Crc32c(0, b, proto::kHeaderBytes), sl.body_crc, sl.body_len);
  proto::StoreCrc(b + proto::kHeaderBytes, crc);
  sl.len = proto::kHeaderBytes + proto::kCrcBytes;
}

// Float: local exponent (and non-finiteness) of block b, kept for when the slot sends it.
// Blocks are first read a few sends before they are needed (the exponent of block b+W when block b
// goes out, int32 block b itself): a tensor larger than the cache streams from memory, and a 1 KiB
// block per packet is too short a run for the hardware prefetcher across page boundaries.
void SlotWindow::Prefetch(int64_t b) const {
  if (b >= blocks_) return;
  const auto* p = reinterpret_cast<const char*>(op_.is_float ? static_cast<const void*>(op_.f)
                                                             : static_cast<const void*>(op_.i)) +
                  static_cast<size_t>(b) * cfg_.k * proto::kElemBytes;
  for (size_t i = 0; i < BlockCount(b) * proto::kElemBytes; i += 64) __builtin_prefetch(p + i);
}

Status SlotWindow::LocalExp(int64_t b, uint8_t* exp, bool* nonfinite) {
  if (quant_ != nullptr) return quant_->LocalExp(b, exp, nonfinite);
  if (op_.stager != nullptr) INA_RETURN_IF_ERROR(op_.stager->Acquire(b));
  *exp = kern_.block_exp(op_.f + static_cast<size_t>(b) * cfg_.k, BlockCount(b), nonfinite);
  return Status::Ok();
}

Status SlotWindow::SendExpRound(uint16_t s) {
  Slot& sl = slots_[s];
  sl.block = -1;
  sl.body = nullptr;
  INA_RETURN_IF_ERROR(LocalExp(s, &sl.pending_exp, &sl.pending_nonfinite));
  PutHeader(s, 0, proto::kExpNone, sl.pending_exp, 0, static_cast<uint32_t>(s) * cfg_.k);
  return Status::Ok();
}

Status SlotWindow::StartBlock(uint16_t s, int64_t b, uint8_t e) {
  const Slot& cur = slots_[s];
  // Checked before anything is quantized at `e` (|x| >= 2^E is outside the kernels' contract).
  if (op_.is_float && !cur.pending_nonfinite && e < cur.pending_exp) {
    return Internal("slot " + std::to_string(s) + " block " + std::to_string(b) +
                    ": agreed exponent " + std::to_string(e) + " below the local exponent " +
                    std::to_string(cur.pending_exp) + " (fabric did not max-reduce next_exp?)");
  }
  if (quant_ == nullptr) return SendBlock(s, b, e);
  INA_RETURN_IF_ERROR(quant_->Agree(b, e));
  INA_ASSIGN_OR_RETURN(const bool ready, quant_->Quantized(b));
  if (ready) return SendBlock(s, b, e);
  Slot& sl = slots_[s];
  sl.block = b;
  sl.parked = true;
  sl.parked_exp = e;
  ++parked_;
  return Status::Ok();
}

Status SlotWindow::OnReady() {
  if (parked_ == 0) return Status::Ok();
  for (uint16_t s = cfg_.lane; s < used_; s = static_cast<uint16_t>(s + cfg_.lanes)) {
    Slot& sl = slots_[s];
    if (!sl.parked) continue;
    INA_ASSIGN_OR_RETURN(const bool ready, quant_->Quantized(sl.block));
    if (!ready) continue;
    sl.parked = false;
    --parked_;
    INA_RETURN_IF_ERROR(SendBlock(s, sl.block, sl.parked_exp));
  }
  return Status::Ok();
}

// Block b on slot s with the agreed biased exponent `e` (float) or as int32.
Status SlotWindow::SendBlock(uint16_t s, int64_t b, uint8_t e) {
  Slot& sl = slots_[s];
  sl.block = b;
  sl.body = nullptr;
  const size_t cnt = BlockCount(b);
  const size_t off = static_cast<size_t>(b) * cfg_.k;
  uint8_t* payload = Buf(s) + proto::kHeaderBytes;
  if (!op_.is_float) {
    if (op_.stager != nullptr) INA_RETURN_IF_ERROR(op_.stager->Acquire(b));
    Prefetch(b + kPrefetchBlocks);
    kern_.to_wire(op_.i + off, cnt, payload);
    PutHeader(s, proto::flags::kInt32, 0, 0, static_cast<uint16_t>(cnt),
              static_cast<uint32_t>(off));
    return Status::Ok();
  }
  const bool nonfinite = sl.pending_nonfinite;
  uint8_t next_exp = proto::kExpNone;
  const int64_t nb = b + window_;
  if (nb < blocks_) {
    if (quant_ == nullptr) Prefetch(nb + kPrefetchBlocks);
    INA_RETURN_IF_ERROR(LocalExp(nb, &next_exp, &sl.pending_nonfinite));
    sl.pending_exp = next_exp;
  }
  if (nonfinite) {
    std::memset(payload, 0, cnt * proto::kElemBytes);
  } else if (quant_ != nullptr && quant_->tx_body() != nullptr && !keyed()) {  // the NIC reads it
    sl.body = quant_->tx_body() + off * proto::kElemBytes;
    sl.body_len = static_cast<uint32_t>(cnt * proto::kElemBytes);
    sl.body_crc = quant_->PayloadCrc(b);
  } else if (quant_ != nullptr) {  // quantized by the domain, at the same exponent
    std::memcpy(payload, quant_->wire() + off * proto::kElemBytes, cnt * proto::kElemBytes);
  } else {
    kern_.quantize(op_.f + off, cnt, e, precision_, payload);
  }
  PutHeader(s, nonfinite ? proto::flags::kNonfinite : 0, e, next_exp, static_cast<uint16_t>(cnt),
            static_cast<uint32_t>(off));
  return Status::Ok();
}

Status SlotWindow::CheckPeersStillIn(uint64_t seq) const {
  if (seq < peer_left_after_) return Status::Ok();
  return Aborted("rank " + std::to_string(peer_left_rank_) + " left the job after " +
                 std::to_string(peer_left_after_) + " calls; call #" + std::to_string(seq) +
                 " cannot complete");
}

Status SlotWindow::Begin(const OpDesc& op, TimePoint now) {
  INA_RETURN_IF_ERROR(key_status_);  // a keyed job whose keys could not be set up
  INA_RETURN_IF_ERROR(CheckPeersStillIn(op.seq));
  op_ = op;
  active_ = true;
  const int64_t k = cfg_.k;
  blocks_ = static_cast<int64_t>((op.n + k - 1) / k);
  remaining_ = 0;
  ring_head_ = ring_size_ = 0;
  last_transport_error_ = Status::Ok();
  last_taken_ = now;
  used_ = static_cast<uint16_t>(std::min<int64_t>(window_, blocks_));
  quant_ = op.is_float && op.stager != nullptr && op.stager->quantizes() ? op.stager : nullptr;
  parked_ = 0;
  for (Slot& sl : slots_) sl.busy = sl.queued = sl.parked = false;
  for (uint32_t s = cfg_.lane; s < used_; s += cfg_.lanes) {
    remaining_ += (blocks_ - s + window_ - 1) / window_;  // blocks s, s+W, ... < B
  }
  for (uint16_t s = cfg_.lane; s < used_; s = static_cast<uint16_t>(s + cfg_.lanes)) {
    // Fails only for a staged op (its copy into staging failed or was stopped).
    Status st = op.is_float ? SendExpRound(s) : SendBlock(s, s, 0);
    if (!st.ok()) {
      End();
      return st;
    }
  }
  last_progress_ = now;
  return Status::Ok();
}

void SlotWindow::End() {
  active_ = false;
  deadline_floor_ = due_floor_ = TimePoint::max();
  ring_head_ = ring_size_ = 0;
  for (Slot& sl : slots_) {
    sl.busy = sl.queued = sl.parked = false;
    sl.deadline = TimePoint::max();
  }
  op_ = OpDesc{};
  quant_ = nullptr;
  parked_ = 0;
}

size_t SlotWindow::PeekTx(std::span<TxMessage> out) const {
  const size_t n = std::min(out.size(), ring_size_);
  for (size_t i = 0; i < n; ++i) {
    const uint16_t s = send_ring_[(ring_head_ + i) % window_];
    const Slot& sl = slots_[s];
    // Data: the trailer covers it.
    out[i] = {Buf(s), sl.len, /*payload_checked=*/true, sl.body, sl.body_len, proto::kHeaderBytes};
  }
  return n;
}

void SlotWindow::OnSent(size_t n, TimePoint now) {
  if (n > 0) last_taken_ = now;
  for (size_t i = 0; i < n && ring_size_ > 0; ++i) {
    const uint16_t s = send_ring_[ring_head_];
    ring_head_ = (ring_head_ + 1) % window_;
    --ring_size_;
    Slot& sl = slots_[s];
    sl.queued = false;
    sl.sent = true;
    sl.sent_at = now;
    sl.deadline = now + microseconds(sl.rto_us);
    deadline_floor_ = std::min(deadline_floor_, sl.deadline);
    due_floor_ = std::min(due_floor_, Due(sl));
    counters_.packets_sent.Inc();
    if (proto::GetFlags(Buf(s)) & proto::flags::kRetx) counters_.retransmissions.Inc();
    if (sl.body != nullptr) counters_.sent_from_body.Inc();
  }
}

// The fabric is a queue, so under load every result is late together: a slot is only declared
// lost when, past its own timer, either a packet sent at least an RTO after it already got its
// result (RACK's time-ordering evidence) or no result at all arrived for its RTO (tail loss,
// stall).
TimePoint SlotWindow::Due(const Slot& sl) const {
  const microseconds base_rto(rto_.rto_us());
  const bool overtaken = rack_sent_ - sl.sent_at >= base_rto;
  return overtaken ? sl.deadline : std::max(sl.deadline, last_progress_ + microseconds(sl.rto_us));
}

// Scans the slots only when the earliest time one can be due has come (due_floor_): in a
// lossless flow that is never, and the scan of W slots per turn was a few percent of a worker's
// time per packet.
void SlotWindow::OnTimers(TimePoint now) {
  if (!active_ || now < due_floor_) return;
  due_floor_ = deadline_floor_ = TimePoint::max();
  for (uint16_t s = 0; s < used_; ++s) {
    Slot& sl = slots_[s];
    if (!sl.busy || sl.queued) continue;
    const TimePoint due = Due(sl);
    if (due <= now) {
      const uint8_t flags = proto::GetFlags(Buf(s));
      if ((flags & proto::flags::kRetx) == 0) {  // the first retransmission: flag it, seal again
        proto::SetFlags(Buf(s), flags | proto::flags::kRetx);
        // A keyed job's tag does not cover the flag (and mac_encrypt's payload is ciphertext by
        // now): the same bytes go out again.
        if (!keyed()) Seal(s);
      }
      ++sl.retries;
      sl.rto_us = rto_.Backoff(sl.rto_us);
      Enqueue(s);
    } else {
      due_floor_ = std::min(due_floor_, due);
      deadline_floor_ = std::min(deadline_floor_, sl.deadline);
    }
  }
}

Status SlotWindow::CheckProgress(TimePoint now) const {
  if (!key_status_.ok()) return key_status_;
  if (!active_ || remaining_ == 0) return Status::Ok();
  if (now - last_progress_ >= cfg_.progress_timeout) return DeadlineExceeded(DescribeStall(now));
  return Status::Ok();
}

TimePoint SlotWindow::NextDeadline() const {
  if (!active_ || remaining_ == 0) return TimePoint::max();
  return std::min(last_progress_ + cfg_.progress_timeout, due_floor_);
}

Status SlotWindow::OnPacket(std::span<const uint8_t> packet, TimePoint now) {
  const uint8_t* p = packet.data();
  const size_t len = packet.size();
  // A keyed job's tagged result: its tag is checked in HandleResult, once the fields say which
  // use of which slot it claims. Any other tagged packet is not for this window.
  if (keyed() && len >= proto::kHeaderBytes && proto::GetVersion(p) == proto::kVersion &&
      proto::GetSec(p) != 0) {
    if (active_ && proto::GetSec(p) == static_cast<uint8_t>(cfg_.sec) &&
        proto::GetJob(p) == cfg_.job_id && proto::IsType(p, proto::MsgType::kResult)) {
      return HandleResult(p, len, now);
    }
    counters_.stale.Inc();
    return Status::Ok();
  }
  // Nothing but the version is read before the trailer is checked: a damaged packet is dropped
  // whatever it claims to be (a lost result is fetched again by the retransmission timer).
  if (len >= proto::kHeaderBytes && proto::GetVersion(p) == proto::kVersion &&
      !proto::MessageCrcOk(packet)) {
    counters_.bad_crc.Inc();
    return Status::Ok();
  }
  if (active_ && len >= proto::kHeaderBytes && proto::GetVersion(p) == proto::kVersion &&
      proto::GetJob(p) == cfg_.job_id && proto::IsType(p, proto::MsgType::kResult)) {
    if (keyed()) {  // a CRC-only result naming a keyed job: not the fabric's
      counters_.forged.Inc();
      return Status::Ok();
    }
    return HandleResult(p, len, now);
  }
  return HandleControl(p, len);
}

// Non-result packets (and, between ops, results too, which are late copies).
Status SlotWindow::HandleControl(const uint8_t* p, size_t len) {
  if (len < proto::kHeaderBytes || proto::GetVersion(p) != proto::kVersion ||
      proto::GetJob(p) != cfg_.job_id) {
    counters_.stale.Inc();
    return Status::Ok();
  }
  const proto::MsgType type = proto::GetType(p);
  if (type == proto::MsgType::kError) {
    const auto e = proto::ErrorMsg::Decode(p);
    switch (e.code) {
      case proto::ErrorCode::kJobAborted:
        return Aborted("job " + std::to_string(cfg_.job_id) +
                       " aborted by the fabric (another rank left or timed out)");
      case proto::ErrorCode::kRankMismatch:
        return Aborted("job " + std::to_string(cfg_.job_id) +
                       " ended by the fabric: the ranks disagree (rank " +
                       std::to_string(e.proving_rank()) + "'s block for slot " +
                       std::to_string(SlotOfWire(e.mismatch_slot())) + " generation " +
                       std::to_string(e.mismatch_gen()) +
                       " differs from another rank's in offset, count, type or exponent); did "
                       "every rank make the same all-reduce calls, with the same element count "
                       "and type?");
      case proto::ErrorCode::kUnknownJob:
        // The switch answered our data: it holds no such job (restarted, or it ended the job and
        // that error was lost). Nothing of the job is left to finish the call with.
        return Aborted("job " + std::to_string(cfg_.job_id) +
                       " is not held by the fabric any more (error unknown_job: the switch "
                       "restarted, or it ended the job and the error saying why was lost); its "
                       "state is gone: start the job again");
      case proto::ErrorCode::kPeerRefused: {
        // From a tree only: this rank's leaf had every worker in and the spine's grant when
        // another leaf refused one of its workers' JOINs, so the job cannot start
        // (docs/hierarchy.md). Said as a refusal while joining says it.
        JoinConfig join;
        join.job_id = cfg_.job_id;
        join.rank = cfg_.rank;
        join.world_size = cfg_.world_size;
        join.k = cfg_.k;
        join.window = cfg_.window;
        join.lane = cfg_.lane;
        join.lanes = cfg_.lanes;
        return JoinError(e, join, "job " + std::to_string(cfg_.job_id));
      }
      case proto::ErrorCode::kRankLeft:
        // Another rank finished after `calls` calls: calls from that number on cannot complete.
        if (e.calls() < peer_left_after_) {
          peer_left_after_ = e.calls();
          peer_left_rank_ = e.left_rank();
        }
        if (active_) return CheckPeersStillIn(op_.seq);
        return Status::Ok();
      default:
        break;
    }
  }
  if (type == proto::MsgType::kJoinAck) {
    // A late duplicate, or the fabric asking an idle job to release its grant: done between
    // calls, by the communicator (an op in progress ignores it; its data calls the release off).
    const auto ack = proto::JoinAckMsg::Decode(p);
    if (ack.release == 1 && !active_) release_epoch_ = static_cast<uint8_t>(ack.epoch);
    return Status::Ok();
  }
  counters_.stale.Inc();
  return Status::Ok();
}

Status SlotWindow::HandleResult(const uint8_t* p, size_t len, TimePoint now) {
  const proto::Header h = proto::DecodeHeader(p);
  const uint32_t slot = SlotOfWire(h.slot);
  if ((h.rank != cfg_.rank && h.rank != proto::kRankAll) || slot >= window_) {
    counters_.stale.Inc();
    return Status::Ok();
  }
  const auto s = static_cast<uint16_t>(slot);
  Slot& sl = slots_[s];
  const uint8_t* mine = Buf(s);
  if (!sl.busy || !sl.sent || h.gen != sl.gen ||
      len != (keyed() ? proto::MessageBytes(h.count, h.sec) : proto::MessageBytes(h.count)) ||
      h.count != proto::GetCount(mine) || h.offset != proto::GetOffset(mine) ||
      (op_.is_float && h.exp != proto::GetExp(mine))) {
    counters_.stale.Inc();
    return Status::Ok();
  }
  const uint8_t* payload = p + proto::kHeaderBytes;
  if (keyed()) {  // the tag, for the use in flight, before anything of the result is used
    if (opener_ == nullptr ||
        !opener_->Open(cfg_.sec, std::span<const uint8_t>(p, len),
                       proto::MakeNonce(h.rank, h.slot, sl.use), plain_.data())) {
      counters_.forged.Inc();
      return Status::Ok();
    }
    if (cfg_.sec == proto::SecMode::kMacEncrypt) payload = plain_.data();
  }
  counters_.results.Inc();
  last_progress_ = now;
  rto_.OnSample(std::chrono::duration_cast<microseconds>(now - sl.sent_at), sl.retries != 0);
  if (sl.retries == 0) rack_sent_ = std::max(rack_sent_, sl.sent_at);
  // Newer evidence (rack_sent_) or a smaller RTO can make a slot due as early as its own
  // deadline: until the next scan, that is the bound.
  due_floor_ = std::min(due_floor_, deadline_floor_);
  sl.busy = false;
  sl.deadline = TimePoint::max();
  if (sl.block < 0) {  // exponent round: the result's next_exp is block s's agreed exponent
    return StartBlock(s, s, h.next_exp);
  }
  const int64_t b = sl.block;
  const size_t off = static_cast<size_t>(b) * cfg_.k;
  if (quant_ != nullptr) {  // the domain dequantizes the chunk once its results are all here
    if (h.flags & proto::flags::kNonfinite) {
      quant_->ResultNonfinite(b);
    } else {
      std::memcpy(quant_->wire() + off * proto::kElemBytes, payload,
                  size_t{h.count} * proto::kElemBytes);
    }
  } else if (op_.is_float) {
    if (h.flags & proto::flags::kNonfinite) {
      std::fill_n(op_.f + off, h.count, std::numeric_limits<float>::quiet_NaN());
    } else {
      kern_.dequantize(payload, h.count, h.exp, precision_, op_.f + off);
      quant::DivideBy(kern_, op_.f + off, h.count, op_.divisor);
    }
  } else {
    kern_.from_wire(payload, h.count, op_.i + off);
    quant::DivideBy(op_.i + off, h.count, op_.divisor);
  }
  --remaining_;
  if (op_.stager != nullptr) INA_RETURN_IF_ERROR(op_.stager->Release(b));
  const int64_t nb = b + window_;
  if (nb < blocks_) return StartBlock(s, nb, h.next_exp);
  return Status::Ok();
}

std::string SlotWindow::DescribeStall(TimePoint now) const {
  const Slot* worst = nullptr;
  uint16_t ws = 0;
  for (uint16_t s = 0; s < window_; ++s) {
    const Slot& sl = slots_[s];
    if (sl.busy && (worst == nullptr || sl.sent_at < worst->sent_at)) {
      worst = &sl;
      ws = s;
    }
  }
  const auto waited = std::chrono::duration_cast<milliseconds>(now - last_progress_).count();
  std::string m =
      "rank " + std::to_string(cfg_.rank) + " job " + std::to_string(cfg_.job_id) +
      (cfg_.lanes > 1 ? " lane " + std::to_string(cfg_.lane) + "/" + std::to_string(cfg_.lanes)
                      : std::string()) +
      ": no result for " + std::to_string(waited) + " ms (progress_timeout_ms " +
      std::to_string(cfg_.progress_timeout.count()) + ")";
  if (worst != nullptr) {
    m += "; slot " + std::to_string(ws) + " gen " + std::to_string(worst->gen) +
         (worst->block < 0 ? std::string(" (exponent round)")
                           : " (block " + std::to_string(worst->block) + ")") +
         " waited, " + std::to_string(worst->retries) + " retransmissions";
  }
  if (parked_ > 0) {
    m += "; " + std::to_string(parked_) +
         " slots waiting for their quantization in the memory domain";
  }
  m += "; " + std::to_string(remaining_) + " of " + std::to_string(blocks_) + " blocks pending" +
       (cfg_.lanes > 1 ? " on this lane" : "");
  if (ring_size_ > 0) {
    // A queued packet is not retransmitted again until the transport took it: few
    // retransmissions above then mean a transport that stopped sending (a full TX queue whose
    // peer stopped draining), not a quiet fabric.
    const auto idle = std::chrono::duration_cast<milliseconds>(now - last_taken_).count();
    m += "; " + std::to_string(ring_size_) + " packets queued for sending, the transport took " +
         (idle > 0 ? "none for " + std::to_string(idle) + " ms" : std::string("some just now"));
  }
  if (!last_transport_error_.ok()) {
    m += "; last transport error: " + last_transport_error_.ToString();
  }
  return m;
}

}  // namespace ina::host::internal
