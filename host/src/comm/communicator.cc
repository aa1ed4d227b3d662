// The worker side of the ina protocol: join handshake and the progress engine.
//
// One progress thread per communicator owns the transport and runs queued ops one at a time. An
// op of B blocks uses S = min(W, B) slots; slot s carries the chain of blocks s, s+W, s+2W, ...
// with one packet in flight. Every use of a slot takes the slot's next generation (kept for the
// communicator's life), so all ranks agree on (slot, gen) as long as they issue the same calls.
// Float ops start each slot's chain with an exponent round (count 0). Per-slot packet buffers are
// allocated once at Create; nothing is allocated per packet.
#include "ina/host/communicator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ina/host/quant.h"
#include "ina/host/transport.h"
#include "ina/proto/wire.h"

namespace ina::host {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace internal {

struct OpState {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;

  void Finish(Status s) {
    {
      std::lock_guard<std::mutex> lk(mu);
      if (done) return;
      status = std::move(s);
      done = true;
    }
    cv.notify_all();
  }
};

}  // namespace internal

bool Request::Test() {
  if (!state_) return true;
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->done;
}

Status Request::Wait() {
  if (!state_) return FailedPrecondition("Request::Wait on an empty request");
  std::unique_lock<std::mutex> lk(state_->mu);
  state_->cv.wait(lk, [&] { return state_->done; });
  return state_->status;
}

namespace {

constexpr size_t kBurst = 32;
constexpr size_t kRxBufBytes = 2048;  // > kMaxPacketBytes, so oversize packets are visible
constexpr milliseconds kJoinResend{100};
constexpr milliseconds kIdlePoll{5};

// Single-writer counter: the progress thread writes, anyone reads.
struct Counter {
  std::atomic<uint64_t> v{0};
  void Inc(uint64_t n = 1) { v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  uint64_t Get() const { return v.load(std::memory_order_relaxed); }
};

Status JoinError(uint16_t code, const std::string& who) {
  std::string m = who + ": fabric answered error(" + std::string(proto::ErrorCodeName(code)) + ")";
  switch (static_cast<proto::ErrorCode>(code)) {
    case proto::ErrorCode::kBadParams:
      return InvalidArgument(m + ": K, world size or window differ from the other ranks' or are "
                                 "out of range");
    case proto::ErrorCode::kNoSlots:
    case proto::ErrorCode::kTooManyJobs: return ResourceExhausted(m);
    case proto::ErrorCode::kRankTaken: return AlreadyExists(m);
    case proto::ErrorCode::kJobAborted: return Aborted(m);
    default: return Internal(m);
  }
}

struct Op {
  bool is_float = true;
  float* f = nullptr;
  int32_t* i = nullptr;
  size_t n = 0;
  uint64_t seq = 0;  // this communicator's call number, from 0
  std::shared_ptr<internal::OpState> state;
};

struct Slot {
  uint16_t next_gen = 0;  // generation of the slot's next use
  uint16_t gen = 0;       // generation of the packet in flight
  bool busy = false;      // a packet is in flight (or queued) awaiting its result
  bool queued = false;    // in the send queue, not yet (re)sent
  bool sent = false;      // sent at least once
  int64_t block = -1;     // block in flight; -1: exponent round
  uint8_t pending_exp = 0;         // local biased exponent of the next block this slot sends
  bool pending_nonfinite = false;  // ... and whether it holds Inf/NaN
  uint32_t retries = 0;
  int64_t rto_us = 0;
  Clock::time_point sent_at{};
  Clock::time_point deadline = Clock::time_point::max();
  size_t len = 0;  // bytes of the packet in the buffer
};

}  // namespace

class Communicator::Impl {
 public:
  Impl(const CommConfig& cfg, std::unique_ptr<Transport> t, uint16_t window)
      : cfg_(cfg),
        transport_(std::move(t)),
        window_(window),
        kern_(quant::ActiveKernels()),
        precision_(quant::Precision(cfg.world_size)),
        slots_(window),
        tx_bufs_(size_t{window} * proto::kMaxPacketBytes),
        send_ring_(window),
        rx_bufs_(kBurst * kRxBufBytes),
        rto_us_(cfg.rto_initial_us) {}

  void Start() { thread_ = std::thread([this] { Run(); }); }

