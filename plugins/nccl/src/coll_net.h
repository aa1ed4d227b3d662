// The CollNet side of the NCCL plugin as plain C++: the listen handle, and one collective
// communicator (an ina::host::Communicator) with a fixed pool of in-flight all-reduce requests.
//
// How NCCL uses it (src/transport/coll_net.cc, 2.28): every node's head rank calls listen, NCCL
// all-gathers the handles, every node calls connect(handles, nNodes, node). Node 0's handle names
// the fabric (INA_SWITCH of node 0), the job id (allocated at node 0's listen) and the K/window
// every node then uses. Job ids come from the fabric (ina::host::AllocateJobId), so NCCL
// communicators, torch groups and other trainings sharing a switch never collide. The other
// nodes' listens allocate ids too (listen does not know which node it is); those unused
// reservations lapse with the fabric's job timeout.
//
// Data: iallreduce(send, recv, count) copies send to recv (unless they are the same) and queues
// an in-place Communicator::AllReduceAsync on recv; every node must issue the same sequence of
// iallreduce calls (NCCL does: collnet ops are ordered). float32 sums are block-quantized
// (bit-identical on every node, within the bound of ina/host/quant.h); int32 sums are exact.
// Buffers in device memory go through a DeviceMemory (below): the copy send -> recv on the device
// and the device-memory all-reduce (Communicator::AllReduceAsync(data, domain, stream)), whose
// request completes when the result is back in recv.
//
// Threading: every method may be called from any thread (a mutex guards the request pool).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "ina/base/status.h"
#include "ina/host/communicator.h"
#include "ina/host/config.h"

namespace ina::nccl {

constexpr size_t kHandleBytes = 128;  // NCCL_NET_HANDLE_MAXSIZE

// The CollNet listen handle (NCCL copies it between nodes as opaque bytes, over its bootstrap).
// Big-endian fields. A keyed job's secret rides in it when the listener made one (see
// CollListener): NCCL's bootstrap is the job's rendezvous (docs/security.md).
struct CollHandle {
  static constexpr size_t kMaxHostLen = 79;
  static constexpr size_t kMaxSecretLen = 32;
  uint16_t job_id = 0;  // 0: that node's listen got no job id (connect then fails on node 0's)
  uint16_t switch_port = 0;
  uint16_t k = 0;
  uint16_t window = 0;
  std::string switch_host;  // at most kMaxHostLen bytes
  host::JobSecret secret;   // empty, or the job's secret (16 .. kMaxSecretLen bytes)

  // Writes kHandleBytes bytes to out. REQUIRES: switch_host.size() <= kMaxHostLen,
  // secret.size() <= kMaxSecretLen.
  void Encode(uint8_t* out) const;
  // InvalidArgument when `in` (kHandleBytes bytes) is not a handle this version wrote.
  static Result<CollHandle> Decode(const uint8_t* in);
};

// What the fabric can sum; NCCL's other (type, op) pairs go to another algorithm.
enum class ElemType { kFloat32, kInt32 };
constexpr size_t ElemBytes(ElemType) { return 4; }

// The state between listen and connect: the local config (INA_* environment) and the handle.
//
// Listen never fails: NCCL's head ranks all-gather the handles right after listen, and a node
// whose listen returned an error would skip that all-gather and leave the others waiting. A
// listen that could not get a job id writes job id 0 and keeps the reason in status(); connect
// then fails on every node (node 0's handle has no id), and NCCL falls back to point-to-point.
class CollListener {
 public:
  // `config` is the local fabric configuration (CommConfig::FromEnv); asks that fabric for a job
  // id (blocks up to config.join_timeout_ms). A keyed job (config.sec mac or mac_encrypt) without
  // a job secret (no INA_JOB_KEY): the listener makes one (host::MakeJobSecret), installs it for
  // that id with the switch's admin secret from INA_ADMIN_KEY (host::InstallJobKey) and puts it in
  // the handle; connect takes node 0's. status() afterwards: InvalidArgument (config, or a host
  // name longer than CollHandle::kMaxHostLen), FailedPrecondition (keyed without INA_JOB_KEY or
  // INA_ADMIN_KEY), AllocateJobId's and InstallJobKey's errors (DeadlineExceeded: no fabric
  // answered, or no set_key_ack; ResourceExhausted: no id free), or OK.
  static std::unique_ptr<CollListener> Create(const host::CommConfig& config);
  const CollHandle& handle() const { return handle_; }
  const host::CommConfig& config() const { return config_; }
  const Status& status() const { return status_; }

