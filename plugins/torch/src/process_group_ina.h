// ProcessGroupIna: the torch.distributed backend "ina" (docs/pytorch.md).
//
// Which torch: on torch 2.x it is a c10d::Backend, registered (ina_torch/__init__.py) for the
// devices "cpu" and "cuda", so torch's ProcessGroup dispatches every collective of those devices
// to it (reduce_scatter_tensor, pg._get_backend(device), functional collectives, DDP); on torch
// 1.13 it is the c10d::ProcessGroup itself (then the only kind of backend). The choice is made at
// compile time from TORCH_VERSION_MAJOR (InaBackendBase below); the class and every collective are
// the same code on both. _reduce_scatter_base (reduce_scatter_tensor) is on both; the coalesced
// forms only 2.x has (reduce_scatter_tensor_coalesced, allgather_into_tensor_coalesced) are built
// on 2.x only.
//
// all_reduce SUM/AVG of float32/int32 tensors (float16/bfloat16/float64 through a float32 staging
// copy) goes through the fabric (ina::host::Communicator), and so do reduce_scatter and
// allreduce_coalesced of those (one all-reduce of the concatenation); every other collective, op or
// dtype goes to a Gloo group over the same store. The Gloo groups are made by the Python creator
// (torch's own ProcessGroupGloo binding) and handed in as InaBackendBase: pip torch ships no Gloo
// headers, so this code sees Gloo only through the base class. The first use of each kind that
// does not go through the fabric logs one line saying why.
//
// Ordering: every collective, fabric or Gloo, enters one FIFO in the caller's order and one
// backend thread runs them one at a time, so the order of Gloo ops is the same on every rank.
// Point-to-point ops (send/recv) go straight to Gloo: a send waiting for its receiver must not
// hold up the collectives behind it, and their order relative to collectives plays no part in
// matching.
//
// Numerics and safety: the fabric all-reduces a staging copy, written back to the caller's
// tensors only when the call succeeded (AVG: the fabric averages, AllReduceOptions::average:
// float32 sum / float(world) with one IEEE division, int32 truncating toward zero as NCCL's does;
// a call done on Gloo divides its sum the same way). All ranks get bit-identical results.
//
// Rendezvous (constructor, blocks up to the store's timeout and the join timeout): every rank
// publishes whether its settings are valid under "ina/config/<rank>" (one bad rank: every rank
// throws, fallback or not); rank 0 asks the fabric for a job id (ina::host::AllocateJobId) and
// publishes "ok job host port k window" under "ina/fabric" in the group's store; every rank joins
// (at its own INA_SWITCH / switch option if it has one, else rank 0's address); each publishes
// whether its join worked under "ina/join/<rank>"; the fabric is used only if every rank joined.
//
// Fallback (options.fallback, default on; INA_FALLBACK=off turns it off): fabric unreachable at
// init -> warn once, every op on Gloo. A fabric call failing later (switch gone:
// DeadlineExceeded after the progress timeout; job aborted) -> warn once, recover (below), and
// every later op on Gloo. Recovery: f_r = the index of the first fabric call this rank did not
// complete. The failing rank sets "ina/recover" in the store; ranks waiting in a Gloo op see it
// and join in. Over a second Gloo group (recovery only), the ranks all-gather f_r; F = min f_r.
// If some ranks completed call F (f_r = F + 1), the lowest of them broadcasts its result of call
// F and the ranks at F take it (bit-identical to the fabric's); otherwise call F is redone on
// Gloo from the caller's untouched input. With fallback off, a fabric failure is an exception
// (c10::Error naming the cause) from wait() and the future, and later fabric calls fail too.
//
// CUDA tensors (docs/pytorch.md, "CUDA tensors"): all_reduce, all_reduce_coalesced and
// reduce_scatter of CUDA tensors go through the fabric with the device-memory all-reduce
// (DevicePath, device_path.h: drivers/gpu's CUDA memory domain), bit-identical to the CPU path.
// Without the CUDA path in this build, or with a torch without CUDA, they fail at the call with
// the reason. Streams go through c10's device-generic interface (no c10_cuda): at the call an
// event is recorded on torch's current stream of the tensors' device; the backend thread runs
// the op's torch work (staging copies, write-back) on an ina stream from torch's pool that waits
// for that event on the device, and the fabric's copies start after that work (an event again).
// The Work and its future complete when the fabric's result is in device memory and the
// write-back into the caller's tensors is enqueued on the ina stream: wait() and the future's
// wait()/then() make the caller's current stream wait for it on the device (the future is
// CUDA-aware: c10::ivalue::Future with the tensors' devices); the host does not synchronise the
// device at any point. Other collectives of CUDA tensors go to Gloo in the same way.
//
// Threading: every method may be called from any thread. Work objects complete from the backend
// thread; their futures hold the output tensors (ListType(TensorType)).
#pragma once

