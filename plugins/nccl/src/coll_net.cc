#include "coll_net.h"

#include <climits>
#include <cstring>
#include <vector>

#include "ina/host/job_alloc.h"
#include "ina/proto/wire.h"

namespace ina::nccl {
namespace {

constexpr uint8_t kMagic[4] = {'I', 'N', 'A', 'C'};
constexpr uint8_t kHandleVersion = 2;
constexpr size_t kHostOffset = 16;
constexpr size_t kSecretOffset = kHandleBytes - CollHandle::kMaxSecretLen;
static_assert(kHostOffset + CollHandle::kMaxHostLen <= kSecretOffset);

void Put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
uint16_t Get16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }

}  // namespace

void CollHandle::Encode(uint8_t* out) const {
  std::memset(out, 0, kHandleBytes);
  std::memcpy(out, kMagic, 4);
  out[4] = kHandleVersion;
  out[5] = static_cast<uint8_t>(switch_host.size());
  Put16(out + 6, job_id);
  Put16(out + 8, switch_port);
  Put16(out + 10, k);
  Put16(out + 12, window);
  out[14] = static_cast<uint8_t>(secret.size());
  std::memcpy(out + kHostOffset, switch_host.data(), switch_host.size());
  if (!secret.empty()) std::memcpy(out + kSecretOffset, secret.bytes().data(), secret.size());
}

Result<CollHandle> CollHandle::Decode(const uint8_t* in) {
  if (std::memcmp(in, kMagic, 4) != 0) {
    return InvalidArgument("collnet handle: not an ina handle (bad magic)");
  }
  if (in[4] != kHandleVersion) {
    return InvalidArgument("collnet handle: version " + std::to_string(in[4]) + ", expected " +
                           std::to_string(kHandleVersion));
  }
  CollHandle h;
  h.job_id = Get16(in + 6);
  if ((in[5] == 0 && h.job_id != 0) || in[5] > kMaxHostLen) {
    return InvalidArgument("collnet handle: host length " + std::to_string(in[5]));
  }
  h.switch_port = Get16(in + 8);
  h.k = Get16(in + 10);
  h.window = Get16(in + 12);
  h.switch_host.assign(reinterpret_cast<const char*>(in + kHostOffset), in[5]);
  if (in[14] != 0 && (in[14] < proto::kSecretMinBytes || in[14] > kMaxSecretLen)) {
    return InvalidArgument("collnet handle: secret length " + std::to_string(in[14]));
  }
  if (in[14] != 0) h.secret = host::JobSecret(std::span(in + kSecretOffset, in[14]));
  return h;
}

std::unique_ptr<CollListener> CollListener::Create(const host::CommConfig& config) {
  CollHandle h;
  h.switch_port = config.switch_port;
  h.k = config.k;
  h.window = config.window;
  // A keyed job without a secret makes its own (below); validated with a stand-in.
  const bool make_secret = config.sec != "crc" && config.job_secret.empty();
  host::CommConfig v = config;
  if (make_secret) v.job_secret = host::JobSecret(std::vector<uint8_t>(32, 1));
  Status st = v.Validate();
  host::JobSecret admin;
  if (st.ok() && make_secret) {
    if (auto a = host::AdminSecretFromEnv(config, "the plugin"); a.ok()) {
      admin = std::move(*a);
    } else {
      st = a.status().WithContext("collnet listen");
    }
  }
  if (st.ok() &&
      (config.switch_host.empty() || config.switch_host.size() > CollHandle::kMaxHostLen)) {
    st = InvalidArgument("collnet listen: switch host '" + config.switch_host + "' is " +
                         std::to_string(config.switch_host.size()) + " bytes, at most " +
                         std::to_string(CollHandle::kMaxHostLen));
  }
  if (st.ok()) {
    h.switch_host = config.switch_host;
    auto job = host::AllocateJobId(config);
    if (job.ok() && make_secret) {
      auto secret = host::MakeAndInstallJobKey(config, *job, admin.bytes());
      if (secret.ok()) {
        h.job_id = *job;
        h.secret = std::move(*secret);
      } else {
        st = secret.status().WithContext("collnet listen: job " + std::to_string(*job) +
                                         "'s key at " + config.switch_host + ":" +
                                         std::to_string(config.switch_port));
      }
    } else if (job.ok()) {
      h.job_id = *job;
    } else {
      st = job.status().WithContext("collnet listen: job id from " + config.switch_host + ":" +
                                    std::to_string(config.switch_port));
    }
  }
  return std::unique_ptr<CollListener>(new CollListener(config, std::move(h), std::move(st)));
}

CollComm::CollComm(std::unique_ptr<host::Communicator> comm, int rank, int nodes)
    : comm_(std::move(comm)), rank_(rank), nodes_(nodes) {
  for (auto& r : pool_) r.owner = this;
}

CollComm::~CollComm() {
  // Destroying the communicator completes what is still queued (Aborted) and sends LEAVE.
  comm_.reset();
}

