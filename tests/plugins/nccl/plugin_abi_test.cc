// The NCCL plugin's ABI, end to end and without a GPU: a real ina-switchd on a free loopback port
// and 2 to 4 nccl_abi_peer processes that dlopen libnccl-net-ina.so and drive its v11 tables in
// the order NCCL 2.28 does (abi_peer.cc says how). NCCL itself cannot run here
// (ncclCommInitRank needs a GPU before it loads plugins); scripts/gpu-check.sh runs it where a
// GPU is.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "json_line.h"
#include "nccl_abi.h"
#include "process.h"

namespace ina::bench {
namespace {

using namespace std::chrono_literals;

uint64_t Seed() {
  const char* s = std::getenv("INA_SEED");
  uint64_t seed = s ? std::strtoull(s, nullptr, 10) : 20260702;
  std::printf("seed %llu (INA_SEED overrides)\n", static_cast<unsigned long long>(seed));
  return seed;
}

// A scratch directory for the handle files, removed on destruction (also when a check failed).
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/ina-nccl-abi-XXXXXX";
    path = mkdtemp(tmpl) ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

// The switch, on an ephemeral port; its Process kills it when the test ends.
struct Switch {
  std::optional<Process> proc;
  int port = 0;
  bool Start(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {INA_SWITCHD_BIN, "--port", "0", "--bind", "127.0.0.1"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto p = Process::Start(args);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) return false;
    auto line = p->WaitForLine("ina-switchd listening on ", 20s);
    EXPECT_TRUE(line.ok()) << line.status().ToString();
    if (!line.ok()) return false;
    port = std::stoi(line->substr(line->rfind(':') + 1));
    proc.emplace(std::move(*p));
    return true;
  }
  // Stops it (SIGTERM) and returns the counters line it prints at exit ("" if none).
  std::string StopForCounters() {
    std::string counters;
    EXPECT_TRUE(proc->Stop(SIGTERM, 10s).ok());
    for (const auto& line : proc->Drain(10s)) {
      if (line.rfind("{\"switch_counters\"", 0) == 0) counters = line;
    }
    return counters;
  }
};

struct Peer {
  std::optional<Process> proc;
  std::string json;
  int exit_code = -1;
};

// `switches`: each node's INA_SWITCH (a leaf of a tree); empty, the environment's.
std::vector<Peer> StartPeers(const std::string& mode, int n, const std::string& dir, uint64_t seed,
                             const std::vector<std::string>& switches = {}) {
  std::vector<Peer> peers(n);
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> args = {NCCL_ABI_PEER_BIN, mode,
                                     "--plugin",        INA_NCCL_PLUGIN_SO,
                                     "--dir",           dir,
                                     "--rank",          std::to_string(r),
                                     "--nodes",         std::to_string(n),
                                     "--seed",          std::to_string(seed)};
    if (!switches.empty()) {
      args.push_back("--switch");
      args.push_back(switches[static_cast<size_t>(r)]);
    }
    auto p = Process::Start(args);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (p.ok()) peers[r].proc.emplace(std::move(*p));
  }
  return peers;
}

void Finish(std::vector<Peer>& peers) {
  for (auto& p : peers) {
    if (!p.proc) continue;
    for (const auto& line : p.proc->Drain(240s)) {
      if (!line.empty() && line[0] == '{') p.json = line;
    }
    std::printf("peer: %s\n", p.json.c_str());
    auto st = p.proc->Stop(SIGTERM, 5s);
    p.exit_code = st.ok() && WIFEXITED(*st) ? WEXITSTATUS(*st) : -1;
  }
}

// The switches' admin secret in `dir` (hex, mode 0600); its path, or "" if it cannot be written.
std::string WriteAdminKey(const TempDir& dir) {
  const std::string path = dir.path + "/admin.key";
  {
    std::ofstream f(path);
    f << "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n";
  }
  return chmod(path.c_str(), 0600) == 0 ? path : "";
}

// Every peer printed its JSON line, ok, with the same fingerprint of its results.
void ExpectOkAndAgreed(const std::vector<Peer>& peers) {
  std::string fingerprint;
  for (size_t r = 0; r < peers.size(); ++r) {
    const std::string& j = peers[r].json;
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + j);
    ASSERT_FALSE(j.empty()) << "no JSON line from rank " << r;
    EXPECT_TRUE(JsonTrue(j, "ok")) << JsonString(j, "error");
    if (r == 0) fingerprint = JsonString(j, "fingerprint");
    EXPECT_EQ(JsonString(j, "fingerprint"), fingerprint) << "results differ across nodes";
  }
}

