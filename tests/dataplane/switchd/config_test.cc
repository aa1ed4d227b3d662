// The switch loop's configuration (dataplane/src/switchd/include/ina/dp/switchd/config.h): one
// flag table for the parser, --help, the start-up print and docs/switchd.md; every tunable that
// used to bypass it (the 8 MiB socket buffer, INA_UDP_GSO, INA_RTLSIM_*, ina-rtlsim's --slots) is
// a flag now, with its environment override read once here; bad values are refused naming the
// flag or the variable.
#include "ina/dp/switchd/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ina/net/port.h"

namespace ina::dp::switchd {
namespace {

const EngineMenu kSwitchd{"fast|ref", "fast"};
const EngineMenu kRtl{"rtl|fast|ref", "rtl", 512, /*rtl=*/true};

// A fake environment for ParseArgs.
std::map<std::string, std::string> g_env;
const char* FakeEnv(const char* name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}

Result<Config> Parse(std::vector<std::string> args, const EngineMenu& menu = kSwitchd,
                     std::map<std::string, std::string> env = {}) {
  g_env = std::move(env);
  return ParseArgs(args, menu, &FakeEnv);
}

TEST(SwitchdConfig, DefaultsAndValues) {
  auto c = Parse({});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->engine, "fast");
  EXPECT_EQ(c->slots, 16384u);
  EXPECT_EQ(c->socket_buffer_bytes, 8u << 20);
  EXPECT_TRUE(c->udp_gso);
  c = Parse({"--slots=0x100", "--socket-buffer-bytes", "0", "--udp-gso", "0", "--seed",
             "18446744073709551615", "--drop-rate", "0.5", "--engine", "ref"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->slots, 256u);
  EXPECT_EQ(c->socket_buffer_bytes, 0u);
  EXPECT_FALSE(c->udp_gso);
  EXPECT_EQ(c->seed, UINT64_MAX);
  EXPECT_EQ(c->drop_rate, 0.5);
  EXPECT_EQ(c->engine, "ref");
}

TEST(SwitchdConfig, RoceNeedsAConcreteIpv4AddressAndOneCore) {
  auto c = Parse({"--io", "roce", "--bind", "10.0.1.2", "--roce-qpn", "0x200"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->io, "roce");
  EXPECT_EQ(c->roce_qpn, 0x200u);
  EXPECT_EQ(c->roce_qkey, 0x494E4100u);
  EXPECT_TRUE(Parse({"--io", "roce"}).ok());  // --bind 127.0.0.1; not 0.0.0.0, not IPv6
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--io", "roce", "--bind", "0.0.0.0"},
           {"--io", "roce", "--bind", "::1"},
           {"--io", "roce", "--bind", "10.0.1.2", "--cores", "2"},
           {"--io", "roce", "--bind", "10.0.1.2", "--roce-qpn", "1"},
           {"--io", "roce", "--bind", "10.0.1.2", "--roce-qpn", "0x1000000"},
           {"--io", "rdma"}}) {
    EXPECT_FALSE(Parse(args).ok()) << args.back();
  }
}

TEST(SwitchdConfig, LeafNeedsAnUpstreamAddressUdpAndOneCoreOrCorePorts) {
  auto c = Parse({"--upstream", "10.0.0.1:47000", "--leaf-index", "1", "--leaves", "2"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->upstream, "10.0.0.1:47000");
  EXPECT_EQ(c->leaf_index, 1u);
  EXPECT_EQ(c->leaves, 2u);
  EXPECT_TRUE(Parse({"--upstream", "[::1]:9"}).ok());
  // A leaf on several cores: core c's share goes to the spine's core c, at its port + c.
  EXPECT_TRUE(Parse({"--upstream", "10.0.0.1:65532", "--cores", "4", "--core-ports", "1"}).ok());
  EXPECT_TRUE(Parse({"--upstream", "[::1]:47000", "--cores", "2", "--core-ports", "1"}).ok());
  auto past = Parse({"--upstream", "10.0.0.1:65533", "--cores", "4", "--core-ports", "1"});
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find("at most 65532"), std::string::npos)
      << past.status().ToString();
  auto two = Parse({"--upstream", "10.0.0.1:47000", "--cores", "2"});
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("--core-ports 1"), std::string::npos)
      << two.status().ToString();
  // --upstream-core-ports 0: every core to the spine's one port (a lane each), so no port past.
  EXPECT_TRUE(Parse({"--upstream", "10.0.0.1:65535", "--cores", "4", "--core-ports", "1",
                     "--upstream-core-ports", "0"})
                  .ok());
  EXPECT_FALSE(Parse({"--upstream", "10.0.0.1:47000", "--cores", "17", "--core-ports", "1",
                      "--upstream-core-ports", "0"})
                   .ok())
      << "more cores than a rank has lanes";
  EXPECT_FALSE(Parse({"--upstream-core-ports", "0"}).ok()) << "needs --upstream";
  // Keys passed on to the spine: the spine's admin secret, on a leaf with an admin channel.
  auto keys = Parse({"--upstream", "10.0.0.1:47000", "--admin-key-file", "/a.key",
                     "--upstream-admin-key-file", "/b.key"});
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(keys->upstream_admin_key_file, "/b.key");
  const auto no_admin =
      Parse({"--upstream", "10.0.0.1:47000", "--upstream-admin-key-file", "/b.key"});
  ASSERT_FALSE(no_admin.ok());
  EXPECT_NE(no_admin.status().message().find("needs --admin-key-file"), std::string::npos)
      << no_admin.status().ToString();
  EXPECT_FALSE(Parse({"--admin-key-file", "/a.key", "--upstream-admin-key-file", "/b.key"}).ok())
      << "needs --upstream";
  auto up = net::ParseEndpoint("[::1]:47000");
  ASSERT_TRUE(up.ok());
  net::SetEndpointPort(&*up, 47003);
  EXPECT_EQ(net::EndpointPort(*up), 47003);
  EXPECT_EQ(net::EndpointToString(*up), "[::1]:47003");
  auto e = net::ParseEndpoint("[fe80::1]:47000");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(net::EndpointToString(*e), "[fe80::1]:47000");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--upstream", "10.0.0.1"},
           {"--upstream", "10.0.0.1:0"},
           {"--upstream", "host:47000"},
           {"--upstream", "::1:47000"},
           {"--upstream", "10.0.0.1:47000", "--leaf-index", "2", "--leaves", "2"},
           {"--upstream", "10.0.0.1:47000", "--cores", "2"},
           {"--upstream", "10.0.0.1:47000", "--io", "roce"},
           {"--leaf-index", "1", "--leaves", "2"},
           {"--leaves", "0"}}) {
    EXPECT_FALSE(Parse(args).ok()) << args[0] << " " << args[1];
  }
}

