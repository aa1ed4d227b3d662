#include "process_group_ina.h"

#include <Python.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <sstream>
#include <string_view>

#include "ina/base/log_line.h"
#include "ina/base/status.h"
#include "ina/host/comm_metrics.h"
#include "ina/host/job_alloc.h"
#include "ina/proto/sec.h"

namespace ina::torch_backend {
namespace {

using ina::host::CommConfig;
using ina::host::Communicator;

constexpr char kFabricKey[] = "ina/fabric";
constexpr char kRecoverKey[] = "ina/recover";
// A keyed job's secret as rank 0 made it (hex), for the other ranks; deleted once all joined.
constexpr char kSecretKey[] = "ina/job_secret";

std::string StoreString(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }
std::string Hex(std::span<const uint8_t> b) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (uint8_t x : b) {
    s += kDigits[x >> 4];
    s += kDigits[x & 15];
  }
  return s;
}
std::vector<uint8_t> StoreBytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

bool FabricDtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kInt || t == at::kHalf || t == at::kBFloat16 ||
         t == at::kDouble;
}

std::string OpName(uint8_t op) {
  switch (op) {
    case c10d::ReduceOp::SUM:
      return "SUM";
    case c10d::ReduceOp::AVG:
      return "AVG";
    case c10d::ReduceOp::PRODUCT:
      return "PRODUCT";
    case c10d::ReduceOp::MIN:
      return "MIN";
    case c10d::ReduceOp::MAX:
      return "MAX";
    case c10d::ReduceOp::BAND:
      return "BAND";
    case c10d::ReduceOp::BOR:
      return "BOR";
    case c10d::ReduceOp::BXOR:
      return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM:
      return "PREMUL_SUM";
    default:
      return "op" + std::to_string(op);
  }
}

int EnvFallback() {
  const char* v = std::getenv("INA_FALLBACK");
  if (v == nullptr) return 1;
  const std::string_view s(v);
  if (s == "off" || s == "0" || s == "false" || s == "no") return 0;
  if (s == "on" || s == "1" || s == "true" || s == "yes" || s.empty()) return 1;
  TORCH_CHECK(false, "ina: INA_FALLBACK must be on or off, got '", s, "'");
  return 1;
}

// Why an all-reduce of tensors like `t` with `op` cannot go through the fabric; empty if it can.
std::string FabricRefusal(const at::Tensor& t, uint8_t op) {
  if (op != c10d::ReduceOp::SUM && op != c10d::ReduceOp::AVG) {
    return "the fabric sums (op " + OpName(op) + ")";
  }
  if (!FabricDtype(t.scalar_type())) {
    return "the fabric takes float32/int32 (and float16/bfloat16/float64 through float32), not " +
           std::string(c10::toString(t.scalar_type()));
  }
  if (!t.device().is_cpu() && !t.device().is_cuda()) {
    return "the fabric takes CPU and CUDA tensors, not " + t.device().str();
  }
  if (t.layout() != at::kStrided) return "the fabric sums dense tensors only";
  return "";
}

// In-place AVG after a Gloo sum (the fabric averages itself: AllReduceOptions::average, with the
// same definition): float division, int32 truncating toward zero (as NCCL's). On CUDA by a 0-dim
// device tensor: ATen's CUDA kernel turns a division by a CPU scalar into a multiplication by its
// reciprocal, which would differ from the CPU path's IEEE division.
void DivideByWorld(at::Tensor& t, int world) {
  if (t.scalar_type() == at::kInt) {
    t.div_(world, "trunc");
  } else if (t.is_cuda()) {
    t.div_(at::full({}, world, t.options()));
  } else {
    t.div_(world);
  }
}

// The world parts of a reduce_scatter_tensor / all_gather_into_tensor buffer that holds world x
// `part`'s elements, as views shaped like `part`.
std::vector<at::Tensor> Parts(const at::Tensor& buffer, const at::Tensor& part, int world,
                              const char* what) {
  TORCH_CHECK(buffer.numel() == part.numel() * world && buffer.is_contiguous() &&
                  buffer.scalar_type() == part.scalar_type() && buffer.device() == part.device(),
              "ina: ", what,
              ": the buffer must be contiguous, of the same type and device, with "
              "world size (",
              world, ") x ", part.numel(), " elements; got ", buffer.numel());
  std::vector<at::Tensor> parts;
  for (int r = 0; r < world; ++r) {
    parts.push_back(buffer.view({-1}).narrow(0, r * part.numel(), part.numel()).view(part.sizes()));
  }
  return parts;
}

const c10::impl::DeviceGuardImplInterface* CudaImpl() {
  return c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
}

// An event of torch's CUDA guard (a cudaEvent_t behind void*), destroyed with this object.
class TorchEvent {
 public:
  explicit TorchEvent(c10::Device device) : device_(device) {}
  ~TorchEvent() {
    if (event_ != nullptr) CudaImpl()->destroyEvent(event_, device_.index());
  }
  TorchEvent(const TorchEvent&) = delete;
  TorchEvent& operator=(const TorchEvent&) = delete;
  void Record(const c10::Stream& stream) {
    CudaImpl()->record(&event_, stream, device_.index(), c10::EventFlag::PYTORCH_DEFAULT);
  }
  void Block(const c10::Stream& stream) const { CudaImpl()->block(event_, stream); }
  void* get() const { return event_; }