class CollNetAbi : public ::testing::TestWithParam<int> {};

// Handle exchange, connect, one shared region registered twice, 80 all-reduces per round
// (float32 and int32, 1 to 24000 elements) posted until the plugin says NULL, tested in order;
// every result equal bit for bit to the exact expectation (so identical across nodes), within the
// quantization bound, and the fingerprints agree; reduceSupport and teardown.
TEST_P(CollNetAbi, AllReduceAsNcclDrivesIt) {
  const int nodes = GetParam();
  const uint64_t seed = Seed();
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  Switch sw;
  ASSERT_TRUE(sw.Start());
  setenv("INA_SWITCH", ("127.0.0.1:" + std::to_string(sw.port)).c_str(), 1);
  unsetenv("INA_PROGRESS_TIMEOUT_MS");
  auto peers = StartPeers("coll", nodes, dir.path, seed);
  Finish(peers);
  std::string fingerprint;
  for (int r = 0; r < nodes; ++r) {
    const std::string& j = peers[r].json;
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + j);
    ASSERT_FALSE(j.empty()) << "no JSON line from rank " << r;
    EXPECT_EQ(peers[r].exit_code, 0);
    EXPECT_TRUE(JsonTrue(j, "ok")) << JsonString(j, "error");
    EXPECT_GT(JsonNumber(j, "null_retries"), 0);
    EXPECT_EQ(JsonNumber(j, "supported_pairs"), 2);
    EXPECT_GE(JsonNumber(j, "ops"), 100);
    if (r == 0) fingerprint = JsonString(j, "fingerprint");
    EXPECT_EQ(JsonString(j, "fingerprint"), fingerprint) << "results differ across nodes";
  }
  EXPECT_EQ(fingerprint.size(), 16u);
  // Teardown was clean: every node left gracefully (LEAVE "done"), nothing was aborted.
  const std::string counters = sw.StopForCounters();
  ASSERT_FALSE(counters.empty()) << "no counters from ina-switchd";
  EXPECT_EQ(JsonNumber(counters, "leaves_done"), nodes) << counters;
  EXPECT_EQ(JsonNumber(counters, "jobs_done"), 1) << counters;
  EXPECT_EQ(JsonNumber(counters, "err_job_aborted"), 0) << counters;
}

// A keyed job with no INA_JOB_KEY (docs/security.md): each node's listen makes a secret and
// installs it with the switch's admin secret (INA_ADMIN_KEY); node 0's rides in its handle through
// the all-gather, every JOIN proves it on a switch that requires keys, and the results agree.
TEST(CollNetAbi, KeyedJobSharesNode0sSecretThroughTheHandles) {
  constexpr int kNodes = 2;
  const uint64_t seed = Seed();
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string admin = WriteAdminKey(dir);
  ASSERT_FALSE(admin.empty());
  Switch sw;
  ASSERT_TRUE(sw.Start({"--admin-key-file", admin, "--require-job-keys", "1"}));
  setenv("INA_SWITCH", ("127.0.0.1:" + std::to_string(sw.port)).c_str(), 1);
  setenv("INA_JOB_SEC", "mac", 1);
  setenv("INA_ADMIN_KEY", admin.c_str(), 1);
  unsetenv("INA_PROGRESS_TIMEOUT_MS");
  auto peers = StartPeers("coll", kNodes, dir.path, seed);
  Finish(peers);
  unsetenv("INA_JOB_SEC");
  unsetenv("INA_ADMIN_KEY");
  ExpectOkAndAgreed(peers);
  const std::string counters = sw.StopForCounters();
  ASSERT_FALSE(counters.empty()) << "no counters from ina-switchd";
  EXPECT_EQ(JsonNumber(counters, "keys_installed"), kNodes) << counters;
  EXPECT_GE(JsonNumber(counters, "joins_proven"), kNodes) << counters;  // resends count too
  EXPECT_EQ(JsonNumber(counters, "joins_unauthorized"), 0) << counters;
  EXPECT_EQ(JsonNumber(counters, "jobs_done"), 1) << counters;
}