#include <torch/csrc/api/include/torch/version.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "device_path.h"
#include "ina/host/communicator.h"
#include "ina/host/config.h"

namespace ina::torch_backend {

// The class the backend derives from, and the type of the Gloo groups it is handed: c10d::Backend
// on torch 2.x, c10d::ProcessGroup on torch 1.13 (which has no Backend).
#if TORCH_VERSION_MAJOR >= 2
#define INA_TORCH_BACKEND_API 1
using InaBackendBase = c10d::Backend;
#else
#define INA_TORCH_BACKEND_API 0
using InaBackendBase = c10d::ProcessGroup;
#endif

// Options of one process group. Unset fields (empty, -1) take the INA_* environment, then the
// CommConfig defaults (docs/host.md).
struct BackendOptions {
  std::string switch_addr;       // "host:port" of the fabric (INA_SWITCH)
  int progress_timeout_ms = -1;  // a fabric call with no progress this long fails
  int join_timeout_ms = -1;      // every rank joined by then, or the fabric is not used
  int k = -1;                    // elements per packet (64 or 256)
  int window = -1;               // slots asked for
  int fallback = -1;             // 1 on, 0 off; -1: INA_FALLBACK (off|0 = off; default on)
};

// A Work completed by the backend thread. For outputs on CUDA devices the future is CUDA-aware
// (Complete records an event on the backend thread's current stream of each device; wait() and
// the future make the waiter's current streams wait for it on the device).
class InaWork : public c10d::Work {
 public:
  // `devices`: the CUDA devices of the outputs (empty for CPU tensors).
  InaWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
          std::vector<c10::Device> devices = {});
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return outputs_; }
  // Blocks the host until the op completed (rethrows its error); for CUDA outputs then makes the
  // caller's current streams wait for the result on the device.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  // Called once, by the backend thread. nullptr: success.
  void Complete(std::exception_ptr error);

 private:
  std::vector<at::Tensor> outputs_;
  bool cuda_ = false;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// A collective on CUDA tensors, captured on the caller's thread: the device and an event recorded
// on torch's current stream of it at the call (see the header comment).
struct CudaCall;

class ProcessGroupIna : public InaBackendBase {
 public:
  // `gloo` and `recovery`: two Gloo groups of the same ranks over their own prefixes of `store`
  // (the main one, and one used only by the recovery protocol). Throws c10::Error (init failed,
  // or fabric unreachable with fallback off).
  ProcessGroupIna(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                  std::chrono::milliseconds timeout, BackendOptions options,
                  c10::intrusive_ptr<InaBackendBase> gloo,
                  c10::intrusive_ptr<InaBackendBase> recovery);
  // Runs what is queued, then stops the backend thread (sends LEAVE to the fabric).
  ~ProcessGroupIna() override;

