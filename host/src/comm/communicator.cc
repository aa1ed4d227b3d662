// The worker side of the ina protocol: the op queue, the requests and the lanes' threads.
//
// The protocol engine itself is not here: SlotWindow (slot_window.h) is the per-op state machine
// (slots, generations, exponent rounds, loss detection, rank_left / job_aborted, the progress
// timeout), Membership (membership.h) the join, re-join and LEAVE, RtoEstimator (rto.h) the
// retransmission timeout, and Progress (progress.h) the loop that feeds both from a Transport and
// a Clock; DeviceBuffers (device_buffers.h) holds the staging and GPUDirect NIC buffers of calls
// on device memory. This file owns the transports, the real clock, the FIFO of queued ops and
// the requests, and the threads that run them (one per lane), and decides when to join, re-join
// and leave.
#include "ina/host/communicator.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "communicator_factory.h"
#include "counter.h"
#include "device_buffers.h"
#include "exchange.h"
#include "ina/base/log_line.h"
#include "ina/host/quant.h"
#include "ina/host/transport.h"
#include "ina/net/udp.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/wire.h"
#include "lane_transport.h"
#include "progress.h"
#include "slot_window.h"
#include "staged_op.h"

namespace ina::host {

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

constexpr std::chrono::milliseconds kIdlePoll{5};
// Where the fabric does not say its job timeout (join_ack), the one assumed: ina-switchd's default.
constexpr std::chrono::milliseconds kJobTimeoutNotSaid{30000};

struct Op {
  internal::OpDesc desc;
  std::shared_ptr<internal::OpState> state;
  MemoryDomain* domain = nullptr;  // the tensor is in this domain's memory (staged)
};

using internal::Grant;

}  // namespace

// The op queue and the progress threads, one per lane (CommConfig::progress_threads). Lane 0's
// thread takes ops from the FIFO queue one at a time; with more lanes it hands each op to the
// other lanes' threads, runs its own part (the slots s with s mod L == 0) and waits for theirs.
// The op's status is the first failure of any lane, which cancels the others' parts. Between ops
// every lane polls its transport, so a job_aborted is noticed before the next call.
// A grant with a lease of N calls is renewed before the call that would be its N+1st: every lane
// re-joins (JOIN with exp = its grant's epoch, handed to each lane's thread like an op) and its
// window takes the new grant (SlotWindow::Regrant); lanes on switch cores then agree on one
// window (Regrant). The staging and NIC buffers of calls on
// device memory are DeviceBuffers' (device_buffers.h).
class Communicator::Impl {
 public:
  // Each lane's window is built for the slots asked (config.window) and takes the grant at Join.
  Impl(const CommConfig& cfg, const quant::Kernels& kernels,
       std::vector<std::unique_ptr<Transport>> transports)
      : cfg_(cfg), window_(0), lane_grants_(transports.size()) {
    lanes_.resize(transports.size());
    for (size_t l = 0; l < lanes_.size(); ++l) {
      const auto lane = static_cast<uint16_t>(l);
      lanes_[l].transport = std::move(transports[l]);
      lanes_[l].progress = std::make_unique<internal::Progress>(
          internal::WindowConfig::From(cfg, cfg.window, lane),
          internal::JoinConfig::From(cfg, lane), kernels, *lanes_[l].transport, clock_);
    }
    std::vector<Transport*> ts;
    for (Lane& lane : lanes_) ts.push_back(lane.transport.get());
    buffers_ = std::make_unique<internal::DeviceBuffers>(cfg, std::move(ts));
  }

  // Joins every lane at once (the fabric admits the job only when all lanes of all ranks
  // joined), one thread per lane when there are several; the first lane to fail cancels the
  // others. Lanes on switch cores whose cores granted more than another re-join asking the least,
  // until every lane has the same window (AgreedGrant). Before Start.
  Status Join() {
    std::vector<size_t> all(lanes_.size());
    for (size_t l = 0; l < all.size(); ++l) all[l] = l;
    INA_RETURN_IF_ERROR(OnLanesAtOnce(all, [&](size_t l, const std::atomic<bool>& cancel) {
      Result<Grant> g = lanes_[l].progress->Join(0, &cancel);
      if (!g.ok()) return g.status();
      lane_grants_[l] = *g;
      // Each lane's own salt: lanes on switch cores join at cores of their own, each with its
      // own key for the job.
      lanes_[l].progress->window().FirstGrant(LaneWindow(g->window), g->salt);
      return Status::Ok();
    }));
    while (HasLanesAboveTheLeast()) {
      const uint16_t least = LeastWindow();
      INA_RETURN_IF_ERROR(OnLanesAtOnce(all, [&](size_t l, const std::atomic<bool>& cancel) {
        return lane_grants_[l].window > least ? Rejoin(l, cancel, least) : Status::Ok();
      }));
    }
    grant_ = AgreedGrant();
    window_.store(grant_.window, std::memory_order_relaxed);
    for (Lane& lane : lanes_) lane.last_sent = std::chrono::steady_clock::now();
    joined_ = true;
    return Status::Ok();
  }