 private:
  c10::Device device_;
  void* event_ = nullptr;
};

std::vector<c10::Device> CudaDevices(const std::vector<at::Tensor>& tensors) {
  std::vector<c10::Device> devices;
  for (const auto& t : tensors) {
    if (t.is_cuda() && std::find(devices.begin(), devices.end(), t.device()) == devices.end()) {
      devices.push_back(t.device());
    }
  }
  return devices;
}

}  // namespace

struct CudaCall {
  CudaCall(c10::Device d, c10::Stream s) : device(d), caller(s), ready(d) {}
  c10::Device device;
  c10::Stream caller;  // torch's current stream of `device` at the call
  TorchEvent ready;    // recorded on `caller` at the call
};

InaWork::InaWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
                 std::vector<c10::Device> devices)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      cuda_(!devices.empty()),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()), std::move(devices))) {}

bool InaWork::wait(std::chrono::milliseconds timeout) {
  const bool done = c10d::Work::wait(timeout);
  if (cuda_) future_->wait();  // the current streams wait for the result's event (device side)
  return done;
}

void InaWork::Complete(std::exception_ptr error) {
  if (error) {
    finish(error);
    future_->setError(error);
  } else {
    finish();
    future_->markCompleted(c10::IValue(outputs_));
  }
}

ProcessGroupIna::ProcessGroupIna(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                 std::chrono::milliseconds timeout, BackendOptions options,
                                 c10::intrusive_ptr<InaBackendBase> gloo,
                                 c10::intrusive_ptr<InaBackendBase> recovery)
    : InaBackendBase(rank, size),
      store_(store),
      gloo_(std::move(gloo)),
      recovery_(std::move(recovery)),
      timeout_(timeout),
      device_path_(MakeDevicePath()) {
  TORCH_CHECK(gloo_ && recovery_, "ina: the Gloo groups are missing (ina_torch makes them)");
  TORCH_CHECK(gloo_->getRank() == rank && gloo_->getSize() == size &&
                  recovery_->getRank() == rank && recovery_->getSize() == size,
              "ina: the Gloo groups' rank and size differ from this group's");
  fallback_ = options.fallback >= 0 ? options.fallback != 0 : EnvFallback() != 0;
  InitFabric(options);
  thread_ = std::thread([this] { Loop(); });
  init();
}