// Through a tree of switches (docs/hierarchy.md): a spine and 2 leaves, nodes 0-1 at leaf 0 and
// 2-3 at leaf 1 (each node's INA_SWITCH), a keyed job with no INA_JOB_KEY. Node 0's listen installs
// its secret at leaf 0, which passes it on to the spine (--upstream-admin-key-file); nodes 2 and 3
// install it at leaf 1 before they join (the same key twice: kept). Every switch requires keys.
TEST(CollNetAbi, KeyedJobThroughATreeJoinsEachNodeAtItsLeaf) {
  constexpr int kNodes = 4;
  const uint64_t seed = Seed();
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string admin = WriteAdminKey(dir);
  ASSERT_FALSE(admin.empty());
  const std::vector<std::string> keyed = {"--admin-key-file", admin, "--require-job-keys", "1"};
  Switch spine;
  ASSERT_TRUE(spine.Start(keyed));
  std::vector<Switch> leaves(2);
  std::vector<std::string> at;
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> args = keyed;
    args.insert(args.end(),
                {"--upstream", "127.0.0.1:" + std::to_string(spine.port), "--leaf-index",
                 std::to_string(i), "--leaves", "2", "--upstream-admin-key-file", admin});
    ASSERT_TRUE(leaves[static_cast<size_t>(i)].Start(args));
  }
  for (int r = 0; r < kNodes; ++r) {
    at.push_back("127.0.0.1:" + std::to_string(leaves[static_cast<size_t>(r / 2)].port));
  }
  setenv("INA_JOB_SEC", "mac", 1);
  setenv("INA_ADMIN_KEY", admin.c_str(), 1);
  unsetenv("INA_PROGRESS_TIMEOUT_MS");
  auto peers = StartPeers("coll", kNodes, dir.path, seed, at);
  Finish(peers);
  unsetenv("INA_JOB_SEC");
  unsetenv("INA_ADMIN_KEY");
  ExpectOkAndAgreed(peers);
  for (Switch& leaf : leaves) {
    const std::string counters = leaf.StopForCounters();
    ASSERT_FALSE(counters.empty()) << "no counters from a leaf";
    EXPECT_EQ(JsonNumber(counters, "joins_unauthorized"), 0) << counters;
    EXPECT_GE(JsonNumber(counters, "leaf_up_key_acks"), 1) << counters;
    EXPECT_EQ(JsonNumber(counters, "leaf_key_mismatch"), 0) << counters;
  }
  const std::string counters = spine.StopForCounters();
  ASSERT_FALSE(counters.empty()) << "no counters from the spine";
  EXPECT_EQ(JsonNumber(counters, "joins_unauthorized"), 0) << counters;
  EXPECT_EQ(JsonNumber(counters, "jobs_done"), 1) << counters;
}

INSTANTIATE_TEST_SUITE_P(Nodes, CollNetAbi, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "n" + std::to_string(i.param);
                         });

