// Lanes on switch cores through the real ina-switchd: --cores 2 --core-ports 1 and workers with
// switch_cores 2 give one job on both cores (each aggregating the slots s with s mod 2 == its
// index, from its own port), with the same bits as one core. switch_cores auto asks the switch
// (hello) and gets the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "ina/host/communicator.h"
#include "support/switchd_process.h"

namespace ina::host {
namespace {

constexpr int kWorld = 3;
constexpr size_t kN = 100003;  // 391 blocks of K=256: both cores' slots, a short last block

std::vector<float> Input(int rank) {
  std::vector<float> v(kN);
  uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(rank + 1);
  for (size_t i = 0; i < kN; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = static_cast<float>(static_cast<int64_t>(x >> 40) - (1 << 23)) *
           (i % 97 == 0 ? 1e-3f : 1e-6f);
  }
  return v;
}

// Rank r of job `job` at the switch at `port`, K=256, asking 64 slots.
CommConfig RankConfig(uint16_t port, uint16_t job, int r, int switch_cores) {
  CommConfig c;
  c.switch_port = port;
  c.job_id = job;
  c.rank = static_cast<uint16_t>(r);
  c.world_size = kWorld;
  c.k = 256;
  c.window = 64;
  c.join_timeout_ms = 30000;
  c.progress_threads = std::max(switch_cores, 1);  // auto (0): what the switch says
  c.switch_cores = switch_cores;
  return c;
}

// A job of one rank, K=256, asking `window` slots of the switch core at `port`: it holds part of
// that core's pool while another job runs.
CommConfig HolderConfig(uint16_t port, uint16_t job, uint16_t window) {
  CommConfig h;
  h.switch_port = port;
  h.job_id = job;
  h.world_size = 1;
  h.k = 256;
  h.window = window;
  h.join_timeout_ms = 30000;
  return h;
}

// Every rank's result of two calls (a float sum, then an int32 sum) against the switch at `port`.
std::vector<std::vector<float>> RunJob(uint16_t port, uint16_t job, int switch_cores,
                                       std::vector<Status>* status) {
  std::vector<std::vector<float>> out(kWorld);
  status->assign(kWorld, Status::Ok());
  std::vector<std::thread> ts;
  for (int r = 0; r < kWorld; ++r) {
    ts.emplace_back([&, r] {
      auto comm = Communicator::Create(RankConfig(port, job, r, switch_cores));
      if (!comm.ok()) {
        (*status)[r] = comm.status();
        return;
      }
      std::vector<float> f = Input(r);
      Status s = (*comm)->AllReduce(std::span<float>(f));
      std::vector<int32_t> i(5000, r + 1);
      if (s.ok()) s = (*comm)->AllReduce(std::span<int32_t>(i));
      if (s.ok() && i[4999] != kWorld * (kWorld + 1) / 2) s = Internal("int32 sum wrong");
      (*status)[r] = s;
      out[r] = std::move(f);
    });
  }
  for (auto& t : ts) t.join();
  return out;
}

// Stops `two` (a --cores 2 --core-ports 1 switch) into *total and checks that both cores
// aggregated: its per-core counters line has data and results on each.
void ExpectBothCoresAggregated(test::SwitchProcess& two, std::map<std::string, uint64_t>* total) {
  *total = two.Stop();
  const std::string out = two.Output();
  const auto at = out.find("{\"core_counters\": [");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string line = out.substr(at, out.find('\n', at) - at);
  std::vector<uint64_t> rx_data, results;
  const std::regex d("\"rx_data\": ([0-9]+)"), res("\"results\": ([0-9]+)");
  for (auto it = std::sregex_iterator(line.begin(), line.end(), d); it != std::sregex_iterator();
       ++it) {
    rx_data.push_back(std::stoull((*it)[1]));
  }
  for (auto it = std::sregex_iterator(line.begin(), line.end(), res); it != std::sregex_iterator();
       ++it) {
    results.push_back(std::stoull((*it)[1]));
  }
  ASSERT_EQ(rx_data.size(), 2u) << line;
  ASSERT_EQ(results.size(), 2u) << line;
  for (int c = 0; c < 2; ++c) {
    EXPECT_GT(rx_data[c], 0u) << "core " << c << " aggregated nothing: " << line;
    EXPECT_GT(results[c], 0u) << "core " << c << ": " << line;
  }
  EXPECT_EQ((*total)["rx_data"], rx_data[0] + rx_data[1]);
  EXPECT_EQ((*total)["jobs_done"], 2u) << "each core's share ends with every rank's LEAVE";
}

TEST(CoreLanes, OneJobOnTwoSwitchCoresIsBitIdenticalToOneCore) {
  std::vector<Status> st;
  test::SwitchProcess one({"--port", "0"});
  ASSERT_TRUE(one.ok());
  const auto want = RunJob(one.port(), 21, 1, &st);
  for (int r = 0; r < kWorld; ++r)
    ASSERT_TRUE(st[r].ok()) << "one core, rank " << r << ": " << st[r].ToString();

  test::SwitchProcess two({"--port", "0", "--cores", "2", "--core-ports", "1"});
  ASSERT_TRUE(two.ok());
  const auto got = RunJob(two.port(), 21, 2, &st);
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(st[r].ok()) << "two cores, rank " << r << ": " << st[r].ToString();
    EXPECT_EQ(got[r], want[r]) << "rank " << r << " differs from the one-core result";
    EXPECT_EQ(got[r], got[0]) << "rank " << r << " differs from rank 0";
  }
  std::map<std::string, uint64_t> total;
  ExpectBothCoresAggregated(two, &total);
}

// Workers that ask (switch_cores auto): two lanes, one on each core of a --core-ports switch, the
// same bits; one lane on a switch of one port.
TEST(CoreLanes, AutoAsksTheSwitchAndUsesEveryCore) {
  std::vector<Status> st;
  test::SwitchProcess one({"--port", "0"});
  ASSERT_TRUE(one.ok());
  const auto want = RunJob(one.port(), 23, CommConfig::kSwitchCoresAuto, &st);
  for (int r = 0; r < kWorld; ++r)
    ASSERT_TRUE(st[r].ok()) << "one core, rank " << r << ": " << st[r].ToString();
  auto total_one = one.Stop();
  EXPECT_EQ(total_one["hellos"], static_cast<uint64_t>(kWorld));
  EXPECT_EQ(total_one["jobs_done"], 1u);

  test::SwitchProcess two({"--port", "0", "--cores", "2", "--core-ports", "1"});
  ASSERT_TRUE(two.ok());
  const auto got = RunJob(two.port(), 23, CommConfig::kSwitchCoresAuto, &st);
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(st[r].ok()) << "two cores, rank " << r << ": " << st[r].ToString();
    EXPECT_EQ(got[r], want[r]) << "rank " << r << " differs from the one-core result";
  }
  std::map<std::string, uint64_t> total;
  ExpectBothCoresAggregated(two, &total);
  EXPECT_EQ(total["hellos"], static_cast<uint64_t>(kWorld)) << "one hello per rank, at core 0";
}