Result<std::unique_ptr<CollComm>> CollComm::Connect(const host::CommConfig& local,
                                                    std::span<const CollHandle> handles, int rank) {
  if (handles.empty()) return InvalidArgument("collnet connect: no handles");
  if (rank < 0 || static_cast<size_t>(rank) >= handles.size()) {
    return InvalidArgument("collnet connect: rank " + std::to_string(rank) + " of " +
                           std::to_string(handles.size()));
  }
  const CollHandle& root = handles[0];
  if (root.job_id == 0) {
    return Unavailable("collnet connect: node 0's listen got no job id from the fabric (" +
                       (root.switch_host.empty()
                            ? std::string("no valid INA_SWITCH")
                            : root.switch_host + ":" + std::to_string(root.switch_port)) +
                       "; node 0's log says why)");
  }
  host::CommConfig c = local;
  const bool node0s_secret = c.sec != "crc" && c.job_secret.empty();
  if (node0s_secret) c.job_secret = root.secret;  // node 0's (listen)
  c.job_id = root.job_id;
  // A node joins at its own switch (its INA_SWITCH). Where that is not node 0's (a leaf of a
  // tree), node 0's listen installed the secret it made at its own switch only: this node installs
  // it at its own too before it joins (the same key again is no change where it is already).
  if (node0s_secret && (c.switch_host != root.switch_host || c.switch_port != root.switch_port)) {
    INA_RETURN_IF_ERROR(host::InstallJobKeyAtOwnSwitch(
        c, c.job_id, c.job_secret,
        "collnet connect: node " + std::to_string(rank) + ", not at node 0's switch"));
  }
  c.k = root.k;
  c.window = root.window;
  c.rank = static_cast<uint16_t>(rank);
  c.world_size = static_cast<uint16_t>(handles.size());
  if (handles.size() > UINT16_MAX) return InvalidArgument("collnet connect: too many nodes");
  auto comm = host::Communicator::Create(c);
  if (!comm.ok()) {
    return comm.status().WithContext("collnet connect: job " + std::to_string(c.job_id) + " rank " +
                                     std::to_string(rank) + "/" + std::to_string(handles.size()) +
                                     " at " + c.switch_host + ":" + std::to_string(c.switch_port));
  }
  return std::unique_ptr<CollComm>(
      new CollComm(std::move(*comm), rank, static_cast<int>(handles.size())));
}

Result<CollRequest*> CollComm::IAllReduce(const void* send, void* recv, size_t count, ElemType type,
                                          DeviceMemory* device) {
  const size_t bytes = count * ElemBytes(type);
  if (count >= (size_t{1} << 32) || bytes > static_cast<size_t>(INT_MAX)) {
    return InvalidArgument("collnet iallreduce: " + std::to_string(count) +
                           " elements is too many (at most INT_MAX bytes)");
  }
  if (count > 0 && send == nullptr) return InvalidArgument("collnet iallreduce: null send");
  if (count > 0 && recv == nullptr) return InvalidArgument("collnet iallreduce: null recv");
  std::lock_guard<std::mutex> lock(mu_);
  CollRequest* slot = nullptr;
  for (auto& r : pool_) {
    if (!r.in_use) {
      slot = &r;
      break;
    }
  }
  if (slot == nullptr) return static_cast<CollRequest*>(nullptr);
  Result<host::Request> req = host::Request();
  if (device != nullptr) {
    req = device->StartAllReduce(*comm_, send, recv, count, type);
  } else {
    if (send != recv && bytes > 0) std::memcpy(recv, send, bytes);
    req = type == ElemType::kFloat32
              ? comm_->AllReduceAsync(std::span<float>(static_cast<float*>(recv), count))
              : comm_->AllReduceAsync(std::span<int32_t>(static_cast<int32_t*>(recv), count));
  }
  if (!req.ok()) return req.status().WithContext("collnet iallreduce");
  slot->in_use = true;
  slot->bytes = bytes;
  slot->request = std::move(*req);
  return slot;
}

Status CollComm::ReserveStaging(size_t bytes, DeviceMemory& device) {
  return device.ReserveStaging(*comm_, bytes)
      .WithContext("collnet staging of " + std::to_string(bytes) + " bytes");
}

Status CollComm::Test(CollRequest* request, bool* done, size_t* bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (request == nullptr || request->owner != this || !request->in_use) {
    return FailedPrecondition("collnet test: not a request in flight on this communicator");
  }
  *done = false;
  if (!request->request.Test()) return Status::Ok();
  *done = true;
  *bytes = request->bytes;
  Status st = request->request.Wait();  // finished: does not block
  request->in_use = false;
  request->request = host::Request();
  if (!st.ok()) return st.WithContext("collnet allreduce");
  return Status::Ok();
}

int CollComm::in_flight() {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (auto& r : pool_) n += r.in_use ? 1 : 0;
  return n;
}

}  // namespace ina::nccl