void ProcessGroupIna::InitFabric(const BackendOptions& options) {
  // A bad setting on any rank is an error on every rank (after the rendezvous, so that no rank
  // waits out the store's timeout for one that threw), whatever the fallback says.
  std::string local_error;
  CommConfig c;
  if (auto config = CommConfig::FromEnv(CommConfig{}); config.ok()) {
    c = *config;
  } else {
    local_error = config.status().ToString();
  }
  if (!options.switch_addr.empty()) {
    const auto colon = options.switch_addr.rfind(':');
    const int port =
        colon == std::string::npos ? 0 : std::atoi(options.switch_addr.c_str() + colon + 1);
    if (colon == std::string::npos || colon == 0 || port <= 0 || port > 65535) {
      local_error = "switch option must be host:port, got '" + options.switch_addr + "'";
    } else {
      c.switch_host = options.switch_addr.substr(0, colon);
      c.switch_port = static_cast<uint16_t>(port);
    }
  }
  if (options.progress_timeout_ms >= 0) c.progress_timeout_ms = options.progress_timeout_ms;
  if (options.join_timeout_ms >= 0) c.join_timeout_ms = options.join_timeout_ms;
  if (options.k > 65535 || options.window > 65535) local_error = "k or window out of range";
  if (options.k >= 0) c.k = static_cast<uint16_t>(options.k);
  if (options.window >= 0) c.window = static_cast<uint16_t>(options.window);
  c.world_size = static_cast<uint16_t>(size_);
  c.rank = static_cast<uint16_t>(rank_);
  // A keyed job (INA_JOB_SEC mac or mac_encrypt) without INA_JOB_KEY: rank 0 makes the secret,
  // installs it at the switch with the switch's admin secret (INA_ADMIN_KEY) and shares it through
  // the store (docs/security.md, "Keys: where they come from"). Validated with a stand-in secret.
  const bool share_secret = c.sec != "crc" && c.job_secret.empty();
  ina::host::JobSecret admin;
  if (local_error.empty()) {
    CommConfig v = c;
    if (share_secret) v.job_secret = ina::host::JobSecret(std::vector<uint8_t>(32, 1));
    if (Status st = v.Validate(); !st.ok()) local_error = st.ToString();
  }
  if (local_error.empty() && share_secret && rank_ == 0) {
    if (auto a = ina::host::AdminSecretFromEnv(c, "rank 0"); a.ok()) {
      admin = std::move(*a);
    } else {
      local_error = std::string(a.status().message());  // it names INA_ADMIN_KEY
    }
  }
  ina::host::JobSecret made;  // rank 0's, when it makes the secret

  // Every rank reports its settings; rank 0 allocates the job (if every rank's are good) and
  // publishes it with the fabric's parameters.
  store_->set("ina/config/" + std::to_string(rank_),
              StoreBytes(local_error.empty() ? std::string("ok") : local_error));
  if (rank_ == 0) {
    std::string value;
    // Every rank's entry, also after an error: a rank publishes it only once its Gloo groups are
    // connected, and rank 0 must not leave (and close its side) while another still connects.
    for (int r = 0; r < size_; ++r) {
      const std::string s = StoreString(store_->get("ina/config/" + std::to_string(r)));
      if (s != "ok" && value.empty()) value = "error rank " + std::to_string(r) + ": " + s;
    }
    if (value.empty()) {
      if (auto job = ina::host::AllocateJobId(c); !job.ok()) {
        value = "none fabric at " + c.switch_host + ":" + std::to_string(c.switch_port) + ": " +
                job.status().ToString();
      } else {
        Status keyed = Status::Ok();
        if (share_secret) {
          auto secret = ina::host::MakeAndInstallJobKey(c, *job, admin.bytes());
          keyed = secret.status();
          if (keyed.ok()) {
            made = std::move(*secret);
            std::string hex = Hex(made.bytes());
            store_->set(kSecretKey, StoreBytes(hex));
            std::fill(hex.begin(), hex.end(), '0');
          }
          admin.Wipe();
        }
        if (!keyed.ok()) {
          value = "none fabric at " + c.switch_host + ":" + std::to_string(c.switch_port) + ": " +
                  keyed.ToString();
        } else {
          std::ostringstream os;
          os << "ok " << *job << ' ' << c.switch_host << ' ' << c.switch_port << ' ' << c.k << ' '
             << c.window;
          value = os.str();
        }
      }
    }
    store_->set(kFabricKey, StoreBytes(value));
  }
  const std::string published = StoreString(store_->get(kFabricKey));
  std::string why;
  if (published.rfind("ok ", 0) == 0) {
    std::istringstream is(published.substr(3));
    int job = 0, port = 0, k = 0, window = 0;
    std::string host;
    is >> job >> host >> port >> k >> window;
    TORCH_CHECK(!is.fail(), "ina: malformed store entry ", kFabricKey, ": '", published, "'");
    c.job_id = static_cast<uint16_t>(job);
    const std::string rank0_at = host + ":" + std::to_string(port);
    // A rank given its own address of the fabric (INA_SWITCH or the option: a switch reached
    // through another of its ports, as on the testbed, or a leaf of a tree) keeps it; the others
    // use rank 0's.
    if (std::getenv("INA_SWITCH") == nullptr && options.switch_addr.empty()) {
      c.switch_host = host;
      c.switch_port = static_cast<uint16_t>(port);
    }
    host = c.switch_host;
    port = c.switch_port;
    c.k = static_cast<uint16_t>(k);
    c.window = static_cast<uint16_t>(window);
    if (share_secret && local_error.empty()) {
      if (rank_ == 0) {
        c.job_secret = made;
      } else {
        std::string hex = StoreString(store_->get(kSecretKey));
        auto secret =
            ina::proto::ParseSecretHex(std::move(hex), "the store's " + std::string(kSecretKey));
        if (secret.ok()) {
          c.job_secret = ina::host::JobSecret(*secret);
          std::fill(secret->begin(), secret->end(), uint8_t{0});
        } else {
          local_error = secret.status().ToString();
        }
      }
    }
    // A rank whose switch is not rank 0's (a leaf of a tree: docs/hierarchy.md, "Keyed jobs")
    // installs the secret there too, so that every switch the job's ranks join holds the key
    // before any of them joins. The first such rank at each switch does it for all of them (the
    // store's add elects it); the others wait for its word.
    const std::string my_at = host + ":" + std::to_string(port);
    std::string key_at;  // this rank's election's store keys, deleted once every rank joined
    if (share_secret && local_error.empty() && my_at != rank0_at) {
      const std::string at = "ina/keyat/" + std::to_string(job) + "/" + my_at;
      if (store_->add(at, 1) == 1) {
        key_at = at;
        const Status st = ina::host::InstallJobKeyAtOwnSwitch(
            c, c.job_id, c.job_secret,
            "rank " + std::to_string(rank_) + ", not at rank 0's switch " + rank0_at);
        store_->set(at + "/done", StoreBytes(st.ok() ? std::string("ok") : st.ToString()));
      }
      const std::string done = StoreString(store_->get(at + "/done"));
      if (done != "ok") local_error = done;
    }
    Result<std::unique_ptr<Communicator>> comm =
        local_error.empty() ? Communicator::Create(c)
                            : Result<std::unique_ptr<Communicator>>(InvalidArgument(local_error));
    const std::string mine = comm.ok() ? "ok" : comm.status().ToString();
    store_->set("ina/join/" + std::to_string(rank_), StoreBytes(mine));
    TORCH_CHECK(local_error.empty(), "ina: rank ", rank_, ": ", local_error);
    for (int r = 0; r < size_ && why.empty(); ++r) {
      const std::string s = StoreString(store_->get("ina/join/" + std::to_string(r)));
      if (s != "ok") {
        why = "rank " + std::to_string(r) + " could not join job " + std::to_string(job) +
              " on the fabric at " + host + ":" + std::to_string(port) + ": " + s;
      }
    }
    if (!key_at.empty()) {  // every rank at this switch has read its word
      try {
        store_->deleteKey(key_at);
        store_->deleteKey(key_at + "/done");
      } catch (const std::exception&) {  // a store without deleteKey keeps them (no secret)
      }
    }
    if (share_secret && rank_ == 0) {
      // Every rank has joined (or failed): none needs the secret from the store any more.
      try {
        store_->deleteKey(kSecretKey);
      } catch (const std::exception&) {  // a store without deleteKey keeps it (documented)
      }
    }
    if (why.empty()) {
      comm_ = std::move(*comm);
      job_id_ = job;
      fabric_status_ = "active job=" + std::to_string(job) + " " + comm_->config().ToString();
      return;
    }
  } else {
    why = published.substr(published.find(' ') + 1);
    TORCH_CHECK(published.rfind("error ", 0) != 0, "ina: ", why);
    TORCH_CHECK(local_error.empty(), "ina: rank ", rank_, ": ", local_error);
  }
  fabric_status_ = "not used: " + why;
  TORCH_CHECK(fallback_, "ina: rank ", rank_, ": ", why, " (INA_FALLBACK=off)");
  LogLinef(
      "ina_torch: rank %d: WARNING: %s; every collective goes through Gloo "
      "(INA_FALLBACK=off makes this an error)\n",
      rank_, why.c_str());
}

