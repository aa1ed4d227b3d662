// SlotWindow: the progress state machine of one rank, one op at a time (docs/host.md, "The
// progress engine").
//
// It is driven by (now, packets received) and gives (packets to send, next deadline, op done or
// failed with a Status). It reads no clock, owns no socket and starts no thread: the caller
// (Progress, progress.h) passes the time and moves packets between it and a Transport, so unit
// tests drive it with a fake clock and a fake transport (tests/host/comm/slot_window_test.cc).
//
// Protocol (unchanged from the monolithic engine it was split from):
//  - An op of B = ceil(n/K) blocks uses slots 0 .. min(W, B)-1; slot s carries blocks s, s+W, ...
//    with one packet in flight. A window of lane l of L (WindowConfig::lane, lanes; one per
//    progress thread) runs only the slots s with s mod L == l, and its op is done when their
//    blocks are; the other slots are the other lanes' (their results here count as stale). Every
//    use of a slot takes its next 16-bit generation, kept for the window's life (so across ops),
//    which is how ranks that issue the same calls agree on (slot, gen).
//  - Float ops start each slot with an exponent round (count 0, offset s*K, next_exp = local
//    exponent of block s); each later use sends block b with the agreed exponent and next_exp =
//    local exponent of block b+W. Inf/NaN blocks are sent as zeros with `nonfinite`; a result
//    with `nonfinite` makes the block all-NaN. int32 ops: flag int32, no exponent round.
//  - Every packet sent ends with its CRC32C trailer (ina/proto/crc32c.h), sealed after the payload
//    was quantized and again when the retx flag is first set. A received packet of this version
//    whose trailer does not match is dropped (bad_crc) before any other field is read; a lost
//    result is fetched again by the retransmission timer, as after a loss.
//  - Keyed jobs (WindowConfig::sec mac or mac_encrypt, docs/security.md): every data packet ends
//    with the AES-GCM tag under the grant's up key (ina/proto/sec.h) in place of the trailer,
//    nonce (rank, slot, use), where `use` counts the slot's uses since the grant began (gen is its
//    low 16 bits); in mac_encrypt the payload is encrypted in the TX buffer. The tag does not
//    cover the retx flag, so a retransmission sends the same bytes but that bit. Results must carry
//    the job's sec and a tag that opens under the grant's down key with nonce (the header's rank,
//    slot, the use of the packet in flight); the field checks below come first (they pick the
//    use), then the tag, and only then is anything of the result used (decrypted first in
//    mac_encrypt). A result that fails, or a CRC-only one, is counted (forged) and dropped, and
//    the retransmission timer asks again, as after a loss. Each grant (FirstGrant: 1, Regrant: +1)
//    derives its own keys, as the fabric's control plane does.
//  - A result is accepted only if type, version, job, destination (own rank or all), slot < W,
//    gen, length, count and offset match the packet in flight, and for a float op its exp too
//    (the fabric sums a float block only when every rank sent the same exp, docs/protocol.md, "The
//    fabric checks that ranks agree", so another exp is a changed result, never to dequantize
//    with); anything else counts as stale.
//  - Loss: per-slot timers with the RTO of RtoEstimator (Karn, per-slot backoff); a slot past its
//    timer is resent (retx flag) only when a first transmission sent at least one RTO after it
//    already got its result (RACK-like time-ordering evidence) or no result at all was accepted
//    for its RTO.
//  - error(job_aborted): Aborted. error(rank_mismatch): Aborted, naming the slot, generation and
//    rank the fabric reported (the ranks made different calls, or quantized with different
//    exponents). error(unknown_job): Aborted (the fabric holds no such job). error(peer_refused),
//    which only a tree sends once a rank is in (another leaf refused one of its workers):
//    Aborted, worded as at the join (JoinError). error(rank_left, offset N): the
//    current op fails with Aborted if it is call N or later, as does every later Begin; earlier
//    ops carry on.
//  - No accepted result for progress_timeout while an op is active: DeadlineExceeded
//  (CheckProgress)
//    whose message names the oldest waiting slot, its generation, block, retries and the last
//    transport error.
//
// A staged op (OpDesc::stager) reads and writes the staging copy of the tensor and tells the
// stager before its first read of a block (which may wait for that chunk's copy; its error fails
// the op) and after a block's result was written. A stager that quantizes (float tensors in a
// domain that quantizes, staged_op.h) gives the local exponents, is told each agreed exponent,
// and holds the quantized blocks and the results (big-endian int32 in stager->wire()): the window
// copies a block into its packet instead of quantizing it, and stores a result there instead of
// dequantizing it. A slot whose next block is not quantized yet is parked (no packet in flight,
// no timer) and sent by OnReady once it is; the packets on the wire are the same as the CPU
// path's, bit for bit.
//
// Buffers: W packet buffers (proto::kMaxPacketBytes each: header, payload, trailer) allocated at
// construction; nothing is allocated per packet. A float op quantizes into the slot's buffer and
// dequantizes results into the caller's tensor in place (block b+W's exponent is read when block b
// is sent, before b+W's result can exist; retransmissions resend the stored buffer, resealed once
// when the retx flag is set).
//
// Threading: one thread at a time. The counters may be read from any thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "clock.h"
#include "counter.h"
#include "ina/base/status.h"
#include "ina/host/config.h"
#include "ina/host/quant.h"
#include "ina/host/transport.h"
#include "ina/proto/sec.h"
#include "ina/proto/wire.h"
#include "rto.h"
#include "staged_op.h"

