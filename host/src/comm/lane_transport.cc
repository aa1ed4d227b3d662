// LaneTransportConfig (see lane_transport.h).
#include "lane_transport.h"

#include <string>
#include <vector>

namespace ina::host::internal {

TransportConfig LaneTransportConfig(const CommConfig& config, int lane) {
  TransportConfig tc;
  tc.kind = config.transport;
  tc.fabric_host = config.switch_host;
  tc.fabric_port = config.switch_port;
  tc.socket_buffer_bytes = config.socket_buffer_bytes;
  tc.udp_gso = config.udp_gso;
  tc.dpdk = config.dpdk;
  tc.verbs = config.verbs;
  if (config.transport == "dpdk" && config.progress_threads > 1) {
    if (config.switch_cores > 1) {  // one port, queue l: it pairs with the switch's queue l
      tc.dpdk_queues = static_cast<unsigned>(config.switch_cores);
      tc.dpdk_queue = static_cast<unsigned>(lane);
    } else {
      const std::vector<std::string> ports =
          DpdkLanePorts(config.dpdk.port, config.progress_threads);  // validated
      tc.dpdk.port = ports[static_cast<size_t>(lane)];
    }
    tc.dpdk.local_port = static_cast<uint16_t>(config.dpdk.local_port + lane);
  }
  // Lanes on switch cores: lane l to core l's own port (validated: it fits).
  if (config.switch_cores > 1) tc.fabric_port = static_cast<uint16_t>(config.switch_port + lane);
  return tc;
}

}  // namespace ina::host::internal