// Three calls of every rank (floats, other floats, int32) against the switch at `port`, asking
// 64 slots; `between` runs once after every rank's first call. Each rank's two float results,
// and in *windows its window after the first call and after the last. `rank_ports`, if given:
// rank r's switch is at rank_ports[r] instead (a tree's leaves).
std::vector<std::vector<float>> RunThreeCalls(uint16_t port, uint16_t job, int switch_cores,
                                              const std::function<void()>& between,
                                              std::vector<Status>* status,
                                              std::vector<std::vector<uint16_t>>* windows,
                                              const std::vector<uint16_t>& rank_ports = {}) {
  std::vector<std::vector<float>> out(kWorld);
  status->assign(kWorld, Status::Ok());
  windows->assign(kWorld, {});
  std::barrier sync(kWorld, [&]() noexcept { between(); });
  std::vector<std::thread> ts;
  for (int r = 0; r < kWorld; ++r) {
    ts.emplace_back([&, r] {
      auto comm = Communicator::Create(
          RankConfig(rank_ports.empty() ? port : rank_ports[r], job, r, switch_cores));
      std::vector<float> f = Input(r), g = Input(r + kWorld);
      Status s = comm.ok() ? (*comm)->AllReduce(std::span<float>(f)) : comm.status();
      if (s.ok()) (*windows)[r].push_back((*comm)->window());
      sync.arrive_and_wait();
      if (s.ok()) s = (*comm)->AllReduce(std::span<float>(g));
      std::vector<int32_t> i(5000, r + 1);
      if (s.ok()) s = (*comm)->AllReduce(std::span<int32_t>(i));
      if (s.ok() && i[4999] != kWorld * (kWorld + 1) / 2) s = Internal("int32 sum wrong");
      if (s.ok()) (*windows)[r].push_back((*comm)->window());
      (*status)[r] = s;
      out[r] = std::move(f);
      out[r].insert(out[r].end(), g.begin(), g.end());
    });
  }
  for (auto& t : ts) t.join();
  return out;
}