namespace ina::host::internal {

struct WindowConfig {
  uint16_t job_id = 1;
  uint16_t rank = 0;
  uint16_t world_size = 1;
  uint16_t k = 256;     // elements per packet
  uint16_t window = 1;  // slots granted by the fabric, >= 1
  // Slots the buffers are sized for: a later grant (Regrant) may use up to this many. 0: window.
  uint16_t capacity = 0;
  uint16_t lane = 0;   // this window runs the slots s with s % lanes == lane
  uint16_t lanes = 1;  // >= 1, lane < lanes
  // Lanes on switch cores: the packets number this lane's slots and blocks densely, as core
  // `lane`'s job of its own (core_lanes.h). REQUIRES: every window a multiple of lanes.
  bool core_lanes = false;
  std::chrono::milliseconds progress_timeout{5000};
  // Keyed job (docs/security.md): its mode and secret (kSecretMinBytes .. kSecretMaxBytes bytes).
  proto::SecMode sec = proto::SecMode::kCrc;
  JobSecret secret;
  RtoConfig rto;

  // The communicator's settings with the granted window, for lane `lane` of
  // config.progress_threads.
  static WindowConfig From(const CommConfig& config, uint16_t granted_window, uint16_t lane = 0);
};

// One all-reduce call. The tensor is the caller's; it must stay alive until the op ends.
struct OpDesc {
  bool is_float = true;
  float* f = nullptr;    // is_float
  int32_t* i = nullptr;  // !is_float
  size_t n = 0;          // elements, 1 .. 2^32-1
  uint64_t seq = 0;      // the call number on this communicator, from 0
  // Averaging (AllReduceOptions::average): world_size; 1 for a sum. The window divides each
  // block's result (quant::DivideBy) where it writes it (tensor or copying stager's staging); a
  // quantizing stager divides in its own dequantization instead.
  int divisor = 1;
  // A tensor staged from a memory domain (staged_op.h): f / i point into its staging, Acquire(b)
  // comes before block b is first read, Release(b) after its result was written. nullptr: plain
  // host memory.
  BlockStager* stager = nullptr;
};

struct WindowCounters {
  Counter packets_sent;     // data packets, first sends and retransmissions
  Counter retransmissions;  // of those, retransmissions
  Counter results;          // results accepted
  Counter stale;            // packets ignored (old generation, another job, malformed, ...)
  Counter bad_crc;          // packets dropped: CRC32C trailer not matching (damaged in flight)
  Counter forged;           // keyed job: results dropped, the tag did not verify or was missing
  Counter sent_from_body;   // of packets_sent, those whose payload the NIC read from domain
                            // memory (GPUDirect RDMA, BlockStager::tx_body)
};

class SlotWindow {
 public:
  // REQUIRES: config.window >= 1, config.k one of proto::kKValues, config.lane < config.lanes.
  SlotWindow(const WindowConfig& config, const quant::Kernels& kernels);