  // Hands each lane's TX buffers (the slot window quantizes into them) to its transport, so a
  // transport that sends from registered memory (verbs) posts them without a copy.
  Status RegisterTxMemory() {
    for (Lane& lane : lanes_) {
      const std::span<const uint8_t> m = lane.progress->window().tx_memory();
      INA_RETURN_IF_ERROR(lane.transport->RegisterTxMemory(m.data(), m.size()));
    }
    return Status::Ok();
  }

  void Start() {
    lanes_[0].thread = std::thread([this] { Run(); });
    for (size_t l = 1; l < lanes_.size(); ++l) {
      lanes_[l].thread = std::thread([this, l] { RunLane(l); });
    }
  }

  ~Impl() {
    stop_flag_.store(true, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    {
      std::lock_guard<std::mutex> lk(lane_mu_);
      lane_stop_ = true;
    }
    lane_cv_.notify_all();
    for (Lane& lane : lanes_) {
      if (lane.thread.joinable()) lane.thread.join();
    }
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
    // fetching lost results. Otherwise abort, so the others fail at once. The threads are joined
    // and Submit is not running (the caller is destroying us), so the count is final. One LEAVE,
    // from lane 0: the fabric takes a LEAVE from any lane as the rank's; with lanes on switch
    // cores, one to each core (each holds its share of the job on its own).
    if (!joined_) return;  // a failed join: nothing to leave (a queued one left already)
    const bool clean = rest.empty() && failed_.ok();
    const size_t leavers = cfg_.switch_cores > 1 ? lanes_.size() : 1;
    for (size_t l = 0; l < leavers; ++l) {
      lanes_[l].progress->SendLeave(clean ? proto::ErrorCode::kNone : proto::ErrorCode::kJobAborted,
                                    ops_completed_.Get());
    }
  }

  Result<Request> Submit(Op op) {
    if (op.desc.n > std::numeric_limits<uint32_t>::max()) {
      return InvalidArgument("all-reduce of " + std::to_string(op.desc.n) +
                             " elements: at most 2^32-1 supported");
    }
    op.state = std::make_shared<internal::OpState>();
    Request req(op.state);
    std::lock_guard<std::mutex> lk(mu_);
    if (!failed_.ok()) {
      return FailedPrecondition("communicator failed earlier: " + failed_.ToString());
    }
    op.desc.seq = next_seq_++;
    if (op.desc.n == 0) {    // no packets, no slot uses; counted from this thread (Counter is
      ops_completed_.Inc();  // multi-writer safe: the progress thread counts too)
      op.state->Finish(Status::Ok());
      return req;
    }
    queue_.push_back(std::move(op));
    no_op_queued_.store(false, std::memory_order_relaxed);
    cv_.notify_all();
    return req;
  }

  CommStats stats() const {
    CommStats s;
    for (const Lane& lane : lanes_) {
      const internal::WindowCounters& w = lane.progress->window().counters();
      s.packets_sent += w.packets_sent.Get();
      s.packets_received += lane.progress->packets_received();
      s.retransmissions += w.retransmissions.Get();
      s.results += w.results.Get();
      s.stale_results_ignored += w.stale.Get();
      s.bad_crc += w.bad_crc.Get();
      s.results_forged += w.forged.Get();
      s.packets_from_device += w.sent_from_body.Get();
      s.socket_drops += lane.transport->rx_kernel_drops();
    }
    s.ops_completed = ops_completed_.Get();
    s.ops_failed = ops_failed_.Get();
    return s;
  }

  uint16_t window() const { return window_.load(std::memory_order_relaxed); }
  const CommConfig& config() const { return cfg_; }
  // The buffers of tensors in a memory domain (ReserveStaging: any thread).
  internal::DeviceBuffers& device_buffers() { return *buffers_; }

 private:
  struct Lane {
    std::unique_ptr<Transport> transport;
    std::unique_ptr<internal::Progress> progress;  // this lane's thread only (counters: any)
    std::thread thread;
    // This lane's thread (Join's before Start): when it last sent anything (KeepAliveIfIdle).
    std::chrono::steady_clock::time_point last_sent{};
  };

  // Lane 0's thread: the op queue.
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
          no_op_queued_.store(queue_.empty(), std::memory_order_relaxed);
        }
      }
      if (!op.state) {
        Status s = KeepAliveIfIdle(0);
        if (s.ok()) s = lanes_[0].progress->PollIdle();
        if (s.ok() && ReleaseAsked()) s = Regrant(Renewal::kRelease);
        if (!s.ok()) Fail(s, nullptr, 0);
        continue;
      }
      if (grant_.lease != 0 && calls_in_grant_ >= grant_.lease) {
        Status r = Regrant();
        if (!r.ok()) {
          Fail(r, &op, 0);
          continue;
        }
      }
      Status s = op.domain != nullptr ? RunStaged(op) : RunOnAllLanes(op.desc);
      ++calls_in_grant_;
      if (s.ok()) {
        ops_completed_.Inc();
        op.state->Finish(Status::Ok());
      } else {
        Fail(s, &op, 0);
      }
    }
  }

  // Lane 0's thread: runs `op` on a tensor in op.domain's memory through the staging buffer
  // (staged_op.h), which is kept for the next call while large enough. Returns after every copy
  // the op enqueued completed, failed or not.
  Status RunStaged(const Op& op) {
    internal::OpDesc d = op.desc;
    // Float tensors in a domain that quantizes are quantized there (staged_op.h).
    const bool quantize = d.is_float && op.domain->quantizes();
    // With a NIC buffer the CRCs come after the rest (room for them either way: the choice is
    // made below and staging is kept across calls).
    const size_t bytes = internal::StagedOp::StagingBytes(d.n, proto::kElemBytes, cfg_.k, quantize,
                                                          /*nic_wire=*/true);
    INA_ASSIGN_OR_RETURN(uint8_t* const staging, buffers_->Staging(*op.domain, bytes));
    void* user = d.is_float ? static_cast<void*>(d.f) : static_cast<void*>(d.i);
    internal::StagedOp::Quant quant;
    quant.precision = quant::Precision(cfg_.world_size);
    quant.window = grant_.window;
    quant.divisor = d.divisor;
    // A keyed job seals each packet whole in its TX buffer, so its payload cannot stay in device
    // memory the host never reads.
    if (quantize && cfg_.sec == "crc") quant.nic_wire = buffers_->NicWire(*op.domain, 4 * d.n);
    internal::StagedOp staged(*op.domain, staging, user, d.n, proto::kElemBytes, cfg_.k, stop_flag_,
                              lanes_.size() > 1 ? &op_cancel_ : nullptr,
                              quantize ? &quant : nullptr);
    Status s = staged.Start();
    if (s.ok()) {
      if (d.is_float) {
        d.f = reinterpret_cast<float*>(staging);
      } else {
        d.i = reinterpret_cast<int32_t*>(staging);
      }
      d.stager = &staged;
      s = RunOnAllLanes(d);
    }
    return staged.Finish(s);
  }

  // What lane 0 hands every lane: an op, a re-join at the end of a lease, or a re-join asking
  // less of the lanes whose cores granted more than the least.
  enum class LaneWork : uint8_t { kOp, kRejoin, kAskLess };

  // Lane 0's thread: runs `work` (with `op`, or asking `ask` slots) on every lane; the first
  // failure of any lane.
  Status RunOnAllLanes(const internal::OpDesc& op, LaneWork work = LaneWork::kOp,
                       uint16_t ask = 0) {
    lanes_joining_.store(lanes_.size(), std::memory_order_release);
    if (lanes_.size() == 1) return LanePart(0, op, work, ask, nullptr);
    {
      std::lock_guard<std::mutex> lk(lane_mu_);
      lane_op_ = op;
      lane_work_ = work;
      lane_ask_ = ask;
      op_error_ = Status::Ok();
      op_cancel_.store(false, std::memory_order_relaxed);
      lanes_pending_ = lanes_.size() - 1;
      ++op_epoch_;
    }
    lane_cv_.notify_all();
    LaneFinished(LanePart(0, op, work, ask, &op_cancel_), false);
    std::unique_lock<std::mutex> lk(lane_mu_);
    lane_cv_.wait(lk, [&] { return lanes_pending_ == 0; });
    return op_error_;
  }

  // Why every lane re-joins: its lease ended, or (idle) the fabric asked it to release the grant.
  enum class Renewal : uint8_t { kLease, kRelease };

  // Lane 0's thread, before the call after a lease's last, or idle when the fabric asked the job
  // to release its grant (docs/protocol.md, "Idle jobs"): every lane re-joins; where the cores
  // granted different windows, those above the least re-join asking it, until they agree. A
  // release the fabric called off (another rank called first) leaves the grant as it was.
  Status Regrant(Renewal why = Renewal::kLease) {
    const uint8_t before = grant_.epoch;  // lane 0's (AgreedGrant)
    lane_work_why_ = why;
    INA_RETURN_IF_ERROR(RunOnAllLanes({}, LaneWork::kRejoin));
    while (HasLanesAboveTheLeast()) {
      INA_RETURN_IF_ERROR(RunOnAllLanes({}, LaneWork::kAskLess, LeastWindow()));
    }
    lane_grants_[0].release = 0;  // answered: a release asked of this grant is done with
    grant_ = AgreedGrant();
    // A lease's re-join renews every lane; a release called off (one core) renews none.
    if (grant_.epoch != before) calls_in_grant_ = 0;
    window_.store(grant_.window, std::memory_order_relaxed);
    return Status::Ok();
  }

  // Lane 0's thread, idle: whether the fabric asked the job to release its grant, in a join_ack
  // that answered lane 0's keep-alive or came on its own. Lanes on switch cores do not: each
  // core's release would re-join every core (docs/protocol.md, "Idle jobs").
  bool ReleaseAsked() {
    const uint8_t asked = lanes_[0].progress->window().TakeReleaseAsk();
    if (cfg_.switch_cores > 1) return false;
    return lane_grants_[0].release == 1 || (asked != 0 && asked == lane_grants_[0].epoch);
  }

  // Lane l's part of what lane 0 handed over, on lane l's thread; `cancel`: another lane failed
  // (nullptr with one lane).
  Status LanePart(size_t l, const internal::OpDesc& op, LaneWork work, uint16_t ask,
                  const std::atomic<bool>* cancel) {
    lanes_[l].last_sent = std::chrono::steady_clock::now();
    if (work == LaneWork::kOp) return lanes_[l].progress->RunOp(op, stop_flag_, cancel);
    const std::atomic<bool>& stop = cancel != nullptr ? *cancel : stop_flag_;
    Status s = work == LaneWork::kRejoin || lane_grants_[l].window > ask
                   ? Rejoin(l, stop, work == LaneWork::kAskLess ? ask : 0)
                   : Status::Ok();
    lanes_joining_.fetch_sub(1, std::memory_order_acq_rel);
    return s.ok() && lanes_.size() > 1 ? KeepJoined(l, lanes_joining_, stop) : s;
  }

  // Lane l, its (re-)join granted, while `joining` lanes of the same round are still waiting for
  // theirs: resends its JOIN every third of its core's job timeout (exp 0: its core, the job
  // active there, answers with the grant it holds, and counts it as the job's activity), so that
  // a core that granted does not time the job out (--job-timeout-ms) while another core queues it
  // behind other jobs. Until `joining` is 0 or `cancel` (another lane failed).
  Status KeepJoined(size_t l, const std::atomic<size_t>& joining, const std::atomic<bool>& cancel) {
    auto next = std::chrono::steady_clock::now() + KeepAliveEvery(l);
    while (joining.load(std::memory_order_acquire) != 0 &&
           !cancel.load(std::memory_order_relaxed)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (std::chrono::steady_clock::now() < next) continue;
      INA_RETURN_IF_ERROR(RenewJoin(l, cancel, "keeping its grant while another lane joins"));
      next = std::chrono::steady_clock::now() + KeepAliveEvery(l);
    }
    return Status::Ok();
  }

  // Lane l's thread, between ops: a job with no call for a third of the fabric's job timeout
  // (join_ack; 30 s where the fabric does not say) resends its JOIN, which the fabric answers
  // with the grant it holds and counts as the job's activity, so that an idle phase of the
  // training (validation, a checkpoint) longer than the timeout does not end the job
  // (docs/protocol.md, "Idle jobs"). Lanes on switch cores: every lane, at its own core;
  // otherwise lane 0 (a JOIN from any lane keeps the job).
  Status KeepAliveIfIdle(size_t l) {
    if (l != 0 && cfg_.switch_cores <= 1) return Status::Ok();
    if (stop_flag_.load(std::memory_order_relaxed)) return Status::Ok();
    if (std::chrono::steady_clock::now() - lanes_[l].last_sent < KeepAliveEvery(l)) {
      return Status::Ok();
    }
    const Status s = RenewJoin(l, stop_flag_, "keeping the idle job alive");
    return stop_flag_.load(std::memory_order_relaxed) ? Status::Ok() : s;
  }

  // Lane l's JOIN again (exp 0): its core, the job active there, answers with the grant the lane
  // holds and counts it as the job's activity. A grant that differs is an error (`why`: what the
  // JOIN was for).
  Status RenewJoin(size_t l, const std::atomic<bool>& cancel, const char* why) {
    Result<Grant> g = lanes_[l].progress->Join(0, &cancel);
    lanes_[l].last_sent = std::chrono::steady_clock::now();
    const std::string who = "lane " + std::to_string(l) + ": " + why;
    if (!g.ok()) return g.status().WithContext(who);
    Grant& held = lane_grants_[l];
    if (g->window != held.window || g->epoch != held.epoch) {
      return Internal(who + ": its core answered with window " + std::to_string(g->window) +
                      " epoch " + std::to_string(g->epoch) + ", not the grant it holds (window " +
                      std::to_string(held.window) + " epoch " + std::to_string(held.epoch) + ")");
    }
    // The idle job is asked to release it (Run; lane 0's own thread: only its flag is read).
    if (l == 0 && g->release == 1) held.release = 1;
    return Status::Ok();
  }

  // A third of lane l's core's job timeout (its join_ack's; kJobTimeoutNotSaid where not said).
  std::chrono::milliseconds KeepAliveEvery(size_t l) const {
    const std::chrono::milliseconds t = lane_grants_[l].job_timeout;
    return (t.count() > 0 ? t : kJobTimeoutNotSaid) / 3;
  }

  // Lane l (its thread, or Join's before Start): re-joins after its grant, at the end of a lease
  // (ask 0) or asking `ask` slots, and its window takes the new grant (SlotWindow::Regrant: each
  // grant of the lane's core is a new generation of its keys). Recorded in lane_grants_[l].
  Status Rejoin(size_t l, const std::atomic<bool>& cancel, uint16_t ask) {
    if (ask != 0) lanes_[l].progress->AskWindow(ask);
    // Releasing an idle job's grant, the wait for the next grant runs its slot wait only while a
    // call waits for it: an idle job is not failed for waiting.
    const bool release = ask == 0 && lane_work_why_ == Renewal::kRelease;
    Result<Grant> g = lanes_[l].progress->Join(lane_grants_[l].epoch, &cancel, release,
                                               release ? &no_op_queued_ : nullptr);
    if (!g.ok()) {
      return g.status().WithContext(
          ask != 0 ? "re-join asking " + std::to_string(ask) +
                         " slots, the least window another switch core granted"
          : lane_work_why_ == Renewal::kRelease
              ? std::string("re-join releasing the idle job's slots (another job waits for them)")
              : std::string("re-join at the end of a lease"));
    }
    // The same epoch: a release called off (another rank called first), the grant stands as it
    // is, its slots' generations and keys too.
    if (g->epoch != lane_grants_[l].epoch) {
      lanes_[l].progress->window().Regrant(LaneWindow(g->window), g->salt);
    }
    lane_grants_[l] = *g;
    return Status::Ok();
  }

  // The least window of the lanes' grants (lane_grants_), and whether a lane has more. One fabric
  // port grants every lane of a rank the same. Lanes on switch cores join cores of their own,
  // each sharing its own pool with the jobs there, so their windows may differ; the engine's slot
  // history needs the window its job was granted, so those above the least re-join asking it.
  // Every rank gets the same grants from each core, so every rank re-joins the same lanes.
  uint16_t LeastWindow() const {
    uint16_t least = lane_grants_[0].window;
    for (const Grant& g : lane_grants_) least = std::min(least, g.window);
    return least;
  }
  bool HasLanesAboveTheLeast() const {
    const uint16_t least = LeastWindow();
    return std::any_of(lane_grants_.begin(), lane_grants_.end(),
                       [&](const Grant& g) { return g.window > least; });
  }

  // The grant the communicator runs on once every lane has the same window: that window (all
  // cores' together on switch cores), and the shortest lease (a switch's cores have one
  // --lease-calls; a lane re-joining early is re-granted early). Each lane keeps its own core's
  // epoch in lane_grants_.
  Grant AgreedGrant() const {
    Grant g = lane_grants_[0];
    for (const Grant& o : lane_grants_) {
      if (o.lease != 0 && (g.lease == 0 || o.lease < g.lease)) g.lease = o.lease;
    }
    g.window = LaneWindow(g.window);
    return g;
  }

  // The window of the communicator's slot numbering for a lane granted `granted`: on switch
  // cores, each core holds granted slots of the N times as many (core_lanes.h).
  uint16_t LaneWindow(uint16_t granted) const {
    return cfg_.switch_cores > 1 ? static_cast<uint16_t>(granted * lanes_.size()) : granted;
  }

  // Before Start: runs `join` for each lane of `which`, one thread per lane when there are
  // several; the first to fail sets the others' cancel flag, and its Status is returned. A lane
  // whose join is done keeps it alive (KeepJoined) until every lane's is.
  template <typename F>
  Status OnLanesAtOnce(const std::vector<size_t>& which, const F& join) {
    std::atomic<bool> cancel{false};
    if (which.size() == 1) return join(which[0], cancel);
    std::atomic<int> first_failed{-1};  // the first real failure, not a lane cancelled by it
    std::atomic<size_t> joining{which.size()};
    std::vector<Status> got(lanes_.size());
    std::vector<std::thread> threads;
    for (size_t l : which) {
      threads.emplace_back([&, l] {
        got[l] = join(l, cancel);
        joining.fetch_sub(1, std::memory_order_acq_rel);
        if (got[l].ok()) got[l] = KeepJoined(l, joining, cancel);
        if (got[l].ok()) return;
        int none = -1;
        if (first_failed.compare_exchange_strong(none, static_cast<int>(l))) {
          cancel.store(true, std::memory_order_relaxed);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    if (first_failed.load() >= 0) return got[static_cast<size_t>(first_failed.load())];
    return Status::Ok();
  }

  // Records a lane's part of the op. The first failure wins and cancels the other lanes (whose
  // "another lane failed" come later, so they never mask it).
  void LaneFinished(const Status& s, bool count_down) {
    std::lock_guard<std::mutex> lk(lane_mu_);
    if (!s.ok() && op_error_.ok()) {
      op_error_ = s;
      op_cancel_.store(true, std::memory_order_relaxed);
    }
    if (count_down && --lanes_pending_ == 0) lane_cv_.notify_all();
  }

  // Lanes 1..L-1: run the part of every op lane 0 hands over; poll between ops.
  void RunLane(size_t l) {
    uint64_t seen = 0;
    bool idle_failed = false;  // reported once; the communicator is failed
    while (true) {
      internal::OpDesc op;
      bool have_op = false;
      LaneWork work = LaneWork::kOp;
      uint16_t ask = 0;
      {
        std::unique_lock<std::mutex> lk(lane_mu_);
        lane_cv_.wait_for(lk, kIdlePoll, [&] { return lane_stop_ || op_epoch_ != seen; });
        if (op_epoch_ != seen) {  // before the stop check: lane 0 waits for this lane's part
          seen = op_epoch_;
          op = lane_op_;
          work = lane_work_;
          ask = lane_ask_;
          have_op = true;
        } else if (lane_stop_) {
          return;
        }
      }
      if (have_op) {
        LaneFinished(LanePart(l, op, work, ask, &op_cancel_), true);
      } else if (!idle_failed) {
        Status s = KeepAliveIfIdle(l);
        if (s.ok()) s = lanes_[l].progress->PollIdle();
        if (!s.ok()) {
          idle_failed = true;
          Fail(s, nullptr, l);
        }
      }
    }
  }

  // Marks the communicator failed: the op (if any) and every queued op fail with `s`. Called from
  // lane `l`'s thread, which sends the aborting LEAVE (unless the job is aborted already).
  void Fail(const Status& s, Op* current, size_t l) {
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
    // Lane l's core only: a transport is its lane thread's alone. With lanes on switch cores the
    // other cores learn it from the other ranks, whose op fails with this core's abort, and from
    // this rank's destructor, which tells every core.
    if (s.code() != StatusCode::kAborted) {
      lanes_[l].progress->SendLeave(proto::ErrorCode::kJobAborted, ops_completed_.Get());
    }
  }

  const CommConfig cfg_;
  internal::SteadyClock clock_;
  // Declared before lanes_, so freed after the transports (which deregister what they hold).
  std::unique_ptr<internal::DeviceBuffers> buffers_;
  std::vector<Lane> lanes_;      // fixed after construction
  Grant grant_;                  // lane 0's thread
  uint64_t calls_in_grant_ = 0;  // lane 0's thread: calls run under grant_
  // Why the lanes re-join (Regrant): lane 0 writes it before the hand-off, which lane_mu_ orders.
  Renewal lane_work_why_ = Renewal::kLease;
  // No op in queue_ (written under mu_, read by the lanes' re-joins for a release).
  std::atomic<bool> no_op_queued_{true};
  std::atomic<uint16_t> window_;    // grant_.window, for window() from any thread
  std::vector<Grant> lane_grants_;  // [l]: lane l's thread during a join or re-join
  bool joined_ = false;             // Join succeeded

  std::atomic<bool> stop_flag_{false};  // polled by RunOp
  std::mutex mu_;
  bool stop_ = false;  // guarded by mu_
  std::condition_variable cv_;
  std::deque<Op> queue_;   // guarded by mu_
  Status failed_;          // guarded by mu_ (read unlocked only after the threads are joined)
  uint64_t next_seq_ = 0;  // guarded by mu_

  // Handing an op from lane 0 to the other lanes.
  std::mutex lane_mu_;
  std::condition_variable lane_cv_;
  bool lane_stop_ = false;                // guarded by lane_mu_
  uint64_t op_epoch_ = 0;                 // guarded by lane_mu_: bumped for every op handed over
  internal::OpDesc lane_op_;              // guarded by lane_mu_
  LaneWork lane_work_ = LaneWork::kOp;    // guarded by lane_mu_: what the hand-off is
  uint16_t lane_ask_ = 0;                 // guarded by lane_mu_: kAskLess's window
  std::atomic<size_t> lanes_joining_{0};  // a (re-)join round's lanes not yet granted (KeepJoined)
  size_t lanes_pending_ = 0;              // guarded by lane_mu_: lanes 1.. still running their part
  Status op_error_;                       // guarded by lane_mu_: the op's first failure
  std::atomic<bool> op_cancel_{false};    // set with op_error_; polled by the lanes' RunOp
  // Bumped by the progress thread and, for empty ops, by Submit's caller.
  internal::Counter ops_completed_, ops_failed_;
};

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Communicator::~Communicator() = default;

Result<std::unique_ptr<Communicator>> Communicator::Create(const CommConfig& config) {
  INA_RETURN_IF_ERROR(config.Validate());
  const quant::Kernels* kernels = quant::KernelsByName(config.quant);
  if (kernels == nullptr) {
    return InvalidArgument("config: quant " + config.quant +
                           " is not available on this CPU or build (scalar always is)");
  }
  if (config.switch_cores == CommConfig::kSwitchCoresAuto) {
    CommConfig asked = config;
    INA_RETURN_IF_ERROR(internal::AskSwitchCores(&asked));
    return Create(asked);
  }
  std::vector<std::unique_ptr<Transport>> transports;
  for (int l = 0; l < config.progress_threads; ++l) {  // one socket (udp) or port (dpdk) per lane
    INA_ASSIGN_OR_RETURN(std::unique_ptr<Transport> t,
                         MakeTransport(internal::LaneTransportConfig(config, l)));
    transports.push_back(std::move(t));
  }
  return internal::CommunicatorFactory::Create(config, *kernels, std::move(transports));
}

namespace internal {

Status AskSwitchCores(CommConfig* cfg) {
  CommConfig one = *cfg;
  one.switch_cores = 1;
  one.progress_threads = 1;
  INA_ASSIGN_OR_RETURN(std::unique_ptr<Transport> t, MakeTransport(LaneTransportConfig(one, 0)));
  std::array<uint8_t, proto::MessageBytes(0)> hello{};
  proto::HelloMsg{.job = cfg->job_id}.Encode(hello.data());
  proto::SealMessage(hello.data(), proto::kHeaderBytes);
  ExchangeSpec spec;
  spec.request = hello;
  spec.timeout = std::chrono::milliseconds(cfg->join_timeout_ms);
  spec.is_reply = [](const proto::Header& a) { return a.type == proto::MsgType::kHelloAck; };
  spec.who = "switch_cores auto: ask the switch at " + cfg->switch_host + ":" +
             std::to_string(cfg->switch_port);
  spec.no_answer = "no hello_ack in " + std::to_string(cfg->join_timeout_ms) +
                   " ms: is it up, and newer than the hello message? Else set switch_cores "
                   "(INA_SWITCH_CORES) to its core count";
  INA_ASSIGN_OR_RETURN(const proto::Header a, RunExchange(*t, spec, SteadyClock()));
  const auto ack = proto::HelloAckMsg::From(a);
  const int cores = std::clamp<int>(ack.core_ports, 1, CommConfig::kMaxProgressThreads);
  cfg->switch_cores = cores;
  if (cores > 1) cfg->progress_threads = cores;
  static std::atomic<bool> said{false};  // once per process
  if (!said.exchange(true)) {
    LogLinef(
        "ina: rank %d job %d: the switch at %s:%d takes a job's lanes on %d core(s)%s: %d "
        "lane(s)%s\n",
        cfg->rank, cfg->job_id, cfg->switch_host.c_str(), cfg->switch_port,
        static_cast<int>(ack.core_ports),
        ack.core_ports > CommConfig::kMaxProgressThreads ? " (a rank has at most 16)" : "",
        cfg->progress_threads, cores > 1 ? ", lane c to core c" : "");
  }
  return cfg->Validate();
}

Status ResolveK(CommConfig* cfg, const std::vector<std::unique_ptr<Transport>>& transports) {
  size_t max_msg = 65507;
  std::string_view path = "the fabric";
  for (const auto& t : transports) {
    if (t->max_message_bytes() < max_msg) {
      max_msg = t->max_message_bytes();
      path = t->name();
    }
  }
  const std::string where = "the " + std::string(path) + " path to " + cfg->switch_host +
                            " carries messages of at most " + std::to_string(max_msg) + " bytes";
  if (cfg->k == 0) {
    cfg->k = proto::LargestKFor(max_msg);
    if (cfg->k == 0) {
      return FailedPrecondition("config: no K fits: " + where +
                                ", K=" + std::to_string(proto::kKValues[0]) + " needs " +
                                std::to_string(proto::MessageBytes(proto::kKValues[0])));
    }
    return Status::Ok();
  }
  if (proto::MessageBytes(cfg->k) > max_msg) {
    const uint16_t fits = proto::LargestKFor(max_msg);
    return InvalidArgument("config: k " + std::to_string(cfg->k) + " makes " +
                           std::to_string(proto::MessageBytes(cfg->k)) + "-byte messages, but " +
                           where + " (no IP fragmentation): use k " +
                           (fits != 0 ? "<= " + std::to_string(fits) : "none") +
                           " or k 0 (chosen from the MTU), or raise the MTU (9000 carries 2048)");
  }
  return Status::Ok();
}

std::string FitWindow(CommConfig* cfg, const std::vector<std::unique_ptr<Transport>>& transports) {
  const size_t message = proto::MessageBytes(cfg->k);
  size_t fits = 0;  // messages the smallest kernel queue of a lane holds; 0: no lane has one
  size_t buffer = 0;
  for (const auto& t : transports) {
    const size_t q = t->rx_queue_messages(message);
    if (q != 0 && (fits == 0 || q < fits)) {
      fits = q;
      buffer = t->rx_buffer_bytes();
    }
  }
  const size_t lanes = std::max<size_t>(transports.size(), 1);
  const size_t most = std::max<size_t>(fits * lanes, 1);
  if (fits == 0 || cfg->window <= most) return "";
  const uint16_t asked = cfg->window;
  cfg->window = static_cast<uint16_t>(most);
  std::string why = "window " + std::to_string(asked) + " -> " + std::to_string(most) +
                    " slots: a lane's socket receive buffer of " +
                    std::to_string(buffer / 2 / 1024) + " KiB holds about " + std::to_string(fits) +
                    " results of " + std::to_string(message) +
                    " bytes (K=" + std::to_string(cfg->k) +
                    "); a larger window would have the kernel drop results";
  const std::string small = net::SmallReceiveBuffer(buffer, cfg->socket_buffer_bytes);
  why += small.empty() ? " (raise socket_buffer_bytes / INA_SOCKET_BUFFER_BYTES for more)"
                       : ": " + small;
  return why;
}

Result<std::unique_ptr<Communicator>> CommunicatorFactory::Create(
    const CommConfig& config, const quant::Kernels& kernels,
    std::vector<std::unique_ptr<Transport>> transports) {
  if (transports.size() != static_cast<size_t>(config.progress_threads)) {
    return InvalidArgument("communicator: " + std::to_string(transports.size()) +
                           " transports for " + std::to_string(config.progress_threads) +
                           " progress threads");
  }
  if (config.switch_cores == CommConfig::kSwitchCoresAuto) {
    return InvalidArgument(
        "communicator: switch_cores auto needs Communicator::Create, which asks "
        "the switch before it opens the lanes' transports");
  }
  CommConfig cfg = config;
  INA_RETURN_IF_ERROR(ResolveK(&cfg, transports));
  if (const std::string note = FitWindow(&cfg, transports); !note.empty()) {
    static std::atomic<bool> said{false};  // once per process: every communicator would repeat it
    if (!said.exchange(true)) {
      LogLinef("ina: rank %d job %d: %s\n", cfg.rank, cfg.job_id, note.c_str());
    }
  }
  auto impl = std::make_unique<Communicator::Impl>(cfg, kernels, std::move(transports));
  INA_RETURN_IF_ERROR(impl->Join());
  INA_RETURN_IF_ERROR(impl->RegisterTxMemory());
  impl->Start();
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

}  // namespace internal

namespace {

// The op of a call on `data` (host memory, or `domain`'s when not null).
template <typename T>
Op MakeOp(std::span<T> data, MemoryDomain* domain, const AllReduceOptions& options,
          uint16_t world_size) {
  Op op;
  if constexpr (std::is_same_v<T, float>) {
    op.desc.is_float = true;
    op.desc.f = data.data();
  } else {
    op.desc.is_float = false;
    op.desc.i = data.data();
  }
  op.desc.n = data.size();
  op.desc.divisor = options.average ? world_size : 1;
  op.domain = domain;
  return op;
}

// The checks of a staged call made in the caller's thread, before the op is queued.
Status PrepareStaged(MemoryDomain& domain, const void* data, size_t n, void* stream) {
  if (n == 0) return Status::Ok();
  INA_RETURN_IF_ERROR(domain.CheckPointer(data, n * proto::kElemBytes));
  return domain.OrderAfter(stream);
}

}  // namespace

Status Communicator::AllReduce(std::span<float> data, const AllReduceOptions& options) {
  INA_ASSIGN_OR_RETURN(Request r, AllReduceAsync(data, options));
  return r.Wait();
}

Status Communicator::AllReduce(std::span<int32_t> data, const AllReduceOptions& options) {
  INA_ASSIGN_OR_RETURN(Request r, AllReduceAsync(data, options));
  return r.Wait();
}

Result<Request> Communicator::AllReduceAsync(std::span<float> data,
                                             const AllReduceOptions& options) {
  return impl_->Submit(MakeOp(data, nullptr, options, impl_->config().world_size));
}

Result<Request> Communicator::AllReduceAsync(std::span<int32_t> data,
                                             const AllReduceOptions& options) {
  return impl_->Submit(MakeOp(data, nullptr, options, impl_->config().world_size));
}

Status Communicator::AllReduce(std::span<float> data, MemoryDomain& domain, void* stream,
                               const AllReduceOptions& options) {
  INA_ASSIGN_OR_RETURN(Request r, AllReduceAsync(data, domain, stream, options));
  return r.Wait();
}

Status Communicator::AllReduce(std::span<int32_t> data, MemoryDomain& domain, void* stream,
                               const AllReduceOptions& options) {
  INA_ASSIGN_OR_RETURN(Request r, AllReduceAsync(data, domain, stream, options));
  return r.Wait();
}

Result<Request> Communicator::AllReduceAsync(std::span<float> data, MemoryDomain& domain,
                                             void* stream, const AllReduceOptions& options) {
  INA_RETURN_IF_ERROR(PrepareStaged(domain, data.data(), data.size(), stream));
  return impl_->Submit(MakeOp(data, &domain, options, impl_->config().world_size));
}

Result<Request> Communicator::AllReduceAsync(std::span<int32_t> data, MemoryDomain& domain,
                                             void* stream, const AllReduceOptions& options) {
  INA_RETURN_IF_ERROR(PrepareStaged(domain, data.data(), data.size(), stream));
  return impl_->Submit(MakeOp(data, &domain, options, impl_->config().world_size));
}

Status Communicator::ReserveStaging(MemoryDomain& domain, size_t tensor_bytes) {
  const size_t bytes = std::max<size_t>(tensor_bytes, config().staging_bytes);
  if (bytes == 0) return Status::Ok();
  if (bytes > CommConfig::kMaxStagingBytes) {
    return InvalidArgument("ReserveStaging: " + std::to_string(bytes) + " bytes > " +
                           std::to_string(CommConfig::kMaxStagingBytes) + " (the largest call)");
  }
  const size_t staging =
      internal::StagedOp::StagingBytes(bytes / proto::kElemBytes, proto::kElemBytes, config().k,
                                       domain.quantizes(), /*nic_wire=*/true);
  internal::DeviceBuffers& buffers = impl_->device_buffers();
  INA_RETURN_IF_ERROR(buffers.Staging(domain, staging).status());
  buffers.ReserveNic(domain, bytes);  // quantized float32: as many int32 bytes
  return Status::Ok();
}

CommStats Communicator::stats() const { return impl_->stats(); }
std::string Communicator::device_send_path() const { return impl_->device_buffers().send_path(); }
uint16_t Communicator::window() const { return impl_->window(); }
const CommConfig& Communicator::config() const { return impl_->config(); }

}  // namespace ina::host
