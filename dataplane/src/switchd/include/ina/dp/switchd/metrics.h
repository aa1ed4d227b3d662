// ina-switchd's Prometheus endpoint (--metrics ADDR:PORT, docs/switchd.md "Metrics").
//
// FormatMetrics renders a SwitchStats in the Prometheus text exposition format (version 0.0.4):
//  - every counter of the engine (names and HELP generated from proto/ina.toml's [[counter]]
//    list: proto::kCounterMetrics), of the control plane, of the switch loop and of a leaf, per
//    core (label core); drop causes share ina_switch_dropped_packets_total{reason=...};
//  - gauges: jobs by state, pool slots and slots in use per core, uptime;
//  - per job (label job): world size, K, lanes, granted slots, ranks joined, and the data packets
//    from its members (ina_switch_job_data_packets_total);
//  - per port: packets in and out, and sends dropped.
// The switch keeps no latency histograms (it does not time packets), so none are exported.
//
// MetricsServer answers HTTP/1.x GET /metrics on its own thread, one connection at a time, each
// bounded (8 KiB request, 2 s to send it); other paths get 404, other methods 405. The data path
// is not touched: a scrape reads what the cores publish every tick (Switch::Snapshot).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "ina/base/status.h"
#include "ina/dp/switchd/switch.h"
#include "ina/net/port.h"

namespace ina::dp::switchd {

std::string FormatMetrics(const SwitchStats& s);

// True if FormatMetrics has a family and HELP of its own for this switch, control or leaf
// counter name (a test checks every name; one without would be exported under a generic HELP).
bool HasMetricFor(std::string_view counter);

// "IPv4:PORT" or "[IPv6]:PORT", port 0 .. 65535 (0: ephemeral). InvalidArgument otherwise.
Result<net::Endpoint> ParseListenEndpoint(std::string_view endpoint);

class MetricsServer {
 public:
  // Listens on `endpoint` ("IPv4:PORT" or "[IPv6]:PORT"; port 0: ephemeral) and serves `render()`
  // for each GET /metrics. InvalidArgument for a bad endpoint, Unavailable if it cannot listen.
  static Result<std::unique_ptr<MetricsServer>> Start(std::string_view endpoint,
                                                      std::function<std::string()> render);
  ~MetricsServer();  // stops the thread and closes the socket
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // "127.0.0.1:9470" (the bound port when 0 was asked).
  const std::string& address() const { return address_; }
  uint64_t scrapes() const { return scrapes_.load(std::memory_order_relaxed); }

 private:
  MetricsServer(int fd, int wake_fd, std::string address, std::function<std::string()> render);
  void Loop();
  void Serve(int conn);

  int fd_;
  int wake_fd_;  // eventfd: the destructor wakes the loop
  std::string address_;
  std::function<std::string()> render_;
  std::atomic<uint64_t> scrapes_{0};
  std::thread thread_;
};

}  // namespace ina::dp::switchd