  SlotWindow(const SlotWindow&) = delete;
  SlotWindow& operator=(const SlotWindow&) = delete;

  // Starts `op` at `now`: queues the first packet of every slot of this lane it uses (exponent
  // rounds for float, the first blocks for int32). Aborted when a rank already left before this
  // call; a keyed job's key setup error (a secret of a bad length). REQUIRES: !active(),
  // op.n >= 1.
  Status Begin(const OpDesc& op, TimePoint now);
  // Ends the current op, done or failed. Generations carry on into the next op.
  void End();
  // A new grant between ops (docs/protocol.md, "Sharing the slot pool"): the window becomes
  // `window` slots and every slot starts again from generation 0 (use 0), as the fabric's new
  // grant does; a keyed job takes the next grant's traffic keys, under the session salt the
  // join_challenge of this grant's JOIN carried (Grant::salt). The TX buffers, counters and the
  // RTT estimate stay. REQUIRES: !active(), 1 <= window <= capacity().
  void Regrant(uint16_t window, const proto::Session& salt = {});
  // The first grant, for a window built before the join with the window asked (config.window =
  // capacity): as Regrant, and the RTO estimator starts again for the granted window's
  // samples per round trip, so the window is the one WindowConfig::From(config, window) builds.
  // REQUIRES: no op begun, 1 <= window <= capacity().
  void FirstGrant(uint16_t window, const proto::Session& salt = {});
  uint16_t capacity() const { return static_cast<uint16_t>(slots_.size()); }
  bool active() const { return active_; }
  // Every block of this lane's slots has its result (in the tensor); at once if the lane's slots
  // carry no block of the op.
  bool done() const { return active_ && remaining_ == 0; }

  // One received packet (whole ina message). Results of the active op are accepted or counted
  // stale; control: error(job_aborted), error(rank_mismatch), error(unknown_job),
  // error(peer_refused) -> Aborted (also when idle);
  // error(rank_left) -> recorded, Aborted if it concerns the active op; join_ack duplicates are
  // ignored, but for a release (join_ack release 1, docs/protocol.md "Idle jobs") while no op is
  // active, which is recorded (TakeReleaseAsk); the rest is stale.
  // Errors: Aborted as above, Internal when the fabric's agreed exponent is below this rank's
  // local one (a fabric that does not max-reduce next_exp).
  Status OnPacket(std::span<const uint8_t> packet, TimePoint now);

  // Queues the slots whose retransmission timer expired (flag retx, backoff). No-op when idle.
  void OnTimers(TimePoint now);
  // Sends the parked slots whose block is now quantized (a quantizing stager). No-op when no slot
  // is parked. Errors: the stager's (a failed quantization).
  Status OnReady();
  // Slots waiting for their block's quantization: the caller polls OnReady while > 0.
  uint16_t parked() const { return parked_; }
  // DeadlineExceeded when no result was accepted for progress_timeout (or since Begin); the key
  // setup's or libcrypto's error of a keyed job (never seen).
  Status CheckProgress(TimePoint now) const;
  // Keyed job: the grant whose keys are in use (1 for the first).
  uint64_t grant() const { return grant_; }
  // The earliest time OnTimers or CheckProgress may have something to do (never later than it;
  // exact after OnTimers until the next result); TimePoint::max() when idle.
  TimePoint NextDeadline() const;

