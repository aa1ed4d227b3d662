// libnccl-net-ina.so: the C tables NCCL loads (ncclNetPlugin_v11/v10, ncclCollNetPlugin_v11/v10).
//
// Thin adapters: every entry converts pointers, calls the C++ classes of tcp_net.h / coll_net.h
// and turns a non-OK Status into an ncclResult_t, with the message through NCCL's logger (WARN).
// Nothing here throws; an allocation failure inside would terminate, as it does in NCCL itself.
//
// GPU buffers (docs/nccl.md, "GPU buffers"): with the CUDA path (cuda_support.h) both tables
// advertise NCCL_PTR_CUDA and take CUDA regions; CollNet all-reduces them with the
// device-memory all-reduce, the TCP net table through host bounce buffers copied on an ina
// stream. iflush completes at once: no NIC writes GPU memory directly, every copy into GPU
// memory has completed before the request that wrote it reports done.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "coll_net.h"
#include "cuda_support.h"
#include "ina/base/log_line.h"
#include "ina/host/config.h"
#include "nccl_abi.h"
#include "tcp_net.h"

namespace ina::nccl {
namespace {

std::atomic<ncclDebugLogger_t> g_logger{nullptr};

__attribute__((format(printf, 2, 3))) void Log(ncclDebugLogLevel level, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  ncclDebugLogger_t logger = g_logger.load();
  if (logger != nullptr) {
    logger(level, NCCL_NET, __FILE__, __LINE__, "NET/ina : %s", msg);
  } else if (level == NCCL_LOG_WARN) {
    WriteLine(STDERR_FILENO, msg);
  }
}

// The one place a Status becomes an ncclResult_t.
ncclResult_t Fail(const Status& st, const char* where) {
  Log(NCCL_LOG_WARN, "%s: %s", where, st.ToString().c_str());
  switch (st.code()) {
    case StatusCode::kInvalidArgument:
      return ncclInvalidArgument;
    case StatusCode::kFailedPrecondition:
      return ncclInvalidUsage;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kAborted:
    case StatusCode::kDataLoss:
      return ncclRemoteError;
    case StatusCode::kResourceExhausted:
    case StatusCode::kAlreadyExists:
      return ncclSystemError;
    default:
      return ncclInternalError;
  }
}

#define INA_NCCL_CHECK(expr, where)           \
  do {                                        \
    ::ina::Status st_ = (expr);               \
    if (!st_.ok()) return Fail(st_, (where)); \
  } while (0)

struct Context {
  uint64_t comm_id;
};

struct MemRegion {
  void* data;
  size_t size;
  int type;    // NCCL_PTR_HOST or NCCL_PTR_CUDA
  int device;  // the CUDA device of a CUDA region, -1 for host memory
};

bool EnvOn(const char* name, bool def) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return def;
  const std::string s(v);
  return !(s == "0" || s == "off" || s == "no" || s == "false");
}

// Why CUDA buffers are not taken, or empty when they are: the CUDA path is available
// (cuda_support.h: built with it, a CUDA device present) and INA_NCCL_CUDA is not 0.
std::string CudaRefusal() {
  if (!EnvOn("INA_NCCL_CUDA", true)) return "INA_NCCL_CUDA=0";
  Status st = Cuda().Available();
  return st.ok() ? std::string() : st.ToString();
}

// ptrSupport of both tables: host always; CUDA where CudaRefusal() is empty; DMA-BUF on top of
// CUDA only with INA_NCCL_DMABUF=1. The data path reads NCCL's GPU buffer with CUDA kernels, not
// with a NIC: over verbs the communicator quantizes it into a NIC buffer of its own, which the
// NIC reads (GPUDirect RDMA, docs/gpu.md). So a dma-buf of NCCL's buffer brings nothing
// (docs/nccl.md).
int PtrSupport() {
  int p = NCCL_PTR_HOST;
  if (CudaRefusal().empty()) {
    p |= NCCL_PTR_CUDA;
    if (EnvOn("INA_NCCL_DMABUF", false)) p |= NCCL_PTR_DMABUF;
  }
  return p;
}

// One device name for the net and the CollNet device: NCCL's topology keys NET nodes by this
// name, and the CollNet device must be the same node as the net device (coll=1 on it), as with
// SHARP on an IB HCA.
constexpr const char* kDeviceName = "ina0";
constexpr size_t kMaxP2pBytes = size_t{1} << 30;   // test() reports sizes as int
constexpr size_t kMaxCollBytes = size_t{1} << 30;  // likewise

void FillProperties(ncclNetProperties_v11_t* p, const char* name, size_t max_coll_bytes) {
  std::memset(p, 0, sizeof(*p));
  p->name = const_cast<char*>(name);
  p->pciPath = nullptr;  // not a PCI device: NCCL places it under the CPU
  p->guid = 0x696e61;    // "ina"
  p->ptrSupport = PtrSupport();
  p->regIsGlobal = 0;
  p->forceFlush = 0;
  p->speed = 10000;  // Mbit/s; the fabric's real rate is not known to the host
  p->port = 0;
  p->latency = 0;
  p->maxComms = 65536;
  p->maxRecvs = 1;
  p->netDeviceType = NCCL_NET_DEVICE_HOST;
  p->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = 0;
  p->maxP2pBytes = kMaxP2pBytes;
  p->maxCollBytes = max_coll_bytes;
  p->maxMultiRequestSize = 1;
}

ncclResult_t MemReg(void* data, size_t size, int type, void** mhandle, const char* where) {
  *mhandle = nullptr;
  if (type == NCCL_PTR_HOST) {
    *mhandle = new MemRegion{data, size, type, -1};
    return ncclSuccess;
  }
  if (type != NCCL_PTR_CUDA) {
    return Fail(InvalidArgument("memory type " + std::to_string(type) +
                                " (NCCL_PTR_HOST or NCCL_PTR_CUDA)"),
                where);
  }
  if (std::string why = CudaRefusal(); !why.empty()) {
    return Fail(InvalidArgument("memory type NCCL_PTR_CUDA: GPU buffers are not taken: " + why),
                where);
  }
  Result<int> device = Cuda().DeviceOf(data);
  if (!device.ok()) return Fail(device.status().WithContext("NCCL_PTR_CUDA region"), where);
  *mhandle = new MemRegion{data, size, type, *device};
  return ncclSuccess;
}

// A dma-buf fd as NCCL passes it (from cuMemGetHandleForAddressRange; NCCL closes it after the
// call). Checked, not kept: the data path reads the region through the CUDA runtime.
Status CheckDmabufFd(int fd) {
  const std::string what = "dma-buf fd " + std::to_string(fd);
  if (fd < 0) return InvalidArgument(what + " is not a file descriptor");
  char target[256];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
  if (n < 0 || fcntl(fd, F_GETFD) < 0) return InvalidArgument(what + " is not an open descriptor");
  target[n] = '\0';
  // The kernel names dma-buf files "/dmabuf:<name>" (older kernels "anon_inode:dmabuf").
  if (std::strncmp(target, "/dmabuf:", 8) != 0 && std::strcmp(target, "anon_inode:dmabuf") != 0) {
    return InvalidArgument(what + " is not a dma-buf (it is " + target + ")");
  }
  return Status::Ok();
}

ncclResult_t MemRegDmaBuf(void* data, size_t size, int type, uint64_t offset, int fd,
                          void** mhandle, const char* where) {
  *mhandle = nullptr;
  INA_NCCL_CHECK(CheckDmabufFd(fd), where);
  return MemReg(data, size, type, mhandle, where);
}

// The net table's GPU buffers: TCP moves host bytes, so a CUDA send is copied to a host bounce
// buffer before it is queued, and a CUDA receive lands in one and is copied to the GPU when its
// test reports done (before NCCL sees done). Keyed by the TCP request.
struct Bounce {
  std::vector<uint8_t> host;
  void* device_ptr = nullptr;  // the receive's GPU buffer; nullptr for a send
  int device = -1;
};
std::mutex g_bounce_mu;
std::unordered_map<void*, Bounce> g_bounces;
std::atomic<int> g_bounce_count{0};

const MemRegion* CudaRegion(void* mhandle) {
  auto* m = static_cast<const MemRegion*>(mhandle);
  return m != nullptr && m->device >= 0 ? m : nullptr;
}

ncclResult_t MemDereg(void* comm, void* mhandle) {
  delete static_cast<MemRegion*>(mhandle);
  return ncclSuccess;
}

// ---------------- net (point to point over TCP) ----------------

ncclResult_t NetInit(void** ctx, uint64_t comm_id, ncclNetCommConfig_v11_t* config,
                     ncclDebugLogger_t logger, ncclProfilerCallback_t prof) {
  if (logger != nullptr) g_logger.store(logger);
  *ctx = new Context{comm_id};
  const std::string why = CudaRefusal();
  Log(NCCL_LOG_INFO, "TCP point-to-point transport, comm %llx; buffers: %s%s",
      static_cast<unsigned long long>(comm_id),
      why.empty() ? "host and CUDA" : "host only: ", why.c_str());
  return ncclSuccess;
}

ncclResult_t NetDevices(int* ndev) {
  *ndev = 1;
  return ncclSuccess;
}

ncclResult_t NetGetProperties(int dev, ncclNetProperties_v11_t* props) {
  if (dev != 0) return Fail(InvalidArgument("device " + std::to_string(dev)), "getProperties");
  FillProperties(props, kDeviceName, kMaxCollBytes);
  return ncclSuccess;
}

ncclResult_t NetListen(void* ctx, int dev, void* handle, void** listen_comm) {
  *listen_comm = nullptr;
  auto addr = ListenAddress();
  if (!addr.ok()) return Fail(addr.status(), "listen");
  auto l = TcpListener::Listen(*addr);
  if (!l.ok()) return Fail(l.status(), "listen");
  (*l)->handle().Encode(static_cast<uint8_t*>(handle));
  *listen_comm = l->release();
  return ncclSuccess;
}

ncclResult_t NetConnect(void* ctx, int dev, void* handle, void** send_comm,
                        ncclNetDeviceHandle_v11_t** send_dev_comm) {
  *send_comm = nullptr;
  auto* h = static_cast<uint8_t*>(handle);
  auto* c = static_cast<TcpConnector*>(NetHandle::GetState(h));
  if (c == nullptr) {
    auto to = NetHandle::Decode(h);
    if (!to.ok()) return Fail(to.status(), "connect");
    auto started = TcpConnector::Start(*to);
    if (!started.ok()) return Fail(started.status(), "connect");
    c = started->release();
    NetHandle::SetState(h, c);
  }
  auto comm = c->TryFinish();
  if (!comm.ok() || *comm != nullptr) {
    delete c;
    NetHandle::SetState(h, nullptr);
  }
  if (!comm.ok()) return Fail(comm.status(), "connect");
  *send_comm = comm->release();  // nullptr: not yet, NCCL calls again
  return ncclSuccess;
}

ncclResult_t NetAccept(void* listen_comm, void** recv_comm,
                       ncclNetDeviceHandle_v11_t** recv_dev_comm) {
  *recv_comm = nullptr;
  auto comm = static_cast<TcpListener*>(listen_comm)->TryAccept();
  if (!comm.ok()) return Fail(comm.status(), "accept");
  *recv_comm = comm->release();
  return ncclSuccess;
}

ncclResult_t NetRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return MemReg(data, size, type, mhandle, "regMr");
}

