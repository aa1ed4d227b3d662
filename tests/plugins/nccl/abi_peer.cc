// nccl_abi_peer: one process that drives libnccl-net-ina.so's tables the way NCCL 2.28 does
// (src/transport/coll_net.cc, net.cc), started N times by nccl_plugin_abi_test.
//
//   nccl_abi_peer MODE --plugin SO --dir DIR --rank R --nodes N [--seed S] [--rounds M]
//                 [--switch ADDR:PORT]   (this node's INA_SWITCH; else the environment's)
//   MODE: coll (CollNet all-reduce), net (point-to-point, 2 ranks: 0 receives, 1 sends),
//         dead (connect, print "connected", wait for DIR/go, then one all-reduce that must fail),
//         nofabric (INA_SWITCH names no fabric: listen works, connect fails on every node),
//         bench (a figure: NCCL-sized 512 KiB steps, 16 in flight, --rounds x 8 MiB; MB/s)
//
// Handles travel through files in DIR (NCCL all-gathers them through its bootstrap). Only
// dlopen/dlsym reach the plugin: the peer sees exactly the exported tables. Prints one JSON line
// ({"ok":...}) and exits 0 iff every check passed; details of a failure go to stderr.
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nccl_abi.h"
#include "verify.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string g_last_warn;
int g_warns = 0;

void Logger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
            const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (level == NCCL_LOG_WARN) {
    ++g_warns;
    g_last_warn = msg;
  }
  std::fprintf(stderr, "[plugin %s] %s\n", level == NCCL_LOG_WARN ? "WARN" : "INFO", msg);
}

struct Args {
  std::string mode, plugin, dir;
  int rank = 0, nodes = 2, rounds = 2;
  uint64_t seed = 1;
};

std::string g_error;  // first failed check
bool Expect(bool cond, const std::string& what) {
  if (!cond && g_error.empty()) g_error = what;
  if (!cond) std::fprintf(stderr, "check failed: %s\n", what.c_str());
  return cond;
}

std::string Escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += (c == '\n' ? ' ' : c);
  }
  return o;
}

void WriteFile(const std::string& path, const void* data, size_t n) {
  std::string tmp = path + ".tmp";
  std::ofstream(tmp, std::ios::binary).write(static_cast<const char*>(data), n);
  std::rename(tmp.c_str(), path.c_str());
}