  ~Impl() {
    stop_flag_.store(true, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    std::deque<Op> rest;
    {
      std::lock_guard<std::mutex> lk(mu_);
      rest.swap(queue_);
    }
    for (auto& op : rest) {
      ops_failed_.Inc();
      op.state->Finish(Aborted("communicator destroyed with the op still queued"));
    }
    // Done (aux 0) when every op finished cleanly: the fabric keeps the job for ranks still
    // fetching lost results. Otherwise abort, so the others fail at once.
    SendLeave(rest.empty() && failed_.ok() ? proto::ErrorCode::kNone
                                           : proto::ErrorCode::kJobAborted);
  }

  Result<Request> Submit(Op op) {
    if (op.n > std::numeric_limits<uint32_t>::max()) {
      return InvalidArgument("all-reduce of " + std::to_string(op.n) +
                             " elements: at most 2^32-1 supported");
    }
    op.state = std::make_shared<internal::OpState>();
    Request req(op.state);
    std::lock_guard<std::mutex> lk(mu_);
    if (!failed_.ok()) {
      return FailedPrecondition("communicator failed earlier: " + failed_.ToString());
    }
    op.seq = next_seq_++;
    if (op.n == 0) {  // no packets, no slot uses
      ops_completed_.Inc();
      op.state->Finish(Status::Ok());
      return req;
    }
    queue_.push_back(std::move(op));
    cv_.notify_all();
    return req;
  }

  CommStats stats() const {
    CommStats s;
    s.packets_sent = packets_sent_.Get();
    s.packets_received = packets_received_.Get();
    s.retransmissions = retransmissions_.Get();
    s.results = results_.Get();
    s.stale_results_ignored = stale_.Get();
    s.ops_completed = ops_completed_.Get();
    s.ops_failed = ops_failed_.Get();
    return s;
  }

  uint16_t window() const { return window_; }
  const CommConfig& config() const { return cfg_; }

 private:
  // ---- progress thread ----

  void Run() {
    while (true) {
      Op op;
      {
        std::unique_lock<std::mutex> lk(mu_);
        if (queue_.empty() && !stop_) cv_.wait_for(lk, kIdlePoll);
        if (stop_ || !failed_.ok()) return;
        if (!queue_.empty()) {
          op = std::move(queue_.front());
          queue_.pop_front();
        }
      }
      if (!op.state) {
        Status s = PollIdle();
        if (!s.ok()) Fail(s, nullptr);
        continue;
      }
      Status s = Execute(op);
      if (s.ok()) {
        ops_completed_.Inc();
        op.state->Finish(Status::Ok());
      } else {
        Fail(s, &op);
      }
    }
  }

  // Marks the communicator failed: the op (if any) and every queued op fail with `s`.
  void Fail(const Status& s, Op* current) {
    std::deque<Op> rest;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (failed_.ok()) failed_ = s;
      rest.swap(queue_);
    }
    if (current != nullptr) {
      ops_failed_.Inc();
      current->state->Finish(s);
    }
    for (auto& op : rest) {
      ops_failed_.Inc();
      op.state->Finish(s);
    }
    if (s.code() != StatusCode::kAborted) SendLeave(proto::ErrorCode::kJobAborted);
  }

  // aux kNone: this rank is done; anything else: abort the job.
  void SendLeave(proto::ErrorCode reason) {
    uint8_t buf[proto::kHeaderBytes] = {};
    proto::Header h;
    h.version = proto::kVersion;
    h.type = static_cast<uint8_t>(proto::MsgType::kLeave);
    h.job = cfg_.job_id;
    h.rank = cfg_.rank;
    h.aux = static_cast<uint16_t>(reason);
    h.offset = static_cast<uint32_t>(ops_completed_.Get());  // calls this rank completed
    proto::EncodeHeader(h, buf);
    // Best effort (the fabric may be gone), sent three times since nothing acknowledges it; the
    // fabric ignores copies after the first.
    const TxPacket tx[3] = {{buf, sizeof(buf)}, {buf, sizeof(buf)}, {buf, sizeof(buf)}};
    (void)transport_->SendBurst(std::span(tx));
  }

  // Idle: drains the socket so an error(job_aborted) fails the communicator before the next call.
  Status PollIdle() {
    INA_ASSIGN_OR_RETURN(size_t got, Receive(microseconds(0)));
    for (size_t i = 0; i < got; ++i) {
      INA_RETURN_IF_ERROR(HandleControl(rx_[i].data, rx_[i].len, /*count_stale=*/true));
    }
    return Status::Ok();
  }