// The net table between two processes: non-blocking connect/accept, messages of 0 .. 2 MiB into
// larger buffers (sizes reported), a full comm answering NULL, close.
TEST(NetAbi, SendRecvBetweenTwoProcesses) {
  const uint64_t seed = Seed();
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  unsetenv("INA_SWITCH");
  auto peers = StartPeers("net", 2, dir.path, seed);
  Finish(peers);
  for (int r = 0; r < 2; ++r) {
    const std::string& j = peers[r].json;
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + j);
    ASSERT_FALSE(j.empty()) << "no JSON line from rank " << r;
    EXPECT_EQ(peers[r].exit_code, 0);
    EXPECT_TRUE(JsonTrue(j, "ok")) << JsonString(j, "error");
    EXPECT_EQ(JsonNumber(j, "messages"), 64);
  }
}

// After connect, the switch (or node 1's process) is killed: node 0's next all-reduce fails from
// test() (an ncclResult_t error, the reason through the logger) within a bounded time, and its
// teardown still works.
void RunDeadCase(bool kill_switch) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  Switch sw;
  ASSERT_TRUE(sw.Start());
  setenv("INA_SWITCH", ("127.0.0.1:" + std::to_string(sw.port)).c_str(), 1);
  setenv("INA_PROGRESS_TIMEOUT_MS", "1000", 1);
  auto peers = StartPeers("dead", 2, dir.path, 1);
  unsetenv("INA_PROGRESS_TIMEOUT_MS");
  for (auto& p : peers) {
    ASSERT_TRUE(p.proc);
    auto line = p.proc->WaitForLine("connected", 60s);
    ASSERT_TRUE(line.ok()) << line.status().ToString();
  }
  if (kill_switch) {
    ASSERT_TRUE(sw.proc->Stop(SIGKILL, 5s).ok());
  } else {
    ASSERT_TRUE(peers[1].proc->Stop(SIGKILL, 5s).ok());
    peers[1].proc.reset();
  }
  std::ofstream(dir.path + "/go") << "g";
  Finish(peers);
  for (int r = 0; r < (kill_switch ? 2 : 1); ++r) {
    const std::string& j = peers[r].json;
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + j);
    ASSERT_FALSE(j.empty()) << "no JSON line from rank " << r;
    EXPECT_EQ(peers[r].exit_code, 0);
    EXPECT_TRUE(JsonTrue(j, "ok")) << JsonString(j, "error");
    EXPECT_NE(JsonNumber(j, "result"), 0);
    // progress_timeout_ms is 1 s; 20 s is far above it and far below "hangs".
    EXPECT_LT(JsonNumber(j, "error_after_ms"), 20000);
    EXPECT_FALSE(JsonString(j, "warn").empty());
  }
}

TEST(CollNetAbi, DeadSwitchGivesAnErrorInBoundedTime) { RunDeadCase(true); }
TEST(CollNetAbi, DeadPeerGivesAnErrorInBoundedTime) { RunDeadCase(false); }

// INA_SWITCH names a port where no fabric listens: every node's listen still returns a handle
// (so NCCL's all-gather completes), every node's connect fails within the join timeout with the
// reason logged, which is NCCL's cue to use point-to-point instead.
TEST(CollNetAbi, NoFabricAtInitFailsConnectOnEveryNode) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  int dead_port;
  {
    Switch sw;
    ASSERT_TRUE(sw.Start());
    dead_port = sw.port;
    ASSERT_TRUE(sw.proc->Stop(SIGKILL, 5s).ok());
  }
  setenv("INA_SWITCH", ("127.0.0.1:" + std::to_string(dead_port)).c_str(), 1);
  setenv("INA_JOIN_TIMEOUT_MS", "500", 1);
  auto peers = StartPeers("nofabric", 3, dir.path, 1);
  unsetenv("INA_JOIN_TIMEOUT_MS");
  Finish(peers);
  for (int r = 0; r < 3; ++r) {
    const std::string& j = peers[r].json;
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + j);
    ASSERT_FALSE(j.empty()) << "no JSON line from rank " << r;
    EXPECT_EQ(peers[r].exit_code, 0);
    EXPECT_TRUE(JsonTrue(j, "ok")) << JsonString(j, "error");
    EXPECT_NE(JsonNumber(j, "result"), 0);
    EXPECT_LT(JsonNumber(j, "setup_ms"), 20000);  // join timeout 0.5 s
    EXPECT_FALSE(JsonString(j, "warn").empty());
  }
}