 private:
  CollListener(host::CommConfig config, CollHandle handle, Status status)
      : config_(std::move(config)), handle_(std::move(handle)), status_(std::move(status)) {}
  host::CommConfig config_;
  CollHandle handle_;
  Status status_;
};

// The device-memory side of CollComm::IAllReduce for one device: the plugin's CUDA peer
// (cuda_support.h: drivers/gpu's CUDA memory domain and an ina-owned stream), or the host memory
// domain in tests. Thread-safe.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // Starts recv[0..count) = sum over nodes of send[0..count), both in this device's memory:
  // copies send to recv on the device when they differ, then queues
  // comm.AllReduceAsync(recv, domain, stream) ordered after that copy. Does not block on the
  // device. The request completes when every copy back into recv is done.
  virtual Result<host::Request> StartAllReduce(host::Communicator& comm, const void* send,
                                               void* recv, size_t count, ElemType type) = 0;
  // comm.ReserveStaging(domain, bytes): this device's staging for calls of up to `bytes` bytes,
  // allocated now (pinned memory for CUDA), so that no StartAllReduce allocates.
  virtual Status ReserveStaging(host::Communicator& comm, size_t bytes) = 0;
};

class CollComm;

// One in-flight iallreduce: a slot of its CollComm's pool, handed to NCCL as the request.
struct CollRequest {
  CollComm* owner = nullptr;
  bool in_use = false;
  size_t bytes = 0;
  host::Request request;
};

class CollComm {
 public:
  static constexpr int kMaxRequests = 64;  // in flight per communicator; more: nullptr (retry)

  // Joins job handles[0].job_id as rank `rank` of handles.size(), with `local`'s timeouts and
  // transport, at `local`'s switch (its INA_SWITCH: node 0's, or a leaf of a tree,
  // docs/hierarchy.md). Blocks until every node joined (local.join_timeout_ms). A keyed job whose
  // secret node 0's listen made: a node at another switch than node 0's first installs that
  // secret for node 0's id there (host::InstallJobKey, INA_ADMIN_KEY). Errors: InvalidArgument
  // (rank out of range, no handles), Unavailable (node 0's listen got no job id),
  // FailedPrecondition (no INA_ADMIN_KEY where it must install), InstallJobKey's and
  // Communicator::Create's errors.
  static Result<std::unique_ptr<CollComm>> Connect(const host::CommConfig& local,
                                                   std::span<const CollHandle> handles, int rank);
  // Leaves the job (LEAVE: done when every op succeeded, else an abort); requests still in
  // flight complete with Aborted and their slots die with the communicator.
  ~CollComm();

  // Starts recv[0..count) = sum over nodes of send[0..count). send and recv may be equal or
  // disjoint, not partially overlapping; both stay untouched until Test reports done. Host
  // memory when `device` is null, else memory of that device (see DeviceMemory).
  // Returns the request, or nullptr when kMaxRequests are in flight (call again after a Test
  // reported one done). Errors: InvalidArgument (count >= 2^32 or too large for an int byte
  // count), FailedPrecondition (the communicator failed earlier, with the original error),
  // the device's errors.
  Result<CollRequest*> IAllReduce(const void* send, void* recv, size_t count, ElemType type,
                                  DeviceMemory* device = nullptr);
  // The staging of `device`'s all-reduces for calls of up to `bytes` bytes, allocated now
  // (DeviceMemory::ReserveStaging): the plugin calls it when NCCL registers a CUDA buffer for
  // CollNet (regMr), since iallreduce calls never exceed a registered buffer, so no call
  // allocates (or frees) pinned memory while NCCL's kernels run. Errors: the allocation's.
  Status ReserveStaging(size_t bytes, DeviceMemory& device);
  // Does not block. On done, *bytes is the byte count reduced and the slot is free again (the
  // pointer must not be tested again). A failed op is done too: its Status is returned.
  Status Test(CollRequest* request, bool* done, size_t* bytes);

  int rank() const { return rank_; }
  int nodes() const { return nodes_; }
  const host::CommConfig& config() const { return comm_->config(); }
  int in_flight();

 private:
  CollComm(std::unique_ptr<host::Communicator> comm, int rank, int nodes);
  std::unique_ptr<host::Communicator> comm_;
  int rank_, nodes_;
  std::mutex mu_;
  std::array<CollRequest, kMaxRequests> pool_;
};

}  // namespace ina::nccl