ncclResult_t NetRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                            void** mhandle) {
  return MemRegDmaBuf(data, size, type, offset, fd, mhandle, "regMrDmaBuf");
}

ncclResult_t NetIsend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                      void* phandle, void** request) {
  *request = nullptr;
  if (const MemRegion* m = CudaRegion(mhandle)) {
    Bounce b;
    b.host.resize(size);
    INA_NCCL_CHECK(Cuda().CopyToHost(b.host.data(), data, size, m->device), "isend");
    std::lock_guard<std::mutex> lock(g_bounce_mu);
    auto r = static_cast<TcpComm*>(send_comm)->Post(b.host.data(), size, tag, TcpComm::Dir::kSend);
    if (!r.ok()) return Fail(r.status(), "isend");
    if (*r != nullptr) {
      g_bounces[*r] = std::move(b);  // the vector's buffer moves with it
      g_bounce_count.fetch_add(1);
    }
    *request = *r;
    return ncclSuccess;
  }
  auto r = static_cast<TcpComm*>(send_comm)->Post(data, size, tag, TcpComm::Dir::kSend);
  if (!r.ok()) return Fail(r.status(), "isend");
  *request = *r;
  return ncclSuccess;
}

ncclResult_t NetIrecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                      void** mhandles, void** phandles, void** request) {
  if (n != 1) {
    return Fail(InvalidArgument("irecv of " + std::to_string(n) + " buffers (maxRecvs is 1)"),
                "irecv");
  }
  *request = nullptr;
  if (const MemRegion* m = CudaRegion(mhandles != nullptr ? mhandles[0] : nullptr)) {
    Bounce b;
    b.host.resize(sizes[0]);
    b.device_ptr = data[0];
    b.device = m->device;
    std::lock_guard<std::mutex> lock(g_bounce_mu);
    auto r = static_cast<TcpComm*>(recv_comm)->Post(b.host.data(), sizes[0], tags[0],
                                                    TcpComm::Dir::kRecv);
    if (!r.ok()) return Fail(r.status(), "irecv");
    if (*r != nullptr) {
      g_bounces[*r] = std::move(b);
      g_bounce_count.fetch_add(1);
    }
    *request = *r;
    return ncclSuccess;
  }
  auto r = static_cast<TcpComm*>(recv_comm)->Post(data[0], sizes[0], tags[0], TcpComm::Dir::kRecv);
  if (!r.ok()) return Fail(r.status(), "irecv");
  *request = *r;
  return ncclSuccess;
}