// Each core holds its share of the job's slots, numbered densely as a job of its own: a job
// asking 64 slots asks each of 2 cores for 32, so a switch of 32 slots a core grants it all 64
// (when every core held the whole window's numbering, it got 32). One core's bits.
TEST(CoreLanes, EachCoreHoldsItsShareOfTheWindow) {
  std::vector<Status> st;
  std::vector<std::vector<uint16_t>> windows;
  test::SwitchProcess one({"--port", "0"});
  ASSERT_TRUE(one.ok());
  const auto want = RunThreeCalls(
      one.port(), 27, 1, [] {}, &st, &windows);
  for (int r = 0; r < kWorld; ++r)
    ASSERT_TRUE(st[r].ok()) << "one core, rank " << r << ": " << st[r].ToString();

  test::SwitchProcess two({"--port", "0", "--cores", "2", "--core-ports", "1", "--slots", "64"});
  ASSERT_TRUE(two.ok());
  const auto got = RunThreeCalls(
      two.port(), 27, 2, [] {}, &st, &windows);
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(st[r].ok()) << "two cores, rank " << r << ": " << st[r].ToString();
    EXPECT_EQ(windows[r], (std::vector<uint16_t>{64, 64})) << "rank " << r;
    EXPECT_EQ(got[r], want[r]) << "rank " << r << " differs from the one-core result";
  }
  std::map<std::string, uint64_t> total;
  ExpectBothCoresAggregated(two, &total);
}

// Each core shares its own pool with the jobs there, so the cores may grant one job different
// windows, and a core's engine needs the window its job was granted (the slot history). Here a
// job of one lane holds 48 of core 0's 64 slots, so core 0 grants the job on both cores 16 of the
// 32 it asks and core 1 all 32: the lane on core 1 re-joins asking 16. A grant lasts one call;
// after the first call the holder leaves, so at the lease's end core 0 grants 32 and core 1 16
// (asked since): now the lane on core 0 re-joins asking 16. Before, the join failed ("lanes
// granted different windows"). Every call has one core's bits.
TEST(CoreLanes, CoresGrantingDifferentWindowsAgreeOnTheLeast) {
  std::vector<Status> st;
  std::vector<std::vector<uint16_t>> windows;
  test::SwitchProcess one({"--port", "0"});
  ASSERT_TRUE(one.ok());
  const auto want = RunThreeCalls(
      one.port(), 25, 1, [] {}, &st, &windows);
  for (int r = 0; r < kWorld; ++r)
    ASSERT_TRUE(st[r].ok()) << "one core, rank " << r << ": " << st[r].ToString();

  // 64 slots on each core; a grant lasts one call.
  test::SwitchProcess two(
      {"--port", "0", "--cores", "2", "--core-ports", "1", "--slots", "128", "--lease-calls", "1"});
  ASSERT_TRUE(two.ok());
  auto holder = Communicator::Create(HolderConfig(two.port(), 26, 48));  // core 0
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  ASSERT_EQ((*holder)->window(), 48);

  const auto got = RunThreeCalls(
      two.port(), 25, 2, [&] { holder->reset(); }, &st, &windows);
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(st[r].ok()) << "two cores, rank " << r << ": " << st[r].ToString();
    EXPECT_EQ(windows[r], (std::vector<uint16_t>{32, 32})) << "rank " << r << ": 16 a core";
    EXPECT_EQ(got[r], want[r]) << "rank " << r << " differs from the one-core result";
  }
  const auto total = two.Stop();
  // Lease re-joins: before calls 2 and 3, every lane of every rank (2 x 3 x 2); asking less:
  // the lanes on core 1 at the join, those on core 0 before call 2 (3 + 3).
  EXPECT_EQ(total.at("rejoins"), 18u);
  EXPECT_EQ(total.at("jobs_done"), 3u) << "the job's share on each core, and the holder's";
}