namespace {

// Releases the GIL for its lifetime if this thread holds it (else nothing). torch before 2.8
// destroys a process group holding the GIL (pytorch/pytorch#154976), while the threads a
// destructor waits for (the backend thread, Gloo's workers) may need it to drop the last
// reference to a caller's tensor: a deadlock, seen with torch 2.6's own Gloo groups.
class GilReleased {
 public:
  GilReleased()
      : saved_(Py_IsInitialized() != 0 && PyGILState_Check() != 0 && !Finalizing()
                   ? PyEval_SaveThread()
                   : nullptr) {}
  ~GilReleased() {
    if (saved_ != nullptr) PyEval_RestoreThread(saved_);
  }
  GilReleased(const GilReleased&) = delete;
  GilReleased& operator=(const GilReleased&) = delete;

 private:
  static bool Finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing() != 0;
#else
    return _Py_IsFinalizing() != 0;
#endif
  }
  PyThreadState* saved_;
};

}  // namespace

ProcessGroupIna::~ProcessGroupIna() {
  GilReleased nogil;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stop_ = true;
  }
  queue_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  done_.clear();  // on this thread (see done_)
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    comm_.reset();
  }
  gloo_.reset();  // here, without the GIL, if these held the groups' last references
  recovery_.reset();
}

bool ProcessGroupIna::fabric_active() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return comm_ != nullptr;
}
int ProcessGroupIna::job_id() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return job_id_;
}
std::string ProcessGroupIna::fabric_status() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return fabric_status_;
}
int64_t ProcessGroupIna::fabric_calls() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return fabric_calls_;
}

std::vector<std::pair<std::string, uint64_t>> ProcessGroupIna::metrics() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  const ina::host::CommStats s = comm_ != nullptr ? comm_->stats() : ina::host::CommStats{};
  std::vector<std::pair<std::string, uint64_t>> v;
  for (const ina::host::CommStatField& f : ina::host::kCommStatFields) {
    v.emplace_back(std::string(f.name), s.*f.field);
  }
  v.emplace_back("fabric_calls", static_cast<uint64_t>(fabric_calls_));
  return v;
}

void ProcessGroupIna::Enqueue(Task task) {
  std::vector<Task> done;  // destroyed here, on the caller's thread, outside the lock
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    queue_.push_back(std::move(task));
    done.swap(done_);
  }
  queue_cv_.notify_one();
}

void ProcessGroupIna::Loop() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
    std::lock_guard<std::mutex> lock(queue_mu_);
    done_.push_back(std::move(task));  // see done_
  }
}

void ProcessGroupIna::LogOnce(const std::string& kind, const std::string& why) {
  std::lock_guard<std::mutex> lock(log_mu_);
  if (!logged_.insert(kind).second) return;
  LogLinef("ina_torch: rank %d: %s not through the fabric, because %s\n", rank_, kind.c_str(),
           why.c_str());
}