// --core-ports 1: a port per core over UDP, a queue per core over DPDK (which needs a port
// number: core c listens on --port + c); not over RoCE.
TEST(SwitchdConfig, CorePortsOverUdpAndDpdk) {
  EXPECT_TRUE(Parse({"--cores", "2", "--core-ports", "1"}).ok());
  auto c = Parse({"--dpdk", "--no-huge", "--port", "47000", "--cores", "2", "--core-ports", "1"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->io, "dpdk");
  EXPECT_EQ(c->core_ports, 1u);
  EXPECT_FALSE(
      Parse({"--dpdk", "--no-huge", "--port", "0", "--cores", "2", "--core-ports", "1"}).ok());
  EXPECT_FALSE(Parse({"--io", "roce", "--core-ports", "1"}).ok());
}

// --dpdk implies --io dpdk, except beside --io roce (either order): RoCE over DPDK's ports, always
// on RoCEv2's UDP port.
TEST(SwitchdConfig, RoceWithDpdkIsRoceOverEthdevsOnPort4791) {
  const std::string eal = "--no-huge --vdev net_memif0";
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--io", "roce", "--bind", "10.0.1.2", "--dpdk", eal},
           {"--dpdk", eal, "--io", "roce", "--bind", "10.0.1.2", "--port", "47000"}}) {
    auto c = Parse(args);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->io, "roce");
    EXPECT_TRUE(c->uses_eal());
    EXPECT_EQ(c->port, 4791u);
    EXPECT_EQ(c->dpdk_eal, eal);
  }
  auto d = Parse({"--dpdk", eal, "--bind", "10.0.1.2", "--port", "47000"});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->io, "dpdk");
  EXPECT_TRUE(d->uses_eal());
  auto r = Parse({"--io", "roce", "--bind", "10.0.1.2"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->uses_eal());  // raw sockets
}