  const std::string getBackendName() const override { return "ina"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  // reduce_scatter_tensor: the input holds world size x the output's elements.
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
#if INA_TORCH_BACKEND_API
  // torch 2.x's coalesced reduce_scatter_tensor / all_gather_into_tensor
  // (dist._coalescing_manager): one reduce_scatter_tensor / all_gather_into_tensor per (outputs[i],
  // inputs[i]) pair, as one op.
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
#endif
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

  // Introspection (tests, logs). Thread-safe.
  bool fabric_active() const;         // the fabric is (still) in use
  int job_id() const;                 // the fabric job, -1 if none
  std::string fabric_status() const;  // "active job=...", or why not
  int64_t fabric_calls() const;       // fabric calls completed
  // The communicator's counters by name (ina/host/comm_metrics.h: packets_sent, ...) and
  // fabric_calls; zeros while no fabric is in use. Python: pg.metrics() -> dict.
  std::vector<std::pair<std::string, uint64_t>> metrics() const;

 private:
  using Task = std::function<void()>;

  void InitFabric(const BackendOptions& options);
  void Enqueue(Task task);
  void Loop();
  // Runs a Gloo collective from the backend thread to completion (rethrows its error). While the
  // fabric is active, joins a recovery another rank started.
  void WaitGloo(const c10::intrusive_ptr<c10d::Work>& work);
  // A collective through Gloo, queued. `kind` and `why` feed the once-per-kind log line.
  c10::intrusive_ptr<c10d::Work> ViaGloo(c10d::OpType type, const std::string& kind,
                                         const std::string& why, std::vector<at::Tensor> outputs,
                                         std::function<c10::intrusive_ptr<c10d::Work>()> issue);
  // Several Gloo collectives as one op: `issue` returns them in order, each is waited for.
  c10::intrusive_ptr<c10d::Work> ViaGlooAll(
      c10d::OpType type, const std::string& kind, const std::string& why,
      std::vector<at::Tensor> outputs,
      std::function<std::vector<c10::intrusive_ptr<c10d::Work>>()> issue);
  // reduce_scatter and its 2.x forms: one all-reduce (fabric where FabricRefusal allows) of the
  // concatenation of every inputs[i][r], of which outputs[i] keeps this rank's part
  // inputs[i][rank].
  c10::intrusive_ptr<c10d::Work> ReduceScatterQueued(c10d::OpType type,
                                                     std::vector<at::Tensor> outputs,
                                                     std::vector<std::vector<at::Tensor>> inputs,
                                                     const c10d::ReduceScatterOptions& opts);
  // Runs one all-reduce on the backend thread (fabric, or Gloo when !fabric_capable or the
  // fabric is not in use) and writes the result into `tensors`. Throws c10::Error.
  void AllreduceNow(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts,
                    bool fabric_capable);
  // The recovery protocol of the header comment. `failed_call` is this rank's f_r; `staging` its
  // staging buffer of call f_r when it failed that call, else nullptr. Returns true when this
  // rank took call f_r's result from another rank (into *staging).
  bool Recover(int64_t failed_call, at::Tensor* staging, const std::string& why);
  void LogOnce(const std::string& kind, const std::string& why);
  // On the caller's thread: nullptr for CPU tensors; for CUDA tensors the captured call. Throws
  // the reason (c10::Error naming `what`, the device and the cause) when `fabric` and the CUDA
  // path cannot take tensors of t's device (not built, torch without CUDA, no usable device).
  std::shared_ptr<CudaCall> CaptureCuda(const at::Tensor& t, const std::string& what, bool fabric);
  // On the backend thread: runs `body` (on the ina stream of call's device, after the caller's
  // stream, when `call` is set) and completes `work` with its result or exception.
  void RunTask(const std::shared_ptr<CudaCall>& call, const std::vector<at::Tensor>& touched,
               InaWork& work, const std::function<void()>& body);
  // A fabric all-reduce of contiguous float32/int32 `staging` (CPU or CUDA memory), in place;
  // `average`: AVG (AllReduceOptions::average).
  Status FabricAllReduce(at::Tensor& staging, bool average);

  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<InaBackendBase> gloo_;      // main Gloo group
  c10::intrusive_ptr<InaBackendBase> recovery_;  // used only by Recover
  std::chrono::milliseconds timeout_;
  bool fallback_ = true;

  // The CUDA path (device_path.h). Declared before comm_: its domains own comm_'s staging.
  std::unique_ptr<DevicePath> device_path_;
  // Per CUDA device index, the ina stream (from torch's pool) the backend thread runs torch work
  // on. Backend thread only.
  std::vector<c10::optional<c10::Stream>> ina_streams_;

  // Fabric state: touched by the backend thread after the constructor; the mutex guards reads
  // from other threads.
  mutable std::mutex state_mu_;
  std::unique_ptr<ina::host::Communicator> comm_;
  int job_id_ = -1;
  std::string fabric_status_;
  int64_t fabric_calls_ = 0;  // completed fabric calls
  at::Tensor last_result_;    // result of the last completed fabric call (AVG: averaged)
  bool failed_hard_ = false;  // fallback off and a fabric call failed
  std::string hard_error_;

  std::mutex log_mu_;
  std::set<std::string> logged_;

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<Task> queue_;
  // Tasks the backend thread ran, destroyed by the next Enqueue's caller or the destructor, never
  // by the backend thread: their captures may hold the last reference to a caller's tensor (or
  // Work), whose Python object needs the GIL to go, while the thread that drops the group's last
  // Python reference holds the GIL and joins the backend thread (a deadlock at exit, seen under
  // torchrun).
  std::vector<Task> done_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ina::torch_backend