// Done at once (*request = NULL, which NCCL takes as flushed): a receive into GPU memory was
// copied there by test() before it reported done (cudaStreamSynchronize of the copy), so later
// GPU work sees the bytes; no NIC writes GPU memory directly, so there is no PCIe write to flush.
ncclResult_t NetIflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                       void** request) {
  *request = nullptr;
  if (n < 0 || (n > 0 && (data == nullptr || sizes == nullptr))) {
    return Fail(InvalidArgument("iflush of " + std::to_string(n) + " buffers"), "iflush");
  }
  return ncclSuccess;
}

ncclResult_t NetTest(void* request, int* done, int* sizes) {
  auto* r = static_cast<TcpRequest*>(request);
  bool d = false;
  size_t bytes = 0;
  if (g_bounce_count.load() == 0) {
    INA_NCCL_CHECK(r->owner->Test(r, &d, &bytes), "test");
  } else {
    Bounce b;
    bool bounced = false;
    {
      // Test and the map lookup together: once done, the slot may be posted again.
      std::lock_guard<std::mutex> lock(g_bounce_mu);
      Status st = r->owner->Test(r, &d, &bytes);
      auto it = g_bounces.find(r);
      if ((d || !st.ok()) && it != g_bounces.end()) {
        b = std::move(it->second);
        bounced = true;
        g_bounces.erase(it);
        g_bounce_count.fetch_sub(1);
      }
      INA_NCCL_CHECK(st, "test");
    }
    if (bounced && b.device_ptr != nullptr && d) {
      INA_NCCL_CHECK(Cuda().CopyToDevice(b.device_ptr, b.host.data(), bytes, b.device), "test");
    }
  }
  *done = d ? 1 : 0;
  if (d && sizes != nullptr) sizes[0] = static_cast<int>(bytes);
  return ncclSuccess;
}

