// ina-bench's command line (tools/ina_bench/options.h) and its JSON line writer: defaults, every
// kind of bad value refused with a message naming the option, cross-option checks, --help made
// from the same table, and JSON escaping in the format json_line.h reads back.
#include "options.h"

#include <gtest/gtest.h>

#include <cstdio>
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
      {"--worker-netns", ""}, {"--bogus"}};
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
  EXPECT_FALSE(Parse({"--role", "worker", "--rank", "0"}).ok()) << "no --shm/--store/--switch";
  // memif: ina-bench starts the switch and every rank on this host.
  EXPECT_TRUE(Parse({"--transport", "memif"}).ok());
  EXPECT_FALSE(Parse({"--transport", "memif", "--switch", "h:1"}).ok());
  EXPECT_FALSE(Parse({"--transport", "memif", "--workers", "2", "--worker-netns", "a,b",
                      "--worker-switch", "h:1,h:1"})
                   .ok());
  EXPECT_TRUE(Parse({"--workers", "2", "--worker-netns", "a,b", "--switch", "h:1"}).ok());
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
  for (const char* flag : {"--workers N", "--kill-after-ms T", "--worker-netns A,B,..",
                           "--dpdk-backoff-us U", "--gloo-host ADDR", "worker transport:"}) {
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
