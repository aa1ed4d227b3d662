// Two-level aggregation end to end (docs/hierarchy.md): a spine ina-switchd, 2 leaves
// (ina-switchd --upstream) of 4 workers each (ina-dpdk-worker over UDP, ranks 0-3 on leaf 0 and
// 4-7 on leaf 1), with packet loss (and duplicates) injected by every switch on what it receives
// and what it sends, so on every hop in both directions. Every rank's result, float and int32,
// must be exact and bit-identical to the same inputs through one flat switch without loss. A leaf
// or the spine killed mid-run must make every worker fail (exit 1) within a bound, never hang.
//
// Two topologies: loopback (one namespace, every process on 127.0.0.1), and network namespaces
// (spine, each leaf and each leaf's workers in their own namespace, joined by veth pairs; skipped
// when not root or when namespaces cannot be made). Seeds: INA_SEED (default 1) picks the inputs
// and the fault streams; it is printed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "process.h"
#include "support/seed.h"

namespace ina::bench {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kLeaves = 2;
constexpr int kPerLeaf = 4;
constexpr int kWorld = kLeaves * kPerLeaf;

uint64_t Seed() {
  static const uint64_t seed = ina::tests::Seed();
  return seed;
}

std::map<std::string, uint64_t> Counters(const std::string& obj) {
  std::map<std::string, uint64_t> m;
  const std::regex re("\"([a-z_0-9]+)\": ([0-9]+)");
  for (auto it = std::sregex_iterator(obj.begin(), obj.end(), re); it != std::sregex_iterator();
       ++it) {
    m[(*it)[1]] = std::stoull((*it)[2]);
  }
  return m;
}

// The switch's counters after SIGTERM: its last JSON line (every core's sum) and, with --cores
// N > 1, each core's ("core_counters": [{...}, ...]) in `per_core`.
std::map<std::string, uint64_t> StopSwitch(
    Process& sw, std::vector<std::map<std::string, uint64_t>>* per_core = nullptr) {
  auto st = sw.Stop(SIGTERM, 10s);
  EXPECT_TRUE(st.ok() && WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
  std::map<std::string, uint64_t> c;
  for (const auto& l : sw.Drain(5s)) {
    if (l.rfind("{\"switch_counters\"", 0) == 0) c = Counters(l);
    if (per_core != nullptr && l.rfind("{\"core_counters\"", 0) == 0) {
      for (size_t at = l.find('{', 1); at != std::string::npos; at = l.find('{', at + 1)) {
        per_core->push_back(Counters(l.substr(at, l.find('}', at) - at)));
      }
    }
  }
  return c;
}

// Where each process runs and how it is reached.
struct Topology {
  bool netns = false;
  std::string prefix;  // namespace names: PREFIX-s, PREFIX-l<i>, PREFIX-w<i>
  std::vector<std::string> made;

  std::vector<std::string> In(const std::string& ns, std::vector<std::string> argv) const {
    if (!netns) return argv;
    argv.insert(argv.begin(), {"/usr/bin/env", "ip", "netns", "exec", prefix + "-" + ns});
    return argv;
  }
  // Spine in PREFIX-s; leaf i in PREFIX-l<i>, its link up lu 10.78.i.2 <-> sd<i> 10.78.i.1 (the
  // spine's side), its link down ld 10.79.i.1 <-> wl 10.79.i.2 (the workers' side, PREFIX-w<i>).
  bool Up() {
    auto sh = [](const std::string& c) {
      return std::system((c + " >/dev/null 2>&1").c_str()) == 0;
    };
    auto add = [&](const std::string& ns) {
      if (!sh("ip netns add " + prefix + "-" + ns)) return false;
      made.push_back(prefix + "-" + ns);
      return sh("ip -n " + prefix + "-" + ns + " link set lo up");
    };
    if (!add("s")) return false;
    for (int i = 0; i < kLeaves; ++i) {
      const std::string l = prefix + "-l" + std::to_string(i);
      const std::string w = prefix + "-w" + std::to_string(i);
      const std::string s = prefix + "-s";
      const std::string I = std::to_string(i);
      if (!add("l" + I) || !add("w" + I)) return false;
      if (!sh("ip link add lu netns " + l + " type veth peer name sd" + I + " netns " + s) ||
          !sh("ip -n " + l + " addr add 10.78." + I + ".2/24 dev lu") ||
          !sh("ip -n " + s + " addr add 10.78." + I + ".1/24 dev sd" + I) ||
          !sh("ip -n " + l + " link set lu up") || !sh("ip -n " + s + " link set sd" + I + " up") ||
          !sh("ip link add ld netns " + l + " type veth peer name wl netns " + w) ||
          !sh("ip -n " + l + " addr add 10.79." + I + ".1/24 dev ld") ||
          !sh("ip -n " + w + " addr add 10.79." + I + ".2/24 dev wl") ||
          !sh("ip -n " + l + " link set ld up") || !sh("ip -n " + w + " link set wl up")) {
        return false;
      }
    }
    return true;
  }
  void Down() {
    for (const auto& ns : made)
      (void)std::system(("ip netns delete " + ns + " 2>/dev/null").c_str());
    made.clear();
  }
  std::string SpineBind() const { return netns ? "0.0.0.0" : "127.0.0.1"; }
  std::string SpineAddrFor(int leaf, const std::string& loopback) const {
    return netns ? "10.78." + std::to_string(leaf) + ".1:47000" : loopback;
  }
  // A leaf in a namespace listens on every address: its replies to the workers leave from
  // 10.79.i.1, its packets to the spine from 10.78.i.2 (the spine has no route to 10.79.i.0/24).
  std::string LeafBind() const { return netns ? "0.0.0.0" : "127.0.0.1"; }
  std::string LeafAddrFor(int leaf, const std::string& listening) const {
    return netns ? "10.79." + std::to_string(leaf) + ".1:47000" : listening;
  }
};

struct RunResult {
  std::map<int, std::string> fingerprint;  // by rank
  bool all_exact = true;
  std::map<std::string, uint64_t> spine;
  std::vector<std::map<std::string, uint64_t>> leaves;
  // With switch cores: each core's counters, of the spine and of every leaf.
  std::vector<std::map<std::string, uint64_t>> spine_cores;
  std::vector<std::vector<std::map<std::string, uint64_t>>> leaf_cores;
};

// The address of "PROGRAM listening on ADDR" (ina-switchd, ina-rtlsim).
std::string Address(Process& sw, const std::string& program = "ina-switchd") {
  const std::string prefix = program + " listening on ";
  auto line = sw.WaitForLine(prefix, 60s);
  EXPECT_TRUE(line.ok()) << line.status().ToString();
  return line.ok() ? line->substr(prefix.size()) : "";
}

// A keyed job's files (docs/security.md): the switches' admin secret and the job secret, hex, mode
// 0600 in a fresh directory removed at the end.
// `pass_on`: the key is installed at the leaves only, which pass it on to the spine
// (--upstream-admin-key-file); the spine requires keys.
struct Keys {
  std::string mode, dir, admin, job;
  bool pass_on = false;
  Keys(std::string m, bool pass) : mode(std::move(m)), pass_on(pass) {
    char tmpl[] = "/tmp/ina-hier-keys-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return;
    dir = tmpl;
    admin = dir + "/admin.key";
    job = dir + "/job.key";
    auto write = [](const std::string& path, char fill) {
      std::ofstream(path) << std::string(64, fill) << "\n";
      std::filesystem::permissions(
          path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    };
    write(admin, 'a');
    write(job, '5');
  }
  ~Keys() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
  bool ok() const { return !dir.empty(); }
};

// `cores` > 1: lane l talks to the switch's core l (INA_SWITCH_CORES; lanes == cores). `keys`:
// a keyed job (mac) with the job secret's file.
std::vector<std::string> WorkerArgv(const std::string& sw, int rank, const std::string& type,
                                    size_t elements, int repeats, int progress_ms, int lanes = 1,
                                    int cores = 1, const Keys* keys = nullptr) {
  std::vector<std::string> argv = {
      "/usr/bin/env", "INA_PROGRESS_THREADS=" + std::to_string(lanes),
      "INA_SWITCH_CORES=" + std::to_string(cores), "INA_TRANSPORT=udp", "INA_SWITCH=" + sw,
      "INA_JOB=7", "INA_RANK=" + std::to_string(rank), "INA_WORLD=" + std::to_string(kWorld),
      "INA_WINDOW=32",
      // the same K on loopback and on the 1500-byte veths (default:
      // the MTU's)
      "INA_K=256", "INA_JOIN_TIMEOUT_MS=30000",
      "INA_PROGRESS_TIMEOUT_MS=" + std::to_string(progress_ms), INA_WORKER_BIN,
      std::to_string(elements), std::to_string(Seed()), std::to_string(repeats), type};
  if (keys != nullptr) {
    argv.insert(argv.begin() + 1, {"INA_JOB_SEC=" + keys->mode, "INA_JOB_KEY=" + keys->job});
  }
  return argv;
}

// Results of kWorld workers, each reporting "result ... fingerprint=F exact=E".
void Collect(std::vector<Process>& ws, RunResult* out) {
  const std::regex re("fingerprint=([0-9a-f]+) exact=([01])");
  for (size_t r = 0; r < ws.size(); ++r) {
    auto l = ws[r].WaitForLine("result ", 180s);
    EXPECT_TRUE(l.ok()) << "rank " << r << ": " << l.status().ToString();
    std::smatch m;
    if (l.ok() && std::regex_search(*l, m, re)) {
      out->fingerprint[static_cast<int>(r)] = m[1];
      out->all_exact = out->all_exact && m[2] == "1";
    } else {
      out->all_exact = false;
    }
    (void)ws[r].Drain(30s);
    auto st = ws[r].Stop(SIGTERM, 10s);
    EXPECT_TRUE(st.ok() && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << "rank " << r;
  }
}

RunResult RunFlat(const std::string& type, size_t elements, int lanes) {
  RunResult out;
  auto sw = Process::Start({INA_SWITCHD_BIN, "--bind", "127.0.0.1", "--port", "0"});
  EXPECT_TRUE(sw.ok());
  if (!sw.ok()) return out;
  const std::string addr = Address(*sw);
  std::vector<Process> ws;
  for (int r = 0; r < kWorld; ++r) {
    auto p = Process::Start(WorkerArgv(addr, r, type, elements, 2, 30000, lanes));
    EXPECT_TRUE(p.ok());
    if (!p.ok()) return out;
    ws.push_back(std::move(*p));
  }
  Collect(ws, &out);
  out.spine = StopSwitch(*sw);
  return out;
}

struct Tree {
  std::optional<Process> spine;
  std::vector<std::string> spine_argv;  // as started, with the port it got
  std::vector<Process> leaves;
  std::vector<std::string> leaf_addr;
};

// Where the cores of a leaf on several cores go: the spine's cores (it has as many, a port each)
// or one spine port (a spine on one core; each leaf core a lane of the leaf's rank).
enum class Spine { kSameCores, kOnePort };

// Starts the spine and the leaves, every switch with `faults` (flags). Leaf 0 is `leaf0_bin`
// (ina-switchd, or ina-rtlsim: the verilated core as the leaf's engine). `cores` > 1: every leaf
// on that many cores with a port each (--core-ports 1); leaf core c under the spine's core c
// (the spine on as many cores), or (Spine::kOnePort) lane c at the spine's one port.
//
// `keys`: every switch with the admin secret, and job 7's key installed at each (every core) with
// ina-jobkey, run where the switch runs; with keys->pass_on at the leaves only (see Keys).
bool StartTree(const Topology& topo, const std::vector<std::string>& faults, Tree* t,
               const std::string& leaf0_bin = INA_SWITCHD_BIN, int cores = 1,
               Spine spine = Spine::kSameCores, const Keys* keys = nullptr) {
  std::vector<std::string> admin;
  if (keys != nullptr) admin = {"--admin-key-file", keys->admin};
  auto install = [&](const std::string& ns, const std::string& addr, int at_cores) {
    if (keys == nullptr) return true;
#ifdef INA_JOBKEY_BIN
    // In a namespace the switch listens on every address: its own loopback reaches it.
    const std::string to = topo.netns ? "127.0.0.1:47000" : addr;
    std::string cmd;
    for (const auto& a : topo.In(ns, {INA_JOBKEY_BIN, "--switch", to, "--admin-key-file",
                                      keys->admin, "--job", "7", "--secret-file", keys->job,
                                      "--mode", keys->mode, "--cores", std::to_string(at_cores)})) {
      cmd += a + " ";
    }
    const int rc = std::system((cmd + "> /dev/null").c_str());
    EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << cmd;
    return WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
#else
    ADD_FAILURE() << "ina-jobkey not built";
    return false;
#endif
  };
  const std::string seed = std::to_string(Seed());
  std::vector<std::string> on_cores, spine_cores;
  if (cores > 1) {
    on_cores = {"--cores", std::to_string(cores), "--core-ports", "1"};
    if (spine == Spine::kSameCores) spine_cores = on_cores;
    if (spine == Spine::kOnePort) on_cores.insert(on_cores.end(), {"--upstream-core-ports", "0"});
  }
  std::vector<std::string> sa = {
      INA_SWITCHD_BIN, "--bind", topo.SpineBind(), "--port", topo.netns ? "47000" : "0",
      "--seed",        seed};
  sa.insert(sa.end(), faults.begin(), faults.end());
  sa.insert(sa.end(), spine_cores.begin(), spine_cores.end());
  sa.insert(sa.end(), admin.begin(), admin.end());
  const bool pass_on = keys != nullptr && keys->pass_on;
  if (pass_on) sa.insert(sa.end(), {"--require-job-keys", "1"});
  auto sp = Process::Start(topo.In("s", sa));
  if (!sp.ok()) return false;
  t->spine.emplace(std::move(*sp));
  const std::string spine_addr = Address(*t->spine);
  if (spine_addr.empty()) return false;
  t->spine_argv = sa;
  t->spine_argv[4] = spine_addr.substr(spine_addr.rfind(':') + 1);  // --port's value
  if (!pass_on && !install("s", spine_addr, spine_cores.empty() ? 1 : cores)) return false;
  for (int i = 0; i < kLeaves; ++i) {
    const std::string bin = i == 0 ? leaf0_bin : INA_SWITCHD_BIN;
    std::vector<std::string> la = {bin,
                                   "--bind",
                                   topo.LeafBind(),
                                   "--port",
                                   topo.netns ? "47000" : "0",
                                   "--upstream",
                                   topo.SpineAddrFor(i, spine_addr),
                                   "--leaf-index",
                                   std::to_string(i),
                                   "--leaves",
                                   std::to_string(kLeaves),
                                   "--seed",
                                   std::to_string(Seed() + 100 + i)};
    la.insert(la.end(), faults.begin(), faults.end());
    la.insert(la.end(), on_cores.begin(), on_cores.end());
    la.insert(la.end(), admin.begin(), admin.end());
    if (pass_on) la.insert(la.end(), {"--upstream-admin-key-file", keys->admin});
    auto lp = Process::Start(topo.In("l" + std::to_string(i), la));
    if (!lp.ok()) return false;
    t->leaves.push_back(std::move(*lp));
    const std::string a = Address(
        t->leaves.back(),
        std::filesystem::path(bin).filename() == "ina-rtlsim" ? "ina-rtlsim" : "ina-switchd");
    if (a.empty()) return false;
    if (!install("l" + std::to_string(i), a, cores)) return false;
    t->leaf_addr.push_back(topo.LeafAddrFor(i, a));
  }
  return true;
}

RunResult RunTree(const Topology& topo, const std::string& type, size_t elements,
                  const std::vector<std::string>& faults, int lanes, const std::string& leaf0_bin,
                  int cores, Spine spine, const Keys* keys) {
  std::printf("tree (%s): %s, %d switch core(s)%s, INA_SEED=%llu\n",
              topo.netns ? "netns" : "loopback", type.c_str(), cores,
              keys != nullptr ? (", keyed (" + keys->mode + ")").c_str() : "",
              static_cast<unsigned long long>(Seed()));
  RunResult out;
  Tree t;
  EXPECT_TRUE(StartTree(topo, faults, &t, leaf0_bin, cores, spine, keys));
  if (t.leaves.size() != kLeaves) return out;
  std::vector<Process> ws;
  for (int r = 0; r < kWorld; ++r) {
    const int leaf = r / kPerLeaf;
    auto p = Process::Start(
        topo.In("w" + std::to_string(leaf),
                WorkerArgv(t.leaf_addr[leaf], r, type, elements, 2, 30000, lanes, cores, keys)));
    EXPECT_TRUE(p.ok());
    if (!p.ok()) return out;
    ws.push_back(std::move(*p));
  }
  Collect(ws, &out);
  for (auto& l : t.leaves) {
    out.leaf_cores.emplace_back();
    out.leaves.push_back(StopSwitch(l, &out.leaf_cores.back()));
  }
  out.spine = StopSwitch(*t.spine, &out.spine_cores);
  return out;
}

class Hierarchy : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    topo_.netns = GetParam();
    if (!topo_.netns) return;
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    topo_.prefix = "inah" + std::to_string(getpid());
    if (!topo_.Up()) {
      topo_.Down();
      GTEST_SKIP() << "network namespaces or veth pairs cannot be made here";
    }
  }
  void TearDown() override { topo_.Down(); }

  // `lanes`: progress threads per worker, each with its own socket (a rank joins the leaf from
  // that many addresses; the leaf still joins the spine with one).
  // `cores` > 1: every switch of the tree on that many cores (a port each), the workers' lanes on
  // them (lanes == cores); the flat run stays on one core with the same lanes.
  // `sec` mac or mac_encrypt: the tree's job is keyed (its key at every switch), the flat one
  // CRC-only; `pass_keys`: the key installed at the leaves only, passed on to the spine.
  // `lease_calls` > 0: the switches' --lease-calls (the spine's lease, which its leaves pass to
  // their workers): the tree's job is granted again after every that many calls.
  void ExpectTreeEqualsFlat(const std::string& type, size_t elements, int lanes = 1,
                            const std::string& leaf0_bin = INA_SWITCHD_BIN, int cores = 1,
                            Spine spine = Spine::kSameCores, const std::string& sec = "crc",
                            bool pass_keys = false, int lease_calls = 0) {
    std::vector<std::string> faults = {"--drop-rate", "0.02", "--dup-rate", "0.01"};
    if (lease_calls > 0)
      faults.insert(faults.end(), {"--lease-calls", std::to_string(lease_calls)});
    const bool keyed = sec != "crc";
    std::optional<Keys> keys;
    if (keyed) {
      keys.emplace(sec, pass_keys);
      ASSERT_TRUE(keys->ok());
    }
    RunResult tree = RunTree(topo_, type, elements, faults, lanes, leaf0_bin, cores, spine,
                             keys.has_value() ? &*keys : nullptr);
    RunResult flat = RunFlat(type, elements, lanes);
    ASSERT_EQ(tree.fingerprint.size(), static_cast<size_t>(kWorld));
    ASSERT_EQ(flat.fingerprint.size(), static_cast<size_t>(kWorld));
    EXPECT_TRUE(flat.all_exact);
    EXPECT_TRUE(tree.all_exact);
    EXPECT_EQ(tree.fingerprint, flat.fingerprint);
    for (int r = 1; r < kWorld; ++r) EXPECT_EQ(tree.fingerprint[r], tree.fingerprint[0]);
    // Loss on every hop, recovered on both: drops at the spine and at both leaves, retransmissions
    // from the workers (seen by the leaves) and from the leaves (seen by the spine).
    ASSERT_EQ(tree.leaves.size(), static_cast<size_t>(kLeaves));
    EXPECT_GT(tree.spine["inj_rx_drops"] + tree.spine["inj_tx_drops"], 0u);
    EXPECT_GT(tree.spine["retransmissions"], 0u);
    for (int i = 0; i < kLeaves; ++i) {
      auto& l = tree.leaves[i];
      std::printf(
          "leaf %d: up_data %llu up_retx %llu up_results %llu down %llu resends %llu "
          "pending %llu retransmissions %llu\n",
          i, (unsigned long long)l["leaf_up_data"], (unsigned long long)l["leaf_up_retx"],
          (unsigned long long)l["leaf_up_results"], (unsigned long long)l["leaf_down_results"],
          (unsigned long long)l["leaf_down_resends"], (unsigned long long)l["leaf_resend_pending"],
          (unsigned long long)l["retransmissions"]);
      EXPECT_GT(l["inj_rx_drops"] + l["inj_tx_drops"], 0u) << "leaf " << i;
      EXPECT_GT(l["retransmissions"], 0u) << "leaf " << i;
      EXPECT_GT(l["leaf_up_retx"], 0u) << "leaf " << i;
      // Every partial sent upstream came back as a result, exactly once per (slot, generation).
      EXPECT_EQ(l["leaf_up_results"], l["leaf_up_data"]) << "leaf " << i;
      // Each core admits its share of the job as a job of its own.
      EXPECT_EQ(l["jobs_admitted"], static_cast<uint64_t>(cores)) << "leaf " << i;
    }
    if (keyed) {
      // Every hop sealed under its own keys: nothing forged, nothing crossed unopened.
      EXPECT_EQ(tree.spine["drop_forged"], 0u);
      EXPECT_EQ(tree.spine["drop_cross_job"], 0u);
      EXPECT_GT(tree.spine["joins_proven"], 0u);
      for (int i = 0; i < kLeaves; ++i) {
        auto& l = tree.leaves[i];
        EXPECT_GT(l["leaf_up_proofs"], 0u) << "leaf " << i;
        EXPECT_GT(l["joins_proven"], 0u) << "leaf " << i;
        EXPECT_EQ(l["leaf_data_forged"], 0u) << "leaf " << i;
        EXPECT_EQ(l["leaf_up_forged"], 0u) << "leaf " << i;
        EXPECT_EQ(l["leaf_key_mismatch"], 0u) << "leaf " << i;
        if (pass_keys) {  // each leaf core passed it on (again for an ina-jobkey ack lost)
          EXPECT_GE(l["leaf_up_key_acks"], static_cast<uint64_t>(cores)) << "leaf " << i;
        }
      }
      if (pass_keys) {
        EXPECT_EQ(tree.spine["joins_unauthorized"], 0u);
        EXPECT_GE(tree.spine["keys_installed"], static_cast<uint64_t>(kLeaves * cores));
      }
    }
    if (lease_calls > 0) {
      // Each worker made 2 calls: the spine granted the job again after the first lease, and so
      // did each leaf (every core its share) once its workers re-joined.
      EXPECT_GE(tree.spine["regrants"], static_cast<uint64_t>(cores));
      for (int i = 0; i < kLeaves; ++i) {
        EXPECT_GE(tree.leaves[i]["regrants"], static_cast<uint64_t>(cores)) << "leaf " << i;
        EXPECT_EQ(tree.leaves[i]["leaf_no_slots"], 0u) << "leaf " << i;
      }
    }
    // The spine aggregated one contribution per leaf per (slot, generation): its results are the
    // leaves' partials, and it counted every duplicate instead of adding it.
    EXPECT_EQ(tree.spine["rx_data"],
              tree.leaves[0]["leaf_up_data"] + tree.leaves[1]["leaf_up_data"]);
    EXPECT_EQ(tree.spine["results"], tree.leaves[0]["leaf_up_data"]);
    // Every worker left gracefully, and then each leaf: the spine freed the job as done (each
    // core its share).
    if (spine == Spine::kOnePort) {
      // One spine job of kLeaves ranks with `cores` lanes each; the first graceful LEAVE of a
      // leaf's cores is its rank's (the others find the rank gone).
      std::printf("spine: leaves %llu, leaves_done %llu, leave_ignored %llu\n",
                  (unsigned long long)tree.spine["leaves"],
                  (unsigned long long)tree.spine["leaves_done"],
                  (unsigned long long)tree.spine["leave_ignored"]);
      EXPECT_EQ(tree.spine["leaves_done"], static_cast<uint64_t>(kLeaves));
      EXPECT_EQ(tree.spine["jobs_done"], 1u);
      EXPECT_EQ(tree.spine["jobs_admitted"], 1u);
      EXPECT_EQ(tree.spine_cores.size(), 0u) << "the spine runs on one core";
      for (int i = 0; i < kLeaves; ++i) {
        ASSERT_EQ(tree.leaf_cores[i].size(), static_cast<size_t>(cores)) << "leaf " << i;
        for (int c = 0; c < cores; ++c) {
          auto& lc = tree.leaf_cores[i][c];
          EXPECT_GT(lc["leaf_up_data"], 0u) << "leaf " << i << " core " << c;
          EXPECT_EQ(lc["leaf_up_results"], lc["leaf_up_data"]) << "leaf " << i << " core " << c;
        }
      }
      return;
    }
    EXPECT_EQ(tree.spine["leaves_done"], static_cast<uint64_t>(kLeaves * cores));
    EXPECT_EQ(tree.spine["jobs_done"], static_cast<uint64_t>(cores));
    if (cores == 1) return;
    // One job on every core of every switch: each spine core aggregated the partials of the
    // same core of every leaf, and nothing crossed between cores.
    ASSERT_EQ(tree.spine_cores.size(), static_cast<size_t>(cores));
    for (int c = 0; c < cores; ++c) {
      uint64_t up = 0;
      for (int i = 0; i < kLeaves; ++i) {
        ASSERT_EQ(tree.leaf_cores[i].size(), static_cast<size_t>(cores)) << "leaf " << i;
        auto& lc = tree.leaf_cores[i][c];
        EXPECT_GT(lc["rx_data"], 0u) << "leaf " << i << " core " << c;
        EXPECT_EQ(lc["jobs_admitted"], 1u) << "leaf " << i << " core " << c;
        EXPECT_EQ(lc["leaf_up_results"], lc["leaf_up_data"]) << "leaf " << i << " core " << c;
        up += lc["leaf_up_data"];
      }
      std::printf("spine core %d: rx_data %llu results %llu (leaves' partials to it: %llu)\n", c,
                  (unsigned long long)tree.spine_cores[c]["rx_data"],
                  (unsigned long long)tree.spine_cores[c]["results"], (unsigned long long)up);
      EXPECT_EQ(tree.spine_cores[c]["rx_data"], up) << "spine core " << c;
      EXPECT_EQ(tree.spine_cores[c]["jobs_done"], 1u) << "spine core " << c;
    }
  }

  Topology topo_;
};

TEST_P(Hierarchy, FloatUnderLossIsBitIdenticalToFlat) { ExpectTreeEqualsFlat("float", 50000); }

TEST_P(Hierarchy, Int32UnderLossIsBitIdenticalToFlat) { ExpectTreeEqualsFlat("int32", 50000); }

TEST_P(Hierarchy, WorkersWithTwoLanesUnderLossAreBitIdenticalToFlat) {
  ExpectTreeEqualsFlat("float", 50000, 2);
}

// A keyed job (mac) through the tree under loss: the workers' data opened at each leaf, the
// partials sealed for the spine and the spine's results opened and sealed again for the workers;
// retransmissions on every hop carry their tags unchanged. Bit-identical to a CRC-only flat run.
// Leases through the tree (docs/hierarchy.md, "Leases"): the spine's lease of 1 call, passed by
// the leaves to their workers, so the job is granted again between its two calls, at the spine
// and at each leaf, under loss; CRC-only, and keyed (each grant's own keys at every hop).
TEST_P(Hierarchy, LeasesReGrantTheTreeUnderLossBitIdenticalToFlat) {
  ExpectTreeEqualsFlat("float", 50000, 1, INA_SWITCHD_BIN, 1, Spine::kSameCores, "crc", false, 1);
}

TEST_P(Hierarchy, KeyedLeasesReGrantTheTreeUnderLossBitIdenticalToFlat) {
  ExpectTreeEqualsFlat("float", 50000, 1, INA_SWITCHD_BIN, 1, Spine::kSameCores, "mac", false, 1);
}

// Two tree jobs on a spine whose pool holds one (32 slots, both ask 32, a lease of 4 calls): the
// second waits (join_wait through the leaves) until the first's lease ends, and both then run on
// their fair shares, 16 each, every result exact.
TEST_P(Hierarchy, TwoTreeJobsShareTheSpinesPoolAtLeaseEnds) {
  Tree t;
  ASSERT_TRUE(StartTree(topo_, {"--slots", "32", "--lease-calls", "4"}, &t));
  auto start = [&](int job, int repeats, std::vector<Process>* ws) {
    for (int r = 0; r < kWorld; ++r) {
      const int leaf = r / kPerLeaf;
      auto argv = WorkerArgv(t.leaf_addr[leaf], r, "float", 50000, repeats, 30000);
      for (auto& a : argv) {
        if (a == "INA_JOB=7") a = "INA_JOB=" + std::to_string(job);
      }
      auto p = Process::Start(topo_.In("w" + std::to_string(leaf), argv));
      ASSERT_TRUE(p.ok());
      ws->push_back(std::move(*p));
    }
  };
  std::vector<Process> first, second;
  start(7, 300, &first);                // some seconds of calls
  std::this_thread::sleep_for(1500ms);  // job 7 joined: it holds the whole pool
  start(8, 4, &second);
  RunResult a, b;
  Collect(first, &a);
  Collect(second, &b);
  EXPECT_TRUE(a.all_exact);
  EXPECT_TRUE(b.all_exact);
  EXPECT_EQ(a.fingerprint.size(), static_cast<size_t>(kWorld));
  EXPECT_EQ(b.fingerprint.size(), static_cast<size_t>(kWorld));
  auto spine = StopSwitch(*t.spine);
  std::printf("spine: jobs_admitted %llu, jobs_queued %llu, regrants %llu, join_waits %llu\n",
              (unsigned long long)spine["jobs_admitted"], (unsigned long long)spine["jobs_queued"],
              (unsigned long long)spine["regrants"], (unsigned long long)spine["join_waits"]);
  EXPECT_EQ(spine["jobs_admitted"], 2u);
  EXPECT_GE(spine["jobs_queued"], 1u) << "job 8 waited for job 7's lease end";
  EXPECT_GE(spine["regrants"], 1u);
  EXPECT_EQ(spine["jobs_done"], 2u);
  for (int i = 0; i < kLeaves; ++i) {
    auto leaf = StopSwitch(t.leaves[i]);
    EXPECT_EQ(leaf["leaf_no_slots"], 0u) << "leaf " << i;
  }
}

TEST_P(Hierarchy, KeyedUnderLossIsBitIdenticalToFlat) {
  ExpectTreeEqualsFlat("float", 50000, 1, INA_SWITCHD_BIN, 1, Spine::kSameCores, "mac");
}

// The same with every switch on 2 cores (each core's share keyed on its own).
TEST_P(Hierarchy, KeyedOnTwoCoresUnderLossIsBitIdenticalToFlat) {
  ExpectTreeEqualsFlat("int32", 50000, 2, INA_SWITCHD_BIN, 2, Spine::kSameCores, "mac");
}

// The key installed at the leaves only (each core, with ina-jobkey), in mode mac_encrypt: each
// leaf core passes it on to the spine's core under loss (resent until acknowledged), and the spine,
// which requires keys, runs the job as if it had been installed there.
TEST_P(Hierarchy, KeysPassedOnUnderLossAreBitIdenticalToFlat) {
  ExpectTreeEqualsFlat("float", 50000, 2, INA_SWITCHD_BIN, 2, Spine::kSameCores, "mac_encrypt",
                       true);
}

// One job on every switch core, through the tree: 2 cores per switch (--cores 2 --core-ports 1),
// leaf core c under the spine's core c, each worker's 2 lanes on its leaf's 2 cores.
TEST_P(Hierarchy, EverySwitchOnTwoCoresUnderLossIsBitIdenticalToFlat) {
  ExpectTreeEqualsFlat("float", 50000, 2, INA_SWITCHD_BIN, 2);
}

// Leaves on 2 cores under a spine on one (--upstream-core-ports 0): each leaf core joins the
// spine's one port as a lane of its leaf's rank and carries that lane's slots.
TEST_P(Hierarchy, LeavesOnTwoCoresUnderASpineOnOneUnderLossAreBitIdenticalToFlat) {
  ExpectTreeEqualsFlat("float", 50000, 2, INA_SWITCHD_BIN, 2, Spine::kOnePort);
}

// The leaf's work is outside its engine: ina-rtlsim (the verilated RTL core as the engine, the
// same switch loop and leaf around it) serves as leaf 0 unchanged.
TEST_P(Hierarchy, RtlCoreAsALeafsEngineIsBitIdenticalToFlat) {
#ifdef INA_RTLSIM_BIN
  if (topo_.netns) GTEST_SKIP() << "run on loopback only (the RTL model is slow)";
  ExpectTreeEqualsFlat("float", 20000, 1, INA_RTLSIM_BIN);
#else
  GTEST_SKIP() << "ina-rtlsim not built (no verilator)";
#endif
}

// The RTL core as a keyed leaf's engine, in mode mac_encrypt, which the RTL does not do itself
// (docs/security.md): the leaf opens and seals in software and hands the core the plaintext as a
// CRC-only job (ControlConfig::engine_keys), so the encrypted job runs through it unchanged.
TEST_P(Hierarchy, RtlCoreAsAKeyedLeafsEngineIsBitIdenticalToFlat) {
#ifdef INA_RTLSIM_BIN
  if (topo_.netns) GTEST_SKIP() << "run on loopback only (the RTL model is slow)";
  ExpectTreeEqualsFlat("float", 20000, 1, INA_RTLSIM_BIN, 1, Spine::kSameCores, "mac_encrypt");
#else
  GTEST_SKIP() << "ina-rtlsim not built (no verilator)";
#endif
}

// Starts rank `rank` at leaf `leaf` of `t` in calls that last `repeats` float all-reduces of 4096
// (progress timeout `progress_ms`), saying the world has `world` ranks, its stdout and stderr
// merged (what ExpectEachFails reads); appends it to `ws`.
void StartWorker(const Topology& topo, const Tree& t, int leaf, int rank, int world, int repeats,
                 int progress_ms, std::vector<Process>* ws, const Keys* keys = nullptr,
                 int join_ms = 30000) {
  auto argv = WorkerArgv(t.leaf_addr[leaf], rank, "float", 4096, repeats, progress_ms, 1, 1, keys);
  for (auto& a : argv) {
    if (a == "INA_WORLD=" + std::to_string(kWorld)) a = "INA_WORLD=" + std::to_string(world);
    if (a == "INA_JOIN_TIMEOUT_MS=30000") a = "INA_JOIN_TIMEOUT_MS=" + std::to_string(join_ms);
  }
  argv.insert(argv.begin(), {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1"});
  auto p = Process::Start(topo.In("w" + std::to_string(leaf), argv));
  ASSERT_TRUE(p.ok());
  ws->push_back(std::move(*p));
}

// Worker i (`who[i]` in messages) must exit 1 without a result, with `says` in its output,
// within `bound_s` of `from`. Prints each one's error from `shown` on.
void ExpectEachFails(std::vector<Process>& ws, const std::vector<std::string>& who,
                     const std::string& says, Clock::time_point from, double bound_s,
                     const std::string& shown) {
  for (size_t i = 0; i < ws.size(); ++i) {
    std::string all;
    for (const auto& l : ws[i].Drain(40s)) all += l + "\n";
    auto st = ws[i].Stop(SIGKILL, 1s);
    const double s = std::chrono::duration<double>(Clock::now() - from).count();
    ASSERT_TRUE(st.ok());
    EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 1) << who[i] << " did not fail:\n" << all;
    EXPECT_EQ(all.find("\nresult rank="), std::string::npos) << who[i] << ": a result came back:\n"
                                                             << all;
    EXPECT_NE(all.find(says), std::string::npos) << who[i] << ":\n" << all;
    EXPECT_LT(s, bound_s) << who[i];
    const size_t at = all.find(shown);
    std::printf("%s failed %.1f s on: %s", who[i].c_str(), s,
                all.substr(at == std::string::npos ? 0 : at).c_str());
  }
}

// Starts 8 workers at the tree in calls that would last far longer than the test (progress
// timeout `progress_ms`), kills `victim` (a leaf or the spine) after 2 s, runs `then` (a restart;
// the clock starts after it), and expects every worker to exit 1 with `says` in its output within
// `bound_s` (one that hung would be killed at ~31 s after the kill).
void ExpectBoundedErrorsAfterKilling(const Topology& topo, Tree& t, Process& victim,
                                     int progress_ms = 2000, const std::function<void()>& then = {},
                                     const std::string& says = "all-reduce: ",
                                     double bound_s = 20.0) {
  std::vector<Process> ws;
  // The join timeout at its default, 10 s: a kill that lands while the tree re-joins at a lease's
  // end (every 64 calls, the spine's default lease) fails the re-join by then.
  for (int r = 0; r < kWorld; ++r)
    StartWorker(topo, t, r / kPerLeaf, r, kWorld, 1000000, progress_ms, &ws, nullptr, 10000);
  std::this_thread::sleep_for(2s);  // joined and running
  auto st = victim.Stop(SIGKILL, 5s);
  ASSERT_TRUE(st.ok());
  if (then) then();
  std::vector<std::string> who;
  for (int r = 0; r < kWorld; ++r) who.push_back("rank " + std::to_string(r));
  ExpectEachFails(ws, who, says, Clock::now(), bound_s, "all-reduce: ");
}

TEST_P(Hierarchy, KilledLeafFailsEveryWorkerInBoundedTime) {
  Tree t;
  ASSERT_TRUE(StartTree(topo_, {}, &t));
  ExpectBoundedErrorsAfterKilling(topo_, t, t.leaves[0]);
  // The surviving leaf told the spine (aborting LEAVE), which freed the job.
  auto spine = StopSwitch(*t.spine);
  auto leaf1 = StopSwitch(t.leaves[1]);
  EXPECT_GE(leaf1["leaf_up_leaves"], 1u);
  EXPECT_EQ(leaf1["jobs_freed"], 1u);
  EXPECT_EQ(spine["jobs_freed"], 1u);
}

TEST_P(Hierarchy, KilledSpineFailsEveryWorkerInBoundedTime) {
  Tree t;
  ASSERT_TRUE(StartTree(topo_, {}, &t));
  ExpectBoundedErrorsAfterKilling(topo_, t, *t.spine);
  // Both leaves freed their jobs (their workers left) and said so upstream.
  for (int i = 0; i < kLeaves; ++i) {
    auto leaf = StopSwitch(t.leaves[i]);
    EXPECT_EQ(leaf["jobs_freed"], 1u) << "leaf " << i;
    EXPECT_GE(leaf["leaf_up_leaves"], 1u) << "leaf " << i;
  }
}

// Workers of one job id that disagree on the world size, each leaf's consistent among
// themselves: leaf 0's 2 say 4 (ranks 0-1, its share of 4), leaf 1's 4 say 8 (ranks 4-7, its share
// of 8) -- two launches given the same job id, say. A flat switch refuses the second world size.
// In a tree each leaf would admit its own, and the spine would sum partials quantized for two
// precision budgets (P = 30 - ceil(log2 N): 28 and 27). Every worker must fail with an error that
// names the world size, well within its join timeout, and the spine must admit nothing.
TEST_P(Hierarchy, LeavesWhoseWorkersDisagreeOnTheWorldSizeFailEveryWorker) {
  Tree t;
  ASSERT_TRUE(StartTree(topo_, {}, &t));
  struct W {
    int leaf, rank, world;
  };
  const std::vector<W> plan = {{0, 0, 4}, {0, 1, 4}, {1, 4, 8}, {1, 5, 8}, {1, 6, 8}, {1, 7, 8}};
  std::vector<Process> ws;
  const auto started = Clock::now();
  for (const W& w : plan) StartWorker(topo_, t, w.leaf, w.rank, w.world, 2, 30000, &ws);
  std::vector<std::string> who;
  for (const W& w : plan) {
    who.push_back("leaf " + std::to_string(w.leaf) + " rank " + std::to_string(w.rank) +
                  " (world " + std::to_string(w.world) + ")");
  }
  // The join timeout is 30 s: an error from the fabric comes long before it.
  ExpectEachFails(ws, who, "world size", started, 15.0, "error(");
  auto spine = StopSwitch(*t.spine);
  EXPECT_EQ(spine["jobs_admitted"], 0u);
  EXPECT_EQ(spine["rx_data"], 0u);
  EXPECT_GE(spine["err_bad_params"], 1u);
}

// A leaf refuses one of its own workers while its part of the job is joining: rank 7 says the
// world has 16 ranks (a launcher that gave it another INA_WORLD), and it starts after the others
// joined. The leaf dooms the job and tells the spine (LEAVE peer_refused), which tells the other
// leaf: every worker fails at once naming the world size, not at its join timeout (30 s).
TEST_P(Hierarchy, AWorkerItsLeafRefusesFailsEveryWorkerAtOnce) {
  Tree t;
  ASSERT_TRUE(StartTree(topo_, {}, &t));
  std::vector<Process> ws;
  std::vector<std::string> who;
  Clock::time_point started;
  for (int r = 0; r < kWorld; ++r) {
    const int leaf = r / kPerLeaf;
    const bool odd = r == kWorld - 1;
    if (odd) {
      std::this_thread::sleep_for(1s);  // the others joined; leaf 1's part waits for rank 7
      started = Clock::now();
    }
    StartWorker(topo_, t, leaf, r, odd ? 16 : kWorld, 2, 30000, &ws);
    who.push_back("leaf " + std::to_string(leaf) + " rank " + std::to_string(r));
  }
  ExpectEachFails(ws, who, "world size", started, 10.0, "error(");
  auto spine = StopSwitch(*t.spine);
  auto leaf1 = StopSwitch(t.leaves[1]);
  EXPECT_EQ(spine["refused_below"], 1u);
  // Leaf 0 had all its workers in, and its partials went up; none was summed.
  EXPECT_EQ(spine["results"], 0u);
  EXPECT_EQ(leaf1["leaf_up_refusals"], 1u);
}

// Rank 7, which leaf 1 serves, is pointed at leaf 0 (a launcher that gave it the wrong
// INA_SWITCH) and starts before any other: leaf 0 holds no job yet when it refuses it, so it joins
// the spine and at once sends LEAVE peer_refused, which dooms the job there (a keyed job's once
// the leaf's JOIN is proven: the spine takes a LEAVE only from a member). The other 7 workers,
// started 1 s later, fail at once naming rank 7, not at their join timeout (30 s).
TEST_P(Hierarchy, AWorkerAtTheWrongLeafBeforeAnyOtherFailsEveryWorkerAtOnce) {
  for (const std::string sec : {"crc", "mac"}) {
    SCOPED_TRACE(sec);
    std::optional<Keys> keys;
    if (sec != "crc") {
      keys.emplace(sec, false);
      ASSERT_TRUE(keys->ok());
    }
    const Keys* k = keys.has_value() ? &*keys : nullptr;
    Tree t;
    ASSERT_TRUE(StartTree(topo_, {}, &t, INA_SWITCHD_BIN, 1, Spine::kSameCores, k));
    std::vector<Process> wrong;
    StartWorker(topo_, t, 0, kWorld - 1, kWorld, 2, 30000, &wrong, k);
    std::this_thread::sleep_for(1s);  // rank 7 refused; the spine holds the job, doomed
    std::vector<Process> ws;
    std::vector<std::string> who;
    const Clock::time_point started = Clock::now();
    for (int r = 0; r < kWorld - 1; ++r) {
      StartWorker(topo_, t, r / kPerLeaf, r, kWorld, 2, 30000, &ws, k);
      who.push_back("leaf " + std::to_string(r / kPerLeaf) + " rank " + std::to_string(r));
    }
    ExpectEachFails(wrong, {"rank 7 at leaf 0"}, "this switch does not serve rank 7", started, 10.0,
                    "error(");
    ExpectEachFails(ws, who,
                    "rank 7's JOIN was refused, so the job cannot start: it joined a leaf that "
                    "does not serve it",
                    started, 10.0, "error(");
    auto spine = StopSwitch(*t.spine);
    auto leaf0 = StopSwitch(t.leaves[0]);
    EXPECT_EQ(spine["refused_below"], 1u);
    EXPECT_EQ(spine["results"], 0u);
    EXPECT_EQ(leaf0["leaf_up_refusals"], 1u);
  }
}

// Workers that never start: the others' join timeout names who is missing. With no worker of leaf
// 1, the spine waits for that leaf, and leaf 0's workers hear "the leaf of ranks 4..7 has not"
// (the spine's join_pending passed down); with rank 7 alone missing, the spine grants (each leaf
// has a worker) and leaf 1's control plane waits for it: ranks 4..6 hear "rank 7 has not".
TEST_P(Hierarchy, AJoinTimeoutNamesTheLeafOrTheRankThatNeverStarted) {
  struct Plan {
    int first, last;        // the ranks that start
    std::vector<int> told;  // ranks whose join times out naming the missing ones
    std::string says;
  } plans[] = {
      {0,
       kPerLeaf - 1,
       {0, 1, 2, 3},
       "1 of 2 leaves of the tree joined the spine; the leaf of ranks 4..7 has not"},
      {0, kWorld - 2, {4, 5, 6}, "3 of 4 ranks of this leaf joined it; rank 7 has not"},
  };
  for (const Plan& plan : plans) {
    SCOPED_TRACE(plan.says);
    Tree t;
    ASSERT_TRUE(StartTree(topo_, {}, &t));
    std::vector<Process> all;
    const Clock::time_point started = Clock::now();
    for (int r = plan.first; r <= plan.last; ++r) {
      StartWorker(topo_, t, r / kPerLeaf, r, kWorld, 2, 3000, &all, nullptr, 3000);
    }
    std::vector<Process> told;
    std::vector<std::string> who;
    for (int r : plan.told) {
      told.push_back(std::move(all[static_cast<size_t>(r - plan.first)]));
      who.push_back("rank " + std::to_string(r));
    }
    ExpectEachFails(told, who, "no join_ack within 3000 ms: " + plan.says, started, 20.0,
                    "join job");
    for (Process& p : all) {
      if (p.pid() > 0) (void)p.Stop(SIGKILL, 1s);  // leaf 0's, in a call that cannot finish
    }
  }
}

// The spine dies and a new one starts on its address (its supervisor restarting it): it holds no
// job, so it answers the leaves' partials with error(unknown_job), and each leaf ends its local
// job with that error. Every worker fails at once, saying so, instead of at its progress timeout
// (30 s here). No leases: a restart that lands while every leaf re-joins at a lease's end loses
// nothing (no call is in flight): the new spine may grant the job afresh, and nothing fail.
TEST_P(Hierarchy, ARestartedSpineFailsEveryWorkerAtOnce) {
  Tree t;
  ASSERT_TRUE(StartTree(topo_, {"--lease-calls", "0"}, &t));
  ASSERT_EQ(t.spine_argv[3], "--port");
  Process& old_spine = *t.spine;
  std::optional<Process> new_spine;
  ExpectBoundedErrorsAfterKilling(
      topo_, t, old_spine, 30000,
      [&] {
        auto sp = Process::Start(topo_.In("s", t.spine_argv));
        ASSERT_TRUE(sp.ok());
        new_spine.emplace(std::move(*sp));
        ASSERT_FALSE(Address(*new_spine).empty()) << "the new spine did not start";
      },
      "not held by the fabric", 10.0);
  ASSERT_TRUE(new_spine.has_value());
  auto spine = StopSwitch(*new_spine);
  EXPECT_GE(spine["err_unknown_job"], 1u);
  EXPECT_EQ(spine["jobs_admitted"], 0u);
}

INSTANTIATE_TEST_SUITE_P(Topologies, Hierarchy, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Netns" : "Loopback"; });

}  // namespace
}  // namespace ina::bench