ncclResult_t NetCloseComm(void* comm) {
  delete static_cast<TcpComm*>(comm);
  return ncclSuccess;
}

ncclResult_t NetCloseListen(void* listen_comm) {
  delete static_cast<TcpListener*>(listen_comm);
  return ncclSuccess;
}

ncclResult_t CtxFinalize(void* ctx) {
  delete static_cast<Context*>(ctx);
  return ncclSuccess;
}

// ---------------- CollNet (all-reduce through the fabric) ----------------

ncclResult_t CollInit(void** ctx, uint64_t comm_id, ncclDebugLogger_t logger) {
  if (logger != nullptr) g_logger.store(logger);
  *ctx = new Context{comm_id};
  return ncclSuccess;
}

ncclResult_t CollDevices(int* ndev) {
  const char* sw = std::getenv("INA_SWITCH");
  *ndev = sw != nullptr && *sw != '\0' ? 1 : 0;
  Log(NCCL_LOG_INFO, "CollNet %s", *ndev ? sw : "off (INA_SWITCH not set)");
  return ncclSuccess;
}

ncclResult_t CollGetProperties(int dev, ncclNetProperties_v11_t* props) {
  if (dev != 0) return Fail(InvalidArgument("device " + std::to_string(dev)), "getProperties");
  FillProperties(props, kDeviceName, kMaxCollBytes);
  return ncclSuccess;
}