void ProcessGroupIna::WaitGloo(const c10::intrusive_ptr<c10d::Work>& work) {
  auto next_check = std::chrono::steady_clock::now();
  while (!work->isCompleted()) {
    bool active;
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      active = comm_ != nullptr;
    }
    if (!active) break;
    if (std::chrono::steady_clock::now() >= next_check) {
      if (store_->check({kRecoverKey})) {
        Recover(fabric_calls_, nullptr, "another rank's fabric call failed");
        break;
      }
      next_check = std::chrono::steady_clock::now() + std::chrono::milliseconds(10);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  work->wait();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupIna::ViaGloo(
    c10d::OpType type, const std::string& kind, const std::string& why,
    std::vector<at::Tensor> outputs, std::function<c10::intrusive_ptr<c10d::Work>()> issue) {
  return ViaGlooAll(type, kind, why, std::move(outputs),
                    [issue = std::move(issue)] { return std::vector{issue()}; });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupIna::ViaGlooAll(
    c10d::OpType type, const std::string& kind, const std::string& why,
    std::vector<at::Tensor> outputs,
    std::function<std::vector<c10::intrusive_ptr<c10d::Work>>()> issue) {
  LogOnce(kind, why);
  auto call = outputs.empty() ? nullptr : CaptureCuda(outputs[0], kind, /*fabric=*/false);
  auto work = c10::make_intrusive<InaWork>(rank_, type, outputs, CudaDevices(outputs));
  Enqueue([this, work, call, outputs, issue = std::move(issue)] {
    RunTask(call, outputs, *work, [&] {
      for (const auto& w : issue()) WaitGloo(w);
    });
  });
  return work;
}

std::shared_ptr<CudaCall> ProcessGroupIna::CaptureCuda(const at::Tensor& t, const std::string& what,
                                                       bool fabric) {
  if (!t.is_cuda()) return nullptr;
  const std::string where =
      "ina: rank " + std::to_string(rank_) + ": " + what + " of a tensor on " + t.device().str();
  if (fabric && !device_path_->built()) {
    TORCH_CHECK(false, where, ": ", device_path_->Prepare(t.device().index()).message());
  }
  TORCH_CHECK(c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA), where,
              ": this torch has no CUDA support (torch.cuda.is_available() is false)");
  if (fabric) {
    const Status st = device_path_->Prepare(t.device().index());
    TORCH_CHECK(st.ok(), where, ": the fabric's CUDA path is not usable: ", st.ToString());
  }
  auto call = std::make_shared<CudaCall>(t.device(), CudaImpl()->getStream(t.device()));
  call->ready.Record(call->caller);
  return call;
}

void ProcessGroupIna::RunTask(const std::shared_ptr<CudaCall>& call,
                              const std::vector<at::Tensor>& touched, InaWork& work,
                              const std::function<void()>& body) {
  try {
    if (call == nullptr) {
      body();
      work.Complete(nullptr);
      return;
    }
    // Torch work of this op on the ina stream, after everything the caller enqueued before the
    // call. A stream from torch's pool; the caller's own stream where the pool is not offered.
    const auto index = static_cast<size_t>(call->device.index());
    if (ina_streams_.size() <= index) ina_streams_.resize(index + 1);
    if (!ina_streams_[index]) {
      try {
        ina_streams_[index] = CudaImpl()->getStreamFromGlobalPool(call->device);
      } catch (const c10::Error&) {
        ina_streams_[index] = call->caller;
      }
    }
    const c10::Stream stream = *ina_streams_[index];
    c10::StreamGuard guard(stream);
    call->ready.Block(stream);
    // The caller's tensors are used on this stream: the caching allocator must not hand their
    // memory to another stream before this stream's work on them is done.
    for (const auto& t : touched) {
      if (t.is_cuda()) CudaImpl()->recordDataPtrOnStream(t.storage().data_ptr(), stream);
    }
    body();
    work.Complete(nullptr);  // under the guard: the future's event is recorded on `stream`
  } catch (...) {
    work.Complete(std::current_exception());
  }
}

Status ProcessGroupIna::FabricAllReduce(at::Tensor& staging, bool average) {
  const size_t n = static_cast<size_t>(staging.numel());
  const bool is_int = staging.scalar_type() == at::kInt;
  host::AllReduceOptions options;
  options.average = average;
  if (!staging.is_cuda()) {
    return is_int ? comm_->AllReduce(std::span<int32_t>(staging.data_ptr<int32_t>(), n), options)
                  : comm_->AllReduce(std::span<float>(staging.data_ptr<float>(), n), options);
  }
  // The staging copy was enqueued on the current (ina) stream; the fabric's copies start after it.
  TorchEvent ready(staging.device());
  ready.Record(CudaImpl()->getStream(staging.device()));
  const int device = staging.device().index();
  return is_int ? device_path_->AllReduce(*comm_, device,
                                          std::span<int32_t>(staging.data_ptr<int32_t>(), n),
                                          ready.get(), options)
                : device_path_->AllReduce(*comm_, device,
                                          std::span<float>(staging.data_ptr<float>(), n),
                                          ready.get(), options);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupIna::allreduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "ina: allreduce of an empty tensor list");
  const at::Tensor& t0 = tensors[0];
  for (const auto& t : tensors) {
    TORCH_CHECK(t.scalar_type() == t0.scalar_type() && t.sizes() == t0.sizes() &&
                    t.device() == t0.device() && t.layout() == t0.layout(),
                "ina: allreduce: every tensor of the list must have the same type and size");
  }
  const std::string why = FabricRefusal(t0, opts.reduceOp.op_);
  if (!why.empty()) {
    LogOnce("allreduce " + OpName(opts.reduceOp.op_) + " " +
                std::string(c10::toString(t0.scalar_type())),
            why);
  }
  auto call = CaptureCuda(t0, "allreduce", /*fabric=*/why.empty());
  auto work =
      c10::make_intrusive<InaWork>(rank_, c10d::OpType::ALLREDUCE, tensors, CudaDevices(tensors));
  Enqueue([this, work, call, tensors, opts, fabric = why.empty()]() mutable {
    RunTask(call, tensors, *work, [&] { AllreduceNow(tensors, opts, fabric); });
  });
  return work;
}

void ProcessGroupIna::AllreduceNow(std::vector<at::Tensor>& tensors,
                                   const c10d::AllreduceOptions& opts, bool fabric_capable) {
  if (!fabric_capable) {
    WaitGloo(gloo_->allreduce(tensors, opts));
    return;
  }
  const bool avg = opts.reduceOp.op_ == c10d::ReduceOp::AVG;
  const bool is_int = tensors[0].scalar_type() == at::kInt;
  // The staging buffer: contiguous float32/int32, the list summed locally (as Gloo sums a list).
  // A copy, so the caller's tensors stay untouched until the call succeeded.
  auto make_staging = [&] {
    at::Tensor s = tensors[0].to(is_int ? at::kInt : at::kFloat, /*non_blocking=*/false,
                                 /*copy=*/true, at::MemoryFormat::Contiguous);
    for (size_t i = 1; i < tensors.size(); ++i) s.add_(tensors[i]);
    return s.contiguous();
  };
  at::Tensor staging = make_staging();
  // `divide`: staging holds a Gloo sum that AVG still divides (the fabric averaged already).
  auto write_back = [&](bool divide) {
    if (divide) DivideByWorld(staging, size_);
    for (auto& t : tensors) t.copy_(staging);
  };

  bool fabric;
  std::string status;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    TORCH_CHECK(!failed_hard_, hard_error_);
    fabric = comm_ != nullptr;
    status = fabric_status_;
  }
  if (fabric) {
    Status st = FabricAllReduce(staging, avg);
    if (st.ok()) {
      {
        std::lock_guard<std::mutex> lock(state_mu_);
        ++fabric_calls_;
        last_result_ = staging;  // the call's result (averaged for AVG), never changed later
      }
      write_back(/*divide=*/false);
      return;
    }
    const std::string why = "fabric all-reduce call " + std::to_string(fabric_calls_) + " (job " +
                            std::to_string(job_id_) + ") failed: " + st.ToString();
    if (!fallback_) {
      std::string error;
      {
        std::lock_guard<std::mutex> lock(state_mu_);
        failed_hard_ = true;
        hard_error_ = "ina: rank " + std::to_string(rank_) + ": " + why + " (INA_FALLBACK=off)";
        error = hard_error_;
      }
      TORCH_CHECK(false, error);
    }
    if (Recover(fabric_calls_, &staging, why)) {
      write_back(/*divide=*/false);  // another rank's fabric result: averaged already for AVG
      return;
    }
    staging = make_staging();  // redone on Gloo from the caller's untouched input
  } else {
    LogOnce("allreduce SUM/AVG", status);
  }
  std::vector<at::Tensor> v{staging};
  c10d::AllreduceOptions sum;
  sum.reduceOp = c10d::ReduceOp::SUM;
  WaitGloo(gloo_->allreduce(v, sum));
  write_back(/*divide=*/avg);
}