// The same in a tree of switches on two cores: a leaf core's window is its spine core's grant, so
// the job on both cores of two leaves is granted 16 at the spine's core 0 (the holder has 48 of
// its 64) and 32 at its core 1. The workers' lanes on core 1 re-join their leaves asking 16; each
// leaf's core 1 re-joins the spine's core 1 for it once its ranks all did, and the spine's new
// grant reaches the workers. Before, the leaves refused the re-join (bad_params, the window).
TEST(CoreLanes, ATreeWhoseSpineCoresGrantDifferentWindowsAgreesOnTheLeast) {
  std::vector<Status> st;
  std::vector<std::vector<uint16_t>> windows;
  test::SwitchProcess one({"--port", "0"});
  ASSERT_TRUE(one.ok());
  const auto want = RunThreeCalls(
      one.port(), 29, 1, [] {}, &st, &windows);
  for (int r = 0; r < kWorld; ++r)
    ASSERT_TRUE(st[r].ok()) << "one core, rank " << r << ": " << st[r].ToString();

  test::SwitchProcess spine({"--port", "0", "--cores", "2", "--core-ports", "1", "--slots", "128"});
  ASSERT_TRUE(spine.ok());
  auto holder = Communicator::Create(HolderConfig(spine.port(), 30, 48));  // the spine's core 0
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  std::vector<std::unique_ptr<test::SwitchProcess>> leaves;
  for (int i = 0; i < 2; ++i) {
    leaves.push_back(std::make_unique<test::SwitchProcess>(
        std::vector<std::string>{"--port", "0", "--cores", "2", "--core-ports", "1", "--upstream",
                                 "127.0.0.1:" + std::to_string(spine.port()), "--leaf-index",
                                 std::to_string(i), "--leaves", "2"}));
    ASSERT_TRUE(leaves.back()->ok());
  }
  // Leaf 0 serves ranks 0 and 1, leaf 1 rank 2 (RanksOfLeaf).
  const std::vector<uint16_t> ports{leaves[0]->port(), leaves[0]->port(), leaves[1]->port()};
  const auto got = RunThreeCalls(
      0, 29, 2, [] {}, &st, &windows, ports);
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(st[r].ok()) << "tree, rank " << r << ": " << st[r].ToString();
    EXPECT_EQ(windows[r], (std::vector<uint16_t>{32, 32})) << "rank " << r << ": 16 a core";
    EXPECT_EQ(got[r], want[r]) << "rank " << r << " differs from the one-core result";
  }
  for (auto& leaf : leaves) {
    const auto c = leaf->Stop();
    EXPECT_EQ(c.at("leaf_no_slots"), 0u);
    EXPECT_EQ(c.at("jobs_done"), 2u) << "the job's share on each core";
  }
  holder->reset();
  const auto total = spine.Stop();
  EXPECT_EQ(total.at("rejoins"), 2u) << "each leaf's core 1, once";
  EXPECT_EQ(total.at("regrants"), 1u) << "the spine's core 1";
}

// A core that granted hears nothing of the job while another core queues it: the granted lanes
// keep their JOINs going, so that core does not time the job out. Core 0's 32 slots are held by a
// job that keeps calling (and never re-joins: no leases) for 2.5 s, 2.5 job timeouts; the job on
// both cores waits there and then runs. Without the keep-alive, core 1 freed its share after
// 1 s and the first call failed.
TEST(CoreLanes, AGrantedCoreKeepsTheJobWhileAnotherQueuesIt) {
  std::vector<Status> st;
  test::SwitchProcess one({"--port", "0"});
  ASSERT_TRUE(one.ok());
  const auto want = RunJob(one.port(), 28, 1, &st);
  for (int r = 0; r < kWorld; ++r)
    ASSERT_TRUE(st[r].ok()) << "one core, rank " << r << ": " << st[r].ToString();

  test::SwitchProcess two({"--port", "0", "--cores", "2", "--core-ports", "1", "--slots", "64",
                           "--job-timeout-ms", "1000", "--lease-calls", "0"});
  ASSERT_TRUE(two.ok());
  auto holder = Communicator::Create(HolderConfig(two.port(), 29, 32));  // core 0
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  ASSERT_EQ((*holder)->window(), 32);
  Status held;
  std::thread hold([&] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
    std::vector<int32_t> v(256, 1);
    while (held.ok() && std::chrono::steady_clock::now() < until) {
      held = (*holder)->AllReduce(std::span<int32_t>(v));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    holder->reset();  // LEAVE: core 0's slots are free
  });
  const auto t0 = std::chrono::steady_clock::now();
  const auto got = RunJob(two.port(), 28, 2, &st);
  const auto waited = std::chrono::steady_clock::now() - t0;
  hold.join();
  ASSERT_TRUE(held.ok()) << held.ToString();
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(st[r].ok()) << "two cores, rank " << r << ": " << st[r].ToString();
    EXPECT_EQ(got[r], want[r]) << "rank " << r << " differs from the one-core result";
  }
  EXPECT_GE(waited, std::chrono::milliseconds(2000)) << "the job waited for core 0's slots";
  const auto total = two.Stop();
  EXPECT_EQ(total.at("jobs_timed_out"), 0u);
  EXPECT_GE(total.at("join_waits"), 1u);
}

