// ina-switchd's Prometheus text (metrics.h): every counter has a family of its own, families come
// once with HELP and TYPE, values and labels are the snapshot's. The live endpoint is tested by
// metrics_e2e_test.py (a real scrape over HTTP, parsed by Prometheus' own client library).
#include "ina/dp/switchd/metrics.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <set>
#include <sstream>
#include <string>

#include "ina/dp/control.h"
#include "ina/dp/switchd/leaf.h"
#include "ina/proto/wire.h"

namespace ina::dp::switchd {
namespace {

TEST(Metrics, EverySwitchControlAndLeafCounterHasAFamily) {
  for (std::string_view n : kSwitchCounterNames) EXPECT_TRUE(HasMetricFor(n)) << n;
  for (std::string_view n : kControlCounterNames) EXPECT_TRUE(HasMetricFor(n)) << n;
  for (std::string_view n : kLeafCounterNames) EXPECT_TRUE(HasMetricFor(n)) << n;
  EXPECT_FALSE(HasMetricFor("no_such_counter"));
}

// Two cores, one active and one pending job, a port: the exposition carries each value once with
// its labels, and each family's HELP/TYPE once.
TEST(Metrics, RendersTheSnapshot) {
  SwitchStats s;
  s.engine = "fast";
  s.uptime_s = 2.5;
  for (unsigned c = 0; c < 2; ++c) {
    NamedCounters v;
    for (size_t i = 0; i < proto::kNumCounters; ++i) {
      v.emplace_back(proto::kCounterNames[i], 100 * (c + 1) + i);
    }
    v.emplace_back("drop_foreign_src", 7 + c);
    v.emplace_back("joins", 3);
    s.per_core.push_back(v);
    s.pool_slots.push_back(8192);
    s.slots_in_use.push_back(c == 0 ? 64 : 0);
  }
  JobInfo active;
  active.job_id = 42;
  active.active = true;
  active.world_size = 4;
  active.k = 2048;
  active.window = 64;
  active.joined = 4;
  active.data_packets = 12345;
  JobInfo pending;
  pending.job_id = 43;
  pending.world_size = 2;
  pending.k = 256;
  pending.joined = 1;
  s.jobs = {{0, active}, {1, pending}};
  s.ports.push_back({"udp", 0, {}});
  s.ports[0].stats.rx_packets = 999;

  const std::string text = FormatMetrics(s);
  auto has = [&](const std::string& line) {
    return text.find("\n" + line + "\n") != std::string::npos;
  };
  const auto rx = static_cast<size_t>(proto::Counter::kRxPackets);
  const auto crc = static_cast<size_t>(proto::Counter::kDropBadCrc);
  EXPECT_TRUE(has("ina_switch_rx_packets_total{core=\"0\"} " + std::to_string(100 + rx)));
  EXPECT_TRUE(has("ina_switch_rx_packets_total{core=\"1\"} " + std::to_string(200 + rx)));
  EXPECT_TRUE(has("ina_switch_dropped_packets_total{core=\"1\",reason=\"bad_crc\"} " +
                  std::to_string(200 + crc)));
  EXPECT_TRUE(has("ina_switch_dropped_packets_total{core=\"0\",reason=\"foreign_src\"} 7"));
  EXPECT_TRUE(has("ina_switch_joins_total{core=\"1\"} 3"));
  EXPECT_TRUE(has("ina_switch_slots_in_use{core=\"0\"} 64"));
  EXPECT_TRUE(has("ina_switch_pool_slots{core=\"1\"} 8192"));
  EXPECT_TRUE(has("ina_switch_jobs{core=\"0\",state=\"active\"} 1"));
  EXPECT_TRUE(has("ina_switch_jobs{core=\"1\",state=\"pending\"} 1"));
  EXPECT_TRUE(has("ina_switch_jobs{core=\"1\",state=\"active\"} 0"));
  EXPECT_TRUE(has("ina_switch_job_world_size{core=\"0\",job=\"42\"} 4"));
  EXPECT_TRUE(has("ina_switch_job_k{core=\"0\",job=\"42\"} 2048"));
  EXPECT_TRUE(has("ina_switch_job_slots{core=\"1\",job=\"43\"} 0"));
  EXPECT_TRUE(has("ina_switch_job_data_packets_total{core=\"0\",job=\"42\"} 12345"));
  EXPECT_TRUE(has("ina_switch_port_rx_packets_total{core=\"0\",port=\"udp\"} 999"));
  EXPECT_TRUE(has("ina_switch_uptime_seconds 2.500"));

  // Each family's HELP and TYPE exactly once, and before its samples.
  std::istringstream in(text);
  std::string line;
  std::map<std::string, int> helps;
  std::set<std::string> typed;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      ++helps[line.substr(7, line.find(' ', 7) - 7)];
    } else if (line.rfind("# TYPE ", 0) == 0) {
      typed.insert(line.substr(7, line.find(' ', 7) - 7));
    } else {
      const std::string family = line.substr(0, line.find_first_of("{ "));
      EXPECT_TRUE(typed.count(family)) << "sample before its TYPE: " << line;
      EXPECT_NE(line.find(' '), std::string::npos) << line;
    }
  }
  for (const auto& [family, n] : helps) EXPECT_EQ(n, 1) << family;
  EXPECT_EQ(helps.size(), typed.size());
}

TEST(Metrics, ListenEndpoints) {
  EXPECT_TRUE(ParseListenEndpoint("127.0.0.1:0").ok());
  EXPECT_TRUE(ParseListenEndpoint("[::1]:9470").ok());
  EXPECT_FALSE(ParseListenEndpoint("localhost:9470").ok());
  EXPECT_FALSE(ParseListenEndpoint("127.0.0.1").ok());
  EXPECT_FALSE(ParseListenEndpoint("127.0.0.1:70000").ok());
}

// A running server: /metrics answers with the renderer's text, other paths 404, other methods
// 405, and a client that sends nothing cannot hold it (the next request is served).
TEST(MetricsServer, ServesOverHttp) {
  auto server = MetricsServer::Start("127.0.0.1:0", [] { return std::string("x_total 1\n"); });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string addr = (*server)->address();
  const uint16_t port = static_cast<uint16_t>(std::stoi(addr.substr(addr.rfind(':') + 1)));
  auto request = [&](const std::string& req) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    if (!req.empty()) {
      EXPECT_EQ(send(fd, req.data(), req.size(), 0), ssize_t(req.size()));
    }
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, size_t(n));
    close(fd);
    return out;
  };
  const std::string ok = request("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << ok;
  EXPECT_NE(ok.find("Content-Type: text/plain; version=0.0.4"), std::string::npos);
  EXPECT_NE(ok.find("\r\n\r\nx_total 1\n"), std::string::npos);
  EXPECT_EQ(request("GET /other HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(request("POST /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 405", 0), 0u);
  EXPECT_EQ(request("").size(), 0u);  // silent client: closed after the request time
  EXPECT_EQ(request("GET /metrics HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_EQ((*server)->scrapes(), 2u);
}

}  // namespace
}  // namespace ina::dp::switchd