  Result<size_t> Receive(microseconds timeout) {
    for (size_t i = 0; i < kBurst; ++i) rx_[i] = {rx_bufs_.data() + i * kRxBufBytes, kRxBufBytes, 0};
    auto r = transport_->RecvBurst(std::span(rx_.data(), kBurst), timeout);
    if (!r.ok()) {
      // ICMP port unreachable: the fabric is down or restarting. Keep going; the progress timeout
      // bounds how long we wait, and its message names this error.
      if (r.status().code() == StatusCode::kUnavailable) {
        last_transport_error_ = r.status();
        return size_t{0};
      }
      return r.status();
    }
    packets_received_.Inc(*r);
    return *r;
  }

  // Non-result packets: error(job_aborted) fails everything; anything else is ignored.
  Status HandleControl(const uint8_t* p, size_t len, bool count_stale) {
    if (len < proto::kHeaderBytes || proto::GetVersion(p) != proto::kVersion ||
        proto::GetJob(p) != cfg_.job_id) {
      if (count_stale) stale_.Inc();
      return Status::Ok();
    }
    auto type = static_cast<proto::MsgType>(proto::GetType(p));
    if (type == proto::MsgType::kError &&
        proto::GetAux(p) == static_cast<uint16_t>(proto::ErrorCode::kJobAborted)) {
      return Aborted("job " + std::to_string(cfg_.job_id) +
                     " aborted by the fabric (another rank left or timed out)");
    }
    if (type == proto::MsgType::kError &&
        proto::GetAux(p) == static_cast<uint16_t>(proto::ErrorCode::kRankLeft)) {
      // Another rank finished after `offset` calls: calls from that number on cannot complete.
      if (proto::GetOffset(p) < peer_left_after_) {
        peer_left_after_ = proto::GetOffset(p);
        peer_left_rank_ = proto::GetCount(p);
      }
      if (in_op_) return CheckPeersStillIn(op_.seq);
      return Status::Ok();
    }
    if (type == proto::MsgType::kJoinAck) return Status::Ok();  // a late duplicate
    if (count_stale) stale_.Inc();
    return Status::Ok();
  }

  uint8_t* Buf(uint16_t s) { return tx_bufs_.data() + size_t{s} * proto::kMaxPacketBytes; }

  size_t BlockCount(int64_t b) const {
    size_t start = static_cast<size_t>(b) * cfg_.k;
    return std::min<size_t>(cfg_.k, op_.n - start);
  }

  void Enqueue(uint16_t s) {
    Slot& sl = slots_[s];
    sl.queued = true;
    sl.deadline = Clock::time_point::max();
    send_ring_[(ring_head_ + ring_size_) % window_] = s;
    ++ring_size_;
  }

  // Writes the header of slot s's next use and takes a generation.
  void PutHeader(uint16_t s, uint8_t flags, uint8_t exp, uint8_t next_exp, uint16_t count,
                 uint32_t offset) {
    Slot& sl = slots_[s];
    proto::Header h;
    h.version = proto::kVersion;
    h.type = static_cast<uint8_t>(proto::MsgType::kData);
    h.flags = flags;
    h.exp = exp;
    h.next_exp = next_exp;
    h.job = cfg_.job_id;
    h.rank = cfg_.rank;
    h.slot = s;
    h.gen = sl.next_gen;
    h.count = count;
    h.offset = offset;
    proto::EncodeHeader(h, Buf(s));
    sl.gen = sl.next_gen++;
    sl.busy = true;
    sl.sent = false;
    sl.retries = 0;
    sl.rto_us = rto_us_;
    sl.len = proto::kHeaderBytes + size_t{count} * proto::kElemBytes;
    Enqueue(s);
  }

  // Float: local exponent (and non-finiteness) of block b, kept for when the slot sends it.
  uint8_t LocalExp(int64_t b, bool* nonfinite) {
    return kern_.block_exp(op_.f + static_cast<size_t>(b) * cfg_.k, BlockCount(b), nonfinite);
  }

  void SendExpRound(uint16_t s) {
    Slot& sl = slots_[s];
    sl.block = -1;
    sl.pending_exp = LocalExp(s, &sl.pending_nonfinite);
    PutHeader(s, 0, proto::kExpNone, sl.pending_exp, 0, static_cast<uint32_t>(s) * cfg_.k);
  }