bool ReadFile(const std::string& path, void* data, size_t n, std::chrono::seconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    std::ifstream f(path, std::ios::binary);
    if (f && f.read(static_cast<char*>(data), n)) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

struct Plugin {
  void* so = nullptr;
  ncclNet_v11_t* net = nullptr;
  ncclCollNet_v11_t* coll = nullptr;
};

bool Load(const Args& a, Plugin* p) {
  p->so = dlopen(a.plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (p->so == nullptr) {
    const char* e = dlerror();
    return Expect(false, std::string("dlopen: ") + (e ? e : "?"));
  }
  p->net = static_cast<ncclNet_v11_t*>(dlsym(p->so, "ncclNetPlugin_v11"));
  p->coll = static_cast<ncclCollNet_v11_t*>(dlsym(p->so, "ncclCollNetPlugin_v11"));
  return Expect(p->net != nullptr, "no ncclNetPlugin_v11") &&
         Expect(p->coll != nullptr, "no ncclCollNetPlugin_v11") &&
         Expect(dlsym(p->so, "ncclNetPlugin_v10") != nullptr, "no ncclNetPlugin_v10") &&
         Expect(dlsym(p->so, "ncclCollNetPlugin_v10") != nullptr, "no ncclCollNetPlugin_v10");
}

// NCCL's collNetSetup: init, devices, getProperties, listen, handle all-gather, connect,
// closeListen. Returns the collComm or nullptr.
void* CollSetup(const Args& a, const Plugin& p, void** ctx) {
  const uint64_t comm_hash = 0xC0FFEE00ULL + a.seed;
  if (!Expect(p.coll->init(ctx, comm_hash, Logger) == ncclSuccess, "collnet init")) return nullptr;
  int ndev = 0;
  if (!Expect(p.coll->devices(&ndev) == ncclSuccess && ndev > 0, "collnet devices > 0")) {
    return nullptr;
  }
  ncclNetProperties_v11_t props;
  if (!Expect(p.coll->getProperties(0, &props) == ncclSuccess, "collnet getProperties")) {
    return nullptr;
  }
  Expect(props.maxCollBytes > 0 && props.maxCollBytes <= NCCL_MAX_NET_SIZE_BYTES,
         "maxCollBytes in (0, 1 TB]");
  Expect((props.ptrSupport & NCCL_PTR_HOST) != 0, "ptrSupport has NCCL_PTR_HOST");
  Expect((props.ptrSupport & NCCL_PTR_CUDA) == 0, "no GPUDirect claimed");
  Expect(props.name != nullptr && std::string(props.name) == "ina0", "collnet device ina0");
  ncclNetProperties_v11_t net_props;
  Expect(p.net->getProperties(0, &net_props) == ncclSuccess && net_props.name != nullptr &&
             std::string(net_props.name) == props.name && net_props.guid == props.guid,
         "net and collnet are one device (NCCL's topology merges them by name)");

  uint8_t handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listen_comm = nullptr;
  if (!Expect(p.coll->listen(*ctx, 0, handle, &listen_comm) == ncclSuccess && listen_comm,
              "collnet listen")) {
    return nullptr;
  }
  WriteFile(a.dir + "/coll." + std::to_string(a.rank), handle, sizeof(handle));
  std::vector<std::vector<uint8_t>> all(a.nodes, std::vector<uint8_t>(NCCL_NET_HANDLE_MAXSIZE));
  std::vector<void*> ptrs(a.nodes);
  for (int r = 0; r < a.nodes; ++r) {
    if (!Expect(ReadFile(a.dir + "/coll." + std::to_string(r), all[r].data(), all[r].size(), 30s),
                "handle of node " + std::to_string(r))) {
      return nullptr;
    }
    ptrs[r] = all[r].data();
  }
  void* coll_comm = nullptr;
  ncclResult_t rc = p.coll->connect(ptrs.data(), a.nodes, a.rank, listen_comm, &coll_comm);
  if (!Expect(rc == ncclSuccess && coll_comm != nullptr, "collnet connect")) return nullptr;
  Expect(p.coll->closeListen(listen_comm) == ncclSuccess, "closeListen");
  return coll_comm;
}

// The K every node's plugin uses: INA_K, which main sets to 256 unless given (the default, 0,
// would follow the path MTU: 2048 on loopback).
int K() {
  const char* k = std::getenv("INA_K");
  return k ? std::atoi(k) : 256;
}

struct Op {
  bool is_float;
  size_t count, send_off, recv_off;  // elements; offsets in bytes into the region
};

// The ops of one round: the same on every node (same seed), as NCCL's are.
std::vector<Op> MakeOps(uint64_t seed, int round, size_t half_bytes) {
  std::mt19937_64 rng(seed * 1000003 + round);
  std::vector<Op> ops;
  size_t off = 0;
  for (int i = 0; i < 80; ++i) {
    Op o;
    o.is_float = rng() % 3 != 0;
    o.count = 1 + rng() % 24000;
    if (i % 10 == 0) o.count = 1 + rng() % 3;  // tiny ones too
    if (off + o.count * 4 > half_bytes) break;
    o.send_off = off;
    o.recv_off = half_bytes + off;
    off += (o.count * 4 + 63) / 64 * 64;
    ops.push_back(o);
  }
  return ops;
}

int RunColl(const Args& a) {
  Plugin p;
  if (!Load(a, &p)) return 1;
  void* net_ctx = nullptr;
  Expect(p.net->init(&net_ctx, 1, nullptr, Logger, nullptr) == ncclSuccess, "net init");
  void* ctx = nullptr;
  void* cc = CollSetup(a, p, &ctx);
  if (cc == nullptr) return 1;

  // reduceSupport for 12 types x 5 ops: yes exactly for float32 and int32 sums.
  int supported_pairs = 0;
  for (int ty = 0; ty < kNcclNumTypes; ++ty) {
    for (int op = 0; op < ncclNumOps; ++op) {
      int s = -1;
      Expect(p.coll->reduceSupport(static_cast<ncclDataType_t>(ty), static_cast<ncclRedOp_t>(op),
                                   &s) == ncclSuccess,
             "reduceSupport call");
      const bool want = op == ncclSum && (ty == ncclFloat32 || ty == ncclInt32);
      Expect(s == (want ? 1 : 0), "reduceSupport type " + std::to_string(ty) + " op " +
                                      std::to_string(op) + " = " + std::to_string(s));
      supported_pairs += s == 1;
    }
  }

  // One shared buffer of 2 * nChannels * buffSize (2 channels, 4 MiB), registered twice.
  const size_t region_bytes = 2 * 2 * (size_t{4} << 20);
  const size_t half = region_bytes / 2;
  std::vector<uint8_t> region(region_bytes);
  void *send_mh = nullptr, *recv_mh = nullptr, *bad_mh = nullptr;
  Expect(p.coll->regMr(cc, region.data(), region_bytes, NCCL_PTR_HOST, &send_mh) == ncclSuccess,
         "regMr send");
  Expect(p.coll->regMr(cc, region.data(), region_bytes, NCCL_PTR_HOST, &recv_mh) == ncclSuccess,
         "regMr recv");
  Expect(p.coll->regMr(cc, region.data(), region_bytes, NCCL_PTR_CUDA, &bad_mh) != ncclSuccess,
         "regMr NCCL_PTR_CUDA refused");

  uint64_t fingerprint = 1469598103934665603ULL;
  int null_retries = 0, ops_done = 0, max_in_flight = 0;
  bool all_exact = true, all_bound = true, sizes_ok = true, send_intact = true;
  double max_rel_err = 0;
  double loop_s = 0;  // time in the post/test loops (a figure, not checked)
  size_t reduced_bytes = 0;
  for (int round = 0; round < a.rounds; ++round) {
    std::vector<Op> ops = MakeOps(a.seed, round, half);
    auto in_seed = [&](size_t i) { return a.seed * 7919 + round * 1000 + i; };
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].is_float) {
        auto v = ina::bench::MakeFloatInput(in_seed(i), a.rank, ops[i].count);
        std::memcpy(region.data() + ops[i].send_off, v.data(), v.size() * 4);
      } else {
        auto v = ina::bench::MakeIntInput(in_seed(i), a.rank, ops[i].count, i % 4 == 1);
        std::memcpy(region.data() + ops[i].send_off, v.data(), v.size() * 4);
      }
    }
    // NCCL's sendProxy: post while it can, a NULL request is retried later; test in order.
    std::vector<void*> reqs(ops.size(), nullptr);
    size_t posted = 0, tested = 0;
    auto deadline = Clock::now() + 120s;
    const auto loop_start = Clock::now();
    while (tested < ops.size()) {
      if (!Expect(Clock::now() < deadline, "round " + std::to_string(round) + " done in 120 s")) {
        return 1;
      }
      while (posted < ops.size()) {
        const Op& o = ops[posted];
        void* req = nullptr;
        ncclResult_t rc = p.coll->iallreduce(
            cc, region.data() + o.send_off, region.data() + o.recv_off, o.count,
            o.is_float ? ncclFloat32 : ncclInt32, ncclSum, send_mh, recv_mh, &req);
        if (!Expect(rc == ncclSuccess, "iallreduce " + std::to_string(posted))) return 1;
        if (req == nullptr) {
          ++null_retries;
          break;
        }
        reqs[posted++] = req;
        max_in_flight = std::max(max_in_flight, static_cast<int>(posted - tested));
      }
      int done = 0, size = -1;
      ncclResult_t rc = p.coll->test(reqs[tested], &done, &size);
      if (!Expect(rc == ncclSuccess, "test " + std::to_string(tested) + ": " + g_last_warn)) {
        return 1;
      }
      if (done) {
        sizes_ok &= Expect(size == static_cast<int>(ops[tested].count * 4),
                           "test size " + std::to_string(size));
        ++tested;
        ++ops_done;
      } else {
        std::this_thread::yield();
      }
    }
    loop_s += std::chrono::duration<double>(Clock::now() - loop_start).count();
    for (const Op& o : ops) reduced_bytes += o.count * 4;
    // Check every op against the exact expectation rebuilt from every node's inputs.
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& o = ops[i];
      const uint8_t* out = region.data() + o.recv_off;
      fingerprint ^= ina::bench::Fingerprint({out, o.count * 4}) + i;
      fingerprint *= 1099511628211ULL;
      if (o.is_float) {
        std::vector<std::vector<float>> in;
        for (int r = 0; r < a.nodes; ++r) {
          in.push_back(ina::bench::MakeFloatInput(in_seed(i), r, o.count));
        }
        send_intact &= std::memcmp(in[a.rank].data(), region.data() + o.send_off, o.count * 4) == 0;
        auto exp = ina::bench::ExpectFloat(in, K());
        auto chk = ina::bench::CheckFloat({reinterpret_cast<const float*>(out), o.count}, exp);
        if (!chk.exact || !chk.within_bound) {
          std::fprintf(stderr, "round %d op %zu (%zu floats): %s\n", round, i, o.count,
                       chk.detail.c_str());
        }
        all_exact &= chk.exact;
        all_bound &= chk.within_bound;
        max_rel_err = std::max(max_rel_err, chk.max_rel_err);
      } else {
        std::vector<std::vector<int32_t>> in;
        for (int r = 0; r < a.nodes; ++r) {
          in.push_back(ina::bench::MakeIntInput(in_seed(i), r, o.count, i % 4 == 1));
        }
        send_intact &= std::memcmp(in[a.rank].data(), region.data() + o.send_off, o.count * 4) == 0;
        auto exp = ina::bench::ExpectInt(in);
        bool eq = std::memcmp(exp.data(), out, o.count * 4) == 0;
        if (!eq) std::fprintf(stderr, "round %d op %zu (%zu int32): differs\n", round, i, o.count);
        all_exact &= eq;
      }
    }
  }
  Expect(all_exact, "results equal the exact expectation");
  Expect(all_bound, "float results within the quantization bound");
  Expect(sizes_ok, "test() sizes");
  Expect(send_intact, "send buffers untouched");
  Expect(null_retries > 0, "a NULL request (all slots busy) was seen and retried");

  // A pair reduceSupport refused is refused by iallreduce too, without harming the comm.
  void* req = reinterpret_cast<void*>(1);
  Expect(p.coll->iallreduce(cc, region.data(), region.data() + half, 16, ncclFloat64, ncclSum,
                            send_mh, recv_mh, &req) != ncclSuccess,
         "iallreduce float64 refused");
  Expect(req == nullptr, "refused iallreduce gives no request");

  // Teardown as NCCL's: deregMr, closeColl, finalize.
  Expect(p.coll->deregMr(cc, send_mh) == ncclSuccess, "deregMr send");
  Expect(p.coll->deregMr(cc, recv_mh) == ncclSuccess, "deregMr recv");
  auto t0 = Clock::now();
  Expect(p.coll->closeColl(cc) == ncclSuccess, "closeColl");
  const double close_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  Expect(p.coll->finalize(ctx) == ncclSuccess, "collnet finalize");
  Expect(p.net->finalize(net_ctx) == ncclSuccess, "net finalize");
  std::printf(
      "{\"ok\": %s,\"rank\": %d,\"ops\": %d,\"null_retries\": %d,\"max_in_flight\": %d,"
      "\"supported_pairs\": %d,\"fingerprint\": \"%016llx\",\"max_rel_err\": %g,\"close_ms\": %.1f,"
      "\"reduced_bytes\": %zu,\"allreduce_s\": %.3f,\"allreduce_mb_per_s\": %.1f,"
      "\"error\": \"%s\"}\n",
      g_error.empty() ? "true" : "false", a.rank, ops_done, null_retries, max_in_flight,
      supported_pairs, static_cast<unsigned long long>(fingerprint), max_rel_err, close_ms,
      reduced_bytes, loop_s, reduced_bytes / 1e6 / loop_s, Escape(g_error).c_str());
  return g_error.empty() ? 0 : 1;
}

