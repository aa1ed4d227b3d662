// Communicator: the worker side of the ina protocol (docs/protocol.md, docs/host.md).
//
// A Communicator is one rank of one job. Create() joins the job through the fabric and starts a
// progress thread that owns the transport; AllReduce calls queue operations that the thread runs
// one after another in FIFO order. Every rank of the job must issue the same sequence of calls
// with the same element type and count (that is how ranks agree on slot generations).
//
// Numerics: float tensors are block-quantized (ina/host/quant.h) with exponents agreed through
// the fabric, so every rank gets a bit-identical result within the documented error bound; a
// block in which any rank has Inf or NaN becomes all-NaN. int32 tensors are summed exactly with
// int32 wrap-around. AllReduceOptions::average divides the sum by the world size (below).
//
// Failure: if no result is accepted for config.progress_timeout_ms while an op is pending, that op
// and every queued op fail with DeadlineExceeded and the communicator is failed: later calls
// return FailedPrecondition carrying the original error. An error(job_aborted) from the fabric
// (another rank failed) fails everything at once with Aborted; an error(rank_left) (another rank
// finished after N calls) fails call N and later with Aborted. No call waits without bound.
// Destruction sends LEAVE: "done after N calls" when every call succeeded, else an abort.
//
// Threading: all methods may be called from any thread; calls are serialised in the op queue.
// The tensor passed to an async call must stay alive and untouched until its Request completes.
// An empty tensor completes at once in the calling thread without packets, so possibly before
// earlier calls still queued (it still counts as a call, in order, for rank_left).
//
// Inside: one progress thread per lane (config.progress_threads, default 1) owns its transport and
// runs the per-op state machine (host/src/comm/slot_window.h) for the lane's slots (s mod lanes ==
// lane) through the turn loop of host/src/comm/progress.h with the real clock; an op is done when
// every lane's part is, and fails with the first lane's failure; docs/host.md, "The progress
// engine" and "Lanes".
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "ina/base/status.h"
#include "ina/host/config.h"
#include "ina/host/memory_domain.h"

namespace ina::host {

struct CommStats {
  uint64_t packets_sent = 0;      // data packets, first sends and retransmissions
  uint64_t packets_received = 0;  // every packet the transport returned
  uint64_t retransmissions = 0;
  uint64_t results = 0;                // results accepted
  uint64_t stale_results_ignored = 0;  // results for an old generation, another job, malformed
  uint64_t ops_completed = 0;          // calls that succeeded, empty ones included
  uint64_t ops_failed = 0;
  uint64_t bad_crc = 0;  // packets dropped because their CRC32C trailer did not match
  // Of packets_sent, those whose payload the NIC read from the memory domain (GPUDirect RDMA,
  // docs/gpu.md): 0 over udp and dpdk, and where the domain or the NIC cannot.
  uint64_t packets_from_device = 0;
  // Keyed jobs (CommConfig::sec, docs/security.md): results dropped because their tag did not
  // verify under the job's key (forged, rewritten, replayed, damaged) or was missing; each is
  // fetched again as after a loss.
  uint64_t results_forged = 0;
  // Drops by the kernel before libina read them, because a lane's socket receive buffer was
  // full (udp; a packet, or a GSO train of up to 64 that arrived whole; each packet is a loss,
  // recovered by retransmission): a buffer too small for the window (docs/host.md, "Socket
  // buffers").
  uint64_t socket_drops = 0;
};

namespace internal {
struct OpState;
class CommunicatorFactory;  // host/src/comm/communicator_factory.h
}  // namespace internal

// Options of one all-reduce call. Every rank must pass the same options to the same call.
struct AllReduceOptions {
  // Average instead of sum: the result is the sum this call would give, element by element,
  // divided by config().world_size, with one definition on every path (host memory, a staged
  // domain that copies, a domain that quantizes: bit-identical results):
  //  - float: the float sum divided by float(world_size), correctly rounded (one IEEE division's
  //    result, round to nearest even; ina/gpu/quant_elem.h's DequantizeAvgElem gets the same bits
  //    without a division);
  //    a nonfinite block stays NaN. Fused: host memory divides each block as its result arrives,
  //    a quantizing domain divides in its Dequantize (divisor = world_size), a copying domain in
  //    staging before the copy back; never a second pass over the tensor.
  //  - int32: the wrapped int32 sum divided by world_size, truncating toward zero (C++ `/`; as
  //    NCCL's ncclAvg and torch's div(rounding_mode="trunc")).
  // world_size 1: the input, unchanged.
  bool average = false;
};

// The handle of an async all-reduce. Copyable (shared state); outlives its Communicator (a
// destroyed communicator completes its pending requests with Aborted).
class Request {
 public:
  Request() = default;  // an empty request: Test() is true, Wait() is FailedPrecondition
  // True once the op finished (successfully or not). Does not block.
  bool Test();
  // Blocks until the op finished; returns its status. Bounded: the progress engine finishes
  // every op within progress_timeout_ms of its last progress.
  Status Wait();