ncclResult_t CollListen(void* ctx, int dev, void* handle, void** listen_comm) {
  *listen_comm = nullptr;
  auto config = host::CommConfig::FromEnv(host::CommConfig{});
  if (!config.ok()) return Fail(config.status(), "collnet listen");
  // Never an error here (see CollListener): connect reports it, after the handle all-gather.
  auto l = CollListener::Create(*config);
  if (!l->status().ok()) {
    Log(NCCL_LOG_WARN, "collnet listen: %s; connect will fail and NCCL use point-to-point",
        l->status().ToString().c_str());
  }
  l->handle().Encode(static_cast<uint8_t*>(handle));
  *listen_comm = l.release();
  return ncclSuccess;
}

ncclResult_t CollConnect(void* handles[], int nranks, int rank, void* listen_comm,
                         void** coll_comm) {
  *coll_comm = nullptr;
  if (listen_comm == nullptr || handles == nullptr || nranks <= 0) {
    return Fail(InvalidArgument("no listen comm or no handles"), "collnet connect");
  }
  std::vector<CollHandle> hs;
  hs.reserve(static_cast<size_t>(nranks));
  for (int i = 0; i < nranks; ++i) {
    auto h = CollHandle::Decode(static_cast<const uint8_t*>(handles[i]));
    if (!h.ok()) {
      return Fail(h.status().WithContext("node " + std::to_string(i)), "collnet connect");
    }
    hs.push_back(std::move(*h));
  }
  auto* l = static_cast<CollListener*>(listen_comm);
  if (rank == 0 && !l->status().ok()) return Fail(l->status(), "collnet connect");
  auto c = CollComm::Connect(l->config(), hs, rank);
  if (!c.ok()) return Fail(c.status(), "collnet connect");
  Log(NCCL_LOG_INFO, "CollNet job %u node %d/%d on %s:%u (K=%u, window %u)",
      static_cast<unsigned>(hs[0].job_id), rank, nranks, hs[0].switch_host.c_str(),
      static_cast<unsigned>(hs[0].switch_port), static_cast<unsigned>((*c)->config().k),
      static_cast<unsigned>((*c)->config().window));
  *coll_comm = c->release();
  return ncclSuccess;
}