  // Sends block b on slot s with the agreed biased exponent `e` (float) or as int32.
  Status SendBlock(uint16_t s, int64_t b, uint8_t e) {
    Slot& sl = slots_[s];
    sl.block = b;
    const size_t cnt = BlockCount(b);
    const size_t off = static_cast<size_t>(b) * cfg_.k;
    uint8_t* payload = Buf(s) + proto::kHeaderBytes;
    if (!op_.is_float) {
      kern_.to_wire(op_.i + off, cnt, payload);
      PutHeader(s, proto::flags::kInt32, 0, 0, static_cast<uint16_t>(cnt),
                static_cast<uint32_t>(off));
      return Status::Ok();
    }
    const bool nonfinite = sl.pending_nonfinite;
    if (!nonfinite && e < sl.pending_exp) {
      return Internal("slot " + std::to_string(s) + " block " + std::to_string(b) +
                      ": agreed exponent " + std::to_string(e) + " below the local exponent " +
                      std::to_string(sl.pending_exp) + " (fabric did not max-reduce next_exp?)");
    }
    uint8_t next_exp = proto::kExpNone;
    const int64_t nb = b + window_;
    if (nb < blocks_) {
      next_exp = LocalExp(nb, &sl.pending_nonfinite);
      sl.pending_exp = next_exp;
    }
    if (nonfinite) {
      std::memset(payload, 0, cnt * proto::kElemBytes);
    } else {
      kern_.quantize(op_.f + off, cnt, e, precision_, payload);
    }
    PutHeader(s, nonfinite ? proto::flags::kNonfinite : 0, e, next_exp, static_cast<uint16_t>(cnt),
              static_cast<uint32_t>(off));
    return Status::Ok();
  }

  Status Flush() {
    while (ring_size_ > 0) {
      size_t n = std::min(kBurst, ring_size_);
      for (size_t i = 0; i < n; ++i) {
        uint16_t s = send_ring_[(ring_head_ + i) % window_];
        tx_[i] = {Buf(s), slots_[s].len};
      }
      auto r = transport_->SendBurst(std::span(tx_.data(), n));
      size_t sent = 0;
      if (!r.ok()) {
        if (r.status().code() != StatusCode::kUnavailable) return r.status();
        last_transport_error_ = r.status();  // fabric unreachable: retried on the timer
        sent = n;  // treat as sent (lost); the retransmission timer resends
      } else {
        sent = *r;
      }
      const auto now = Clock::now();
      for (size_t i = 0; i < sent; ++i) {
        uint16_t s = send_ring_[ring_head_];
        ring_head_ = (ring_head_ + 1) % window_;
        --ring_size_;
        Slot& sl = slots_[s];
        sl.queued = false;
        sl.sent = true;
        sl.sent_at = now;
        sl.deadline = now + microseconds(sl.rto_us);
        packets_sent_.Inc();
        if (proto::GetFlags(Buf(s)) & proto::flags::kRetx) retransmissions_.Inc();
      }
      if (sent < n) return Status::Ok();  // queue full: retry on the next turn
    }
    return Status::Ok();
  }

  void SampleRtt(const Slot& sl, Clock::time_point now) {
    if (sl.retries != 0) return;  // Karn: ambiguous sample
    const double r =
        static_cast<double>(std::chrono::duration_cast<microseconds>(now - sl.sent_at).count());
    if (!have_rtt_) {
      srtt_ = r;
      rttvar_ = r / 2;
      have_rtt_ = true;
    } else {
      rttvar_ = 0.75 * rttvar_ + 0.25 * std::abs(srtt_ - r);
      srtt_ = 0.875 * srtt_ + 0.125 * r;
    }
    rto_us_ = std::clamp<int64_t>(static_cast<int64_t>(srtt_ + 4 * rttvar_), cfg_.rto_min_us,
                                  cfg_.rto_max_us);
  }