uint8_t Byte(uint64_t seed, int msg, size_t i) {
  return static_cast<uint8_t>((seed * 31 + msg * 131 + i * 7 + (i >> 9)) & 0xff);
}

int RunNet(const Args& a) {
  Plugin p;
  if (!Load(a, &p)) return 1;
  void* ctx = nullptr;
  if (!Expect(p.net->init(&ctx, 7, nullptr, Logger, nullptr) == ncclSuccess, "net init")) {
    return 1;
  }
  int ndev = 0;
  Expect(p.net->devices(&ndev) == ncclSuccess && ndev == 1, "net devices == 1");
  ncclNetProperties_v11_t props;
  Expect(p.net->getProperties(0, &props) == ncclSuccess, "net getProperties");
  Expect(props.ptrSupport == NCCL_PTR_HOST && props.maxRecvs == 1 && props.maxP2pBytes > 0,
         "net properties");

  // Phase A: 40 tiny messages posted without waiting (the 33rd must find the comm full).
  // Phase B: 24 messages of random sizes (0 .. 2 MiB), at most 8 in flight.
  std::mt19937_64 rng(a.seed);
  std::vector<size_t> sizes(40, 16);
  for (int i = 0; i < 24; ++i) {
    size_t s = rng() % 5 == 0 ? rng() % 16 : rng() % (size_t{2} << 20);
    if (i == 0) s = 0;
    sizes.push_back(s);
  }
  const int n = static_cast<int>(sizes.size());
  std::vector<std::vector<uint8_t>> bufs(n);
  int null_seen = 0;
  bool content_ok = true, sizes_ok = true;
  auto deadline = Clock::now() + 60s;
  uint8_t handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* comm = nullptr;
  void* listen_comm = nullptr;
  if (a.rank == 0) {
    Expect(p.net->listen(ctx, 0, handle, &listen_comm) == ncclSuccess, "net listen");
    WriteFile(a.dir + "/net.0", handle, sizeof(handle));
    while (comm == nullptr && Clock::now() < deadline) {
      if (!Expect(p.net->accept(listen_comm, &comm, nullptr) == ncclSuccess, "accept")) return 1;
      if (comm == nullptr) std::this_thread::sleep_for(1ms);
    }
  } else {
    if (!Expect(ReadFile(a.dir + "/net.0", handle, sizeof(handle), 30s), "net handle")) return 1;
    int calls = 0;
    while (comm == nullptr && Clock::now() < deadline) {
      if (!Expect(p.net->connect(ctx, 0, handle, &comm, nullptr) == ncclSuccess, "connect")) {
        return 1;
      }
      ++calls;
      if (comm == nullptr) std::this_thread::sleep_for(1ms);
    }
    std::fprintf(stderr, "connect returned a comm after %d calls\n", calls);
  }
  if (!Expect(comm != nullptr, "connected within 60 s")) return 1;

  const bool sender = a.rank == 1;
  for (int i = 0; i < n; ++i) {
    bufs[i].resize(sizes[i] + (sender ? 0 : 100));  // receive buffers larger than the message
    if (sender) {
      for (size_t j = 0; j < sizes[i]; ++j) bufs[i][j] = Byte(a.seed, i, j);
    }
  }
  void* mh = nullptr;
  std::vector<uint8_t> dummy(64);
  Expect(p.net->regMr(comm, dummy.data(), dummy.size(), NCCL_PTR_HOST, &mh) == ncclSuccess,
         "net regMr");
  std::vector<void*> reqs(n, nullptr);
  int posted = 0, tested = 0;
  while (tested < n) {
    if (!Expect(Clock::now() < deadline, "messages done within 60 s")) return 1;
    const int limit = posted < 40 ? n : tested + 8;
    while (posted < n && posted < limit) {
      void* req = nullptr;
      ncclResult_t rc;
      if (sender) {
        rc = p.net->isend(comm, bufs[posted].data(), sizes[posted], posted, mh, nullptr, &req);
      } else {
        void* data = bufs[posted].data();
        size_t size = bufs[posted].size();
        int tag = posted;
        rc = p.net->irecv(comm, 1, &data, &size, &tag, &mh, nullptr, &req);
      }
      if (!Expect(rc == ncclSuccess, "post " + std::to_string(posted))) return 1;
      if (req == nullptr) {
        ++null_seen;
        break;
      }
      reqs[posted++] = req;
    }
    int done = 0, size = -1;
    if (!Expect(p.net->test(reqs[tested], &done, &size) == ncclSuccess, "net test")) return 1;
    if (done) {
      sizes_ok &= Expect(size == static_cast<int>(sizes[tested]),
                         "size of message " + std::to_string(tested) + ": " + std::to_string(size) +
                             " != " + std::to_string(sizes[tested]));
      if (!sender) {
        for (size_t j = 0; j < sizes[tested]; ++j) {
          if (bufs[tested][j] != Byte(a.seed, tested, j)) {
            content_ok = Expect(
                false, "byte " + std::to_string(j) + " of message " + std::to_string(tested));
            break;
          }
        }
      }
      ++tested;
    }
  }
  Expect(content_ok && sizes_ok, "every message arrived intact");
  Expect(null_seen > 0, "a full comm returned a NULL request");
  Expect(p.net->deregMr(comm, mh) == ncclSuccess, "net deregMr");
  if (sender) {
    Expect(p.net->closeSend(comm) == ncclSuccess, "closeSend");
  } else {
    Expect(p.net->closeRecv(comm) == ncclSuccess, "closeRecv");
    Expect(p.net->closeListen(listen_comm) == ncclSuccess, "closeListen");
  }
  Expect(p.net->finalize(ctx) == ncclSuccess, "net finalize");
  std::printf("{\"ok\": %s,\"rank\": %d,\"messages\": %d,\"null_seen\": %d,\"error\": \"%s\"}\n",
              g_error.empty() ? "true" : "false", a.rank, tested, null_seen,
              Escape(g_error).c_str());
  return g_error.empty() ? 0 : 1;
}