// The same at a lease's end: the job re-joins both cores before its second call; core 0 grants at
// once, core 1 first admits a job that queued there meanwhile (it needs the whole pool:
// --min-window 32), which makes one long call and holds core 1 for 2 s more (idle: it keeps its
// own job alive) before it leaves. Only then is the job re-admitted at core 1; its lanes on core 0
// keep their grant alive until then (2 job timeouts). Lane 0 is the one that waits in the
// re-join (the other lanes' threads, idle meanwhile, keep their jobs as any idle job does).
TEST(CoreLanes, AGrantedCoreKeepsTheJobWhileAnotherQueuesItsReJoin) {
  std::vector<Status> st;
  std::vector<std::vector<uint16_t>> windows;
  test::SwitchProcess one({"--port", "0"});
  ASSERT_TRUE(one.ok());
  const auto want = RunThreeCalls(
      one.port(), 30, 1, [] {}, &st, &windows);
  for (int r = 0; r < kWorld; ++r)
    ASSERT_TRUE(st[r].ok()) << "one core, rank " << r << ": " << st[r].ToString();

  test::SwitchProcess two({"--port", "0", "--cores", "2", "--core-ports", "1", "--slots", "64",
                           "--min-window", "32", "--lease-calls", "1", "--job-timeout-ms", "1000"});
  ASSERT_TRUE(two.ok());
  Status held;
  std::thread hold;
  const auto start_holder = [&] {
    hold = std::thread([&] {
      // Core 1; queued behind the job until it re-joins.
      auto c = Communicator::Create(HolderConfig(static_cast<uint16_t>(two.port() + 1), 31, 32));
      if (!c.ok()) {
        held = c.status();
        return;
      }
      std::vector<float> v(1 << 22, 1.0f);
      held = (*c)->AllReduce(std::span<float>(v));
      std::this_thread::sleep_for(std::chrono::milliseconds(2000));  // idle, then LEAVE
    });
    // Its JOIN is at core 1 before the job's re-join.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  };
  const auto t0 = std::chrono::steady_clock::now();
  const auto got = RunThreeCalls(two.port(), 30, 2, start_holder, &st, &windows);
  const auto took = std::chrono::steady_clock::now() - t0;
  hold.join();
  ASSERT_TRUE(held.ok()) << held.ToString();
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(st[r].ok()) << "two cores, rank " << r << ": " << st[r].ToString();
    EXPECT_EQ(got[r], want[r]) << "rank " << r << " differs from the one-core result";
  }
  EXPECT_GE(took, std::chrono::milliseconds(2000)) << "the job waited at core 1";
  const auto total = two.Stop();
  EXPECT_EQ(total.at("jobs_timed_out"), 0u);
}