  // The packets queued for sending, in order: fills up to out.size() and returns how many.
  // The pointers stay valid until the next call that changes the window.
  size_t PeekTx(std::span<TxMessage> out) const;
  // The first n packets PeekTx gave were handed to the transport at `now` (their timers start).
  // REQUIRES: n <= tx_queued().
  void OnSent(size_t n, TimePoint now);
  size_t tx_queued() const { return ring_size_; }

  // The last transport error (named in the DeadlineExceeded message). Cleared by Begin.
  void NoteTransportError(const Status& s) { last_transport_error_ = s; }

  uint16_t window() const { return window_; }
  // Every slot's TX buffer: one allocation made at construction that lives as long as the window
  // (packets are quantized into it and sent from it: Transport::RegisterTxMemory).
  std::span<const uint8_t> tx_memory() const { return tx_bufs_; }
  const WindowConfig& config() const { return cfg_; }
  const RtoEstimator& rto() const { return rto_; }
  const WindowCounters& counters() const { return counters_; }
  int64_t blocks_remaining() const { return remaining_; }
  // The smallest call count after which some rank left (UINT64_MAX: nobody left).
  uint64_t peer_left_after() const { return peer_left_after_; }
  // The epoch of the grant the fabric asked this lane, idle, to release (join_ack release 1), or
  // 0; cleared.
  uint8_t TakeReleaseAsk() { return std::exchange(release_epoch_, uint8_t{0}); }

  // For tests: one slot's state.
  struct SlotView {
    uint16_t gen = 0;       // generation of the packet in flight
    uint16_t next_gen = 0;  // generation of its next use
    uint64_t use = 0;       // its use since the grant began (gen: the low 16 bits)
    bool busy = false;      // awaiting a result
    bool queued = false;    // waiting to be (re)sent
    bool parked = false;    // waiting for its block's quantization
    int64_t block = -1;     // -1: exponent round
    uint32_t retries = 0;
    int64_t rto_us = 0;
    TimePoint deadline{};
  };
  SlotView slot(uint16_t s) const;

 private:
  struct Slot {
    uint16_t next_gen = 0;
    uint16_t gen = 0;
    uint64_t next_use = 0;  // keyed jobs' nonce: uses since the grant began
    uint64_t use = 0;
    bool busy = false;
    bool queued = false;
    bool sent = false;    // sent at least once
    bool parked = false;  // block's agreed exponent known, its quantization not done yet
    uint8_t parked_exp = 0;
    int64_t block = -1;
    uint8_t pending_exp = 0;         // local biased exponent of the next block this slot sends
    bool pending_nonfinite = false;  // ... and whether it holds Inf/NaN
    uint32_t retries = 0;
    int64_t rto_us = 0;
    TimePoint sent_at{};
    TimePoint deadline = TimePoint::max();
    size_t len = 0;  // bytes of the packet in the buffer
    // GPUDirect (BlockStager::tx_body): the payload lies there, not in the buffer, which holds
    // the header and then the trailer; body_crc is its CRC32C. nullptr: all in the buffer.
    const uint8_t* body = nullptr;
    uint32_t body_len = 0;
    uint32_t body_crc = 0;
  };