TEST(SwitchdConfig, BadValuesNameTheFlagAndTheValue) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--slots", "0"},
      {"--slots", "12x"},
      {"--port", "70000"},
      {"--max-jobs", "4097"},
      {"--drop-rate", "1.5"},
      {"--seed", "-1"},
      {"--engine", "x"},
      {"--bind", "nowhere"},
      {"--io", "rdma"},
      {"--socket-buffer-bytes", "-1"},
      {"--socket-buffer-bytes", "2147483648"},
      {"--udp-gso", "2"},
      {"--cores", "65"},
      {"--dpdk-backoff-us", "x"}};
  for (const auto& [flag, value] : bad) {
    auto c = Parse({flag, value});
    ASSERT_FALSE(c.ok()) << flag << " " << value;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find(flag + "='" + value + "'"), std::string::npos)
        << c.status().message();
  }
  EXPECT_NE(Parse({"--nope", "1"}).status().message().find("--nope"), std::string::npos);
  EXPECT_NE(Parse({"--slots"}).status().message().find("--slots: missing value"),
            std::string::npos);
  EXPECT_FALSE(Parse({"--rtl-idle", "0.1"}).ok()) << "ina-switchd has no --rtl-* flags";
}

TEST(SwitchdConfig, EnvironmentOverridesAreReadHereAndLoseToFlags) {
  auto c = Parse({}, kSwitchd, {{"INA_UDP_GSO", "0"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->udp_gso);
  c = Parse({"--udp-gso", "1"}, kSwitchd, {{"INA_UDP_GSO", "0"}});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->udp_gso) << "the flag wins";
  c = Parse({}, kSwitchd, {{"INA_UDP_GSO", "maybe"}});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("INA_UDP_GSO='maybe'"), std::string::npos)
      << c.status().message();
  // ina-switchd ignores ina-rtlsim's variables.
  EXPECT_TRUE(Parse({}, kSwitchd, {{"INA_RTLSIM_IDLE", "junk"}}).ok());
}

TEST(SwitchdConfig, RecordTraceAndReplay) {
  auto c = Parse({"--record", "cap.pcap"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->record, "cap.pcap");
  EXPECT_NE(Parse({"--record", "c.pcap", "--cores", "2"}).status().message().find("--record"),
            std::string::npos);
  EXPECT_FALSE(Parse({"--record", ""}).ok());
  EXPECT_FALSE(Parse({"--trace", "t.fst"}).ok()) << "ina-switchd has no core to trace";
  EXPECT_FALSE(Parse({"--replay", "in.pcap"}).ok());
  c = Parse({"--trace", "t.fst", "--trace-from", "100", "--trace-cycles", "50"}, kRtl);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rtl_trace, "t.fst");
  EXPECT_EQ(c->rtl_trace_from, 100u);
  EXPECT_EQ(c->rtl_trace_cycles, 50u);
  EXPECT_NE(Parse({"--trace-from", "100"}, kRtl).status().message().find("need --trace"),
            std::string::npos);
  EXPECT_FALSE(Parse({"--trace", "t.fst", "--trace-cycles", "x"}, kRtl).ok());
  c = Parse({"--replay", "in.pcap", "--out", "out.pcap"}, kRtl);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->replay, "in.pcap");
  EXPECT_EQ(c->replay_out, "out.pcap");
  EXPECT_NE(Parse({"--out", "out.pcap"}, kRtl).status().message().find("--replay"),
            std::string::npos);
}