int RunDead(const Args& a) {
  Plugin p;
  if (!Load(a, &p)) return 1;
  void* ctx = nullptr;
  void* cc = CollSetup(a, p, &ctx);
  if (cc == nullptr) return 1;
  std::printf("connected\n");
  std::fflush(stdout);
  char go;
  if (!Expect(ReadFile(a.dir + "/go", &go, 1, 60s), "go file")) return 1;
  std::vector<float> buf(100000, 1.0f);
  void* mh = nullptr;
  Expect(p.coll->regMr(cc, buf.data(), buf.size() * 4, NCCL_PTR_HOST, &mh) == ncclSuccess, "regMr");
  auto t0 = Clock::now();
  void* req = nullptr;
  ncclResult_t rc = p.coll->iallreduce(cc, buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum,
                                       mh, mh, &req);
  int done = 0, size = 0;
  while (rc == ncclSuccess && req != nullptr && !done && Clock::now() - t0 < 60s) {
    rc = p.coll->test(req, &done, &size);
    if (rc == ncclSuccess && !done) std::this_thread::sleep_for(1ms);
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  Expect(rc != ncclSuccess, "an error from iallreduce/test with the switch dead");
  Expect(g_warns > 0, "the error's message went through the logger");
  Expect(p.coll->deregMr(cc, mh) == ncclSuccess, "deregMr");
  Expect(p.coll->closeColl(cc) == ncclSuccess, "closeColl after the failure");
  Expect(p.coll->finalize(ctx) == ncclSuccess, "finalize");
  std::printf(
      "{\"ok\": %s,\"rank\": %d,\"result\": %d,\"error_after_ms\": %.1f,\"warn\": \"%s\","
      "\"error\": \"%s\"}\n",
      g_error.empty() ? "true" : "false", a.rank, static_cast<int>(rc), ms,
      Escape(g_last_warn).c_str(), Escape(g_error).c_str());
  return g_error.empty() ? 0 : 1;
}

// A figure, not a check: NCCL's steady state for a large float32 all-reduce. The 16 MiB region
// is 2 channels x 8 steps of 512 KiB (buffSize 4 MiB / NCCL_STEPS) per direction; every step is
// one iallreduce, up to 16 in flight, tested in order, for --rounds x 8 MiB. A 1-element
// all-reduce first lines the nodes up. Prints MB/s of reduced data (what NCCL's busBw counts).
int RunBench(const Args& a) {
  Plugin p;
  if (!Load(a, &p)) return 1;
  void* ctx = nullptr;
  void* cc = CollSetup(a, p, &ctx);
  if (cc == nullptr) return 1;
  constexpr size_t kStep = size_t{512} << 10;
  constexpr int kSteps = 16;  // 2 channels x NCCL_STEPS
  std::vector<uint8_t> region(2 * kSteps * kStep);
  auto in = ina::bench::MakeFloatInput(a.seed, a.rank, kSteps * kStep / 4);
  std::memcpy(region.data(), in.data(), kSteps * kStep);
  void* mh = nullptr;
  p.coll->regMr(cc, region.data(), region.size(), NCCL_PTR_HOST, &mh);
  auto run = [&](size_t ops, size_t bytes) -> bool {
    std::vector<void*> reqs(ops, nullptr);
    size_t posted = 0, tested = 0;
    auto deadline = Clock::now() + 120s;
    while (tested < ops) {
      if (!Expect(Clock::now() < deadline, "bench done in 120 s")) return false;
      while (posted < ops && posted < tested + kSteps) {
        const size_t slot = posted % kSteps;
        void* req = nullptr;
        if (!Expect(p.coll->iallreduce(cc, region.data() + slot * kStep,
                                       region.data() + (kSteps + slot) * kStep, bytes / 4,
                                       ncclFloat32, ncclSum, mh, mh, &req) == ncclSuccess,
                    "iallreduce")) {
          return false;
        }
        if (req == nullptr) break;
        reqs[posted++] = req;
      }
      int done = 0, size = 0;
      if (!Expect(p.coll->test(reqs[tested], &done, &size) == ncclSuccess, "test")) return false;
      if (done) ++tested;
    }
    return true;
  };
  if (!run(1, 4)) return 1;  // line up
  const size_t ops = static_cast<size_t>(a.rounds) * kSteps;
  auto t0 = Clock::now();
  if (!run(ops, kStep)) return 1;
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  p.coll->deregMr(cc, mh);
  p.coll->closeColl(cc);
  p.coll->finalize(ctx);
  std::printf(
      "{\"ok\": %s,\"rank\": %d,\"nodes\": %d,\"bytes\": %zu,\"seconds\": %.3f,"
      "\"mb_per_s\": %.1f,\"error\": \"%s\"}\n",
      g_error.empty() ? "true" : "false", a.rank, a.nodes, ops * kStep, s, ops * kStep / 1e6 / s,
      Escape(g_error).c_str());
  return g_error.empty() ? 0 : 1;
}

// INA_SWITCH names no fabric: listen still succeeds (NCCL all-gathers the handles right after
// it), connect fails on every node with the reason in the logger, so NCCL falls back to p2p.
int RunNoFabric(const Args& a) {
  Plugin p;
  if (!Load(a, &p)) return 1;
  void* ctx = nullptr;
  if (!Expect(p.coll->init(&ctx, 5, Logger) == ncclSuccess, "collnet init")) return 1;
  auto t0 = Clock::now();
  uint8_t handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listen_comm = nullptr;
  if (!Expect(p.coll->listen(ctx, 0, handle, &listen_comm) == ncclSuccess && listen_comm,
              "collnet listen succeeds without a fabric")) {
    return 1;
  }
  WriteFile(a.dir + "/coll." + std::to_string(a.rank), handle, sizeof(handle));
  std::vector<std::vector<uint8_t>> all(a.nodes, std::vector<uint8_t>(NCCL_NET_HANDLE_MAXSIZE));
  std::vector<void*> ptrs(a.nodes);
  for (int r = 0; r < a.nodes; ++r) {
    if (!Expect(ReadFile(a.dir + "/coll." + std::to_string(r), all[r].data(), all[r].size(), 30s),
                "handle of node " + std::to_string(r))) {
      return 1;
    }
    ptrs[r] = all[r].data();
  }
  void* cc = nullptr;
  ncclResult_t rc = p.coll->connect(ptrs.data(), a.nodes, a.rank, listen_comm, &cc);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  Expect(rc != ncclSuccess, "connect fails");
  Expect(cc == nullptr, "no collComm from a failed connect");
  Expect(g_warns > 0, "the reason went through the logger");
  Expect(p.coll->closeListen(listen_comm) == ncclSuccess, "closeListen");
  Expect(p.coll->finalize(ctx) == ncclSuccess, "finalize");
  std::printf(
      "{\"ok\": %s,\"rank\": %d,\"result\": %d,\"setup_ms\": %.1f,\"warn\": \"%s\","
      "\"error\": \"%s\"}\n",
      g_error.empty() ? "true" : "false", a.rank, static_cast<int>(rc), ms,
      Escape(g_last_warn).c_str(), Escape(g_error).c_str());
  return g_error.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("INA_K", "256", /*overwrite=*/0);  // K(): the results are checked block by block
  Args a;
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: nccl_abi_peer coll|net|dead|nofabric|bench --plugin SO --dir DIR --rank R "
                 "--nodes N [--seed S] [--rounds M] [--switch ADDR:PORT]\n");
    return 2;
  }
  a.mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--plugin")
      a.plugin = v;
    else if (k == "--dir")
      a.dir = v;
    else if (k == "--rank")
      a.rank = std::stoi(v);
    else if (k == "--nodes")
      a.nodes = std::stoi(v);
    else if (k == "--seed")
      a.seed = std::stoull(v);
    else if (k == "--rounds")
      a.rounds = std::stoi(v);
    else if (k == "--switch")  // this node's INA_SWITCH (a leaf of a tree), for the plugin's init
      setenv("INA_SWITCH", v.c_str(), 1);
    else {
      std::fprintf(stderr, "nccl_abi_peer: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (a.mode == "coll") return RunColl(a);
  if (a.mode == "net") return RunNet(a);
  if (a.mode == "dead") return RunDead(a);
  if (a.mode == "nofabric") return RunNoFabric(a);
  if (a.mode == "bench") return RunBench(a);
  std::fprintf(stderr, "nccl_abi_peer: unknown mode %s\n", a.mode.c_str());
  return 2;
}
