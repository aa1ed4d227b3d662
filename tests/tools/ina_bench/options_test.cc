// ina-bench's command line (tools/ina_bench/options.h) and its JSON line writer: defaults, every
// kind of bad value refused with a message naming the option, cross-option checks, --help made
// from the same table, and JSON escaping in the format json_line.h reads back.
#include "options.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "json_line.h"
#include "json_writer.h"

namespace ina::bench {
namespace {

Result<Options> Parse(std::vector<std::string> args, bool* help = nullptr) {
  bool h = false;
  std::vector<char*> argv = {const_cast<char*>("ina-bench")};
  for (auto& a : args) argv.push_back(a.data());
  auto r = ParseArgs(static_cast<int>(argv.size()), argv.data(), &h);
  if (help != nullptr) *help = h;
  return r;
}

TEST(BenchOptions, DefaultsAndValues) {
  auto o = Parse({});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->workers, 4);
  EXPECT_EQ(o->elements, size_t{1} << 20);
  EXPECT_TRUE(o->gloo);
  EXPECT_GE(o->job, 1);  // derived from the pid
  o = Parse({"--workers", "8", "--elements", "0x100", "--drop-rate", "0.25", "--dtype", "int32",
             "--k", "64", "--no-gloo", "--job", "7", "--transport", "dpdk", "--dpdk-eal",
             "--vdev=net_memif{rank}", "--dpdk-local", "10.0.0.{rank}:4000"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->workers, 8);
  EXPECT_EQ(o->elements, 256u);
  EXPECT_DOUBLE_EQ(o->drop_rate, 0.25);
  EXPECT_TRUE(o->int32);
  EXPECT_EQ(o->k, 64);
  EXPECT_FALSE(o->gloo);
  EXPECT_EQ(o->job, 7);
  EXPECT_EQ(SubstRank(o->dpdk_local, 3), "10.0.0.3:4000");
  const HostPort hp = SplitHostPort(SubstRank(o->dpdk_local, 12));
  EXPECT_EQ(hp.host, "10.0.0.12");
  EXPECT_EQ(hp.port, 4000);
}

TEST(BenchOptions, BadValuesNameTheOption) {
  const std::vector<std::vector<std::string>> bad = {
      {"--workers", "0"},     {"--workers", "65"},
      {"--workers", "4x"},    {"--workers"},
      {"--iters", "1001"},    {"--drop-rate", "0.6"},
      {"--drop-rate", "p"},   {"--k", "128"},
      {"--dtype", "double"},  {"--dataplane", "fpga"},
      {"--switch", "nohost"}, {"--transport", "verbs"},
      {"--worker-netns", ""}, {"--bogus"},
      {"--udp-gso", "2"},     {"--quant", "sse9"}};
  for (const auto& args : bad) {
    auto o = Parse(args);
    ASSERT_FALSE(o.ok()) << args[0];
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(o.status().message().find(args[0]), std::string::npos) << o.status().message();
  }
}

TEST(BenchOptions, CrossChecks) {
  EXPECT_FALSE(Parse({"--workers", "2", "--kill-rank", "2"}).ok());
  EXPECT_FALSE(Parse({"--workers", "2", "--worker-netns", "a,b,c", "--switch", "h:1"}).ok());
  EXPECT_FALSE(Parse({"--workers", "2", "--worker-netns", "a,", "--switch", "h:1"}).ok());
  EXPECT_FALSE(Parse({"--workers", "2", "--worker-netns", "a,b"}).ok()) << "no reachable switch";
  EXPECT_FALSE(Parse({"--workers", "2", "--worker-switch", "h:1,h"}).ok());
  EXPECT_FALSE(Parse({"--transport", "dpdk", "--dpdk-eal", "x"}).ok()) << "no --dpdk-local";
  EXPECT_FALSE(Parse({"--role", "worker", "--rank", "0"}).ok()) << "no --coordinator";
  EXPECT_FALSE(Parse({"--role", "worker", "--coordinator", "h:1"}).ok()) << "no --rank";
  EXPECT_TRUE(Parse({"--role", "worker", "--coordinator", "h:1", "--rank", "3"}).ok());
  EXPECT_FALSE(
      Parse({"--listen", "0.0.0.0:0", "--workers", "2", "--worker-netns", "a,b", "--switch", "h:1"})
          .ok());
  EXPECT_FALSE(Parse({"--listen", "h"}).ok());
  // memif: ina-bench starts the switch and every rank on this host.
  EXPECT_TRUE(Parse({"--transport", "memif"}).ok());
  EXPECT_FALSE(Parse({"--transport", "verbs"}).ok());  // needs the RoCE switch
  EXPECT_TRUE(Parse({"--transport", "verbs", "--switch", "10.0.1.2:4791"}).ok());
  EXPECT_FALSE(Parse({"--transport", "memif", "--switch", "h:1"}).ok());
  EXPECT_FALSE(Parse({"--transport", "memif", "--workers", "2", "--worker-netns", "a,b",
                      "--worker-switch", "h:1,h:1"})
                   .ok());
  EXPECT_TRUE(Parse({"--workers", "2", "--worker-netns", "a,b", "--switch", "h:1"}).ok());
}

// Options the parent and a worker do not share are refused on the wrong side, naming the option.
TEST(BenchOptions, ParentAndWorkerOptionsStayOnTheirSide) {
  for (const auto& [flag, value] : {std::pair{"--drop-rate", "0.1"},
                                    {"--worker-netns", "a"},
                                    {"--listen", "h:1"},
                                    {"--engine", "ref"}}) {
    auto o = Parse({"--role", "worker", "--coordinator", "h:1", "--rank", "0", flag, value});
    ASSERT_FALSE(o.ok()) << flag;
    EXPECT_NE(o.status().message().find(std::string(flag) + " is an option of the parent"),
              std::string::npos)
        << o.status().message();
  }
  for (std::vector<std::string> args : {std::vector<std::string>{"--rank", "0"},
                                        {"--coordinator", "h:1"},
                                        {"--gloo-host", "10.0.0.1"}}) {
    auto o = Parse(args);
    ASSERT_FALSE(o.ok()) << args[0];
    EXPECT_NE(o.status().message().find(args[0] + " is an option of a worker"), std::string::npos)
        << o.status().message();
  }
}

// What the coordinator sends (RunArgs) rebuilds the parent's run options in a worker; a worker's
// own per-host values win over the coordinator's defaults; the worker's given run options are
// what the coordinator checks (GivenRunArgs).
TEST(BenchOptions, RunArgsCarryTheRunToAWorker) {
  auto parent = Parse({"--workers",
                       "3",
                       "--elements",
                       "5000",
                       "--iters",
                       "7",
                       "--dtype",
                       "int32",
                       "--k",
                       "64",
                       "--window",
                       "100",
                       "--job",
                       "42",
                       "--no-gloo",
                       "--kill-rank",
                       "1",
                       "--seed",
                       "9",
                       "--progress-timeout-ms",
                       "1234",
                       "--transport",
                       "dpdk",
                       "--dpdk-eal",
                       "--vdev=x{rank}",
                       "--dpdk-local",
                       "10.0.0.{rank}:4000",
                       "--drop-rate",
                       "0.1"});
  ASSERT_TRUE(parent.ok()) << parent.status().ToString();
  auto worker = Parse({"--role", "worker", "--coordinator", "h:1", "--rank", "2", "--dpdk-local",
                       "10.9.9.9:1", "--iters", "7"});
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  EXPECT_EQ(GivenRunArgs(*worker), (Args{{"--iters", "7"}}));
  Options w = *worker;
  w.switch_addr = "sw:1";
  ASSERT_TRUE(ApplyRunArgs(&w, RunArgs(*parent)).ok());
  EXPECT_EQ(w.workers, 3);
  EXPECT_EQ(w.elements, 5000u);
  EXPECT_EQ(w.iters, 7);
  EXPECT_TRUE(w.int32);
  EXPECT_EQ(w.k, 64);
  EXPECT_EQ(w.window, 100);
  EXPECT_EQ(w.job, 42);
  EXPECT_FALSE(w.gloo);
  EXPECT_EQ(w.kill_rank, 1);
  EXPECT_EQ(w.seed, 9u);
  EXPECT_EQ(w.progress_timeout_ms, 1234);
  EXPECT_EQ(w.transport, "dpdk");
  EXPECT_EQ(w.dpdk_eal, "--vdev=x{rank}");  // the coordinator's default
  EXPECT_EQ(w.dpdk_local, "10.9.9.9:1");    // the worker's own
  EXPECT_EQ(w.drop_rate, 0);                // the parent's alone
  auto run_only = [](Args a) {
    std::erase_if(a, [](const auto& fv) { return fv.first == "--dpdk-local"; });
    return a;
  };
  EXPECT_EQ(run_only(RunArgs(w)), run_only(RunArgs(*parent))) << "they agree after the exchange";
  // A rank beyond the run's workers, and an option this build does not know, are errors.
  Options far = *worker;
  far.rank = 3;
  far.switch_addr = "sw:1";
  auto st = ApplyRunArgs(&far, RunArgs(*parent));
  EXPECT_NE(st.message().find("--rank 3"), std::string::npos) << st.message();
  Options w2 = *worker;
  w2.switch_addr = "sw:1";
  st = ApplyRunArgs(&w2, {{"--warp-drive", "1"}});
  EXPECT_NE(st.message().find("--warp-drive"), std::string::npos) << st.message();
}

// --k auto (the default) leaves K to each worker's libina; it travels to workers as "auto", and a
// number that is not a valid K (0 included) is refused.
TEST(BenchOptions, KAutoIsTheDefaultAndTravels) {
  auto def = Parse({});
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(def->k, 0);
  auto given = Parse({"--k", "auto"});
  ASSERT_TRUE(given.ok()) << given.status().ToString();
  EXPECT_EQ(given->k, 0);
  Args run = RunArgs(*def);
  auto k = std::find_if(run.begin(), run.end(), [](const auto& fv) { return fv.first == "--k"; });
  ASSERT_NE(k, run.end());
  EXPECT_EQ(k->second, "auto");
  auto worker = Parse({"--role", "worker", "--coordinator", "h:1", "--rank", "0"});
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  Options w = *worker;
  w.switch_addr = "sw:1";
  w.k = 64;
  ASSERT_TRUE(ApplyRunArgs(&w, run).ok());
  EXPECT_EQ(w.k, 0);
  EXPECT_FALSE(Parse({"--k", "0"}).ok());
  EXPECT_FALSE(Parse({"--k", "Auto"}).ok());
}

// INA_UDP_GSO and INA_QUANT are read once, by the parent's option parsing (a flag wins), and
// reach the workers as run options; a bad value names the variable.
TEST(BenchOptions, EnvironmentOverridesOfUdpGsoAndQuant) {
  setenv("INA_UDP_GSO", "0", 1);
  setenv("INA_QUANT", "scalar", 1);
  auto o = Parse({});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_FALSE(o->udp_gso);
  EXPECT_EQ(o->quant, "scalar");
  auto args = RunArgs(*o);
  EXPECT_NE(
      std::find(args.begin(), args.end(), std::pair<std::string, std::string>{"--udp-gso", "0"}),
      args.end());
  o = Parse({"--udp-gso", "1"});
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->udp_gso) << "the flag wins";
  auto w = Parse({"--role", "worker", "--coordinator", "h:1", "--rank", "0"});
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->udp_gso) << "a worker takes the coordinator's, not its environment's";
  setenv("INA_UDP_GSO", "maybe", 1);
  o = Parse({});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("INA_UDP_GSO='maybe'"), std::string::npos)
      << o.status().message();
  unsetenv("INA_UDP_GSO");
  setenv("INA_QUANT", "sse9", 1);
  o = Parse({});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("INA_QUANT"), std::string::npos) << o.status().message();
  unsetenv("INA_QUANT");
}

