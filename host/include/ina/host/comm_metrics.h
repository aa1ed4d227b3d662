// A worker's counters (CommStats) by name, for whoever exports them: the C API's Prometheus text
// (ina_comm_metrics), the torch backend's dict (ProcessGroupIna.metrics()). One list, so the
// names agree everywhere (docs/host.md, "Metrics").
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "ina/host/communicator.h"

namespace ina::host {

struct CommStatField {
  std::string_view name;    // CommStats' field name: the dict key
  std::string_view metric;  // the Prometheus counter family
  std::string_view help;
  uint64_t CommStats::*field;
};

inline constexpr std::array<CommStatField, 11> kCommStatFields = {{
    {"packets_sent", "ina_worker_sent_packets_total",
     "Data packets sent, first sends and retransmissions.", &CommStats::packets_sent},
    {"packets_received", "ina_worker_received_packets_total", "Packets the transport returned.",
     &CommStats::packets_received},
    {"retransmissions", "ina_worker_retransmitted_packets_total",
     "Data packets sent again after a timeout.", &CommStats::retransmissions},
    {"results", "ina_worker_results_total", "Results accepted.", &CommStats::results},
    {"stale_results_ignored", "ina_worker_stale_results_total",
     "Results ignored: an old generation, another job, or malformed.",
     &CommStats::stale_results_ignored},
    {"ops_completed", "ina_worker_ops_completed_total", "All-reduce calls that succeeded.",
     &CommStats::ops_completed},
    {"ops_failed", "ina_worker_ops_failed_total", "All-reduce calls that failed.",
     &CommStats::ops_failed},
    {"bad_crc", "ina_worker_bad_crc_packets_total",
     "Packets dropped because their CRC32C trailer did not match.", &CommStats::bad_crc},
    {"packets_from_device", "ina_worker_device_sent_packets_total",
     "Sent packets whose payload the NIC read from device memory (GPUDirect RDMA).",
     &CommStats::packets_from_device},
    {"results_forged", "ina_worker_forged_results_total",
     "Keyed jobs: results dropped because their tag did not verify (forged, rewritten, replayed).",
     &CommStats::results_forged},
    {"socket_drops", "ina_worker_socket_dropped_packets_total",
     "Drops by the kernel before libina read them (a packet, or a GSO train that arrived whole): "
     "a socket receive buffer full.",
     &CommStats::socket_drops},
}};

// Prometheus text exposition (format 0.0.4) of `s`, every sample labelled job and rank.
std::string FormatCommMetrics(const CommStats& s, uint16_t job_id, uint16_t rank);

}  // namespace ina::host