// Sums only. ncclAvg never reaches a CollNet plugin: NCCL asks reduceSupport and iallreduce with
// ncclSum for it ("Network sees avg as sum", enqueue.cc) and averages on the GPU itself
// (float: PreMulSum by 1/nRanks before the network; int: SumPostDiv after), so the plugin must
// not average too (Communicator's AllReduceOptions::average is for callers that hand the average
// to ina, as the torch backend does).
bool Supported(int type, int op, ElemType* elem) {
  if (op != ncclSum) return false;
  if (type == ncclFloat32) {
    *elem = ElemType::kFloat32;
    return true;
  }
  if (type == ncclInt32) {
    *elem = ElemType::kInt32;
    return true;
  }
  return false;
}

ncclResult_t CollReduceSupport(ncclDataType_t type, ncclRedOp_t op, int* supported) {
  ElemType e;
  *supported = Supported(type, op, &e) ? 1 : 0;
  return ncclSuccess;
}

// A CUDA buffer registered for CollNet is what NCCL's iallreduce calls read and write, never more:
// the communicator's staging for its device is allocated now, sized for it (CollComm::
// ReserveStaging), so no iallreduce allocates pinned memory while NCCL's kernels run (and staging
// is never freed during a call: Communicator::AllReduce). A failed allocation fails the
// registration, with the region released.
ncclResult_t ReserveForRegion(void* coll_comm, void** mhandle, const char* where) {
  const MemRegion* m = CudaRegion(*mhandle);
  if (m == nullptr || coll_comm == nullptr) return ncclSuccess;
  Result<DeviceMemory*> mem = Cuda().Memory(m->device);
  const Status st =
      mem.ok() ? static_cast<CollComm*>(coll_comm)->ReserveStaging(m->size, **mem) : mem.status();
  if (st.ok()) return ncclSuccess;
  MemDereg(nullptr, *mhandle);
  *mhandle = nullptr;
  return Fail(st, where);
}

ncclResult_t CollRegMr(void* coll_comm, void* data, size_t size, int type, void** mhandle) {
  const ncclResult_t r = MemReg(data, size, type, mhandle, "collnet regMr");
  return r != ncclSuccess ? r : ReserveForRegion(coll_comm, mhandle, "collnet regMr");
}

ncclResult_t CollRegMrDmaBuf(void* coll_comm, void* data, size_t size, int type, uint64_t offset,
                             int fd, void** mhandle) {
  const ncclResult_t r = MemRegDmaBuf(data, size, type, offset, fd, mhandle, "collnet regMrDmaBuf");
  return r != ncclSuccess ? r : ReserveForRegion(coll_comm, mhandle, "collnet regMrDmaBuf");
}

ncclResult_t CollIallreduce(void* coll_comm, void* send, void* recv, size_t count,
                            ncclDataType_t type, ncclRedOp_t op, void* send_mh, void* recv_mh,
                            void** request) {
  *request = nullptr;
  ElemType e;
  if (!Supported(type, op, &e)) {
    return Fail(InvalidArgument("type " + std::to_string(type) + " op " + std::to_string(op) +
                                " (reduceSupport said no: only float32 and int32 sums)"),
                "iallreduce");
  }
  // GPU buffers (both registered as CUDA regions of one device): the device-memory all-reduce.
  const MemRegion* sm = CudaRegion(send_mh);
  const MemRegion* rm = CudaRegion(recv_mh);
  DeviceMemory* device = nullptr;
  if (sm != nullptr || rm != nullptr) {
    if (sm == nullptr || rm == nullptr || sm->device != rm->device) {
      return Fail(InvalidArgument("send and recv must both be CUDA memory of one device, or both "
                                  "host memory"),
                  "iallreduce");
    }
    auto mem = Cuda().Memory(rm->device);
    if (!mem.ok()) return Fail(mem.status(), "iallreduce");
    device = *mem;
  }
  auto r = static_cast<CollComm*>(coll_comm)->IAllReduce(send, recv, count, e, device);
  if (!r.ok()) return Fail(r.status(), "iallreduce");
  *request = *r;  // nullptr: all request slots busy, NCCL calls again later
  return ncclSuccess;
}