  uint8_t* Buf(uint16_t s) { return tx_bufs_.data() + size_t{s} * kBufBytes; }
  // Slot s's and an element offset's numbers on the wire, and the slot of a wire slot number
  // (core_lanes.h; the same numbers without core_lanes).
  uint16_t WireSlot(uint16_t s) const {
    return cfg_.core_lanes ? static_cast<uint16_t>((s - cfg_.lane) / cfg_.lanes) : s;
  }
  uint32_t WireOffset(uint32_t offset) const {
    return cfg_.core_lanes ? (offset / cfg_.k - cfg_.lane) / cfg_.lanes * cfg_.k : offset;
  }
  uint32_t SlotOfWire(uint16_t wire) const {
    return cfg_.core_lanes ? uint32_t{wire} * cfg_.lanes + cfg_.lane : wire;
  }
  const uint8_t* Buf(uint16_t s) const { return tx_bufs_.data() + size_t{s} * kBufBytes; }
  size_t BlockCount(int64_t b) const {
    return std::min<size_t>(cfg_.k, op_.n - static_cast<size_t>(b) * cfg_.k);
  }
  void Enqueue(uint16_t s);
  void PutHeader(uint16_t s, uint8_t flags, uint8_t exp, uint8_t next_exp, uint16_t count,
                 uint32_t offset);
  // Writes slot s's trailer: the CRC32C of its header and payload (with a body, the header's
  // combined with the body's CRC), or a keyed job's tag. Sets sl.len.
  void Seal(uint16_t s);
  bool keyed() const { return cfg_.sec != proto::SecMode::kCrc; }
  // Keyed job: the traffic keys of grant `grant` (sealer_, opener_); errors into key_status_.
  void SetKeys(uint64_t grant);
  // Block b's local exponent: the CPU kernel on the tensor (after Acquire for a staged one), or
  // the quantizing stager's.
  Status LocalExp(int64_t b, uint8_t* exp, bool* nonfinite);
  // Block b's agreed exponent `e` is known: sends it on slot s, or parks the slot until the
  // quantizing stager has the block.
  Status StartBlock(uint16_t s, int64_t b, uint8_t e);
  void Prefetch(int64_t b) const;  // block b's elements into the cache (no-op past the end)
  Status SendExpRound(uint16_t s);
  Status SendBlock(uint16_t s, int64_t b, uint8_t e);
  Status HandleResult(const uint8_t* p, size_t len, TimePoint now);
  Status HandleControl(const uint8_t* p, size_t len);
  Status CheckPeersStillIn(uint64_t seq) const;
  // When slot `sl` (busy, sent) is due for a retransmission.
  TimePoint Due(const Slot& sl) const;
  std::string DescribeStall(TimePoint now) const;

  static constexpr size_t kBufBytes = proto::kMaxPacketBytes;
  static constexpr int64_t kPrefetchBlocks = 4;  // how far ahead of its first read a block is

  WindowConfig cfg_;
  uint16_t window_;
  const quant::Kernels& kern_;
  const int precision_;
  RtoEstimator rto_;

  bool active_ = false;
  OpDesc op_;
  int64_t blocks_ = 0;
  int64_t remaining_ = 0;
  uint16_t used_ = 0;             // slots the op uses
  BlockStager* quant_ = nullptr;  // the op's stager when it quantizes
  uint16_t parked_ = 0;
  std::vector<Slot> slots_;
  std::vector<uint8_t> tx_bufs_;
  std::vector<uint16_t> send_ring_;
  size_t ring_head_ = 0;
  size_t ring_size_ = 0;
  TimePoint last_progress_{};
  TimePoint rack_sent_{};   // latest send time of a first transmission that got a result
  TimePoint last_taken_{};  // when the transport last took a packet (OnSent with n > 0)
  // Bounds for the slots awaiting a result (not queued): no deadline before deadline_floor_, no
  // Due() before due_floor_ (exact after a scan; lowered by sends and results, see OnTimers).
  TimePoint deadline_floor_ = TimePoint::max();
  TimePoint due_floor_ = TimePoint::max();
  Status last_transport_error_;
  uint64_t peer_left_after_ = UINT64_MAX;
  uint8_t release_epoch_ = 0;  // TakeReleaseAsk
  uint16_t peer_left_rank_ = 0;
  WindowCounters counters_;
  // Keyed job: the current grant (counted from 1) and its keys; plain_ holds a mac_encrypt
  // result's decrypted payload.
  uint64_t grant_ = 0;
  proto::Session salt_{};  // the session of the traffic keys (Regrant)
  std::unique_ptr<proto::MessageSealer> sealer_;
  std::unique_ptr<proto::MessageOpener> opener_;
  Status key_status_;
  std::vector<uint8_t> plain_;
};

}  // namespace ina::host::internal
