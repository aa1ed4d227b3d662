// The NCCL plugin's ABI, end to end and without a GPU: a real ina-switchd on a free loopback port
// and 2 to 4 nccl_abi_peer processes that dlopen libnccl-net-ina.so and drive its v11 tables in
// the order NCCL 2.28 does (abi_peer.cc says how). NCCL itself cannot run here
// (ncclCommInitRank needs a GPU before it loads plugins); scripts/gpu-check.sh runs it where a
// GPU is.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <chrono>
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
  bool Start() {
    auto p = Process::Start({INA_SWITCHD_BIN, "--port", "0", "--bind", "127.0.0.1"});
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) return false;
    auto line = p->WaitForLine("ina-switchd listening on ", 20s);
    EXPECT_TRUE(line.ok()) << line.status().ToString();
    if (!line.ok()) return false;
    port = std::stoi(line->substr(line->rfind(':') + 1));
    proc.emplace(std::move(*p));
    return true;
  }
};

struct Peer {
  std::optional<Process> proc;
  std::string json;
  int exit_code = -1;
};

std::vector<Peer> StartPeers(const std::string& mode, int n, const std::string& dir,
                             uint64_t seed) {
  std::vector<Peer> peers(n);
  for (int r = 0; r < n; ++r) {
    auto p = Process::Start({NCCL_ABI_PEER_BIN, mode, "--plugin", INA_NCCL_PLUGIN_SO, "--dir", dir,
                             "--rank", std::to_string(r), "--nodes", std::to_string(n), "--seed",
                             std::to_string(seed)});
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
  ASSERT_TRUE(sw.proc->Stop(SIGTERM, 10s).ok());
  std::string counters;
  for (const auto& line : sw.proc->Drain(10s)) {
    if (line.rfind("{\"switch_counters\"", 0) == 0) counters = line;
  }
  ASSERT_FALSE(counters.empty()) << "no counters from ina-switchd";
  EXPECT_EQ(JsonNumber(counters, "leaves_done"), nodes) << counters;
  EXPECT_EQ(JsonNumber(counters, "jobs_done"), 1) << counters;
  EXPECT_EQ(JsonNumber(counters, "err_job_aborted"), 0) << counters;
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