// Done at once (*request = NULL, which NCCL takes as flushed): NCCL calls it only for GPUDirect
// receives, and an iallreduce into GPU memory reports done only after every copy of the result
// into that memory completed (the CUDA memory domain's events, observed by the host), so later
// GPU work sees it; no NIC writes GPU memory directly, so there is no PCIe write to flush.
ncclResult_t CollIflush(void* coll_comm, void* data, int size, void* mhandle, void** request) {
  *request = nullptr;
  if (coll_comm == nullptr || size < 0) {
    return Fail(InvalidArgument("iflush of " + std::to_string(size) + " bytes" +
                                (coll_comm == nullptr ? " on no communicator" : "")),
                "collnet iflush");
  }
  return ncclSuccess;
}

ncclResult_t CollTest(void* request, int* done, int* size) {
  auto* r = static_cast<CollRequest*>(request);
  if (r == nullptr || r->owner == nullptr) {
    return Fail(FailedPrecondition("not a collnet request"), "collnet test");
  }
  bool d = false;
  size_t bytes = 0;
  Status st = r->owner->Test(r, &d, &bytes);
  *done = d ? 1 : 0;
  if (!st.ok()) return Fail(st, "collnet test");
  if (d && size != nullptr) *size = static_cast<int>(bytes);
  return ncclSuccess;
}

ncclResult_t CollClose(void* coll_comm) {
  delete static_cast<CollComm*>(coll_comm);
  return ncclSuccess;
}

ncclResult_t CollCloseListen(void* listen_comm) {
  delete static_cast<CollListener*>(listen_comm);
  return ncclSuccess;
}

// ---------------- v10: no context argument; one process-wide context ----------------

void* g_net_ctx_v10 = nullptr;
void* g_coll_ctx_v10 = nullptr;

static_assert(offsetof(ncclNetProperties_v11_t, maxCollBytes) ==
              offsetof(ncclNetProperties_v10_t, maxCollBytes));

ncclResult_t NetInitV10(ncclDebugLogger_t logger, ncclProfilerCallback_t prof) {
  if (g_net_ctx_v10 != nullptr) return ncclSuccess;
  return NetInit(&g_net_ctx_v10, 0, nullptr, logger, prof);
}
ncclResult_t GetPropertiesV10(ncclResult_t (*f)(int, ncclNetProperties_v11_t*), int dev,
                              ncclNetProperties_v10_t* props) {
  ncclNetProperties_v11_t p;
  ncclResult_t r = f(dev, &p);
  if (r != ncclSuccess) return r;
  // v10 is v11 without the trailing maxMultiRequestSize (static_assert above).
  std::memcpy(props, &p, sizeof(*props));
  return ncclSuccess;
}
ncclResult_t NetGetPropertiesV10(int dev, ncclNetProperties_v10_t* props) {
  return GetPropertiesV10(NetGetProperties, dev, props);
}
ncclResult_t NetListenV10(int dev, void* handle, void** listen_comm) {
  return NetListen(g_net_ctx_v10, dev, handle, listen_comm);
}
ncclResult_t NetConnectV10(int dev, ncclNetCommConfig_v10_t* config, void* handle, void** send_comm,
                           ncclNetDeviceHandle_v10_t** send_dev_comm) {
  return NetConnect(g_net_ctx_v10, dev, handle, send_comm, send_dev_comm);
}
ncclResult_t CollInitV10(ncclDebugLogger_t logger) {
  if (g_coll_ctx_v10 != nullptr) return ncclSuccess;
  return CollInit(&g_coll_ctx_v10, 0, logger);
}
ncclResult_t CollGetPropertiesV10(int dev, ncclNetProperties_v10_t* props) {
  return GetPropertiesV10(CollGetProperties, dev, props);
}
ncclResult_t CollListenV10(int dev, void* handle, void** listen_comm) {
  return CollListen(g_coll_ctx_v10, dev, handle, listen_comm);
}

}  // namespace
}  // namespace ina::nccl