// A job idle between calls for longer than the switch's job timeout (a trainer's validation or
// checkpoint) keeps its job: its idle lanes resend their JOIN within the timeout the join_ack
// announced (a third of it), and a leaf does the same at its spine. Before, the switch freed the
// job and the next call failed with job_aborted. One switch core (one lane), lanes on two cores,
// and a leaf under a spine (both switches on one core).
TEST(CoreLanes, AnIdleJobOutlivesTheJobTimeout) {
  for (int topology : {1, 2, 0}) {  // 1, 2: switch cores; 0: a leaf and its spine
    const int cores = std::max(topology, 1);
    SCOPED_TRACE(topology == 0 ? std::string("tree") : "switch cores " + std::to_string(cores));
    std::vector<std::string> args{"--port", "0", "--job-timeout-ms", "1000"};
    if (cores > 1) args.insert(args.end(), {"--cores", "2", "--core-ports", "1"});
    std::unique_ptr<test::SwitchProcess> spine;
    if (topology == 0) {
      spine = std::make_unique<test::SwitchProcess>(args);
      ASSERT_TRUE(spine->ok());
      args.insert(args.end(), {"--upstream", "127.0.0.1:" + std::to_string(spine->port()),
                               "--leaf-index", "0", "--leaves", "1"});
    }
    test::SwitchProcess sw(args);
    ASSERT_TRUE(sw.ok());
    std::vector<std::unique_ptr<Communicator>> comms(2);
    std::vector<std::thread> ts;
    std::vector<Status> st(2);
    for (int r = 0; r < 2; ++r) {
      ts.emplace_back([&, r] {
        CommConfig c = RankConfig(sw.port(), 32, r, cores);
        c.world_size = 2;
        auto comm = Communicator::Create(c);
        if (!comm.ok()) {
          st[r] = comm.status();
          return;
        }
        comms[r] = std::move(*comm);
      });
    }
    for (auto& t : ts) t.join();
    ts.clear();
    for (int r = 0; r < 2; ++r) ASSERT_TRUE(st[r].ok()) << st[r].ToString();
    for (int call = 0; call < 2; ++call) {
      if (call == 1) std::this_thread::sleep_for(std::chrono::milliseconds(3000));  // idle
      for (int r = 0; r < 2; ++r) {
        ts.emplace_back([&, r] {
          std::vector<int32_t> v(3000, r + 1);
          st[r] = comms[r]->AllReduce(std::span<int32_t>(v));
          if (st[r].ok() && v[2999] != 3) st[r] = Internal("int32 sum wrong");
        });
      }
      for (auto& t : ts) t.join();
      ts.clear();
      for (int r = 0; r < 2; ++r) {
        ASSERT_TRUE(st[r].ok()) << "call " << call << " rank " << r << ": " << st[r].ToString();
      }
    }
    comms.clear();
    const auto total = sw.Stop();
    EXPECT_EQ(total.at("jobs_timed_out"), 0u);
    EXPECT_EQ(total.at("jobs_done"), static_cast<uint64_t>(cores));
    if (spine != nullptr) {
      const auto up = spine->Stop();
      EXPECT_EQ(up.at("jobs_timed_out"), 0u) << "the spine kept the leaf's job";
      EXPECT_EQ(up.at("jobs_done"), 1u);
    }
  }
}

// Nobody answers: a bounded error that names the switch and the way out.
TEST(CoreLanes, AutoWithNoSwitchIsABoundedErrorNamingIt) {
  CommConfig c;
  c.switch_port = 9;  // discard: nothing answers
  c.switch_cores = CommConfig::kSwitchCoresAuto;
  c.join_timeout_ms = 300;
  const auto t0 = std::chrono::steady_clock::now();
  auto comm = Communicator::Create(c);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), StatusCode::kDeadlineExceeded) << comm.status().ToString();
  EXPECT_NE(comm.status().message().find("127.0.0.1:9"), std::string::npos)
      << comm.status().ToString();
  EXPECT_NE(comm.status().message().find("INA_SWITCH_CORES"), std::string::npos)
      << comm.status().ToString();
  EXPECT_LT(ms, 5000);
}

TEST(CoreLanes, ConfigNeedsALanePerCoreOverUdp) {
  CommConfig c;
  c.switch_cores = 2;
  EXPECT_EQ(c.Validate().code(), StatusCode::kInvalidArgument);  // one lane
  c.progress_threads = 2;
  EXPECT_TRUE(c.Validate().ok()) << c.Validate().ToString();
  c.transport = "verbs";
  EXPECT_EQ(c.Validate().code(), StatusCode::kInvalidArgument);
  c.transport = "udp";
  c.switch_port = 65535;
  EXPECT_EQ(c.Validate().code(), StatusCode::kInvalidArgument);  // core 1 at 65536
}

}  // namespace
}  // namespace ina::host