bool ProcessGroupIna::Recover(int64_t failed_call, at::Tensor* staging, const std::string& why) {
  LogLinef(
      "ina_torch: rank %d: WARNING: %s; recovering and continuing on Gloo for good "
      "(INA_FALLBACK=off makes this an error)\n",
      rank_, why.c_str());
  std::unique_ptr<Communicator> comm;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    comm = std::move(comm_);
    fabric_status_ = "not used since call " + std::to_string(failed_call) + ": " + why;
  }
  comm.reset();  // LEAVE: a peer still in a fabric call fails at once (job aborted)
  store_->set(kRecoverKey, StoreBytes(std::to_string(rank_)));

  std::vector<at::Tensor> in{at::full({1}, failed_call, at::kLong)};
  std::vector<std::vector<at::Tensor>> out(1);
  for (int r = 0; r < size_; ++r) out[0].push_back(at::empty({1}, at::kLong));
  recovery_->allgather(out, in)->wait();
  int64_t lowest = failed_call;
  for (const auto& t : out[0]) lowest = std::min(lowest, t.item<int64_t>());
  int root = -1;
  for (int r = 0; r < size_ && root < 0; ++r) {
    if (out[0][r].item<int64_t>() == lowest + 1) root = r;
  }
  LogLinef(
      "ina_torch: rank %d: recovery: first failed fabric call %lld on this rank, %lld "
      "on all; %s\n",
      rank_, static_cast<long long>(failed_call), static_cast<long long>(lowest),
      root >= 0 ? ("rank " + std::to_string(root) + " hands over its result").c_str()
                : "the call is redone on Gloo");
  if (root < 0) return false;
  at::Tensor buf = failed_call == lowest ? *staging : last_result_;
  TORCH_CHECK(buf.defined(), "ina: recovery: no result of fabric call ", lowest, " on rank ",
              rank_);
  std::vector<at::Tensor> b{buf};
  c10d::BroadcastOptions bo;
  bo.rootRank = root;
  recovery_->broadcast(b, bo)->wait();
  return failed_call == lowest;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupIna::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "ina: allreduce_coalesced of an empty tensor list");
  std::string why = FabricRefusal(tensors[0], opts.reduceOp.op_);
  for (const auto& t : tensors) {
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type() && t.device() == tensors[0].device(),
                "ina: allreduce_coalesced: every tensor must have the same type and device");
  }
  if (!why.empty()) {
    return ViaGloo(
        c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced " + OpName(opts.reduceOp.op_), why,
        tensors,
        [this, tensors, opts]() mutable { return gloo_->allreduce_coalesced(tensors, opts); });
  }
  // One fabric all-reduce of the concatenation, split back into the tensors.
  auto call = CaptureCuda(tensors[0], "allreduce_coalesced", /*fabric=*/true);
  auto work = c10::make_intrusive<InaWork>(rank_, c10d::OpType::ALLREDUCE_COALESCED, tensors,
                                           CudaDevices(tensors));
  Enqueue([this, work, call, tensors, opts]() mutable {
    RunTask(call, tensors, *work, [&] {
      std::vector<at::Tensor> parts;
      for (const auto& t : tensors) parts.push_back(t.reshape({-1}));
      std::vector<at::Tensor> flat{at::cat(parts)};
      AllreduceNow(flat, opts, /*fabric_capable=*/true);
      int64_t offset = 0;
      for (auto& t : tensors) {
        t.copy_(flat[0].narrow(0, offset, t.numel()).view(t.sizes()));
        offset += t.numel();
      }
    });
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupIna::broadcast(std::vector<at::Tensor>& tensors,
                                                          const c10d::BroadcastOptions& opts) {
  return ViaGloo(c10d::OpType::BROADCAST, "broadcast", "the fabric only sums", tensors,
                 [this, tensors, opts]() mutable { return gloo_->broadcast(tensors, opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupIna::reduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::ReduceOptions& opts) {
  return ViaGloo(c10d::OpType::REDUCE, "reduce",
                 "the fabric all-reduces, it does not reduce to a root", tensors,
                 [this, tensors, opts]() mutable { return gloo_->reduce(tensors, opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupIna::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  std::vector<at::Tensor> flat;
  for (const auto& v : outputs) flat.insert(flat.end(), v.begin(), v.end());
  return ViaGloo(
      c10d::OpType::ALLGATHER, "allgather", "the fabric only sums", flat,
      [this, outputs, inputs, opts]() mutable { return gloo_->allgather(outputs, inputs, opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupIna::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  // Gloo (1.13) has no _allgather_base: an allgather into views of the output.
  TORCH_CHECK(output.is_contiguous() && output.scalar_type() == input.scalar_type() &&
                  output.numel() == input.numel() * size_,
              "ina: _allgather_base: the output must be contiguous, of the input's type, with "
              "world size x its elements");
  std::vector<std::vector<at::Tensor>> views(1);
  for (int r = 0; r < size_; ++r) {
    views[0].push_back(
        output.view({-1}).narrow(0, r * input.numel(), input.numel()).view(input.sizes()));
  }
  return ViaGloo(c10d::OpType::_ALLGATHER_BASE, "_allgather_base", "the fabric only sums", {output},
                 [this, views, input, opts]() mutable {
                   std::vector<at::Tensor> in{input};
                   return gloo_->allgather(views, in, opts);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupIna::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  std::vector<at::Tensor> flat;
  for (const auto& v : outputs) flat.insert(flat.end(), v.begin(), v.end());
  return ViaGloo(c10d::OpType::ALLGATHER_COALESCED, "allgather_coalesced", "the fabric only sums",
                 flat, [this, outputs, inputs, opts]() mutable {
                   return gloo_->allgather_coalesced(outputs, inputs, opts);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupIna::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  std::vector<at::Tensor> flat;
  for (const auto& v : outputs) flat.insert(flat.end(), v.begin(), v.end());
  return ViaGloo(
      c10d::OpType::GATHER, "gather", "the fabric only sums", flat,
      [this, outputs, inputs, opts]() mutable { return gloo_->gather(outputs, inputs, opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupIna::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  return ViaGloo(
      c10d::OpType::SCATTER, "scatter", "the fabric only sums", outputs,
      [this, outputs, inputs, opts]() mutable { return gloo_->scatter(outputs, inputs, opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupIna::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1,
              "ina: reduce_scatter takes one output tensor and one input list");
  return ReduceScatterQueued(c10d::OpType::REDUCE_SCATTER, outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupIna::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  return ReduceScatterQueued(c10d::OpType::_REDUCE_SCATTER_BASE, {output},
                             {Parts(input, output, size_, "reduce_scatter_tensor")}, opts);
}

#if INA_TORCH_BACKEND_API
c10::intrusive_ptr<c10d::Work> ProcessGroupIna::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(!outputs.empty() && outputs.size() == inputs.size(),
              "ina: reduce_scatter_tensor_coalesced: one input per output");
  std::vector<std::vector<at::Tensor>> parts;
  for (size_t i = 0; i < outputs.size(); ++i) {
    parts.push_back(Parts(inputs[i], outputs[i], size_, "reduce_scatter_tensor_coalesced"));
  }
  return ReduceScatterQueued(c10d::OpType::COALESCED, outputs, parts, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupIna::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(!outputs.empty() && outputs.size() == inputs.size(),
              "ina: allgather_into_tensor_coalesced: one input per output");
  std::vector<std::vector<std::vector<at::Tensor>>> views;
  for (size_t i = 0; i < outputs.size(); ++i) {
    views.push_back({Parts(outputs[i], inputs[i], size_, "allgather_into_tensor_coalesced")});
  }
  return ViaGlooAll(c10d::OpType::COALESCED, "allgather_into_tensor_coalesced",
                    "the fabric only sums", outputs, [this, views, inputs, opts]() mutable {
                      std::vector<c10::intrusive_ptr<c10d::Work>> works;
                      for (size_t i = 0; i < views.size(); ++i) {
                        std::vector<at::Tensor> in{inputs[i]};
                        works.push_back(gloo_->allgather(views[i], in, opts));
                      }
                      return works;
                    });
}
#endif

c10::intrusive_ptr<c10d::Work> ProcessGroupIna::ReduceScatterQueued(
    c10d::OpType type, std::vector<at::Tensor> outputs, std::vector<std::vector<at::Tensor>> inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(!outputs.empty() && outputs.size() == inputs.size(),
              "ina: reduce_scatter: one input list per output");
  const at::Tensor& first = outputs[0];
  for (size_t i = 0; i < outputs.size(); ++i) {
    TORCH_CHECK(static_cast<int>(inputs[i].size()) == size_,
                "ina: reduce_scatter: the input list must hold one tensor per rank (", size_,
                "), got ", inputs[i].size());
    TORCH_CHECK(
        outputs[i].scalar_type() == first.scalar_type() && outputs[i].device() == first.device(),
        "ina: reduce_scatter: every output must have the same type and device");
    for (const auto& t : inputs[i]) {
      TORCH_CHECK(t.scalar_type() == first.scalar_type() && t.numel() == outputs[i].numel() &&
                      t.device() == first.device(),
                  "ina: reduce_scatter: every input must have its output's type and size");
    }
  }
  // Gloo (1.13) has no reduce_scatter: it is an all-reduce of the concatenated inputs, of which
  // each rank keeps its part; through the fabric where the all-reduce can go there.
  const std::string why = FabricRefusal(first, opts.reduceOp.op_);
  LogOnce("reduce_scatter", why.empty() ? std::string("it is a fabric all-reduce of the "
                                                      "concatenated inputs")
                                        : why +
                                              "; done as a Gloo all-reduce of the concatenated "
                                              "inputs");
  auto call = CaptureCuda(first, "reduce_scatter", /*fabric=*/why.empty());
  auto work = c10::make_intrusive<InaWork>(rank_, type, outputs, CudaDevices(outputs));
  std::vector<at::Tensor> touched = outputs;
  for (const auto& list : inputs) touched.insert(touched.end(), list.begin(), list.end());
  Enqueue([this, work, call, touched, outputs, inputs, opts, fabric = why.empty()]() mutable {
    RunTask(call, touched, *work, [&] {
      std::vector<at::Tensor> parts;
      for (const auto& list : inputs) {
        for (const auto& t : list) parts.push_back(t.reshape({-1}));
      }
      std::vector<at::Tensor> flat{at::cat(parts)};
      c10d::AllreduceOptions ao;
      ao.reduceOp = opts.reduceOp;
      ao.timeout = opts.timeout;
      AllreduceNow(flat, ao, fabric);
      int64_t offset = 0;
      for (auto& out : outputs) {
        const int64_t n = out.numel();
        out.copy_(flat[0].narrow(0, offset + rank_ * n, n).view(out.sizes()));
        offset += n * size_;
      }
    });
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupIna::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  return ViaGloo(c10d::OpType::ALLTOALL_BASE, "alltoall", "the fabric only sums", {output},
                 [this, output, input, output_split_sizes, input_split_sizes, opts]() mutable {
                   return gloo_->alltoall_base(output, input, output_split_sizes, input_split_sizes,
                                               opts);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupIna::barrier(const c10d::BarrierOptions& opts) {
  return ViaGloo(c10d::OpType::BARRIER, "barrier", "it carries no data", {},
                 [this, opts]() mutable { return gloo_->barrier(opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupIna::send(std::vector<at::Tensor>& tensors, int dst_rank,
                                                     int tag) {
  LogOnce("send", "point-to-point traffic goes to Gloo directly");
  return gloo_->send(tensors, dst_rank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupIna::recv(std::vector<at::Tensor>& tensors, int src_rank,
                                                     int tag) {
  LogOnce("recv", "point-to-point traffic goes to Gloo directly");
  return gloo_->recv(tensors, src_rank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupIna::recvAnysource(std::vector<at::Tensor>& tensors,
                                                              int tag) {
  LogOnce("recv", "point-to-point traffic goes to Gloo directly");
  return gloo_->recvAnysource(tensors, tag);
}

}  // namespace ina::torch_backend