 private:
  friend class Communicator;
  explicit Request(std::shared_ptr<internal::OpState> s) : state_(std::move(s)) {}
  std::shared_ptr<internal::OpState> state_;
};

class Communicator {
 public:
  // Validates `config`, opens the transport (one per lane) and joins the job: sends JOIN (aux =
  // world, count = K, offset = window; with lanes, slot = lane and gen = progress_threads) every
  // 100 ms until JOIN_ACK (which gives the granted window, its epoch and lease) or ERROR or
  // join_timeout_ms, on every lane at once. Once the fabric answers JOIN_WAIT (every rank joined,
  // the job is queued for slots) it waits up to slot_wait_timeout_ms instead, then fails with
  // DeadlineExceeded naming the wait (after an aborting LEAVE). Then starts the progress threads.
  // Blocks up to join_timeout_ms + slot_wait_timeout_ms. With a lease of N calls the progress
  // thread re-joins the same way before the call after every N-th and runs on the new grant's
  // window (docs/protocol.md, "Sharing the slot pool"); a failed re-join fails that call.
  // Errors: InvalidArgument (config, or ERROR(bad_params): K/world/window/lanes differ from the
  // other ranks' or are out of range; the message names the parameter and both values), the
  // transport's error, DeadlineExceeded (not every rank joined in time), ResourceExhausted (ERROR
  // no_slots / too_many_jobs), AlreadyExists (ERROR rank_taken), Aborted (ERROR job_aborted, or
  // ERROR peer_refused: another rank's JOIN was refused, so the job cannot start; the message
  // names that rank, the parameter and its value; it comes as soon as the fabric refuses that
  // JOIN, not at the join timeout). A fabric that is not up yet (Unavailable) is retried until the
  // timeout.
  static Result<std::unique_ptr<Communicator>> Create(const CommConfig& config);
  // Fails the op in progress and the queued ones with Aborted, joins the progress threads and sends
  // LEAVE: aux 0 with the number of completed calls when every call succeeded and none was
  // pending (the fabric keeps the job for ranks still fetching lost results and tells the others
  // error(rank_left) with that count), an abort otherwise (the other ranks fail with Aborted).
  // Returns within about 10 ms (the progress thread checks its stop flag that often).
  ~Communicator();

  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // In-place all-reduce (sum, or average with options.average), blocking.
  // REQUIRES: data.size() < 2^32.
  Status AllReduce(std::span<float> data, const AllReduceOptions& options = {});
  Status AllReduce(std::span<int32_t> data,
                   const AllReduceOptions& options = {});  // exact, wrapping
  // Queues the op and returns at once. Errors: FailedPrecondition when the communicator failed.
  Result<Request> AllReduceAsync(std::span<float> data, const AllReduceOptions& options = {});
  Result<Request> AllReduceAsync(std::span<int32_t> data, const AllReduceOptions& options = {});

  // The same on a tensor in `domain`'s memory (ina/host/memory_domain.h), e.g. GPU memory with
  // ina::gpu's CUDA domain (ina/gpu/memory_domain.h). The wire traffic and the result are the
  // same, bit for bit, as the host-memory call on the same values: the tensor is staged through
  // host memory in chunks (copies enqueued on the domain's engine, overlapping the network) and
  // the result copied back chunk by chunk as the chunk's blocks complete. The copies start after
  // the work enqueued on `stream` before this call (opaque: a cudaStream_t for CUDA, nullptr for
  // the default stream / HostDomain). The request completes when the last copy back is done, so
  // after Wait() the tensor holds the result for any stream. Staging (domain.AllocStaging) is kept
  // per domain: allocated at the domain's first call (or by ReserveStaging), at least
  // config.staging_bytes' worth, and reused while large enough. A larger call allocates a larger
  // one first; the outgrown buffer is not freed before ~Communicator. Staging is never freed
  // during a call (for CUDA, cudaFreeHost may wait for the device, where a framework's kernel can
  // be waiting for this op: a deadlock); set config.staging_bytes (INA_STAGING_BYTES) or call
  // ReserveStaging so calls do not allocate at all.
  // REQUIRES: `domain` outlives this communicator (its staging is freed by ~Communicator).
  // Errors at the call: FailedPrecondition as above, InvalidArgument from
  // domain.CheckPointer (not this domain's memory) or OrderAfter. A staging allocation or copy
  // that fails fails the op and the communicator (the other ranks are aborted, as for a transport
  // error): the ranks must make the same calls, so one rank cannot skip one.
  Status AllReduce(std::span<float> data, MemoryDomain& domain, void* stream = nullptr,
                   const AllReduceOptions& options = {});
  Status AllReduce(std::span<int32_t> data, MemoryDomain& domain, void* stream = nullptr,
                   const AllReduceOptions& options = {});
  Result<Request> AllReduceAsync(std::span<float> data, MemoryDomain& domain,
                                 void* stream = nullptr, const AllReduceOptions& options = {});
  Result<Request> AllReduceAsync(std::span<int32_t> data, MemoryDomain& domain,
                                 void* stream = nullptr, const AllReduceOptions& options = {});

  // Allocates now, in the calling thread, `domain`'s staging for staged calls on tensors of up to
  // max(tensor_bytes, config().staging_bytes) bytes (float32 quantized in the domain included),
  // so that no such call allocates (for CUDA: no cudaHostAlloc while a framework's kernels run).
  // No-op when the domain's staging is large enough already or both sizes are 0. Thread-safe; a
  // call already running keeps its buffer. Blocks for the allocation only. Errors: the domain's
  // (ResourceExhausted, ...), InvalidArgument past CommConfig::kMaxStagingBytes.
  // REQUIRES: `domain` outlives this communicator.
  Status ReserveStaging(MemoryDomain& domain, size_t tensor_bytes = 0);

  CommStats stats() const;  // a snapshot; thread-safe
  // How float all-reduces in a quantizing memory domain send (docs/gpu.md, "GPUDirect RDMA"):
  // empty until the first such call over a transport that can send from device memory (verbs);
  // then "gpudirect" (payloads straight from the domain's memory), or "host staging: <why>" (the
  // reason is also printed once to stderr, and every later call stages through host memory).
  std::string device_send_path() const;  // thread-safe
  uint16_t window() const;  // slots granted by the fabric (the current grant's); thread-safe
  const CommConfig& config() const;

  class Impl;

 private:
  friend class internal::CommunicatorFactory;
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ina::host