// Without INA_SWITCH the CollNet table reports no device, so NCCL does not use CollNet.
TEST(CollNetAbi, NoSwitchConfiguredMeansNoDevice) {
  unsetenv("INA_SWITCH");
  void* so = dlopen(INA_NCCL_PLUGIN_SO, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(so, nullptr) << dlerror();
  auto* coll = static_cast<ncclCollNet_v11_t*>(dlsym(so, "ncclCollNetPlugin_v11"));
  auto* coll10 = static_cast<ncclCollNet_v10_t*>(dlsym(so, "ncclCollNetPlugin_v10"));
  ASSERT_NE(coll, nullptr);
  ASSERT_NE(coll10, nullptr);
  int n = -1;
  EXPECT_EQ(coll->devices(&n), ncclSuccess);
  EXPECT_EQ(n, 0);
  setenv("INA_SWITCH", "127.0.0.1:1", 1);
  EXPECT_EQ(coll10->devices(&n), ncclSuccess);
  EXPECT_EQ(n, 1);
  unsetenv("INA_SWITCH");
  ncclNetProperties_v10_t p10;
  EXPECT_EQ(coll10->getProperties(0, &p10), ncclSuccess);
  EXPECT_EQ(p10.ptrSupport, NCCL_PTR_HOST);
  EXPECT_NE(coll10->getProperties(1, &p10), ncclSuccess);
  dlclose(so);
}

// What NCCL's logger receives from the plugin (the tests below check the reasons it gives).
std::string g_log;
void CaptureLog(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  g_log += buf;
  g_log += '\n';
}

struct Tables {
  void* so = nullptr;
  ncclNet_v11_t* net = nullptr;
  ncclCollNet_v11_t* coll = nullptr;
  void* net_ctx = nullptr;
  void* coll_ctx = nullptr;
  bool Open() {
    so = dlopen(INA_NCCL_PLUGIN_SO, RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(so, nullptr) << dlerror();
    if (so == nullptr) return false;
    net = static_cast<ncclNet_v11_t*>(dlsym(so, "ncclNetPlugin_v11"));
    coll = static_cast<ncclCollNet_v11_t*>(dlsym(so, "ncclCollNetPlugin_v11"));
    EXPECT_NE(net, nullptr);
    EXPECT_NE(coll, nullptr);
    if (net == nullptr || coll == nullptr) return false;
    EXPECT_EQ(net->init(&net_ctx, 1, nullptr, CaptureLog, nullptr), ncclSuccess);
    EXPECT_EQ(coll->init(&coll_ctx, 1, CaptureLog), ncclSuccess);
    return true;
  }
  ~Tables() {
    if (net != nullptr && net_ctx != nullptr) net->finalize(net_ctx);
    if (coll != nullptr && coll_ctx != nullptr) coll->finalize(coll_ctx);
    if (so != nullptr) dlclose(so);
  }
};

bool NoNvidiaDevice() { return access("/dev/nvidia0", F_OK) != 0; }

// Without the CUDA path (INA_NCCL_CUDA=0 anywhere; here also without it, as there is no GPU) both
// tables say host memory only, and a CUDA region is refused with the reason.
TEST(NcclGpuAbi, WithoutCudaThePropertiesSayHostOnly) {
  Tables t;
  ASSERT_TRUE(t.Open());
  for (const char* cuda_env : {"0", ""}) {
    SCOPED_TRACE(std::string("INA_NCCL_CUDA=") + cuda_env);
    if (*cuda_env != '\0') {
      setenv("INA_NCCL_CUDA", cuda_env, 1);
    } else {
      unsetenv("INA_NCCL_CUDA");
      if (!NoNvidiaDevice()) {
        std::printf("a GPU is present: the unset case is the hw tests' (gpu-check.sh)\n");
        continue;
      }
    }
    ncclNetProperties_v11_t p;
    ASSERT_EQ(t.coll->getProperties(0, &p), ncclSuccess);
    EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
    ASSERT_EQ(t.net->getProperties(0, &p), ncclSuccess);
    EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
    std::vector<float> host(256);
    void* mh = reinterpret_cast<void*>(1);
    g_log.clear();
    EXPECT_EQ(t.coll->regMr(nullptr, host.data(), 1024, NCCL_PTR_CUDA, &mh), ncclInvalidArgument);
    EXPECT_EQ(mh, nullptr);
    EXPECT_NE(g_log.find("NCCL_PTR_CUDA: GPU buffers are not taken"), std::string::npos) << g_log;
    EXPECT_EQ(t.net->regMr(nullptr, host.data(), 1024, NCCL_PTR_CUDA, &mh), ncclInvalidArgument);
    EXPECT_EQ(t.coll->regMr(nullptr, host.data(), 1024, 0x40, &mh), ncclInvalidArgument);
    // Host memory stays accepted.
    ASSERT_EQ(t.coll->regMr(nullptr, host.data(), 1024, NCCL_PTR_HOST, &mh), ncclSuccess);
    EXPECT_EQ(t.coll->deregMr(nullptr, mh), ncclSuccess);
  }
  unsetenv("INA_NCCL_CUDA");
}

// regMrDmaBuf checks the descriptor first and names what is wrong with it.
TEST(NcclGpuAbi, RegMrDmaBufRefusesWhatIsNotADmaBuf) {
  Tables t;
  ASSERT_TRUE(t.Open());
  std::vector<float> buf(256);
  char path[] = "/tmp/ina-nccl-plain-XXXXXX";
  const int file_fd = mkstemp(path);
  ASSERT_GE(file_fd, 0);
  unlink(path);
  const int closed_fd = dup(file_fd);
  ASSERT_GE(closed_fd, 0);
  close(closed_fd);
  struct Case {
    int fd;
    const char* says;
  } cases[] = {{-1, "is not a file descriptor"},
               {closed_fd, "is not an open descriptor"},
               {file_fd, "is not a dma-buf (it is /tmp/ina-nccl-plain-"}};
  for (const Case& c : cases) {
    SCOPED_TRACE("fd " + std::to_string(c.fd));
    for (int type : {NCCL_PTR_CUDA, NCCL_PTR_HOST}) {
      void* mh = reinterpret_cast<void*>(1);
      g_log.clear();
      EXPECT_EQ(t.coll->regMrDmaBuf(nullptr, buf.data(), 1024, type, 0, c.fd, &mh),
                ncclInvalidArgument);
      EXPECT_EQ(mh, nullptr);
      EXPECT_NE(g_log.find(c.says), std::string::npos) << g_log;
      EXPECT_NE(g_log.find("collnet regMrDmaBuf"), std::string::npos) << g_log;
      mh = reinterpret_cast<void*>(1);
      EXPECT_EQ(t.net->regMrDmaBuf(nullptr, buf.data(), 1024, type, 0, c.fd, &mh),
                ncclInvalidArgument);
      EXPECT_EQ(mh, nullptr);
    }
  }
  close(file_fd);
}

// iflush completes at once (NULL request: NCCL takes it as flushed), since a result in GPU memory
// is complete before the request that wrote it reports done; bad arguments are errors.
TEST(NcclGpuAbi, IflushCompletesAtOnce) {
  Tables t;
  ASSERT_TRUE(t.Open());
  std::vector<float> buf(256);
  void* mh = nullptr;
  ASSERT_EQ(t.coll->regMr(nullptr, buf.data(), 1024, NCCL_PTR_HOST, &mh), ncclSuccess);
  int not_a_comm = 0;  // iflush does not touch the communicator
  void* req = reinterpret_cast<void*>(1);
  EXPECT_EQ(t.coll->iflush(&not_a_comm, buf.data(), 1024, mh, &req), ncclSuccess);
  EXPECT_EQ(req, nullptr);
  req = reinterpret_cast<void*>(1);
  EXPECT_EQ(t.coll->iflush(&not_a_comm, buf.data(), -1, mh, &req), ncclInvalidArgument);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(t.coll->iflush(nullptr, buf.data(), 1024, mh, &req), ncclInvalidArgument);
  void* data = buf.data();
  int size = 1024;
  req = reinterpret_cast<void*>(1);
  EXPECT_EQ(t.net->iflush(&not_a_comm, 1, &data, &size, &mh, &req), ncclSuccess);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(t.net->iflush(&not_a_comm, 1, nullptr, nullptr, &mh, &req), ncclInvalidArgument);
  EXPECT_EQ(t.coll->deregMr(nullptr, mh), ncclSuccess);
}

// The v10 net table (no context argument: the adapters use one process-wide context), in one
// process: listen, non-blocking connect/accept, one message each way of the pair, close.
TEST(NetAbi, V10TableInOneProcess) {
  unsetenv("INA_SWITCH");
  void* so = dlopen(INA_NCCL_PLUGIN_SO, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(so, nullptr) << dlerror();
  auto* net = static_cast<ncclNet_v10_t*>(dlsym(so, "ncclNetPlugin_v10"));
  ASSERT_NE(net, nullptr);
  ASSERT_EQ(net->init(nullptr, nullptr), ncclSuccess);
  ncclNetProperties_v10_t props;
  ASSERT_EQ(net->getProperties(0, &props), ncclSuccess);
  EXPECT_EQ(props.ptrSupport, NCCL_PTR_HOST);
  EXPECT_EQ(props.maxRecvs, 1);
  uint8_t handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void *lc = nullptr, *sc = nullptr, *rc = nullptr;
  ASSERT_EQ(net->listen(0, handle, &lc), ncclSuccess);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while ((sc == nullptr || rc == nullptr) && std::chrono::steady_clock::now() < deadline) {
    if (sc == nullptr) {
      ASSERT_EQ(net->connect(0, nullptr, handle, &sc, nullptr), ncclSuccess);
    }
    if (rc == nullptr) {
      ASSERT_EQ(net->accept(lc, &rc, nullptr), ncclSuccess);
    }
  }
  ASSERT_NE(sc, nullptr);
  ASSERT_NE(rc, nullptr);
  std::vector<uint8_t> out(1000), in(2000, 0);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 13);
  void *sreq = nullptr, *rreq = nullptr, *mh = nullptr;
  ASSERT_EQ(net->regMr(sc, out.data(), out.size(), NCCL_PTR_HOST, &mh), ncclSuccess);
  ASSERT_EQ(net->isend(sc, out.data(), out.size(), 3, mh, nullptr, &sreq), ncclSuccess);
  void* data = in.data();
  size_t size = in.size();
  int tag = 3;
  ASSERT_EQ(net->irecv(rc, 1, &data, &size, &tag, &mh, nullptr, &rreq), ncclSuccess);
  ASSERT_NE(sreq, nullptr);
  ASSERT_NE(rreq, nullptr);
  int sdone = 0, rdone = 0, ssize = -1, rsize = -1;
  while ((!sdone || !rdone) && std::chrono::steady_clock::now() < deadline) {
    if (!sdone) {
      ASSERT_EQ(net->test(sreq, &sdone, &ssize), ncclSuccess);
    }
    if (!rdone) {
      ASSERT_EQ(net->test(rreq, &rdone, &rsize), ncclSuccess);
    }
  }
  EXPECT_EQ(ssize, 1000);
  EXPECT_EQ(rsize, 1000);
  EXPECT_EQ(0, std::memcmp(in.data(), out.data(), out.size()));
  EXPECT_EQ(net->deregMr(sc, mh), ncclSuccess);
  EXPECT_EQ(net->closeSend(sc), ncclSuccess);
  EXPECT_EQ(net->closeRecv(rc), ncclSuccess);
  EXPECT_EQ(net->closeListen(lc), ncclSuccess);
  dlclose(so);
}

}  // namespace
}  // namespace ina::bench