// The symbols NCCL looks up with dlsym. Not const: `extern "C"` plus default visibility is what
// makes them findable (a namespace-scope const object would have internal linkage).
#define INA_EXPORT extern "C" __attribute__((visibility("default")))

using namespace ina::nccl;  // NOLINT: the tables name the adapters above

INA_EXPORT ncclNet_v11_t ncclNetPlugin_v11;
ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = "ina",
    .init = NetInit,
    .devices = NetDevices,
    .getProperties = NetGetProperties,
    .listen = NetListen,
    .connect = NetConnect,
    .accept = NetAccept,
    .regMr = NetRegMr,
    .regMrDmaBuf = NetRegMrDmaBuf,
    .deregMr = MemDereg,
    .isend = NetIsend,
    .irecv = NetIrecv,
    .iflush = NetIflush,
    .test = NetTest,
    .closeSend = NetCloseComm,
    .closeRecv = NetCloseComm,
    .closeListen = NetCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
    .finalize = CtxFinalize,
    .setNetAttr = nullptr,
};

INA_EXPORT ncclNet_v10_t ncclNetPlugin_v10;
ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = "ina",
    .init = NetInitV10,
    .devices = NetDevices,
    .getProperties = NetGetPropertiesV10,
    .listen = NetListenV10,
    .connect = NetConnectV10,
    .accept = NetAccept,
    .regMr = NetRegMr,
    .regMrDmaBuf = NetRegMrDmaBuf,
    .deregMr = MemDereg,
    .isend = NetIsend,
    .irecv = NetIrecv,
    .iflush = NetIflush,
    .test = NetTest,
    .closeSend = NetCloseComm,
    .closeRecv = NetCloseComm,
    .closeListen = NetCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
};

INA_EXPORT ncclCollNet_v11_t ncclCollNetPlugin_v11;
ncclCollNet_v11_t ncclCollNetPlugin_v11 = {
    .name = "ina",
    .init = CollInit,
    .devices = CollDevices,
    .getProperties = CollGetProperties,
    .listen = CollListen,
    .connect = CollConnect,
    .reduceSupport = CollReduceSupport,
    .regMr = CollRegMr,
    .regMrDmaBuf = CollRegMrDmaBuf,
    .deregMr = MemDereg,
    .iallreduce = CollIallreduce,
    .iallgather = nullptr,
    .ireducescatter = nullptr,
    .iflush = CollIflush,
    .test = CollTest,
    .closeColl = CollClose,
    .closeListen = CollCloseListen,
    .makeVDevice = nullptr,
    .finalize = CtxFinalize,
};

INA_EXPORT ncclCollNet_v10_t ncclCollNetPlugin_v10;
ncclCollNet_v10_t ncclCollNetPlugin_v10 = {
    .name = "ina",
    .init = CollInitV10,
    .devices = CollDevices,
    .getProperties = CollGetPropertiesV10,
    .listen = CollListenV10,
    .connect = CollConnect,
    .reduceSupport = CollReduceSupport,
    .regMr = CollRegMr,
    .regMrDmaBuf = CollRegMrDmaBuf,
    .deregMr = MemDereg,
    .iallreduce = CollIallreduce,
    .iallgather = nullptr,
    .ireducescatter = nullptr,
    .iflush = CollIflush,
    .test = CollTest,
    .closeColl = CollClose,
    .closeListen = CollCloseListen,
    .makeVDevice = nullptr,
};