TEST(BenchOptions, SwitchCoresSetTheLanesAndNeedUdp) {
  auto o = Parse({"--switch-cores", "4"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->switch_cores, 4);
  EXPECT_EQ(o->progress_threads, 4);  // a lane per switch core
  o = Parse({"--switch-cores", "4", "--progress-threads", "2"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--progress-threads 4"), std::string::npos)
      << o.status().message();
  o = Parse({"--switch-cores", "2", "--transport", "memif"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--transport udp"), std::string::npos)
      << o.status().message();
}

TEST(BenchOptions, HelpListsEveryFlagFromTheTable) {
  bool help = false;
  ASSERT_TRUE(Parse({"--workers", "3", "--help"}, &help).ok());
  EXPECT_TRUE(help);
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  ASSERT_NE(f, nullptr);
  PrintUsage(f);
  std::fclose(f);
  const std::string text(buf, len);
  free(buf);
  for (const char* flag :
       {"--workers N", "--kill-after-ms T", "--worker-netns A,B,..", "--dpdk-backoff-us U",
        "--gloo-host ADDR", "worker transport:", "--listen HOST:PORT", "--coordinator HOST:PORT",
        "--join-timeout-s S", "--switch-cores N"}) {
    EXPECT_NE(text.find(flag), std::string::npos) << flag;
  }
}

TEST(BenchJson, WritesWhatJsonLineReads) {
  JsonObject j;
  j.Int("workers", 4)
      .Num("ina_ms_median", 1.5, "%.4f")
      .Bool("verified", true)
      .Str("dataplane", "s\"w\\")
      .StrList("codes", {"OK", "ABORTED"})
      .Raw("switch_counters", "{\"rx\": 1}");
  const std::string s = j.str();
  EXPECT_EQ(s,
            "{\"workers\": 4, \"ina_ms_median\": 1.5000, \"verified\": true, \"dataplane\": "
            "\"s\\\"w\\\\\", \"codes\": [\"OK\", \"ABORTED\"], \"switch_counters\": {\"rx\": 1}}");
  EXPECT_EQ(JsonNumber(s, "workers"), 4);
  EXPECT_EQ(JsonNumber(s, "ina_ms_median"), 1.5);
  EXPECT_TRUE(JsonTrue(s, "verified"));
  EXPECT_EQ(JsonObject::Quote("a\nb"), "\"a\\u000ab\"");
}

}  // namespace
}  // namespace ina::bench