TEST(SwitchdConfig, RtlsimFlagsAndItsFixedPool) {
  auto c = Parse({}, kRtl, {{"INA_RTLSIM_STALL", "0.25"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->engine, "rtl");
  EXPECT_EQ(c->slots, 512u) << "the core's pool is the default";
  EXPECT_EQ(c->rtl_stall, 0.25);
  EXPECT_EQ(c->rtl_idle, 0);
  c = Parse({"--rtl-idle", "0.5", "--slots", "512"}, kRtl);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rtl_idle, 0.5);
  auto bad = Parse({"--slots", "16384"}, kRtl);
  ASSERT_FALSE(bad.ok()) << "--slots used to be accepted and ignored";
  EXPECT_NE(bad.status().message().find("--slots='16384'"), std::string::npos)
      << bad.status().message();
  for (const auto& [flag, value] : {std::pair{"--rtl-idle", "1"}, {"--rtl-stall", "-0.1"}}) {
    bad = Parse({flag, value}, kRtl);
    ASSERT_FALSE(bad.ok()) << flag;
    EXPECT_NE(bad.status().message().find(std::string(flag) + "='" + value + "'"),
              std::string::npos)
        << bad.status().message();
  }
  bad = Parse({}, kRtl, {{"INA_RTLSIM_IDLE", "1.0"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("INA_RTLSIM_IDLE='1.0'"), std::string::npos);
}

// --help, the config print and docs/switchd.md all come from (or are checked against) the table.
// --config FILE: flags from "flag = value" lines, comments and blank lines skipped; the command
// line wins over the file wherever it stands; errors name the file and the line.
TEST(SwitchdConfig, ConfigFileThenCommandLine) {
  const std::string path = ::testing::TempDir() + "/switchd_config_test.conf";
  {
    std::ofstream f(path);
    f << "# ina-switchd\n\nport = 47010\n  slots=4096  # a comment\nmetrics = 127.0.0.1:9470\n";
  }
  auto c = Parse({"--slots", "2048", "--config", path});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->port, 47010);
  EXPECT_EQ(c->slots, 2048u);  // the command line wins, before or after --config
  EXPECT_EQ(c->metrics, "127.0.0.1:9470");
  EXPECT_EQ(c->config, path);
  {
    std::ofstream f(path);
    f << "port = 1\nslots = zero\n";
  }
  c = Parse({"--config=" + path});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(path + ":2: --slots"), std::string::npos)
      << c.status().message();
  {
    std::ofstream f(path);
    f << "port 47000\n";
  }
  c = Parse({"--config", path});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(":1: 'port 47000' is not 'flag = value'"), std::string::npos)
      << c.status().message();
  {
    std::ofstream f(path);
    f << "no-such-flag = 1\n";
  }
  c = Parse({"--config", path});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("unknown flag"), std::string::npos);
  EXPECT_FALSE(Parse({"--config", path + ".missing"}).ok());
  EXPECT_FALSE(Parse({"--metrics", "localhost:9470"}).ok());
  std::remove(path.c_str());
}

TEST(SwitchdConfig, HelpPrintAndDocsListEveryFlag) {
  auto c = Parse({"--udp-gso", "0"}, kRtl);
  ASSERT_TRUE(c.ok());
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  PrintConfig(*c, "the core", f, kRtl);
  std::fclose(f);
  const std::string printed(buf, len);
  free(buf);
  for (const char* line : {"  engine = rtl [the core]\n", "  slots = 512\n", "  udp_gso = 0\n",
                           "  socket_buffer_bytes = 8388608\n", "  rtl_idle = 0\n"}) {
    EXPECT_NE(printed.find(line), std::string::npos) << line << "in\n" << printed;
  }
  const std::string usage = Usage(kRtl);
  std::ifstream docs(INA_SWITCHD_DOC);
  ASSERT_TRUE(docs.good()) << INA_SWITCHD_DOC;
  std::stringstream ss;
  ss << docs.rdbuf();
  const std::string doc = ss.str();
  for (const std::string& flag : FlagNames(kRtl)) {
    EXPECT_NE(usage.find("  " + flag), std::string::npos) << flag;
    const std::string name = flag.substr(0, flag.find(' '));
    EXPECT_NE(doc.find("`" + name + " "), std::string::npos) << name << " not in docs/switchd.md";
  }
  // --rtl-idle, --rtl-stall, --trace, --trace-from, --trace-cycles, --replay, --out.
  EXPECT_EQ(FlagNames(kSwitchd).size() + 7, FlagNames(kRtl).size());
}

}  // namespace
}  // namespace ina::dp::switchd