  // A result for this job: accepted (and acted upon) or counted stale.
  Status HandleResult(const uint8_t* p, size_t len, Clock::time_point now) {
    const proto::Header h = proto::DecodeHeader(p);
    if ((h.rank != cfg_.rank && h.rank != proto::kRankAll) || h.slot >= window_) {
      stale_.Inc();
      return Status::Ok();
    }
    Slot& sl = slots_[h.slot];
    const uint8_t* mine = Buf(h.slot);
    if (!sl.busy || !sl.sent || h.gen != sl.gen ||
        len != proto::kHeaderBytes + size_t{h.count} * proto::kElemBytes ||
        h.count != proto::GetCount(mine) || h.offset != proto::GetOffset(mine)) {
      stale_.Inc();
      return Status::Ok();
    }
    results_.Inc();
    last_progress_ = now;
    SampleRtt(sl, now);
    if (sl.retries == 0) rack_sent_ = std::max(rack_sent_, sl.sent_at);
    sl.busy = false;
    sl.deadline = Clock::time_point::max();
    const uint16_t s = h.slot;
    const uint8_t* payload = p + proto::kHeaderBytes;
    if (sl.block < 0) {  // exponent round: the result's next_exp is block s's agreed exponent
      return SendBlock(s, s, h.next_exp);
    }
    const int64_t b = sl.block;
    const size_t off = static_cast<size_t>(b) * cfg_.k;
    if (op_.is_float) {
      if (h.flags & proto::flags::kNonfinite) {
        std::fill_n(op_.f + off, h.count, std::numeric_limits<float>::quiet_NaN());
      } else {
        kern_.dequantize(payload, h.count, h.exp, precision_, op_.f + off);
      }
    } else {
      kern_.from_wire(payload, h.count, op_.i + off);
    }
    --remaining_;
    const int64_t nb = b + window_;
    if (nb < blocks_) return SendBlock(s, nb, h.next_exp);
    return Status::Ok();
  }

  std::string DescribeStall(Clock::time_point now) const {
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
    std::string m = "rank " + std::to_string(cfg_.rank) + " job " + std::to_string(cfg_.job_id) +
                    ": no result for " + std::to_string(waited) + " ms (progress_timeout_ms " +
                    std::to_string(cfg_.progress_timeout_ms) + ")";
    if (worst != nullptr) {
      m += "; slot " + std::to_string(ws) + " gen " + std::to_string(worst->gen) +
           (worst->block < 0 ? std::string(" (exponent round)")
                             : " (block " + std::to_string(worst->block) + ")") +
           " waited, " + std::to_string(worst->retries) + " retransmissions";
    }
    m += "; " + std::to_string(remaining_) + " of " + std::to_string(blocks_) + " blocks pending";
    if (!last_transport_error_.ok()) m += "; last transport error: " + last_transport_error_.ToString();
    return m;
  }

  // Aborted if a rank has left before joining call number `seq`.
  Status CheckPeersStillIn(uint64_t seq) const {
    if (seq < peer_left_after_) return Status::Ok();
    return Aborted("rank " + std::to_string(peer_left_rank_) + " left the job after " +
                   std::to_string(peer_left_after_) + " calls; call #" + std::to_string(seq) +
                   " cannot complete");
  }

  Status Execute(const Op& op) {
    INA_RETURN_IF_ERROR(CheckPeersStillIn(op.seq));
    op_ = op;
    in_op_ = true;
    Status s = ExecuteInner();
    in_op_ = false;
    return s;
  }

  Status ExecuteInner() {
    const Op& op = op_;
    const int64_t k = cfg_.k;
    blocks_ = static_cast<int64_t>((op.n + k - 1) / k);
    remaining_ = blocks_;
    ring_head_ = ring_size_ = 0;
    last_transport_error_ = Status::Ok();
    const uint16_t used = static_cast<uint16_t>(std::min<int64_t>(window_, blocks_));
    for (uint16_t s = 0; s < window_; ++s) slots_[s].busy = slots_[s].queued = false;
    for (uint16_t s = 0; s < used; ++s) {
      if (op.is_float) {
        SendExpRound(s);
      } else {
        INA_RETURN_IF_ERROR(SendBlock(s, s, 0));
      }
    }
    last_progress_ = Clock::now();
    const auto progress_timeout = milliseconds(cfg_.progress_timeout_ms);
    while (remaining_ > 0) {
      if (stop_flag_.load(std::memory_order_relaxed)) {
        return Aborted("communicator destroyed while the op was in progress");
      }
      INA_RETURN_IF_ERROR(Flush());
      auto now = Clock::now();
      // Retransmit slots whose timer expired; find the next deadline. The fabric is a queue, so
      // under load every result is late together: a slot is only declared lost when, past its
      // own timer, either a packet sent at least an RTO after it already got its result (RACK's
      // time-ordering evidence) or no result at all arrived for its RTO (tail loss, stall).
      auto next = last_progress_ + progress_timeout;
      const microseconds base_rto(rto_us_);
      for (uint16_t s = 0; s < used; ++s) {
        Slot& sl = slots_[s];
        if (!sl.busy || sl.queued) continue;
        const microseconds rto(sl.rto_us);
        const bool overtaken = rack_sent_ - sl.sent_at >= base_rto;
        const auto due = overtaken ? sl.deadline : std::max(sl.deadline, last_progress_ + rto);
        if (due <= now) {
          proto::SetFlags(Buf(s), proto::GetFlags(Buf(s)) | proto::flags::kRetx);
          ++sl.retries;
          sl.rto_us = std::min<int64_t>(sl.rto_us * 2, cfg_.rto_max_us);
          Enqueue(s);
        } else {
          next = std::min(next, due);
        }
      }
      if (ring_size_ > 0) {
        INA_RETURN_IF_ERROR(Flush());
        if (ring_size_ > 0) next = std::min(next, now + microseconds(100));  // queue was full
      }
      if (now - last_progress_ >= progress_timeout) return DeadlineExceeded(DescribeStall(now));
      auto wait = std::chrono::duration_cast<microseconds>(next - now);
      wait = std::clamp(wait, microseconds(0), microseconds(10000));  // re-check stop_ often
      INA_ASSIGN_OR_RETURN(size_t got, Receive(wait));
      now = Clock::now();
      for (size_t i = 0; i < got; ++i) {
        const uint8_t* p = rx_[i].data;
        const size_t len = rx_[i].len;
        if (len >= proto::kHeaderBytes && proto::GetVersion(p) == proto::kVersion &&
            proto::GetJob(p) == cfg_.job_id &&
            proto::GetType(p) == static_cast<uint8_t>(proto::MsgType::kResult)) {
          INA_RETURN_IF_ERROR(HandleResult(p, len, now));
        } else {
          INA_RETURN_IF_ERROR(HandleControl(p, len, /*count_stale=*/true));
        }
      }
    }
    return Status::Ok();
  }

  const CommConfig cfg_;
  std::unique_ptr<Transport> transport_;
  const uint16_t window_;
  const quant::Kernels& kern_;
  const int precision_;

  std::thread thread_;
  std::atomic<bool> stop_flag_{false};  // polled by Execute
  std::mutex mu_;
  bool stop_ = false;  // guarded by mu_
  std::condition_variable cv_;
  std::deque<Op> queue_;  // guarded by mu_
  Status failed_;         // guarded by mu_

  // Progress thread only.
  Op op_;
  int64_t blocks_ = 0;
  int64_t remaining_ = 0;
  std::vector<Slot> slots_;
  std::vector<uint8_t> tx_bufs_;
  std::vector<uint16_t> send_ring_;
  size_t ring_head_ = 0;
  size_t ring_size_ = 0;
  std::vector<uint8_t> rx_bufs_;
  std::array<RxPacket, kBurst> rx_{};
  std::array<TxPacket, kBurst> tx_{};
  Clock::time_point last_progress_{};
  Clock::time_point rack_sent_{};  // latest send time of a first transmission that got a result
  Status last_transport_error_;
  bool have_rtt_ = false;
  double srtt_ = 0, rttvar_ = 0;
  int64_t rto_us_;

  uint64_t next_seq_ = 0;  // guarded by mu_
  // Progress thread only: the smallest call count after which some rank left (rank_left).
  uint64_t peer_left_after_ = UINT64_MAX;
  uint16_t peer_left_rank_ = 0;
  bool in_op_ = false;
  Counter packets_sent_, packets_received_, retransmissions_, results_, stale_, ops_completed_,
      ops_failed_;
};

namespace {

// Sends JOIN every kJoinResend until JOIN_ACK, ERROR or the join timeout. Returns the window.
Result<uint16_t> Join(const CommConfig& cfg, Transport& t) {
  const std::string who = "join job " + std::to_string(cfg.job_id) + " as rank " +
                          std::to_string(cfg.rank) + " of " + std::to_string(cfg.world_size) +
                          " at " + cfg.switch_host + ":" + std::to_string(cfg.switch_port);
  uint8_t join[proto::kHeaderBytes] = {};
  proto::Header h;
  h.version = proto::kVersion;
  h.type = static_cast<uint8_t>(proto::MsgType::kJoin);
  h.job = cfg.job_id;
  h.rank = cfg.rank;
  h.count = cfg.k;
  h.offset = cfg.window;
  h.aux = cfg.world_size;
  proto::EncodeHeader(h, join);
  TxPacket tx{join, sizeof(join)};

  std::vector<uint8_t> bufs(kBurst * kRxBufBytes);
  std::array<RxPacket, kBurst> rx{};
  Status last_error;
  const auto start = Clock::now();
  const auto deadline = start + milliseconds(cfg.join_timeout_ms);
  auto next_send = start;
  while (true) {
    auto now = Clock::now();
    if (now >= deadline) {
      std::string m = who + ": no join_ack within " + std::to_string(cfg.join_timeout_ms) +
                      " ms (did every rank start?)";
      if (!last_error.ok()) m += "; last transport error: " + last_error.ToString();
      return DeadlineExceeded(m);
    }
    if (now >= next_send) {
      auto r = t.SendBurst(std::span(&tx, 1));
      if (!r.ok()) {
        if (r.status().code() != StatusCode::kUnavailable) return r.status().WithContext(who);
        last_error = r.status();
      }
      next_send = now + kJoinResend;
    }
    const auto until = std::min(next_send, deadline);
    const auto wait = std::chrono::duration_cast<microseconds>(until - now);
    for (size_t i = 0; i < kBurst; ++i) rx[i] = {bufs.data() + i * kRxBufBytes, kRxBufBytes, 0};
    auto r = t.RecvBurst(std::span(rx.data(), kBurst), std::max(wait, microseconds(0)));
    if (!r.ok()) {
      if (r.status().code() != StatusCode::kUnavailable) return r.status().WithContext(who);
      last_error = r.status();  // the fabric is not up (yet): wait for the next resend
      std::this_thread::sleep_until(until);
      continue;
    }
    for (size_t i = 0; i < *r; ++i) {
      const uint8_t* p = rx[i].data;
      if (rx[i].len < proto::kHeaderBytes) continue;
      const proto::Header a = proto::DecodeHeader(p);
      if (a.version != proto::kVersion || a.job != cfg.job_id) continue;
      if (a.type == static_cast<uint8_t>(proto::MsgType::kError)) return JoinError(a.aux, who);
      if (a.type != static_cast<uint8_t>(proto::MsgType::kJoinAck)) continue;
      if (a.count != cfg.k || a.offset < 1 || a.offset > cfg.window) {
        return Internal(who + ": join_ack with k " + std::to_string(a.count) + " window " +
                        std::to_string(a.offset) + " (asked k " + std::to_string(cfg.k) +
                        " window " + std::to_string(cfg.window) + ")");
      }
      return static_cast<uint16_t>(a.offset);
    }
  }
}

}  // namespace

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Communicator::~Communicator() = default;

Result<std::unique_ptr<Communicator>> Communicator::Create(const CommConfig& config) {
  INA_RETURN_IF_ERROR(config.Validate());
  TransportConfig tc;
  tc.kind = config.transport;
  tc.fabric_host = config.switch_host;
  tc.fabric_port = config.switch_port;
  tc.socket_buffer_bytes = config.socket_buffer_bytes;
  tc.dpdk = config.dpdk;
  INA_ASSIGN_OR_RETURN(std::unique_ptr<Transport> t, MakeTransport(tc));
  INA_ASSIGN_OR_RETURN(uint16_t window, Join(config, *t));
  auto impl = std::make_unique<Impl>(config, std::move(t), window);
  impl->Start();
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

Status Communicator::AllReduce(std::span<float> data) {
  INA_ASSIGN_OR_RETURN(Request r, AllReduceAsync(data));
  return r.Wait();
}

Status Communicator::AllReduce(std::span<int32_t> data) {
  INA_ASSIGN_OR_RETURN(Request r, AllReduceAsync(data));
  return r.Wait();
}

Result<Request> Communicator::AllReduceAsync(std::span<float> data) {
  Op op;
  op.is_float = true;
  op.f = data.data();
  op.n = data.size();
  return impl_->Submit(std::move(op));
}

Result<Request> Communicator::AllReduceAsync(std::span<int32_t> data) {
  Op op;
  op.is_float = false;
  op.i = data.data();
  op.n = data.size();
  return impl_->Submit(std::move(op));
}

CommStats Communicator::stats() const { return impl_->stats(); }
uint16_t Communicator::window() const { return impl_->window(); }
const CommConfig& Communicator::config() const { return impl_->config(); }

}  // namespace ina::host
